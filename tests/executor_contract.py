"""The executor contract: what :mod:`orchestrator.executors.base` promises, as tests.

One suite, :class:`ExecutorContract`, run through one parametrized fixture,
``backend``, each backend built by its :class:`Harness`. A tier runs the suite by
subclassing it in a ``test_*.py`` module:

- By default a subclass runs over every executor of the registry
  (:data:`orchestrator.executors.REGISTRY`), read when the subclass is collected, each
  built by its harness in :data:`HARNESSES`: the local executor (real supervisors and
  processes in a temporary folder) and the GitHub executor against the fake GitHub
  server on 127.0.0.1, whose matrix legs are played as a runner plays ``track.yml``
  (:mod:`tests.workflow_player`). Both need real processes: ``tests/integration``.
- A subclass that sets :attr:`ExecutorContract.executor` and
  :attr:`ExecutorContract.harness` runs over that executor alone, registered
  (:func:`orchestrator.executors.register`) while each case runs and never after, so
  no other module sees it. A new executor needs its module, its registry entry and a
  harness; this file does not change.

A guarantee that holds for some backends only is marked ``@backends("local",
why=...)``: the others skip it and say why. A case that needs a track's command to run
as a real process is marked ``@needs_process``: a harness that runs no process (the
in-memory executor's) skips it, and runs every other case.

Time: the legs and the supervisors measure their own times on the real clock, so
runs are named after the current minute and executors are built with the current
time, read where they are built (the GitHub executor never reads the clock itself).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

from orchestrator import executors
from orchestrator.config.models import TrackSpec
from orchestrator.executors import _attempt_folder as sv
from orchestrator.executors.base import (
    DispatchRequest,
    DispatchResult,
    Executor,
    Handle,
    Observation,
)
from orchestrator.executors.github import GitHubExecutor
from orchestrator.executors.github.jobnames import job_name
from orchestrator.executors.local import LocalExecutor
from orchestrator.state.breaker import Breaker
from orchestrator.state.phases import TrackPhase
from tests.builders import spec_data
from tests.fakes.github import FakeGitHub
from tests.gitrepo import make_origin
from tests.workflow_player import Player

BACKENDS = tuple(executors.REGISTRY)
"""Every executor a user can pick: each must have a harness in :data:`HARNESSES`."""
ENDED = frozenset({TrackPhase.COMPLETE, TrackPhase.FAILED, TrackPhase.TAPPED_OUT,
                   TrackPhase.CANCELLED, TrackPhase.WAITING})
"""Phases after which an attempt has nothing more to say (``waiting``: until its next
poll, which is another dispatch)."""
SETTLE = 1.0
"""Seconds after which a second start of an attempt, were there one, has happened (a
supervisor or a leg starts well within it)."""
SLACK = timedelta(seconds=2)
"""How far a leg's or a supervisor's clock may read from this process's."""

T = TypeVar("T")


def backends(*names: str, why: str) -> pytest.MarkDecorator:
    """Marks a contract case that holds for the backends ``names`` only; ``why`` tells
    the others' skip."""
    unknown = set(names) - set(BACKENDS)
    assert not unknown, f"unknown backends {sorted(unknown)}"
    return pytest.mark.executor_backends(*names, why=why)


needs_process = pytest.mark.needs_process
"""Marks a contract case that needs a track's command to run as a real process (its
exit code, output, files, signals): backends whose harness runs none skip it."""


