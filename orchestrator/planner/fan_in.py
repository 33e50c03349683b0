"""Fan-in, the last pass of the settling loop (:mod:`.settling`): runs whose tracks are
all terminal go to ``consolidating`` and get a render effect; :func:`consolidate` then
finishes each one whose brief the shell rendered (``completed``, ``cancelled`` or
``failed``) and counts it on its schedule's cursor.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from ..state import machine
from ..state.model import State
from ..state.phases import RunStatus, TrackPhase
from ..state.records import Cursor, Run, Track
from ..support.times import iso
from .compensation import open_compensations
from .context import Context
from .drain import unsettled
from .pause import record_finish


def fan_in(ctx: Context) -> bool:
    """Move each open run whose tracks are all terminal to ``consolidating``, and ask
    for the render of each consolidating run; say whether anything was added."""
    changed = False
    for run in ctx.open_runs():
        if run.run_id in ctx.decision.render:
            continue  # already seen by this tick (fan-in runs in every settling round)
        changed |= _fan_in_run(ctx, run)
    return changed


def _fan_in_run(ctx: Context, run: Run) -> bool:
    """Fan in one open run; whether anything was added."""
    if run.status is RunStatus.CONSOLIDATING:
        ctx.decision.render.append(run.run_id)  # a previous render did not land
        return True
    tracks = ctx.state.tracks.get(run.run_id, {})
    if _waits(ctx, run, tracks) or _held(ctx, run):
        return False
    lost = _lost(run, tracks)
    if lost and ctx.now < run.deadline:
        return _note_lost(ctx, run, lost)
    if not _all_terminal(tracks, lost):
        return False
    summary = _summary(tracks, lost)
    ctx.state.runs[run.run_id] = machine.move_run(
        run, RunStatus.CONSOLIDATING, ctx.now, f"all tracks terminal: {summary}")
    ctx.decision.note(run.run_id, f"consolidating ({summary})")
    ctx.decision.render.append(run.run_id)
    return True


def _lost(run: Run, tracks: dict[str, Track]) -> list[str]:
    """The tracks the run names without a record of their own (deleted by hand, lost in
    a bad merge): they can never report, so the run ends at its deadline instead of
    staying open and blocking later slots."""
    return [name for name in run.tracks if name not in tracks]


def _waits(ctx: Context, run: Run, tracks: dict[str, Track]) -> bool:
    """Whether ``run`` waits for more than its tracks: its saga, or the account of a
    drain worker that was stopped."""
    if open_compensations(ctx, run.run_id):
        return True  # consolidated once the saga is over
    return any(unsettled(t, ctx.state.queues) for t in tracks.values())


def _held(ctx: Context, run: Run) -> bool:
    """Whether a scoped tick (a fan-in job's) must leave the run open: a schedule fires
    after it that only a full tick may decide."""
    return ctx.only_run is not None and run.schedule_id in ctx.upstreams


def _note_lost(ctx: Context, run: Run, lost: list[str]) -> bool:
    """Log the lost tracks of a run that waits for its deadline, once a tick (fan-in
    runs more than once); whether the line is new."""
    line = (f"{run.run_id}: no record of track(s) {', '.join(lost)}; treated as "
            f"lost, the run ends at its deadline {iso(run.deadline)}")
    if line in ctx.decision.log:
        return False
    ctx.decision.log.append(line)
    return True


def _all_terminal(tracks: dict[str, Track], lost: list[str]) -> bool:
    """Every track of the run ended (a run with no track at all, lost or not, has not)."""
    return bool(tracks or lost) and all(t.phase in machine.TRACK_TERMINAL
                                        for t in tracks.values())


def _summary(tracks: dict[str, Track], lost: list[str]) -> str:
    """``2 complete, 1 failed, 1 lost``: the tracks by phase, in name order."""
    counts = Counter(t.phase.value for t in tracks.values())
    if lost:
        counts["lost"] = len(lost)
    return ", ".join(f"{n} {p}" for p, n in sorted(counts.items()))


def _not_complete(run: Run, tracks: list[Track]) -> list[str]:
    """The tracks that did not complete, lost ones (named by the run, no record) too."""
    bad = [t.name for t in tracks if t.phase is not TrackPhase.COMPLETE]
    recorded = {t.name for t in tracks}
    return sorted([*bad, *(name for name in run.tracks if name not in recorded)])


def _failed_why(bad: list[str], undone: list[str]) -> str:
    why = [f"not complete: {', '.join(bad)}"] if bad else []
    why += [f"compensation of {', '.join(undone)} failed"] if undone else []
    return "; ".join(why)


def finish(run: Run, tracks: Iterable[Track], now: datetime,
           undos: Iterable[Track] = ()) -> Run:
    """Mark a ``consolidating`` run ``completed`` (every track complete, nothing undone),
    ``cancelled`` (an operator's cancel stands, stopped or undid something, and no
    compensation failed for good) or ``failed``,
    with the span its tracks' commands ran (:func:`work_span`)."""
    tracks, undos = list(tracks), list(undos)
    started, ended = work_span(tracks)
    span = {"finished_at": now, "work_started_at": started, "work_finished_at": ended}
    bad = _not_complete(run, tracks)
    undone = sorted(u.name for u in undos if u.phase in _GAVE_UP)
    act = run.standing_cancel
    if act is not None and not undone and _cancel_stopped_something(bad, undos):
        return machine.move_run(run, RunStatus.CANCELLED, now,
                                f"cancelled {act.describe()}", **span)
    if bad or undone:
        return machine.move_run(run, RunStatus.FAILED, now, _failed_why(bad, undone), **span)
    return machine.move_run(run, RunStatus.COMPLETED, now, "all tracks complete", **span)


def _cancel_stopped_something(bad: list[str], undos: list[Track]) -> bool:
    """Whether a cancel that stands left a track not complete, or undid one; one that
    stopped nothing (every track completed first) stays beside a completed run."""
    return bool(bad or undos)


_GAVE_UP = frozenset({TrackPhase.FAILED, TrackPhase.TAPPED_OUT})
"""A compensation in these phases at consolidation failed for good (it is parked)."""


def _steps_to(track: Track, phase: TrackPhase) -> list[datetime]:
    return [h.at for h in track.state_history if h.to == phase.value]


def _start_of(track: Track) -> tuple[datetime | None, datetime | None]:
    """(its first attempt's measured start, else ``None``; its first dispatch when no
    start was measured, else ``None``): both ``None`` for a track that never ran."""
    sent = sorted(_steps_to(track, TrackPhase.DISPATCHED))
    begun = _steps_to(track, TrackPhase.RUNNING)
    begun += [track.started_at] if track.started_at else []
    # the first attempt's measured start comes before the second dispatch
    measured = [b for b in begun if len(sent) < 2 or b < sent[1]]
    if measured:
        return min(measured), None
    return None, (sent[0] if sent else None)


def _span(starts: list[datetime], ends: list[datetime]
          ) -> tuple[datetime | None, datetime | None]:
    """The first start and the last end; an end before the start is taken as the start."""
    start = min(starts) if starts else None
    end = max(ends) if ends else None
    return start, (end if start is None or end is None or end >= start else start)


def work_span(tracks: Iterable[Track]) -> tuple[datetime | None, datetime | None]:
    """The first start and the last end of the tracks' commands: a start where the
    executor measured one (the record's, or a step to ``running``), else a dispatch;
    the records' ends. Tracks that never ran (skipped, cancelled unsent) do not count."""
    starts: list[datetime] = []
    dispatches: list[datetime] = []
    ends: list[datetime] = []
    for track in tracks:
        measured, sent = _start_of(track)
        if measured is not None:
            starts.append(measured)
        elif sent is not None:
            dispatches.append(sent)
        else:
            continue  # it never ran
        if track.finished_at is not None:
            ends.append(track.finished_at)
    # A dispatch is only a bound: on a loaded machine the command starts seconds later.
    # It counts when no track of the run has a measured start.
    return _span(starts or dispatches, ends)


@dataclass(frozen=True)
class Finished:
    """A consolidated run, finished: what the shell commits beside its brief."""

    run: Run
    cursor: Cursor | None
    """The schedule's cursor counting the run (``pause_after_failures``), or ``None``
    when the count does not change (or the schedule has no cursor)."""


def consolidate(state: State, run_id: str, now: datetime) -> Finished:
    """Finish the ``consolidating`` run ``run_id`` of ``state``. Pure: the shell applies
    it only once the run's brief rendered (a brief that fails keeps the run open)."""
    run = state.runs[run_id]
    finished = finish(run, state.tracks.get(run_id, {}).values(), now,
                      state.undos.get(run_id, {}).values())
    cursor = state.cursors.get(run.schedule_id)
    counted = record_finish(cursor, finished) if cursor is not None else None
    return Finished(finished, counted if counted is not cursor else None)
