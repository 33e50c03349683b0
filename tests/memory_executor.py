"""An executor in memory: the executor contract with no process, file or socket.

A test double of a backend for the tick's unit tests (the tick is what they test; this
stands where the local executor or GitHub would). It keeps the contract of
:mod:`orchestrator.executors.base`, and runs the executor contract suite's cases that
need no process (``tests/unit/test_memory_executor_contract.py``):

- one result per request, in order; an invalid run id or track name gets an error;
- a key dispatched again gets the handle it got before and starts nothing;
- :meth:`lookup` maps a key it never saw to ``None``, and leaves every key out while
  the backend is down (it could ask about none); its other calls raise then;
- a cancel leaves a finished attempt alone.

What an attempt does once dispatched is the test's to say, with the times it gives:
it waits for a runner (no phase) until :meth:`MemoryExecutor.start` and
:meth:`MemoryExecutor.finish` move it. Faults are scripted: :attr:`refused` tracks
get an error result, :attr:`dispatch_fails` makes ``dispatch`` raise
:class:`~orchestrator.errors.ExecutorError` (a batch that failed half-way: nothing
says what was started), :attr:`lookup_fails` makes ``lookup`` raise it, and while
:attr:`down` is set every call but ``lookup`` raises it.

It lives in ``tests/`` and not in the package beside the in-memory store: no command
builds it (the executor registry lists the backends a user can pick; its contract test
registers it only while each case runs), while the
in-memory store is the reference the store contract is written against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from orchestrator.config.fieldtypes import check_id, check_run_id
from orchestrator.errors import ExecutorError, InvalidId
from orchestrator.executors.base import DispatchRequest, DispatchResult, Handle, Observation
from orchestrator.state.breaker import Breaker
from orchestrator.state.items import ItemReport, NewItem
from orchestrator.state.phases import TrackPhase

FINAL = frozenset({TrackPhase.COMPLETE, TrackPhase.FAILED, TrackPhase.TAPPED_OUT,
                   TrackPhase.CANCELLED, TrackPhase.WAITING})


@dataclass
class Attempt:
    """One dispatched attempt and what the test made of it."""

    request: DispatchRequest
    phase: TrackPhase | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    items: tuple[ItemReport, ...] | None = None
    """A drain worker's account of its items (``None``: none, as a lost artifact)."""
    enqueue: tuple[NewItem, ...] = ()


@dataclass
class MemoryExecutor:
    """The backend; see the module docstring."""

    name: str = "memory"
    """Its registry name (its contract test registers it): an executor that claimed
    another's name would be given that one's capabilities (work folders)."""
    machine: str | None = None
    """The machine it launches on (``None``: it claims nothing, as GitHub)."""
    breaker: Breaker | None = None
    """What :meth:`health` answers (``None``: no breaker, as the local executor)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Track name -> the error its requests get back."""
    dispatch_fails: str | None = None
    """While set, ``dispatch`` raises ``ExecutorError(dispatch_fails)`` and starts
    nothing."""
    down: str | None = None
    """While set, every call but :meth:`lookup` raises ``ExecutorError(down)``."""
    lookup_fails: str | None = None
    """While set, ``lookup`` raises ``ExecutorError(lookup_fails)`` (a backend
    whose other calls still answer)."""
    attempts: dict[str, Attempt] = field(default_factory=dict)
    """Every attempt the backend took, by dispatch key."""
    starts: list[str] = field(default_factory=list)
    """The dispatch key of each start, in order: a key twice is a track run twice."""
    cancelled: list[str] = field(default_factory=list)
    """The keys the backend stopped."""

    # ------------------------------------------------------------------ the contract

    def dispatch(self, requests: list[DispatchRequest]) -> list[DispatchResult]:
        self._reachable()
        if self.dispatch_fails is not None:
            raise ExecutorError(self.dispatch_fails)
        results = []
        for request in requests:
            try:
                check_run_id(request.run_id)
                check_id(request.track, "track name")
            except InvalidId as exc:
                results.append(DispatchResult(key=request.key, error=exc.message))
                continue
            why = self.refused.get(request.track)
            if why is not None:
                results.append(DispatchResult(key=request.key, error=why))
                continue
            if request.key not in self.attempts:
                self.attempts[request.key] = Attempt(request)
                self.starts.append(request.key)
            results.append(self._result(request.key))
        return results

    def lookup(self, requests: list[DispatchRequest]) -> dict[str, DispatchResult | None]:
        if self.down is not None:  # asked about nothing: no key may be dispatched again
            return {}
        if self.lookup_fails is not None:
            raise ExecutorError(self.lookup_fails)
        return {r.key: self._result(r.key) if r.key in self.attempts else None
                for r in requests}

    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        self._reachable()
        out = {}
        for handle in handles:
            attempt = self.attempts.get(handle.key)
            if attempt is None:
                out[handle.key] = Observation(key=handle.key, phase=TrackPhase.FAILED,
                                              error=f"no attempt {handle.key} in memory")
            else:
                out[handle.key] = Observation(
                    key=handle.key, phase=attempt.phase, started_at=attempt.started_at,
                    finished_at=attempt.finished_at, result=attempt.result,
                    error=attempt.error, items=attempt.items, enqueue=attempt.enqueue)
        return out

    def cancel(self, handle: Handle) -> None:
        self._reachable()
        attempt = self.attempts.get(handle.key)
        if attempt is None or attempt.phase in FINAL:
            return
        attempt.phase, attempt.error = TrackPhase.CANCELLED, "cancelled"
        attempt.finished_at = attempt.finished_at or attempt.started_at
        self.cancelled.append(handle.key)

    def health(self) -> Breaker | None:
        return self.breaker

    # ------------------------------------------------------------------ the test's part

    def start(self, key: str, at: datetime) -> None:
        """A runner took the attempt at ``at``."""
        attempt = self.attempts[key]
        attempt.phase, attempt.started_at = TrackPhase.RUNNING, at

    def finish(self, key: str, at: datetime, phase: TrackPhase = TrackPhase.COMPLETE, *,
               result: dict[str, Any] | None = None, error: str | None = None,
               items: tuple[ItemReport, ...] | None = None,
               enqueue: tuple[NewItem, ...] = ()) -> None:
        """The attempt ended at ``at`` in ``phase`` (started at ``at`` too, unless a
        runner took it before); a drain worker with its account of ``items``, a track
        with the items it asked to ``enqueue``."""
        attempt = self.attempts[key]
        attempt.started_at = attempt.started_at or at
        attempt.phase, attempt.finished_at = phase, at
        attempt.result, attempt.error = result, error
        attempt.items, attempt.enqueue = items, enqueue

    # ------------------------------------------------------------------ inside

    def _reachable(self) -> None:
        if self.down is not None:
            raise ExecutorError(self.down)

    def _result(self, key: str) -> DispatchResult:
        return DispatchResult(key=key, handle={"executor": self.name, "key": key},
                              url=f"memory:{key}")
