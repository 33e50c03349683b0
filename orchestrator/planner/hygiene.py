"""The tick's first step: fold what the executor observed into open tracks, then
keep them honest: timeouts and deadlines, dispatches nobody recorded, retries and the
dead letter queue.
"""

from __future__ import annotations

from datetime import timedelta

from ..executors.base import Observation
from ..state import machine
from ..state.layout import dlq_key
from ..state.phases import RunStatus, TrackPhase
from ..state.records import DeadLetter, Run, Track
from ..support.text import one_line
from ..support.times import iso
from . import approvals, drain, poll, routing
from .context import Context, log_line


def backoff(track: Track) -> timedelta:
    """Delay before attempt ``track.attempt + 1``: doubles with each failed attempt."""
    base = track.spec.retry_backoff_seconds
    return timedelta(seconds=min(base * 2 ** (track.attempt - 1), 24 * 3600))


def hygiene(ctx: Context) -> None:
    for run in ctx.open_runs():
        tracks = ctx.state.tracks.get(run.run_id, {})
        for name in sorted(tracks):
            track = observe(ctx, tracks[name])
            track = timeouts(ctx, run, track)
            retry_or_park(ctx, track)


def observe(ctx: Context, track: Track) -> Track:
    key = track.dispatch_key
    if key is None or track.phase not in (TrackPhase.DISPATCHED, TrackPhase.RUNNING):
        return track
    track = _adopt_handle(ctx, track, key)
    seen = ctx.obs.seen.get(key)
    if seen is None:
        return track
    track = approvals.observed(ctx, track, seen)  # a leg its environment's reviewers hold
    if seen.phase is None or track.phase is TrackPhase.REJECTED or drain.hold(ctx, track, seen):
        return track
    return _take_news(ctx, track, seen, seen.phase)


def _take_news(ctx: Context, track: Track, seen: Observation, to: TrackPhase) -> Track:
    """``track`` after what ``seen`` reports: its phase ``to``, a start, or nothing."""
    if routing.leaves(track, seen):
        return routing.leave(ctx, track)  # its run's cancel, asked by routing, is done
    if _label_failed(track, seen):
        return routing.failed_to_start(ctx, track, seen)  # the label's fault: no attempt
    if to is track.phase:
        return _fill_in(ctx, track, seen)
    if _poll_not_yet(track, seen):
        return poll.wait(ctx, track, seen, seen.finished_at or ctx.now)
    if not machine.can_move_track(track.phase, to):
        return track  # stale or backward news: the state already knows better
    return _follow(ctx, track, seen, to)


def _label_failed(track: Track, seen: Observation) -> bool:
    """A routed leg (not a drain's worker) that failed to start on its runner label."""
    return seen.failed_to_start and track.runner is not None and track.work is None


def _poll_not_yet(track: Track, seen: Observation) -> bool:
    """A poll track whose check answered "not yet" (a drain's worker never polls)."""
    return track.work is None and poll.answered_not_yet(seen)


def _adopt_handle(ctx: Context, track: Track, key: str) -> Track:
    """``track`` with the handle the executor found or saw for ``key``, if it is news."""
    found = ctx.obs.found.get(key)
    if found is not None and track.handle is None and found.handle is not None:
        track = track.model_copy(update={"handle": found.handle, "url": found.url})
        ctx.set_track(track)
        ctx.decision.note(track.run_id, f"{track.name}: adopted unrecorded dispatch {key}")
    seen = ctx.obs.seen.get(key)
    if seen is not None and seen.handle is not None and seen.handle != track.handle:
        track = track.model_copy(update={"handle": seen.handle,
                                         "url": seen.url or track.url})
        ctx.set_track(track)
        ctx.decision.note(track.run_id, f"{track.name}: CI run found for {key}")
    return track


def _fill_in(ctx: Context, track: Track, seen: Observation) -> Track:
    """``track`` with the start and URL ``seen`` adds, for news in the same phase."""
    news = {k: v for k, v in (("started_at", seen.started_at), ("url", seen.url))
            if v is not None and getattr(track, k) is None}
    if news:  # e.g. a queued job that started: its timeout counts from now on
        track = track.model_copy(update=news)
        ctx.set_track(track)
    return track


def _learned(ctx: Context, track: Track, seen: Observation, to: TrackPhase
             ) -> dict[str, object]:
    """What ``seen`` adds to ``track`` as it moves to ``to``: a link, a start, an end
    and a result, an error line."""
    changes = _news_of_start(track, seen)
    if to in machine.TRACK_TERMINAL:
        changes["finished_at"] = seen.finished_at or ctx.now
        if seen.result is not None:
            changes["result"] = seen.result
    if seen.error:
        changes["error_log"] = log_line(track, f"{iso(ctx.now)} {seen.error}")
    return changes


def _news_of_start(track: Track, seen: Observation) -> dict[str, object]:
    """The link and the start ``seen`` adds to ``track``, if they are news."""
    changes: dict[str, object] = {}
    if seen.url and seen.url != track.url:
        changes["url"] = seen.url
    if seen.started_at and track.started_at is None:
        changes["started_at"] = seen.started_at
    return changes


