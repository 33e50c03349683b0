"""The phases of a track and the statuses of a run: the states of the machines of
:mod:`.machine`, without their records, so that reading a phase loads no model."""

from __future__ import annotations

from enum import StrEnum


class TrackPhase(StrEnum):
    """Phase of one track of a run. See :mod:`orchestrator.state.machine` for the transitions."""

    PENDING = "pending"
    """Waiting to be dispatched (first attempt, a retry after backoff, or jitter)."""
    DISPATCHED = "dispatched"
    """The mark commit chose to dispatch it; the executor may not have started it yet."""
    RUNNING = "running"
    """The executor reports it started."""
    COMPLETE = "complete"
    """Finished successfully. Terminal."""
    FAILED = "failed"
    """Finished unsuccessfully. Retried while attempts remain, else dead-lettered."""
    TAPPED_OUT = "tapped_out"
    """Stopped for exceeding its timeout or the run's deadline. Terminal; dead-lettered."""
    CANCELLED = "cancelled"
    """Cancelled by an overlap policy or an operator. Terminal."""
    SKIPPED = "skipped"
    """Never dispatched: a needed track did not complete (``when: success``). Terminal."""
    REJECTED = "rejected"
    """A person refused its approval gate (``orchestrator reject``, or GitHub's reviewers
    of its environment). Terminal; never retried nor dead-lettered."""
    WAITING = "waiting"
    """A poll answered "not yet": dispatched again after its poll interval, without
    using an attempt. Not terminal; the run's deadline taps it out."""


class RunStatus(StrEnum):
    """Status of one firing of a schedule."""

    SCHEDULED = "scheduled"
    """Created by the mark commit; no track dispatched yet (jitter, buffered overlap)."""
    RUNNING = "running"
    """At least one track was dispatched and some track is still open."""
    CONSOLIDATING = "consolidating"
    """Every track is terminal; the brief is being rendered."""
    COMPLETED = "completed"
    """Every track completed. Terminal."""
    FAILED = "failed"
    """Some track did not complete. Terminal (an operator's requeue may reopen it)."""
    CANCELLED = "cancelled"
    """An operator cancelled it (``runs cancel``) and every track is terminal. Terminal,
    neither a success nor a failure (a retry or a requeue may reopen it)."""
