"""The executor contract (tests/executor_contract.py) over the in-memory executor of the
unit tier (tests/memory_executor.py), in its cases that need no process.

- The executor is registered as ``memory`` while each case runs, as any executor a
  test defines is; a user never sees it.
- Its harness is a runner in memory: it takes each attempt dispatched and not taken
  yet, and finishes it as its command, ``true``, would. It models no other command, so
  a case that needs one fails here rather than pass without running it.
- Every tick's executor shares the one backend's attempts, as the next tick's local or
  GitHub executor sees what the last one dispatched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from orchestrator import executors
from orchestrator.executors.base import DispatchRequest, Executor
from orchestrator.state.breaker import Breaker
from tests.executor_contract import Backend, ExecutorContract, Harness
from tests.memory_executor import MemoryExecutor

MEMORY = executors.ExecutorInfo(
    "memory", lambda _setup, breaker: MemoryExecutor(breaker=breaker),
    grace=timedelta(0),  # a dispatch shows within the call that makes it
    summary="attempts in memory, for tests")


def _memory_backend(_request: pytest.FixtureRequest) -> Iterator[Backend]:
    backend = MemoryExecutor()
    taken: list[str] = []  # the key of each attempt the runner took, in order

    def next_tick(breaker: Breaker | None = None) -> MemoryExecutor:
        return MemoryExecutor(breaker=breaker, refused=backend.refused, down=backend.down,
                              attempts=backend.attempts, starts=backend.starts,
                              cancelled=backend.cancelled)

    def take_jobs() -> None:
        waiting = [k for k, a in backend.attempts.items() if a.phase is None]
        for key in waiting:
            run = backend.attempts[key].request.spec.run
            assert run == "true", f"the memory runner runs `true` only, not {run!r}"
            taken.append(key)
            backend.finish(key, datetime.now(UTC))

    @contextlib.contextmanager
    def no_free_runner() -> Iterator[Executor]:
        yield backend  # the runner takes nothing until take_jobs

    def refused(request: DispatchRequest) -> DispatchRequest:
        backend.refused[request.track] = f"memory: track {request.track} is refused"
        return request

    def break_it() -> None:
        backend.down = "memory: the backend is down"

    yield Backend("memory", backend, "nightly--20261201T0700Z", next_tick=next_tick,
                  take_jobs=take_jobs, count_starts=taken.count,
                  no_free_runner=no_free_runner, refused=refused,
                  stops=backend.cancelled.count, tmp=None, break_it=break_it, settle=0)


class TestMemoryExecutor(ExecutorContract):
    executor = MEMORY
    harness = Harness(_memory_backend, processes=False)