def _follow(ctx: Context, track: Track, seen: Observation, to: TrackPhase) -> Track:
    """Move ``track`` to the phase ``to`` that ``seen`` reports, with what it learned."""
    reason = f"{ctx.executor}: {seen.error}" if seen.error else f"seen by {ctx.executor}"
    # The transition is dated with the command's own start or end where the backend
    # measured it, not with the tick that noticed: briefs draw durations from it.
    ended = to in machine.TRACK_TERMINAL
    at = seen.finished_at if ended else seen.started_at
    moved = ctx.move(track, to, one_line(reason), at=at, **_learned(ctx, track, seen, to))
    if ended and poll.is_poll_track(track):
        poll.record(ctx, moved, track.polls + 1, to.value, moved.state_history[-1].at)
    if to is TrackPhase.COMPLETE and (seen.enqueue or seen.enqueue_error):
        drain.take_enqueue(ctx, moved, seen)  # in the commit that records it
    return moved


def timed_out(ctx: Context, track: Track) -> bool:
    """Open and started longer ago than its timeout. It counts from the start, as the
    backends do: time queued for a runner or a task slot is not the track's, nor a
    person's wait for its approval."""
    begin = approvals.clock_start(track)
    if track.phase not in machine.TRACK_OPEN or begin is None:
        return False
    return ctx.now >= begin + timedelta(minutes=track.spec.timeout_minutes)


def dispatch_lost(ctx: Context, track: Track) -> bool:
    """Marked dispatched more than the grace ago, with no dispatch recorded and none
    found under its key: the tick that marked it died before dispatching."""
    key = track.dispatch_key or ""
    return (track.phase is TrackPhase.DISPATCHED and track.handle is None
            and key in ctx.obs.found and ctx.obs.found[key] is None
            and track.dispatched_at is not None
            and ctx.now >= track.dispatched_at + ctx.grace)


def _time_up(ctx: Context, run: Run, track: Track) -> str | None:
    """Why an open track's time is up, or ``None`` while it has time."""
    # The deadline counts from the run's start: a run still waiting (jitter, a
    # buffered overlap, an open circuit breaker) has not started its clock. It stands
    # still while a track of the run waits for a person.
    if run.status is not RunStatus.SCHEDULED and ctx.now >= run.deadline \
            and not approvals.run_waits(ctx, run):
        return f"run deadline {iso(run.deadline)} passed"
    if timed_out(ctx, track):
        return f"timeout of {track.spec.timeout_minutes:g} minutes"
    if ctx.abandoned(track):
        # Only the machine that claimed it can see whether it launched: it never said,
        # within the time the attempt had. Launching it here could run it twice.
        return (f"{track.claimed_by} claimed its dispatch and never recorded it "
                f"within its timeout of {track.spec.timeout_minutes:g} minutes")
    return None


def timeouts(ctx: Context, run: Run, track: Track) -> Track:
    if track.phase not in machine.TRACK_OPEN:
        return track
    if drain.is_drain(track) and track.phase is TrackPhase.DISPATCHED:
        return track  # its workers keep the time; it ends when they have
    if track.awaits_approval:  # a person's wait: neither the run's time nor the track's
        approvals.expire(ctx, track)
        return ctx.state.tracks[run.run_id][track.name]
    why = _time_up(ctx, ctx.state.runs[run.run_id], track)
    if why is not None:
        ctx.tap_out(track, why)
        return ctx.state.tracks[run.run_id][track.name]
    if dispatch_lost(ctx, track):
        # Same key again, so an idempotent backend cannot start it twice.
        track = ctx.move(track, TrackPhase.PENDING, "dispatch never recorded; re-dispatching",
                         not_before=None)
    return track


def _park_reason(track: Track) -> str:
    if track.phase is TrackPhase.FAILED:
        return f"failed after {track.attempt} attempt(s)"
    return track.state_history[-1].reason if track.state_history else "tapped out"


def retry_or_park(ctx: Context, track: Track) -> None:
    if track.spec.drain is not None or track.work is not None:
        return  # a drain's items are retried and parked, never the drain or its workers
    if track.phase is TrackPhase.FAILED and track.attempt < track.max_attempts:
        wait = backoff(track)
        ctx.move(track, TrackPhase.PENDING,
                 f"retry {track.attempt + 1}/{track.max_attempts} after {wait}",
                 attempt=track.attempt + 1, not_before=ctx.now + wait, handle=None, polls=0,
                 dispatch_key=None, url=None, started_at=None, finished_at=None,
                 dispatched_at=None)
    elif track.phase in (TrackPhase.FAILED, TrackPhase.TAPPED_OUT):
        key = dlq_key(track.run_id, track.name)
        current = ctx.state.dlq.get(key)
        if current is not None and current.attempts >= track.attempt:
            return  # already parked (or parked and discarded) for this attempt
        reason = _park_reason(track)
        ctx.state.dlq[key] = DeadLetter(
            key=key, run_id=track.run_id, track=track.name, reason=reason,
            parked_at=ctx.now, attempts=track.attempt, payload=track.spec,
            error_log=track.error_log, state_history=track.state_history)
        ctx.decision.note(track.run_id, f"{track.name}: parked in the dead letter queue ({reason})")
