"""A schedule's ``on_failure``: cancel the run, or compensate it (a saga).

At the first final failure of a track (failed with no attempt left, or tapped out):

* ``continue`` does nothing here (the other tracks go on);
* ``cancel_run`` cancels the run's open tracks;
* ``compensate`` cancels them too, then creates one compensation record per completed
  track that has a ``compensate`` step (``state/runs/<run>/undo/<track>.json``) and runs
  them **one at a time, in reverse order of completion**: the newest change is undone
  first, as later steps may build on earlier ones.

A compensation is dispatched like a track, under its own key
``<run>--<track>--undo--<attempt>``, with ``ORCHESTRATOR_COMPENSATING=1`` and the
track's result in ``ORCHESTRATOR_ORIGINAL_RESULT``. It is retried up to its own
``max_attempts``; one that still fails is parked in the dead letter queue with reason
``compensation_failed`` and the compensations after it are cancelled (undoing an
older step under a newer one that could not be undone may do harm: a human decides).
Once the outside cause is fixed, ``dlq requeue`` reopens the saga where it stopped
(:func:`orchestrator.runs.deadletters.requeue`): the failed compensation with a fresh
attempt budget, the cancelled ones after it in the same order.
The run is consolidated (``failed``) only once no compensation is open; the run's
deadline does not stop them (a tap-out by the deadline is often what they clean up
after), each attempt's own timeout does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime

from ..config.models import TrackSpec
from ..config.policies import OnFailure
from ..executors.base import DispatchRequest
from ..state import machine
from ..state.layout import dlq_key
from ..state.phases import RunStatus, TrackPhase
from ..state.records import DeadLetter, Run, Track
from .context import Context
from .dispatch import run_environment
from .hygiene import backoff, dispatch_lost, observe, timed_out

REASON = "compensation_failed"
"""The dead letter reason of a compensation that failed its last attempt."""
RETRY_BACKOFF_SECONDS = 30
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def on_failure(ctx: Context) -> None:
    for run in ctx.open_runs():
        if run.status is RunStatus.CONSOLIDATING:
            continue
        carry_out_cancel(ctx, run)
        for undo in ordered(ctx, run.run_id):
            drive(ctx, run, undo)
        schedule = ctx.schedules.get(run.schedule_id)
        if schedule is not None and schedule.spec.on_failure is not OnFailure.CONTINUE:
            trigger(ctx, run, schedule.spec.on_failure)
        step(ctx, run)


def open_compensations(ctx: Context, run_id: str) -> bool:
    """Whether a compensation of the run is still to run or running (fan-in waits)."""
    return any(u.phase in machine.TRACK_OPEN for u in ctx.state.undos.get(run_id, {}).values())


def ordered(ctx: Context, run_id: str) -> list[Track]:
    """The run's compensations in the order they run: newest completed track first."""
    return order(ctx.state.tracks.get(run_id, {}), ctx.state.undos.get(run_id, {}))


def order(tracks: Mapping[str, Track], undos: Mapping[str, Track]) -> list[Track]:
    """``undos`` (by track name) in the order they run, by their ``tracks``' completion."""
    def completed_at(name: str) -> datetime:
        track = tracks.get(name)
        return (track.finished_at if track is not None and track.finished_at else _EPOCH)

    return [undos[n] for n in sorted(undos, key=lambda n: (completed_at(n), n), reverse=True)]


def final_failures(tracks: dict[str, Track]) -> list[Track]:
    # After hygiene, a `failed` track with attempts left is already pending again.
    ended = (TrackPhase.FAILED, TrackPhase.TAPPED_OUT)
    # a drain's worker that failed gave its items back: the drain itself says
    return sorted((t for t in tracks.values() if t.phase in ended and t.work is None),
                  key=lambda t: (t.finished_at or _EPOCH, t.name))


def trigger(ctx: Context, run: Run, policy: OnFailure) -> None:
    tracks = ctx.state.tracks.get(run.run_id, {})
    failed = final_failures(tracks)
    if not failed or run.run_id in ctx.state.undos:
        return
    why = f"on_failure={policy.value}: {failed[0].name} {failed[0].phase.value}"
    cancel_open(ctx, run, why)
    if policy is OnFailure.COMPENSATE:
        compensate(ctx, run, why)


def cancel_open(ctx: Context, run: Run, why: str) -> list[Track]:
    """Cancel every open track of ``run`` that this tick can stop, stopping those the
    executor runs; the open tracks another machine runs (left to its next tick)."""
    tracks = ctx.state.tracks.get(run.run_id, {})
    elsewhere = []
    for name in sorted(tracks):
        track = tracks[name]
        if track.phase not in machine.TRACK_OPEN:
            continue
        if track.claimed_by not in (None, ctx.obs.machine):
            elsewhere.append(track)  # only its machine can stop what it launched
            continue
        handle = ctx.handle_of(track)
        if handle is not None:
            ctx.decision.cancel.append(handle)
        ctx.move(track, TrackPhase.CANCELLED, why, finished_at=ctx.now)
    return elsewhere


def carry_out_cancel(ctx: Context, run: Run) -> None:
    """Stop what this machine runs of ``run`` when a cancel stands on it: the request of
    a canceller on another machine, carried out by the owner's next tick."""
    act = run.standing_cancel
    if act is not None and run.status is not RunStatus.CONSOLIDATING:
        cancel_open(ctx, run, f"cancelled {act.describe()}")


