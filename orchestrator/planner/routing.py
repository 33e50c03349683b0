"""Fallback routing over runner labels (``runs_on``), by the health in
:mod:`orchestrator.state.health`.

* :func:`watch_queues` (after hygiene): a leg still waiting for a runner
  ``queue_timeout_minutes`` after its dispatch is left to wait while its label is busy
  (another leg started there since: GitHub queues what exceeds a plan's concurrent
  jobs or a pool's runners). Otherwise its label is degraded and its run's cancel is
  asked, again every :data:`ASK_AGAIN` while the leg still waits; a leg that started
  marks a degraded label healthy.
* :func:`leaves` and :func:`leave` (while hygiene observes): only once the leg is seen
  cancelled (or failed to start) does the track go back to ``pending`` under a fresh
  attempt number (the budget is not spent: the track never ran). A run GitHub cannot
  cancel yet (a sibling leg still runs) keeps the leg where it is: never two copies.
* :func:`failed_to_start` (while hygiene observes, before a failure could count as an
  attempt): a leg whose job completed without ever running the track (no runner took
  it, or its runner was lost setting up: the executor's rule, e.g.
  :mod:`orchestrator.executors.github.observation`) is its label's fault, handled as a
  queue timeout is: the label is degraded and the track goes to the next one under a
  fresh attempt number, its budget untouched. A track without ``runs_on`` has no
  other label to go to: its leg fails as any attempt does.
* :func:`routable` and :func:`pick` (dispatch): a leg goes to the first label that is
  healthy, or that a probe may try (half-open); with no such label the track stays
  pending (until the run's deadline) and the tick says why.

A track waits for a runner while ``dispatched`` (a GitHub job no runner has taken is
observed as no news), or ``running`` with no start time (an older record).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..executors.base import Observation
from ..state import health as runner_health
from ..state.health import RunnerHealth
from ..state.phases import TrackPhase
from ..state.records import Run, Track
from ..support.times import iso
from . import approvals
from .context import Context, log_line

_STARTED = frozenset({TrackPhase.COMPLETE, TrackPhase.FAILED})
_RAN = frozenset({TrackPhase.RUNNING, TrackPhase.COMPLETE, TrackPhase.FAILED,
                  TrackPhase.TAPPED_OUT})
ASK_AGAIN = timedelta(minutes=10)
"""How often a leaving leg's record is touched to ask its cancel again: a tick carries
out cancels only once its commit lands, and a cancel may have failed or been put off."""


def labels(ctx: Context, run: Run, track: Track) -> list[str]:
    """The labels a track may run on, in order of preference (none: no routing)."""
    if track.spec.runs_on:
        return list(track.spec.runs_on)
    schedule = ctx.schedules.get(run.schedule_id)
    return list(schedule.spec.runs_on or []) if schedule is not None else []


def _settings(ctx: Context, run: Run) -> tuple[timedelta, timedelta]:
    schedule = ctx.schedules.get(run.schedule_id)
    if schedule is None:
        return timedelta(minutes=15), timedelta(minutes=30)
    spec = schedule.spec
    return (timedelta(minutes=spec.queue_timeout_minutes),
            timedelta(minutes=spec.runner_cooldown_minutes))


def watch_queues(ctx: Context) -> None:
    for run in ctx.open_runs():
        queue_timeout, _ = _settings(ctx, run)
        tracks = ctx.state.tracks.get(run.run_id, {})
        for name in sorted(tracks):
            track = tracks[name]
            if track.runner is None:
                continue
            if track.started_at is not None or track.phase in _STARTED:
                _started_on_label(ctx, run, track, track.runner)
            elif _leaving(track):
                _ask_again(ctx, track)
            elif _stuck_in_queue(ctx, track, queue_timeout):
                _leave_or_wait(ctx, run, track, track.runner, queue_timeout)


def _proves_healthy(health: RunnerHealth | None, track: Track) -> bool:
    """Whether ``track``'s start shows its label works again: the label is not healthy,
    and the track is its probe or started after the label was last checked."""
    if health is None or health.status == "healthy":
        return False
    if health.probe == track.dispatch_key:
        return True
    return (health.last_checked_at is not None and track.started_at is not None
            and track.started_at >= health.last_checked_at)


def _started_on_label(ctx: Context, run: Run, track: Track, label: str) -> None:
    if _proves_healthy(ctx.state.runners.get(label), track):
        ctx.state.runners[label] = runner_health.recover(ctx.now, f"{track.dispatch_key} started")
        ctx.decision.note(run.run_id, f"runner {label}: healthy again "
                          f"({track.name} started on it)")


def _stuck_in_queue(ctx: Context, track: Track, queue_timeout: timedelta) -> bool:
    """Dispatched ``queue_timeout`` ago and not started. A worker is never moved on: its
    claims name its key. A leg its environment's reviewers hold waits for a person, not
    a runner, until they approve it."""
    since = approvals.runner_wait_began(track)
    if (track.phase not in (TrackPhase.DISPATCHED, TrackPhase.RUNNING)
            or since is None or track.work is not None):
        return False
    return ctx.now >= since + queue_timeout


def _leaving(track: Track) -> bool:
    """Whether ``track`` is an open leg whose run's cancel was asked to move it on."""
    return track.leaving_since is not None and track.phase in (TrackPhase.DISPATCHED,
                                                               TrackPhase.RUNNING)


