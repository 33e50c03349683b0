"""The track and run state machines, as tables.

Track::

    pending ──> dispatched ──> running ──> complete
       ^  │ │        │  │  ^      │  └───> failed ──(attempts left: retry)──> pending
       │  │ │        │  │  │      ├──────> waiting ──(poll interval)──> dispatched
       │  │ │        │  └──┼──────┼──────> failed / tapped_out / cancelled / waiting
       │  │ │        │     └──────┘ (a poll dispatched again, same attempt)
       │  │ └────────┴────────────┴──────> tapped_out | cancelled
       │  └──> skipped (a needed track did not complete)
       └── failed | tapped_out (operator requeue from the dead letter queue)

Run::

    scheduled ──> running ──> consolidating ──> completed | failed | cancelled
        └────────────────────────^     failed | cancelled ──(operator requeue)──> running

A consolidated run ends ``completed`` when every track completed. It ends
``cancelled`` when an operator cancelled it (``runs cancel``) and no ``runs retry``
came after the cancel, even if a track had failed before it: that track's dead letter
asks for a human. A cancelled run whose compensation failed for good (parked as
``compensation_failed``) ends ``failed``: the undo is unfinished and needs a human.
Once its requeue finishes the saga, the run ends ``cancelled`` again. Any other run
ends ``failed``. Records written before ``cancelled`` existed keep their ``failed``.

``pending`` and ``dispatched`` (a leg GitHub's reviewers hold) go to ``rejected`` when
a person refuses the track's approval gate.
``complete``, ``cancelled``, ``skipped``, ``rejected``, ``completed`` have no outgoing
transitions (but a compensation cancelled behind a failed one, reopened by its requeue:
:func:`reopen_compensation`; and an operator's ``runs retry``: :func:`retry_track`,
:func:`reopen_run`).
``waiting`` (a poll answered "not yet") uses no attempt: it goes back to
``dispatched`` under a new dispatch key, or is tapped out or cancelled.
``failed`` and ``tapped_out`` tracks leave only through a retry or an operator's
requeue, and a ``failed`` or ``cancelled`` run only through a requeue or a retry of
one of its tracks. Every
transition appends ``{from, to, at, reason}`` to the object's ``state_history``;
an illegal one raises :class:`~orchestrator.errors.IllegalTransition`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from ..errors import IllegalTransition
from .phases import RunStatus, TrackPhase

if TYPE_CHECKING:  # the tables are read without the records' models
    from .records import Run, Track, Transition

TRACK_TRANSITIONS: dict[TrackPhase, frozenset[TrackPhase]] = {
    TrackPhase.PENDING: frozenset({
        TrackPhase.DISPATCHED, TrackPhase.TAPPED_OUT, TrackPhase.CANCELLED, TrackPhase.SKIPPED,
        TrackPhase.REJECTED}),
    # A track may report `complete`/`failed`/`waiting` before the tick saw it running.
    TrackPhase.DISPATCHED: frozenset({
        TrackPhase.PENDING, TrackPhase.RUNNING, TrackPhase.COMPLETE, TrackPhase.FAILED,
        TrackPhase.TAPPED_OUT, TrackPhase.CANCELLED, TrackPhase.WAITING, TrackPhase.REJECTED}),
    TrackPhase.RUNNING: frozenset({
        TrackPhase.PENDING, TrackPhase.COMPLETE, TrackPhase.FAILED, TrackPhase.TAPPED_OUT,
        TrackPhase.CANCELLED, TrackPhase.WAITING}),
    TrackPhase.WAITING: frozenset({
        TrackPhase.DISPATCHED, TrackPhase.TAPPED_OUT, TrackPhase.CANCELLED}),
    TrackPhase.FAILED: frozenset({TrackPhase.PENDING}),
    TrackPhase.TAPPED_OUT: frozenset({TrackPhase.PENDING}),
    TrackPhase.COMPLETE: frozenset(),
    TrackPhase.CANCELLED: frozenset(),
    TrackPhase.SKIPPED: frozenset(),
    TrackPhase.REJECTED: frozenset(),
}
"""Allowed track transitions. ``dispatched -> pending`` is a re-dispatch after the
dispatch was lost; ``dispatched | running -> pending`` also a leg that no runner took
(GitHub lists a queued job as running), sent to the next runner label;
``failed -> pending`` a retry or requeue; ``tapped_out -> pending`` a requeue."""

TRACK_OPEN = frozenset({TrackPhase.PENDING, TrackPhase.DISPATCHED, TrackPhase.RUNNING,
                        TrackPhase.WAITING})
"""Phases in which a track still needs the tick's attention."""

TRACK_TERMINAL = frozenset({TrackPhase.COMPLETE, TrackPhase.FAILED, TrackPhase.TAPPED_OUT,
                            TrackPhase.CANCELLED, TrackPhase.SKIPPED, TrackPhase.REJECTED})
"""Phases that count as finished for the run's fan-in (``failed`` only once no retry
is left: the planner turns a retryable failure back into ``pending`` in the same tick)."""

RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.SCHEDULED: frozenset({RunStatus.RUNNING, RunStatus.CONSOLIDATING}),
    RunStatus.RUNNING: frozenset({RunStatus.CONSOLIDATING}),
    RunStatus.CONSOLIDATING: frozenset({RunStatus.COMPLETED, RunStatus.FAILED,
                                        RunStatus.CANCELLED}),
    RunStatus.COMPLETED: frozenset(),
    RunStatus.FAILED: frozenset({RunStatus.RUNNING}),
    RunStatus.CANCELLED: frozenset({RunStatus.RUNNING}),
}
"""Allowed run transitions. ``scheduled -> consolidating`` happens when every track was
cancelled, tapped out or skipped before any dispatch; ``failed -> running`` and
``cancelled -> running`` are a requeue."""

RUN_OPEN = frozenset({RunStatus.SCHEDULED, RunStatus.RUNNING, RunStatus.CONSOLIDATING})
RUN_TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})

M = TypeVar("M", bound=BaseModel)


def revise(model: M, **changes: Any) -> M:
    """``model`` with ``changes``, validated like a freshly built one.

    ``model_copy(update=...)`` skips validation: a ``done="yes"`` would be stored and
    serialised as ``"yes"``. Here the fields are merged shallowly and validated again
    by field name, so a wrong type or an unknown field raises
    :class:`pydantic.ValidationError`; nested models are reused as they are.
    """
    cls = type(model)
    data: dict[str, Any] = {}
    for name, value in {**dict(model), **changes}.items():
        # keyed by alias where there is one: accepted with or without populate_by_name
        info = cls.model_fields.get(name)
        data[info.alias if info is not None and info.alias else name] = value
    return cls.model_validate(data)


def can_move_track(src: TrackPhase, dst: TrackPhase) -> bool:
    return dst in TRACK_TRANSITIONS[src]


def can_move_run(src: RunStatus, dst: RunStatus) -> bool:
    return dst in RUN_TRANSITIONS[src]


def _history(record: Track | Run, src: str, dst: str, at: datetime,
             reason: str) -> list[Transition]:
    """``record``'s history with the move from ``src`` to ``dst`` appended."""
    from .records import Transition  # loaded by now: ``record`` is one of its models

    return [*record.state_history, Transition(from_=src, to=dst, at=at, reason=reason)]


def move_track(track: Track, to: TrackPhase, at: datetime, reason: str = "",
               **changes: Any) -> Track:
    """Return ``track`` in phase ``to`` with the transition recorded, or raise."""
    if not can_move_track(track.phase, to):
        raise IllegalTransition(
            f"track {track.run_id}/{track.name}: illegal transition "
            f"{track.phase.value} -> {to.value}", track.run_id)
    history = _history(track, track.phase.value, to.value, at, reason)
    return revise(track, **changes, phase=to, state_history=history)


def reopen_compensation(undo: Track, at: datetime, reason: str, **changes: Any) -> Track:
    """A compensation the saga cancelled after an earlier one failed for good, back to
    ``pending``: the operator requeued the failed one (``dlq requeue``). The only way
    out of ``cancelled``, and only for a compensation."""
    if not undo.compensating or undo.phase is not TrackPhase.CANCELLED:
        raise IllegalTransition(
            f"track {undo.run_id}/{undo.name}: only a cancelled compensation reopens, "
            f"not a {'compensation' if undo.compensating else 'track'} "
            f"{undo.phase.value}", undo.run_id)
    history = _history(undo, undo.phase.value, TrackPhase.PENDING.value, at, reason)
    return revise(undo, **changes, phase=TrackPhase.PENDING, state_history=history)


def move_run(run: Run, to: RunStatus, at: datetime, reason: str = "", **changes: Any) -> Run:
    """Return ``run`` in status ``to`` with the transition recorded, or raise."""
    if not can_move_run(run.status, to):
        raise IllegalTransition(
            f"run {run.run_id}: illegal transition {run.status.value} -> {to.value}",
            run.run_id)
    history = _history(run, run.status.value, to.value, at, reason)
    return revise(run, **changes, status=to, state_history=history)


def retry_track(track: Track, at: datetime, reason: str, **changes: Any) -> Track:
    """A terminal track back to ``pending`` for an operator's ``runs retry``: the one
    way out of ``complete``, ``cancelled`` and ``skipped``, and only for a track."""
    if track.compensating or track.phase not in TRACK_TERMINAL:
        raise IllegalTransition(
            f"track {track.run_id}/{track.name}: only a finished track is retried, "
            f"not a {'compensation' if track.compensating else 'track'} {track.phase.value}",
            track.run_id)
    history = _history(track, track.phase.value, TrackPhase.PENDING.value, at, reason)
    return revise(track, **changes, phase=TrackPhase.PENDING, state_history=history)


def reopen_run(run: Run, at: datetime, reason: str, **changes: Any) -> Run:
    """A finished run running again for an operator's ``runs retry`` (``completed``
    too: the one way out of it)."""
    if run.status not in RUN_TERMINAL:
        raise IllegalTransition(f"run {run.run_id}: only a finished run reopens, not a "
                                f"{run.status.value} one", run.run_id)
    history = _history(run, run.status.value, RunStatus.RUNNING.value, at, reason)
    return revise(run, **changes, status=RunStatus.RUNNING, state_history=history)