def compensate(ctx: Context, run: Run, why: str) -> None:
    """Start the saga of ``run``: one compensation per completed track that has one."""
    if run.run_id in ctx.state.undos:
        return
    tracks = ctx.state.tracks.get(run.run_id, {})
    done = [t for t in tracks.values() if t.phase is TrackPhase.COMPLETE and t.spec.compensate]
    ctx.state.undos[run.run_id] = {t.name: undo_record(t) for t in done}
    if done:
        names = ", ".join(u.name for u in ordered(ctx, run.run_id))
        ctx.decision.note(run.run_id, f"compensating {len(done)} completed track(s), newest "
                          f"first: {names} ({why})")


def undo_record(track: Track) -> Track:
    step_ = track.spec.compensate
    assert step_ is not None
    spec = TrackSpec(name=track.name, run=step_.run, inputs=track.spec.inputs,
                     timeout_minutes=step_.timeout_minutes, max_attempts=step_.max_attempts,
                     retry_backoff_seconds=RETRY_BACKOFF_SECONDS)
    return Track(run_id=track.run_id, name=track.name, spec=spec, compensating=True,
                 max_attempts=step_.max_attempts)


def _retry(ctx: Context, undo: Track) -> None:
    wait = backoff(undo)
    ctx.move(undo, TrackPhase.PENDING,
             f"retry {undo.attempt + 1}/{undo.max_attempts} after {wait}",
             attempt=undo.attempt + 1, not_before=ctx.now + wait, handle=None,
             dispatch_key=None, url=None, started_at=None, finished_at=None,
             dispatched_at=None)


def _park(ctx: Context, run: Run, undo: Track) -> None:
    """Park a compensation out of attempts as a dead letter (once per attempt count)."""
    key = dlq_key(run.run_id, undo.name)
    current = ctx.state.dlq.get(key)
    if current is not None and current.reason == REASON and current.attempts >= undo.attempt:
        return
    ctx.state.dlq[key] = DeadLetter(
        key=key, run_id=run.run_id, track=undo.name, reason=REASON, parked_at=ctx.now,
        attempts=undo.attempt, payload=undo.spec, error_log=undo.error_log,
        state_history=undo.state_history)
    ctx.decision.note(run.run_id, f"{undo.name} (undo): parked in the dead letter queue ({REASON})")


def drive(ctx: Context, run: Run, undo: Track) -> None:
    """Observe one compensation, time it out, retry it or park it."""
    undo = observe(ctx, undo)
    if timed_out(ctx, undo):
        ctx.tap_out(undo, f"timeout of {undo.spec.timeout_minutes:g} minutes")
        undo = ctx.state.undos[run.run_id][undo.name]
    if ctx.abandoned(undo):
        ctx.tap_out(undo, f"{undo.claimed_by} never recorded its dispatch")
        undo = ctx.state.undos[run.run_id][undo.name]
    if dispatch_lost(ctx, undo):
        undo = ctx.move(undo, TrackPhase.PENDING, "dispatch never recorded; re-dispatching")
    if undo.phase not in (TrackPhase.FAILED, TrackPhase.TAPPED_OUT):
        return
    if undo.attempt < undo.max_attempts:
        _retry(ctx, undo)
    else:
        _park(ctx, run, undo)


def step(ctx: Context, run: Run) -> None:
    """Dispatch the next compensation once the one before it completed; after one that
    failed for good, cancel the rest."""
    undos = ordered(ctx, run.run_id)
    for i, undo in enumerate(undos):
        if undo.phase is TrackPhase.COMPLETE:
            continue
        if undo.phase in (TrackPhase.FAILED, TrackPhase.TAPPED_OUT, TrackPhase.CANCELLED):
            _cancel_rest(ctx, undo, undos[i + 1:])
            return
        if _may_dispatch(ctx, undo):
            dispatch(ctx, run, undo)
        return  # one at a time


def _cancel_rest(ctx: Context, undo: Track, later: list[Track]) -> None:
    """Cancel the pending compensations after ``undo``, which did not complete."""
    for track in later:
        if track.phase is TrackPhase.PENDING:
            ctx.move(track, TrackPhase.CANCELLED, f"compensation of {undo.name} did not "
                     "complete", finished_at=ctx.now)


def _may_dispatch(ctx: Context, undo: Track) -> bool:
    """Whether ``undo`` is pending, due, and an executor is there to take it."""
    due = undo.not_before is None or undo.not_before <= ctx.now
    return undo.phase is TrackPhase.PENDING and ctx.obs.executor_available and due


def dispatch(ctx: Context, run: Run, undo: Track) -> None:
    original = ctx.state.tracks.get(run.run_id, {}).get(undo.name)
    result = original.result if original is not None else None
    request = DispatchRequest(
        run_id=run.run_id, track=undo.name, attempt=undo.attempt, spec=undo.spec,
        workflow=run.workflow, compensating=True, fan_in_job=ctx.fan_in_job(run),
        env={**run_environment(ctx, run), "ORCHESTRATOR_COMPENSATING": "1",
             "ORCHESTRATOR_ORIGINAL_RESULT": json.dumps(result, sort_keys=True)})
    ctx.move(undo, TrackPhase.DISPATCHED, f"compensation attempt {undo.attempt} to {ctx.executor}",
             dispatch_key=request.key, dispatched_at=ctx.now, executor=ctx.executor,
             handle=None, not_before=None, claimed_by=ctx.obs.machine)
    ctx.decision.dispatch.append(request)