def eventually(probe: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
    """Poll ``probe`` until it returns something truthy, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie has: nothing reaps orphans in some
    containers)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return raw.rsplit(")", 1)[1].split()[0] == "Z"


# --------------------------------------------------------------------------- backends


@dataclass
class Backend:
    """An executor under test, and what a test needs around it."""

    name: str
    executor: Executor
    """The executor of this tick."""
    run_id: str
    """A run id whose slot is the current minute's predecessor."""
    next_tick: Callable[..., Executor]
    """Another executor on the same backend, as the next tick builds it once the
    executor's grace (:data:`orchestrator.executors.REGISTRY`) has passed; its one
    argument, the breaker the last tick persisted, defaults to none."""
    take_jobs: Callable[[], None]
    """The runners take what was dispatched and not taken yet (GitHub: each matrix leg
    is played in a thread of its own; local: nothing to do, a supervisor takes each
    attempt as it is dispatched)."""
    count_starts: Callable[[str], int]
    """How many times the backend started the attempt with this dispatch key, so far."""
    no_free_runner: Callable[[], contextlib.AbstractContextManager[Executor]]
    """Within it, attempts dispatched with the executor it gives wait for a runner
    (local: a task cap of one whose only slot is held; GitHub: no runner takes a job
    until :attr:`take_jobs`)."""
    refused: Callable[[DispatchRequest], DispatchRequest]
    """A request like the given one that this backend refuses to start."""
    stops: Callable[[str], int]
    """How many times the backend was asked to stop the attempt with this key (local:
    its cancel marker; GitHub: cancels of its workflow run)."""
    tmp: Path | None
    """A folder for the tracks' own files (``None``: the backend runs no process)."""
    break_it: Callable[[], None] | None = None
    """Makes the backend unable to answer (local: its work folder cannot be read;
    GitHub: every call fails)."""
    settle: float = SETTLE
    """Seconds after which a second start, were there one, has happened (none for a
    backend in memory, where a start happens within the call that makes it)."""

    def starts(self, *keys: str) -> list[int]:
        """How many times each attempt was started, once a second start, were there one,
        would have happened: after :attr:`settle`, and the runners taking what is new."""
        time.sleep(self.settle)
        self.take_jobs()
        time.sleep(self.settle / 2)
        return [self.count_starts(key) for key in keys]


def _run_id() -> str:
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    return f"nightly--{slot:%Y%m%dT%H%MZ}"


def _local_backend(tmp: Path) -> Iterator[Backend]:
    work = tmp / "work"

    def make(breaker: Breaker | None = None, **options: Any) -> LocalExecutor:
        return LocalExecutor(work, kill_grace_seconds=0.3, **options)  # keeps no breaker

    def starts(key: str) -> int:
        log = work / sv.LAUNCHES
        lines = log.read_text().splitlines() if log.exists() else []
        return sum(1 for line in lines if json.loads(line)["key"] == key)

    @contextlib.contextmanager
    def no_free_runner() -> Iterator[Executor]:
        (work / sv.SLOTS).mkdir(parents=True, exist_ok=True)
        slot = sv.try_lock(work / sv.SLOTS / "0.lock")
        assert slot is not None
        try:
            yield make(max_concurrent=1)
        finally:
            os.close(slot)

    def refused(request: DispatchRequest) -> DispatchRequest:
        # a track for a schedule's own workflow (inputs, no command): nothing to run here
        return replace(request, spec=TrackSpec(name=request.track, run=None,
                                               inputs={"target": "docs"}))

    def stops(key: str) -> int:
        return int((work / key / sv.CANCEL).exists())

    def break_it() -> None:
        # The work folder becomes a link to a name longer than any file system takes:
        # every look into it fails (ENAMETOOLONG), even for root, which permissions
        # would not stop.
        shutil.rmtree(work, ignore_errors=True)
        work.symlink_to("x" * 300)

    yield Backend("local", make(), _run_id(), next_tick=make, take_jobs=lambda: None,
                  count_starts=starts, no_free_runner=no_free_runner, refused=refused,
                  stops=stops, tmp=tmp, break_it=break_it)
    # Leave nothing running, whatever the test did.
    if work.is_symlink():  # broken by the test: nothing ran in it since
        return
    for status in work.glob("*/status.json"):
        data = json.loads(status.read_text())
        for pid, kill in ((data.get("pgid"), os.killpg), (data.get("supervisor_pid"), os.kill)):
            if pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(pid, signal.SIGKILL)


def _github_backend(tmp: Path, fake: FakeGitHub) -> Iterator[Backend]:
    fake.now = None  # the fake's jobs keep the real clock, as the legs do
    fake.cancel_delay = timedelta(seconds=0.2)  # GitHub's "a little later", made short
    origin = make_origin(tmp, {"nightly": spec_data()})
    player = Player(fake, origin, tmp / "play")
    grace = executors.get("github").grace
    threads: list[threading.Thread] = []
    taken: set[tuple[int, str]] = set()

    def make(breaker: Breaker | None = None, later: timedelta = timedelta(0)
             ) -> GitHubExecutor:
        # its retries wait on its own clock, which the client moves: nothing sleeps
        return GitHubExecutor(fake.repository, fake.token, api_url=fake.api_url,
                              now=datetime.now(UTC) + later, breaker=breaker,
                              sleep=lambda _seconds: None)

    def take_jobs() -> None:
        for run in list(fake.runs.values()):
            for leg in json.loads(run.inputs["tracks"]):
                if (run.id, leg["key"]) in taken:
                    continue
                taken.add((run.id, leg["key"]))
                thread = threading.Thread(target=player.play_leg,
                                          args=(run.id, run.inputs, leg), daemon=True)
                thread.start()
                threads.append(thread)

    def starts(key: str) -> int:  # the jobs of that key a runner took
        return sum(1 for run in fake.runs.values() for job in run.jobs
                   if job.name == job_name(key) and job.started_at is not None)

    @contextlib.contextmanager
    def no_free_runner() -> Iterator[Executor]:
        yield executor

    def refused(request: DispatchRequest) -> DispatchRequest:
        # more than GitHub takes as one dispatch's inputs (65,535 characters)
        spec = TrackSpec(name=request.track, run="echo " + "y" * 60_000,
                         inputs={"more": "z" * 10_000})
        return replace(request, spec=spec)

    def stops(key: str) -> int:
        runs = {run.id for run in fake.runs.values()
                if any(j.name == job_name(key) for j in run.jobs)}
        return sum(1 for call in fake.calls("cancel")
                   if int(call.path.rstrip("/").split("/")[-2]) in runs)

    def break_it() -> None:
        fake.fail("any", status=500, times=1000)

    executor = make()
    yield Backend("github", executor, _run_id(),
                  next_tick=lambda breaker=None: make(breaker, grace), take_jobs=take_jobs,
                  count_starts=starts, no_free_runner=no_free_runner, refused=refused,
                  stops=stops, tmp=tmp, break_it=break_it)
    player.stop()
    for thread in threads:
        thread.join(timeout=30)
    fake.faults.clear()


@dataclass(frozen=True)
class Harness:
    """How the suite builds one backend under test, and tears it down."""

    build: Callable[[pytest.FixtureRequest], Iterator[Backend]]
    """Yields the backend, then leaves nothing running (the request gives fixtures,
    ``tmp_path`` among them)."""
    processes: bool = True
    """Whether a track's command runs as a real process: cases marked
    :data:`needs_process` skip for a backend that runs none."""


HARNESSES: dict[str, Harness] = {
    "local": Harness(lambda request: _local_backend(request.getfixturevalue("tmp_path"))),
    "github": Harness(lambda request: _github_backend(
        request.getfixturevalue("tmp_path"), request.getfixturevalue("fake_github"))),
}
"""The harness of each executor of the registry."""


# --------------------------------------------------------------------------- the suite


@dataclass(frozen=True)
class Ran:
    """Attempts dispatched and observed until they ended."""

    seen: dict[str, Observation]
    sent: datetime
    """When the dispatch was sent (by this process's clock)."""
    handles: dict[str, Handle]
    """The handles the dispatch gave, by dispatch key."""


class ExecutorContract:
    """The contract cases, each run over every executor of the registry, or over the
    subclass's own :attr:`executor`."""

    executor: ClassVar[executors.ExecutorInfo | None] = None
    """An executor the subclass defines (in its test file): the cases run over it alone,
    with it registered while each runs. ``None``: over every registered executor."""
    harness: ClassVar[Harness | None] = None
    """The harness of :attr:`executor`."""

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        # Read when each subclass is collected, not when this module is imported.
        if "backend" in metafunc.fixturenames:
            metafunc.parametrize("backend", self._backends(), indirect=True)

    def _backends(self) -> tuple[str, ...]:
        if self.executor is not None:
            assert self.harness is not None, f"{self.executor.name} has no harness"
            return (self.executor.name,)
        missing = sorted(set(executors.REGISTRY) - set(HARNESSES))
        assert not missing, f"executors without a contract harness: {missing}"
        return tuple(executors.REGISTRY)

    def _harness(self, name: str) -> Harness:
        return self.harness if self.harness is not None else HARNESSES[name]

    @pytest.fixture
    def backend(self, request: pytest.FixtureRequest) -> Iterator[Backend]:
        name, harness = request.param, self._harness(request.param)
        only = request.node.get_closest_marker("executor_backends")
        if only is not None and name not in only.args:
            pytest.skip(f"{name}: holds for {', '.join(only.args)} only ({only.kwargs['why']})")
        if request.node.get_closest_marker("needs_process") and not harness.processes:
            pytest.skip(f"{name}: its harness runs no process, and this case needs one")
        with contextlib.ExitStack() as stack:
            if self.executor is not None:
                stack.enter_context(executors.register(self.executor))
            yield from harness.build(request)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def request(backend: Backend, track: str, run: str, *, attempt: int = 1,
                timeout_minutes: float = 5, **fields: Any) -> DispatchRequest:
        spec = TrackSpec(name=track, run=run, timeout_minutes=timeout_minutes,
                         inputs=fields.pop("inputs", {}))
        return DispatchRequest(run_id=backend.run_id, track=track, attempt=attempt,
                               spec=spec, **fields)

    @staticmethod
    def handle(result: DispatchResult, timeout_minutes: float = 5) -> Handle:
        assert result.error is None and result.handle is not None, result
        return Handle(key=result.key, handle=result.handle, timeout_minutes=timeout_minutes)

    @staticmethod
    def ended(executor: Executor, handles: list[Handle]) -> dict[str, Observation]:
        """Observe ``handles`` until every attempt is in one of :data:`ENDED`."""
        def probe() -> dict[str, Observation] | None:
            seen = executor.observe(handles)
            assert set(seen) <= {h.key for h in handles}, "observe answers for its handles only"
            done = all(h.key in seen and seen[h.key].phase in ENDED for h in handles)
            return seen if done else None

        return eventually(probe, f"{[h.key for h in handles]} to end")

    def run_to_end(self, backend: Backend, *requests: DispatchRequest) -> Ran:
        """Dispatch ``requests``, let the runners take them, observe until they ended."""
        sent = datetime.now(UTC)
        results = backend.executor.dispatch(list(requests))
        backend.take_jobs()
        handles = [self.handle(r, req.spec.timeout_minutes)
                   for r, req in zip(results, requests, strict=True)]
        return Ran(self.ended(backend.executor, handles), sent,
                   {h.key: h for h in handles})

    @staticmethod
    def script(backend: Backend, name: str, body: str) -> str:
        """A command that runs the Python ``body`` (with ``os`` and ``json`` imported)."""
        assert backend.tmp is not None, "a script runs in a process: mark the case"
        path = backend.tmp / f"{name}.py"
        path.write_text(f"import json, os, sys\n{body}\n")
        return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"

    # ------------------------------------------------------------------ dispatch

    def test_dispatch_answers_each_request_in_order_with_a_handle_or_an_error(
            self, backend: Backend) -> None:
        first = self.request(backend, "first", "true")
        refused = backend.refused(self.request(backend, "refused", "true"))
        last = self.request(backend, "last", "true")
        results = backend.executor.dispatch([first, refused, last])

        assert [r.key for r in results] == [first.key, refused.key, last.key]
        for result in results:
            assert (result.handle is None) != (result.error is None), result
        assert results[1].error and results[1].handle is None
        assert not results[1].not_sent  # it reached the backend, which said no
        backend.take_jobs()
        seen = self.ended(backend.executor, [self.handle(results[0]), self.handle(results[2])])
        assert {o.phase for o in seen.values()} == {TrackPhase.COMPLETE}
        assert backend.starts(refused.key) == [0]

    def test_a_request_with_an_invalid_id_gets_an_error_and_the_others_still_go(
            self, backend: Backend) -> None:
        good = self.request(backend, "good", "true")
        bad_run = replace(self.request(backend, "a", "true"), run_id="../../evil")
        bad_track = replace(self.request(backend, "b", "true"), track="Not A Name")
        odd_workflow = replace(self.request(backend, "c", "true"), workflow="../x.yml")
        requests = [bad_run, good, bad_track, odd_workflow]
        results = backend.executor.dispatch(requests)  # never raises for one request

        assert [r.key for r in results] == [r.key for r in requests]
        for result in results:
            assert (result.handle is None) != (result.error is None), result
        assert results[0].error and results[2].error
        assert "evil" in results[0].error and "Not A Name" in results[2].error
        if backend.name == "github":  # the local executor runs no workflow file
            assert results[3].error and "../x.yml" in results[3].error
        backend.take_jobs()
        seen = self.ended(backend.executor, [self.handle(results[1])])
        assert seen[good.key].phase is TrackPhase.COMPLETE
        assert backend.starts(bad_run.key, bad_track.key) == [0, 0]

    def test_a_handle_is_plain_json_and_serves_the_next_tick(self, backend: Backend) -> None:
        request = self.request(backend, "a", "true")
        [result] = backend.executor.dispatch([request])
        backend.take_jobs()
        assert result.handle is not None
        stored = json.loads(json.dumps(result.handle))  # as the tick stores it on the track
        handle = Handle(key=result.key, handle=stored, timeout_minutes=5)
        seen = self.ended(backend.next_tick(), [handle])
        assert seen[request.key].phase is TrackPhase.COMPLETE

    def test_dispatching_a_key_again_in_a_later_tick_starts_it_once(
            self, backend: Backend) -> None:
        # e.g. a state branch rewound after the dispatch was recorded, then accepted
        request = self.request(backend, "a", "true")
        ran = self.run_to_end(backend, request)
        assert ran.seen[request.key].phase is TrackPhase.COMPLETE
        [again] = backend.next_tick().dispatch([request])
        backend.take_jobs()
        assert again.error is None and again.handle is not None
        later = self.ended(backend.next_tick(), [self.handle(again)])
        assert later[request.key].phase is TrackPhase.COMPLETE
        assert backend.starts(request.key) == [1]

    @backends("local", why="GitHub cannot refuse a second workflow_dispatch sent at once; "
                           "the tick never sends a dispatch it recorded again, and looks "
                           "up one it did not record")
    def test_dispatching_a_key_twice_in_one_tick_starts_it_once(self, backend: Backend) -> None:
        request = self.request(backend, "a", "true")
        [first] = backend.executor.dispatch([request])
        [second] = backend.executor.dispatch([request])
        assert first.handle is not None and second.handle == first.handle
        self.ended(backend.executor, [self.handle(second)])
        assert backend.starts(request.key) == [1]

    @backends("github", why="the local executor keeps no circuit breaker")
    def test_a_request_behind_an_open_breaker_is_not_sent(self, backend: Backend) -> None:
        opened = Breaker(state="open", failures=5, opened_at=datetime.now(UTC),
                         last_error="500 Server Error")
        executor = backend.next_tick(opened)  # the breaker the last tick persisted
        request = self.request(backend, "a", "true")
        [result] = executor.dispatch([request])
        assert result.not_sent and result.error and result.handle is None
        assert executor.health() == opened
        assert backend.starts(request.key) == [0]

    # ------------------------------------------------------------------ observe

    @needs_process
    def test_exit_0_is_complete_with_its_times_and_its_result(self, backend: Backend) -> None:
        run = self.script(backend, "done", "json.dump({'summary': 'built'}, "
                          "open(os.environ['ORCHESTRATOR_RESULT'], 'w'))")
        request = self.request(backend, "a", run)
        ran = self.run_to_end(backend, request)
        after = datetime.now(UTC)
        done = ran.seen[request.key]
        assert done.phase is TrackPhase.COMPLETE and done.error is None
        assert done.result == {"summary": "built"}
        assert done.started_at is not None and done.finished_at is not None
        assert ran.sent - SLACK <= done.started_at <= done.finished_at <= after + SLACK

    @needs_process
    def test_exit_1_is_failed_with_the_end_of_stderr(self, backend: Backend) -> None:
        request = self.request(backend, "a", "echo starting; echo 'no such table' >&2; exit 1")
        ran = self.run_to_end(backend, request)
        failed = ran.seen[request.key]
        assert failed.phase is TrackPhase.FAILED
        assert failed.error is not None and "exit code 1" in failed.error
        assert "no such table" in failed.error and "starting" not in failed.error
        assert failed.started_at is not None and failed.finished_at is not None
        assert ran.sent - SLACK <= failed.started_at <= failed.finished_at

    @needs_process
    def test_exit_75_is_a_polls_not_yet_and_the_next_poll_starts_again(
            self, backend: Backend) -> None:
        run = self.script(backend, "poll", "poll = os.environ['ORCHESTRATOR_POLL']\n"
                          "if poll == '0': sys.exit(75)\n"
                          "json.dump({'summary': 'ready at poll ' + poll}, "
                          "open(os.environ['ORCHESTRATOR_RESULT'], 'w'))")
        request = self.request(backend, "a", run)
        ran = self.run_to_end(backend, request)
        waiting = ran.seen[request.key]
        assert waiting.phase is TrackPhase.WAITING
        assert waiting.started_at is not None and waiting.finished_at is not None
        assert ran.sent - SLACK <= waiting.started_at <= waiting.finished_at
        # the next poll of the same attempt is dispatched under its own key
        again = replace(request, poll=1)
        assert again.key == f"{request.key}.1"
        polled = self.run_to_end(backend, again).seen[again.key]
        assert polled.phase is TrackPhase.COMPLETE
        assert polled.result == {"summary": "ready at poll 1"}
        assert backend.starts(request.key, again.key) == [1, 1]

    @needs_process
    def test_a_track_past_its_timeout_is_tapped_out(self, backend: Backend) -> None:
        request = self.request(backend, "a", "sleep 30", timeout_minutes=0.02)  # 1.2 s
        tapped = self.run_to_end(backend, request).seen[request.key]
        assert tapped.phase is TrackPhase.TAPPED_OUT
        assert tapped.started_at is not None and tapped.finished_at is not None
        assert timedelta(seconds=1) <= tapped.finished_at - tapped.started_at \
            < timedelta(seconds=20)

    def test_an_attempt_no_runner_took_yet_has_no_phase(self, backend: Backend) -> None:
        request = self.request(backend, "a", "true")
        with backend.no_free_runner() as executor:
            [result] = executor.dispatch([request])
            time.sleep(backend.settle / 2)  # time enough to start, were a runner free
            seen = executor.observe([self.handle(result)])
            assert set(seen) <= {request.key}
            assert request.key not in seen or seen[request.key].phase is None
            assert backend.count_starts(request.key) == 0  # so far: no runner took it

    @needs_process
    def test_the_command_gets_its_inputs_the_other_tracks_results_and_its_environment(
            self, backend: Backend) -> None:
        run = self.script(backend, "seen", "\n".join([
            "names = ['RUN_ID', 'TRACK', 'ATTEMPT', 'POLL', 'COMPENSATING',",
            "         'ORIGINAL_RESULT']",
            "env = {n: os.environ.get('ORCHESTRATOR_' + n) for n in names}",
            "path = os.environ.get('ORCHESTRATOR_RESULTS')",
            "results = json.load(open(path)) if path else None",
            "inputs = json.loads(os.environ['ORCHESTRATOR_INPUTS'])",
            "json.dump({'summary': 'seen', 'env': env, 'inputs': inputs,",
            "           'results': results}, open(os.environ['ORCHESTRATOR_RESULT'], 'w'))",
        ]))
        others = {"build": {"phase": "complete", "attempt": 1, "result": {"summary": "ok"},
                            "error": None}}
        track = self.request(backend, "report", run, attempt=2,
                             inputs={"region": "eu-west", "quote": "it's"}, results=others)
        original = json.dumps({"summary": "made"})
        undo = self.request(backend, "ship", run, compensating=True, env={
            "ORCHESTRATOR_COMPENSATING": "1", "ORCHESTRATOR_ORIGINAL_RESULT": original})
        assert undo.key == f"{backend.run_id}--ship--undo--1"
        seen = self.run_to_end(backend, track, undo).seen

        got = seen[track.key].result
        assert got is not None and got["inputs"] == {"region": "eu-west", "quote": "it's"}
        assert got["results"] == others
        assert {k: v for k, v in got["env"].items() if v} == {
            "RUN_ID": backend.run_id, "TRACK": "report", "ATTEMPT": "2", "POLL": "0"}
        undone = seen[undo.key].result
        assert undone is not None and undone["results"] is None
        assert undone["env"]["COMPENSATING"] == "1"
        assert undone["env"]["ORIGINAL_RESULT"] == original

    @needs_process
    def test_the_command_knows_its_schedule_its_slot_and_the_slot_before(
            self, backend: Backend) -> None:
        names = ["ORCHESTRATOR_SCHEDULE", "ORCHESTRATOR_SLOT", "ORCHESTRATOR_SLOT_LOCAL",
                 "ORCHESTRATOR_PREVIOUS_SLOT"]
        run = self.script(backend, "slots", "\n".join([
            f"env = {{n: os.environ.get(n) for n in {names!r}}}",
            "json.dump({'summary': 'slots', 'env': env},",
            "          open(os.environ['ORCHESTRATOR_RESULT'], 'w'))",
        ]))
        # what the planner gives every dispatch (tests/unit/test_planner.py)
        env = {"ORCHESTRATOR_SCHEDULE": "nightly", "ORCHESTRATOR_SLOT": "2026-11-30T07:15:00Z",
               "ORCHESTRATOR_SLOT_LOCAL": "2026-11-30T02:15:00-05:00",
               "ORCHESTRATOR_PREVIOUS_SLOT": "2026-11-27T07:15:00Z"}
        track = self.request(backend, "when", run, env=env)
        got = self.run_to_end(backend, track).seen[track.key].result
        assert got is not None and got["env"] == env

    # ------------------------------------------------------------------ lookup

    def test_lookup_tells_an_unrecorded_dispatch_from_one_never_sent(
            self, backend: Backend) -> None:
        marked = datetime.now(UTC)
        sent = self.request(backend, "sent", "true", marked_at=marked)
        never = self.request(backend, "never", "true", marked_at=marked)
        backend.executor.dispatch([sent])  # the tick died before recording the result
        backend.take_jobs()

        found = backend.next_tick().lookup([sent, never])
        assert set(found) == {sent.key, never.key}  # both were asked about
        assert found[never.key] is None  # no trace: only this one may be dispatched again
        adopted = found[sent.key]
        assert adopted is not None and adopted.key == sent.key and adopted.error is None
        seen = self.ended(backend.next_tick(), [self.handle(adopted)])
        assert seen[sent.key].phase is TrackPhase.COMPLETE
        assert backend.starts(sent.key, never.key) == [1, 0]

    def test_lookup_leaves_out_what_it_could_not_ask_about(self, backend: Backend) -> None:
        request = self.request(backend, "a", "true", marked_at=datetime.now(UTC))
        assert backend.break_it is not None
        backend.break_it()
        found = backend.next_tick().lookup([request])  # answers, never raises
        assert request.key not in found  # absent, never None: no second dispatch

    # ------------------------------------------------------------------ cancel

    @needs_process
    def test_cancel_stops_a_running_track(self, backend: Backend) -> None:
        assert backend.tmp is not None
        pidfile = backend.tmp / "pid"
        request = self.request(backend, "a", f"echo $$ > {shlex.quote(str(pidfile))}; "
                                             "exec sleep 60")
        [result] = backend.executor.dispatch([request])
        backend.take_jobs()
        handle = self.handle(result)

        def running() -> bool:
            seen = backend.executor.observe([handle]).get(request.key)
            assert seen is None or seen.phase in (None, TrackPhase.RUNNING), seen
            return seen is not None and seen.phase is TrackPhase.RUNNING and pidfile.exists() \
                and pidfile.read_text().strip().isdigit()

        eventually(running, f"{request.key} to run")
        pid = int(pidfile.read_text())
        backend.executor.cancel(handle)
        assert backend.stops(request.key) == 1
        seen = self.ended(backend.executor, [handle])
        assert seen[request.key].phase is TrackPhase.CANCELLED, seen[request.key]
        eventually(lambda: gone(pid), f"the command of {request.key} to stop", timeout=15)

    @needs_process
    def test_cancel_leaves_a_finished_attempt_alone(self, backend: Backend) -> None:
        run = self.script(backend, "done", "json.dump({'summary': 'built'}, "
                          "open(os.environ['ORCHESTRATOR_RESULT'], 'w'))")
        request = self.request(backend, "a", run)
        ran = self.run_to_end(backend, request)
        handle = ran.handles[request.key]
        backend.executor.cancel(handle)
        assert backend.stops(request.key) == 0  # not even asked
        time.sleep(0.5)  # time enough for a cancel to be carried out
        after = backend.executor.observe([handle])[request.key]
        assert after.phase is TrackPhase.COMPLETE
        assert after.result == {"summary": "built"}
        assert after.finished_at == ran.seen[request.key].finished_at

    # ------------------------------------------------------------------ health

    def test_health_is_none_or_a_breaker_closed_while_every_call_is_answered(
            self, backend: Backend) -> None:
        self.run_to_end(backend, self.request(backend, "a", "true"))
        health = backend.executor.health()
        assert health is None or health == Breaker()

    @backends("github", why="the local executor keeps no circuit breaker")
    def test_health_counts_the_failed_calls_of_this_tick(self, backend: Backend) -> None:
        request = self.request(backend, "a", "true")
        ran = self.run_to_end(backend, request)
        assert backend.break_it is not None
        backend.break_it()
        backend.executor.observe(list(ran.handles.values()))
        failing = backend.executor.health()
        assert failing is not None and failing.failures > 0 and failing.last_error