def _ran_on(track: Track, label: str, since: datetime) -> bool:
    """Whether ``track`` started on ``label`` and was still there at ``since`` or later."""
    if track.runner != label or track.started_at is None or track.phase not in _RAN:
        return False
    return track.finished_at is None or track.finished_at >= since


def _busy(ctx: Context, label: str, since: datetime) -> int:
    """How many legs ran on ``label`` since ``since``: its runners work, they are taken."""
    return sum(_ran_on(t, label, since) for tracks in ctx.state.tracks.values()
               for t in tracks.values())


def _leave_or_wait(ctx: Context, run: Run, track: Track, label: str,
                   queue_timeout: timedelta) -> None:
    """Wait on a busy label; on a label that took no leg, degrade it and ask to cancel
    the leg's run. The track moves on once the leg is seen cancelled (:func:`leave`)."""
    waited = int(queue_timeout.total_seconds() // 60)
    assert track.dispatched_at is not None  # checked by _stuck_in_queue
    busy = _busy(ctx, label, track.dispatched_at)
    handle = ctx.handle_of(track)
    if busy or handle is None:
        why = (f"{busy} leg(s) started there since: busy, not sick" if busy else
               "its dispatch is not recorded yet")
        ctx.decision.log.append(f"{run.run_id}: {track.name}: queued on {label} for over "
                                f"{waited} min; {why}; it waits")
        return
    _degrade(ctx, label, f"{track.dispatch_key} waited {waited} min for a runner")
    ctx.decision.cancel.append(handle)
    ctx.set_track(track.model_copy(update={"leaving_since": ctx.now}))
    ctx.decision.note(run.run_id, f"{track.name}: no runner took it on {label} within "
                      f"{waited} min; cancelling its run before it goes to the next label")


def _ask_again(ctx: Context, track: Track) -> None:
    """Ask again to cancel a leaving leg's run; touch its record every :data:`ASK_AGAIN`
    so that a tick lands and carries the cancel out even when nothing else changed."""
    handle = ctx.handle_of(track)
    if handle is None or track.leaving_since is None:
        return
    ctx.decision.cancel.append(handle)
    if ctx.now >= track.leaving_since + ASK_AGAIN:
        ctx.set_track(track.model_copy(update={"leaving_since": ctx.now}))


def leaves(track: Track, seen: Observation) -> bool:
    """Whether ``seen`` confirms that a leaving leg's run was cancelled: the leg ended
    cancelled, or failed to start."""
    return track.leaving_since is not None and (seen.phase is TrackPhase.CANCELLED
                                                or seen.failed_to_start)


def leave(ctx: Context, track: Track) -> Track:
    """The leaving leg is seen cancelled: send the track to the next label. Its label
    was degraded when the cancel was asked, not again now."""
    line = f"{track.dispatch_key}: no runner took it on {track.runner}; its run was cancelled"
    return _next_label(ctx, track, f"its run was cancelled, no runner having taken it "
                       f"on {track.runner}; trying the next label",
                       error_log=log_line(track, f"{iso(ctx.now)} {line}"))


def failed_to_start(ctx: Context, track: Track, seen: Observation) -> Track:
    """``track``'s leg failed to start on its label (``seen.failed_to_start``): degrade
    the label and send the track to the next one, its attempt budget untouched."""
    assert track.runner is not None
    _degrade(ctx, track.runner, f"{track.dispatch_key} failed to start")
    error = seen.error or f"{track.dispatch_key} failed to start"
    return _next_label(ctx, track, f"failed to start on {track.runner}, not the track's "
                       "fault; trying the next label",
                       error_log=log_line(track, f"{iso(ctx.now)} {error}"))


def _degrade(ctx: Context, label: str, note: str) -> None:
    health = ctx.state.runners.get(label)
    if health is None or health.status == "healthy" or health.last_checked_at != ctx.now:
        # one failure per label and tick, however many of its legs failed there
        ctx.state.runners[label] = runner_health.degrade(health, ctx.now, note)


def _next_label(ctx: Context, track: Track, reason: str,
                error_log: list[str] | None = None) -> Track:
    # A fresh attempt number gives the leg a new job name; the budget grows with it,
    # as the track never ran.
    return ctx.move(track, TrackPhase.PENDING, reason, attempt=track.attempt + 1,
                    max_attempts=track.max_attempts + 1, runner=None, handle=None,
                    dispatch_key=None, url=None, dispatched_at=None, not_before=None,
                    started_at=None, finished_at=None, leaving_since=None,
                    error_log=track.error_log if error_log is None else error_log)


def routable(ctx: Context, wanting: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pending tracks of ``wanting`` that some label may take now; the others stay
    pending, and the tick's log says why."""
    out = []
    for run_id, name in wanting:
        run, track = ctx.state.runs[run_id], ctx.state.tracks[run_id][name]
        options = labels(ctx, run, track)
        _, cooldown = _settings(ctx, run)
        if not options or any(runner_health.choice(ctx.state.runners.get(label), ctx.now, cooldown)
                              != "skip" for label in options):
            out.append((run_id, name))
            continue
        states = "; ".join(runner_health.describe(label, ctx.state.runners[label])
                           for label in options)
        ctx.decision.log.append(f"{run_id}: {name}: no healthy runner label ({states}); it stays "
                                f"pending until the run's deadline "
                                f"{iso(run.deadline)}")
    return out


def pick(ctx: Context, run: Run, track: Track, key: str) -> tuple[bool, str | None]:
    """Whether ``track``'s next leg (``key``) may go, and to which label (``None``: the
    schedule does not route). A degraded label whose cooldown passed gets this leg as
    its probe; once the probe is out, the label is skipped again."""
    _, cooldown = _settings(ctx, run)
    options = labels(ctx, run, track)
    if not options:
        return True, None
    for label in options:
        health = ctx.state.runners.get(label)
        verdict = runner_health.choice(health, ctx.now, cooldown)
        if verdict == "use":
            return True, label
        if verdict == "probe" and health is not None:
            ctx.state.runners[label] = health.model_copy(update={"probe": key})
            ctx.decision.note(run.run_id, f"runner {label}: {track.name} probes it "
                              f"({health.status})")
            return True, label
    ctx.decision.log.append(f"{run.run_id}: {track.name}: its only runner label left is being "
                            "probed; it waits")
    return False, None
