"""A toy executor, defined in this file alone, run through the whole executor contract.

This is the proof that adding an executor takes its module, one registry entry and one
harness, and no edit anywhere else:

- the module: :class:`ToyExecutor`, the five methods of
  :class:`orchestrator.executors.base.Executor`, over a toy service whose runner starts
  each track's command as a process of this test;
- the registry entry: :data:`TOY`, with its grace and no optional capabilities;
- the harness: :func:`_toy_backend`, which builds each tick's executor with the factory
  the registry holds, and leaves nothing running.

Neither ``tests/executor_contract.py`` nor the registry names it: the suite registers
:data:`TOY` only while each of its cases runs, and runs every case over it but those
that hold for named backends only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator import executors
from orchestrator.config.fieldtypes import check_id, check_run_id
from orchestrator.config.models import TrackSpec
from orchestrator.errors import InvalidId
from orchestrator.executors.base import (
    DispatchRequest,
    DispatchResult,
    Executor,
    Handle,
    Observation,
)
from orchestrator.state.breaker import Breaker
from orchestrator.state.phases import TrackPhase
from orchestrator.support.credentials import track_environment
from tests.executor_contract import Backend, ExecutorContract, Harness

NOT_YET = 75
"""The exit code of a poll that answers "not yet"."""


@dataclass
class _Attempt:
    """One dispatched attempt on the toy service."""

    request: DispatchRequest
    folder: Path
    proc: subprocess.Popen[bytes] | None = None
    """Its command, once a runner took it."""
    started_at: datetime | None = None
    ended: Observation | None = None
    """What it ended as; never changes after."""

    def start(self) -> None:
        self.folder.mkdir(parents=True)
        env = track_environment(os.environ) | {
            "ORCHESTRATOR_RUN_ID": self.request.run_id,
            "ORCHESTRATOR_TRACK": self.request.track,
            "ORCHESTRATOR_ATTEMPT": str(self.request.attempt),
            "ORCHESTRATOR_POLL": str(self.request.poll),
            "ORCHESTRATOR_INPUTS": json.dumps(self.request.spec.inputs),
            "ORCHESTRATOR_RESULT": str(self.folder / "result.json"),
        } | self.request.env
        if self.request.results is not None:
            (self.folder / "results.json").write_text(json.dumps(self.request.results))
            env["ORCHESTRATOR_RESULTS"] = str(self.folder / "results.json")
        assert self.request.spec.run is not None  # refused at dispatch
        with open(self.folder / "stderr", "wb") as stderr:
            # a session of its own, so a stop reaches whatever the command started
            self.proc = subprocess.Popen(
                ["sh", "-c", self.request.spec.run], cwd=self.folder, env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                start_new_session=True)
        self.started_at = datetime.now(UTC)

    def look(self) -> Observation:
        if self.ended is not None:
            return self.ended
        if self.proc is None or self.started_at is None:
            return Observation(key=self.request.key, phase=None)  # no runner took it yet
        code = self.proc.poll()
        if code is None:
            limit = timedelta(minutes=self.request.spec.timeout_minutes)
            if datetime.now(UTC) - self.started_at <= limit:
                return Observation(key=self.request.key, phase=TrackPhase.RUNNING,
                                   started_at=self.started_at)
            self.kill()
            return self.end(TrackPhase.TAPPED_OUT, error="timed out")
        if code == 0:
            return self.end(TrackPhase.COMPLETE, result=self.result())
        if code == NOT_YET:
            return self.end(TrackPhase.WAITING)
        tail = (self.folder / "stderr").read_text(errors="replace").splitlines()[-5:]
        return self.end(TrackPhase.FAILED, error="\n".join([f"exit code {code}", *tail]))

    def result(self) -> dict[str, Any] | None:
        try:
            data = json.loads((self.folder / "result.json").read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def end(self, phase: TrackPhase, **fields: Any) -> Observation:
        self.ended = Observation(key=self.request.key, phase=phase,
                                 started_at=self.started_at or datetime.now(UTC),
                                 finished_at=datetime.now(UTC), **fields)
        return self.ended

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()


@dataclass
class _Service:
    """The toy's backend: what it was asked to run, kept across ticks as a CI service
    keeps it."""

    work: Path
    attempts: dict[str, _Attempt] = field(default_factory=dict)
    launches: list[str] = field(default_factory=list)
    """The key of each attempt a runner started, in order."""
    stops: list[str] = field(default_factory=list)
    """The key of each attempt a cancel stopped."""
    down: bool = False

    def take(self) -> None:
        """The runner starts every attempt dispatched and not taken yet."""
        for key, attempt in self.attempts.items():
            if attempt.proc is None and attempt.ended is None:
                attempt.start()
                self.launches.append(key)


_SERVICES: dict[Path, _Service] = {}
"""The toy services by checkout, as long as a harness holds one."""


class ToyExecutor:
    """Tracks as queued commands on a toy service."""

    name = "toy"
    machine = None  # any tick may look a dispatch up

    def __init__(self, service: _Service) -> None:
        self.service = service

    def dispatch(self, requests: list[DispatchRequest]) -> list[DispatchResult]:
        return [self._dispatch_one(request) for request in requests]

    def _dispatch_one(self, request: DispatchRequest) -> DispatchResult:
        if self.service.down:
            return DispatchResult(key=request.key, error="toy: down", not_sent=True)
        try:
            check_run_id(request.run_id)
            check_id(request.track, "track name")
        except InvalidId as exc:
            return DispatchResult(key=request.key, error=exc.message)
        if request.spec.run is None:
            return DispatchResult(key=request.key, error=f"toy: {request.track} has no command")
        # a key dispatched again gets the attempt it got before
        self.service.attempts.setdefault(
            request.key, _Attempt(request, self.service.work / request.key))
        return DispatchResult(key=request.key, handle={"key": request.key})

    def lookup(self, requests: list[DispatchRequest]) -> dict[str, DispatchResult | None]:
        if self.service.down:
            return {}  # asked about nothing: no key may be dispatched again
        return {r.key: DispatchResult(key=r.key, handle={"key": r.key})
                if r.key in self.service.attempts else None for r in requests}

    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        out = {}
        for handle in handles:
            attempt = self.service.attempts.get(handle.key)
            out[handle.key] = attempt.look() if attempt is not None else Observation(
                key=handle.key, phase=TrackPhase.FAILED, error="toy: no such attempt")
        return out

    def cancel(self, handle: Handle) -> None:
        attempt = self.service.attempts.get(handle.key)
        if attempt is None or attempt.look().phase not in (None, TrackPhase.RUNNING):
            return  # ended: left alone
        attempt.kill()
        attempt.end(TrackPhase.CANCELLED, error="cancelled")
        self.service.stops.append(handle.key)

    def health(self) -> Breaker | None:
        return None


def _toy(setup: executors.Setup, _breaker: Breaker | None) -> Executor:
    return ToyExecutor(_SERVICES.setdefault(setup.repo, _Service(setup.repo / "toy")))


TOY = executors.ExecutorInfo("toy", _toy, grace=timedelta(seconds=30),
                             summary="commands on a toy service")


def _toy_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    tmp: Path = request.getfixturevalue("tmp_path")
    service = _SERVICES[tmp] = _Service(tmp / "toy")
    info = executors.get("toy")  # the suite registered it for this case

    def tick(_breaker: Breaker | None = None) -> Executor:
        return info.factory(executors.Setup(repo=tmp, now=datetime.now(UTC)), None)

    @contextlib.contextmanager
    def no_free_runner() -> Iterator[Executor]:
        yield tick()  # the runner takes nothing until take_jobs

    def refused(request: DispatchRequest) -> DispatchRequest:
        # a track for a schedule's own workflow (inputs, no command): nothing to run here
        return replace(request, spec=TrackSpec(name=request.track, run=None,
                                               inputs={"target": "docs"}))

    def break_it() -> None:
        service.down = True

    try:
        yield Backend("toy", tick(), "nightly--20261201T0700Z", next_tick=tick,
                      take_jobs=service.take, count_starts=service.launches.count,
                      no_free_runner=no_free_runner, refused=refused,
                      stops=service.stops.count, tmp=tmp, break_it=break_it)
    finally:
        for attempt in service.attempts.values():
            attempt.kill()
        del _SERVICES[tmp]


class TestToyExecutor(ExecutorContract):
    executor = TOY
    harness = Harness(_toy_backend)


def test_the_toy_is_registered_only_while_a_contract_case_runs() -> None:
    assert "toy" not in executors.REGISTRY
