"""The local executor against real processes: detached supervisors, process groups,
timeouts, cancels, crashes, and dispatch races between OS processes."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any, TypeVar

import pytest

from orchestrator.config.models import TrackSpec
from orchestrator.errors import InvalidId
from orchestrator.executors import local
from orchestrator.executors.base import DispatchRequest, Executor, Handle, Observation
from orchestrator.executors.local import LocalExecutor
from orchestrator.state.phases import TrackPhase

RUN_ID = "nightly--20261201T0700Z"
FINAL = {TrackPhase.COMPLETE, TrackPhase.FAILED, TrackPhase.TAPPED_OUT, TrackPhase.CANCELLED}
GRACE = 0.3

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], timeout: float = 15.0, what: str = "") -> T:
    """Poll ``probe`` until it returns something truthy, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or probe}")
        time.sleep(0.05)


def request(track: str, run: str, *, attempt: int = 1, timeout_minutes: float = 1,
            inputs: dict[str, str] | None = None) -> DispatchRequest:
    spec = TrackSpec(name=track, run=run, timeout_minutes=timeout_minutes,
                     inputs=inputs or {})
    return DispatchRequest(run_id=RUN_ID, track=track, attempt=attempt, spec=spec)


def handle(req: DispatchRequest) -> Handle:
    return Handle(key=req.key, handle={"key": req.key}, timeout_minutes=req.spec.timeout_minutes)


def observe(ex: LocalExecutor, req: DispatchRequest) -> Observation:
    return ex.observe([handle(req)])[req.key]


def final(ex: LocalExecutor, req: DispatchRequest, timeout: float = 15.0) -> Observation:
    def probe() -> Observation | None:
        obs = observe(ex, req)
        return obs if obs.phase in FINAL else None

    return eventually(probe, timeout, f"{req.key} to finish")


def running(ex: LocalExecutor, req: DispatchRequest) -> Observation:
    def probe() -> Observation | None:
        obs = observe(ex, req)
        assert obs.phase not in FINAL, obs
        return obs if obs.phase == TrackPhase.RUNNING else None

    return eventually(probe, what=f"{req.key} to run")


def status(ex: LocalExecutor, req: DispatchRequest) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ex.attempt_dir(req.key) / "status.json").read_text())
    return data


def launches(ex: LocalExecutor) -> list[dict[str, Any]]:
    path = ex.work_dir / "launches.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a live process; ``None`` when gone. Zombies count as
    gone: nothing reaps orphans in some containers."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw.rsplit(")", 1)[1].split()
    return (None if fields[0] == "Z" else (fields[0], int(fields[2])))


def alive(pid: int) -> bool:
    return _proc_stat(pid) is not None


def group_alive(pgid: int) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat is not None and stat[1] == pgid:
                return True
    return False


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="process checks read /proc")


@pytest.fixture
def work_dir(tmp_path: Path) -> Iterator[Path]:
    work = tmp_path / "work"
    yield work
    # Leave nothing running, whatever the test did.
    for st in work.glob("*/status.json"):
        data = json.loads(st.read_text())
        if data.get("pgid"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(data["pgid"], signal.SIGKILL)
        if data.get("supervisor_pid") and alive(data["supervisor_pid"]):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(data["supervisor_pid"], signal.SIGKILL)


@pytest.fixture
def ex(work_dir: Path) -> LocalExecutor:
    return LocalExecutor(work_dir, kill_grace_seconds=GRACE)


# --------------------------------------------------------------------------- outcomes


def test_complete_with_result_environment_and_logs(work_dir: Path, tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    ex = LocalExecutor(work_dir, repo=checkout, env={**os.environ, "EXTRA": "from-env"})
    run = (
        "echo out-line; echo err-line >&2; "
        "printf '{\"summary\": \"done\", \"run_id\": \"%s\", \"track\": \"%s\", "
        "\"attempt\": \"%s\", \"inputs\": %s, \"extra\": \"%s\", \"cwd\": \"%s\"}' "
        "\"$ORCHESTRATOR_RUN_ID\" \"$ORCHESTRATOR_TRACK\" \"$ORCHESTRATOR_ATTEMPT\" "
        "\"$ORCHESTRATOR_INPUTS\" \"$EXTRA\" \"$PWD\" > \"$ORCHESTRATOR_RESULT\""
    )
    req = request("alpha", run, attempt=2, inputs={"region": "eu"})

    [res] = ex.dispatch([req])
    assert res.error is None and res.key == f"{RUN_ID}--alpha--2"
    assert res.handle == {"executor": "local", "key": req.key,
                          "host": socket.gethostname(), "work_dir": str(ex.work_dir),
                          "machine": ex.machine}
    assert ex.machine == (work_dir / "machine-id").read_text().strip()
    obs = final(ex, req)

    assert obs.phase == TrackPhase.COMPLETE, obs
    assert obs.error is None
    assert obs.result == {
        "summary": "done", "run_id": RUN_ID, "track": "alpha", "attempt": "2",
        "inputs": {"region": "eu"}, "extra": "from-env", "cwd": str(checkout),
    }
    assert obs.started_at is not None and obs.finished_at is not None
    assert obs.started_at.tzinfo == UTC and obs.started_at <= obs.finished_at
    folder = work_dir / req.key
    assert obs.url == folder.as_uri() == res.url
    assert (folder / "stdout.log").read_text() == "out-line\n"
    assert (folder / "stderr.log").read_text() == "err-line\n"
    assert [entry["key"] for entry in launches(ex)] == [req.key]
    assert status(ex, req)["exit_code"] == 0


def test_failure_reports_exit_code_and_stderr_tail(ex: LocalExecutor) -> None:
    req = request("beta", "for i in $(seq 1 30); do echo line-$i >&2; done; "
                          "echo '{\"summary\": \"partial\"}' > \"$ORCHESTRATOR_RESULT\"; exit 3")
    ex.dispatch([req])
    obs = final(ex, req)

    assert obs.phase == TrackPhase.FAILED
    assert obs.error is not None and obs.error.startswith("exit code 3")
    tail = obs.error.split("\n", 1)[1].splitlines()
    assert tail == [f"line-{i}" for i in range(11, 31)]
    assert obs.result == {"summary": "partial"}  # a failing track's report is kept


def test_track_killed_by_a_signal_without_writing_anything_fails(ex: LocalExecutor) -> None:
    req = request("gamma", "kill -9 $$")
    ex.dispatch([req])
    obs = final(ex, req)

    assert obs.phase == TrackPhase.FAILED
    assert obs.error == "killed by SIGKILL"
    assert obs.result is None


def test_processes_a_finished_track_leaves_behind_are_killed(ex: LocalExecutor) -> None:
    req = request("leaver", "sleep 60 & echo $! > leftover.pid")
    ex.dispatch([req])
    assert final(ex, req).phase == TrackPhase.COMPLETE

    leftover = int((ex.attempt_dir(req.key) / "leftover.pid").read_text())
    eventually(lambda: not alive(leftover), what="the leftover sleep to be killed")


@pytest.mark.parametrize(
    ("content", "note"),
    [("{not json", "invalid JSON"), ("[1, 2]", "a JSON object is expected, not list")],
)
def test_exit_zero_with_a_broken_result_is_complete_with_a_note(
    ex: LocalExecutor, content: str, note: str
) -> None:
    req = request("delta", f"printf '%s' '{content}' > \"$ORCHESTRATOR_RESULT\"")
    ex.dispatch([req])
    obs = final(ex, req)

    assert obs.phase == TrackPhase.COMPLETE
    assert obs.result == {"error": obs.error}
    assert obs.error is not None and note in obs.error


def test_timeout_taps_out_and_kills_the_whole_group(ex: LocalExecutor) -> None:
    # Everything in the group ignores SIGTERM, so only the SIGKILL after the grace
    # period stops it; the background `sleep` is a grandchild of the supervisor.
    req = request("slow", "trap '' TERM; sleep 60 & echo $! > grandchild.pid; sleep 60",
                  timeout_minutes=0.01)
    ex.dispatch([req])
    started = running(ex, req)
    folder = ex.attempt_dir(req.key)
    grandchild = int(eventually(lambda: (folder / "grandchild.pid").read_text().strip()
                                if (folder / "grandchild.pid").exists() else None))
    pgid = status(ex, req)["pgid"]
    assert alive(grandchild) and group_alive(pgid)

    obs = final(ex, req)

    assert obs.phase == TrackPhase.TAPPED_OUT
    assert obs.error is not None and obs.error.startswith("timed out after 0.01 minutes")
    assert obs.finished_at is not None and started.started_at is not None
    assert (obs.finished_at - started.started_at).total_seconds() >= 0.6 + GRACE - 0.05
    assert status(ex, req)["signal"] == signal.SIGKILL
    assert not alive(grandchild)
    assert not group_alive(pgid)


def test_cancel_stops_the_group_and_reports_cancelled(ex: LocalExecutor) -> None:
    req = request("eps", "sleep 60 & sleep 60")
    ex.dispatch([req])
    running(ex, req)
    pgid = status(ex, req)["pgid"]

    ex.cancel(handle(req))
    obs = final(ex, req)

    assert obs.phase == TrackPhase.CANCELLED
    assert not group_alive(pgid)
    assert status(ex, req)["signal"] == signal.SIGTERM  # stopped within the grace period


def test_cancel_leaves_a_finished_attempt_alone(ex: LocalExecutor) -> None:
    req = request("zeta", "true")
    ex.dispatch([req])
    assert final(ex, req).phase == TrackPhase.COMPLETE

    ex.cancel(handle(req))

    assert observe(ex, req).phase == TrackPhase.COMPLETE
    assert not (ex.attempt_dir(req.key) / "cancel").exists()


def test_an_attempt_cancelled_before_dispatch_never_launches(ex: LocalExecutor) -> None:
    req = request("eta", "true")
    ex.cancel(handle(req))
    [res] = ex.dispatch([req])

    assert res.error is None
    assert final(ex, req).phase == TrackPhase.CANCELLED
    assert launches(ex) == []


def test_sigterm_to_the_supervisor_cancels_the_track(ex: LocalExecutor) -> None:
    req = request("theta", "sleep 60")
    ex.dispatch([req])
    running(ex, req)
    pgid = status(ex, req)["pgid"]

    os.kill(status(ex, req)["supervisor_pid"], signal.SIGTERM)
    obs = final(ex, req)

    assert obs.phase == TrackPhase.CANCELLED
    assert obs.error is not None and "supervisor terminated" in obs.error
    assert not group_alive(pgid)


@pytest.mark.slow
def test_a_vanished_supervisor_fails_the_attempt_and_its_orphans_are_killed(
    ex: LocalExecutor,
) -> None:
    req = request("iota", "sleep 60")
    ex.dispatch([req])
    running(ex, req)
    st = status(ex, req)
    os.kill(st["supervisor_pid"], signal.SIGKILL)
    eventually(lambda: not alive(st["supervisor_pid"]), what="the supervisor to die")
    assert group_alive(st["pgid"])  # the track itself survives its supervisor ...

    obs = observe(ex, req)

    assert obs.phase == TrackPhase.FAILED
    assert obs.error is not None and obs.error.startswith("supervisor vanished")
    assert not group_alive(st["pgid"])  # ... until an observer notices
    assert observe(ex, req).phase == TrackPhase.FAILED  # recorded, not re-derived


# A process holding this much touched memory takes tens of milliseconds to die after
# SIGKILL (its pages are freed first), as any process may on a loaded machine.
SLOW_TO_DIE = textwrap.dedent("""
    import mmap, time
    size = 64 << 20
    m = mmap.mmap(-1, size)
    for i in range(0, size, 4096):
        m[i] = 1
    print("ready", flush=True)
    time.sleep(60)
""")


@pytest.mark.slow
def test_an_orphan_slow_to_die_is_dead_before_its_attempt_is_reported_failed(
    ex: LocalExecutor,
) -> None:
    # The cause of this suite's flake under load: SIGKILL is delivered asynchronously,
    # so "killed" was reported while the orphan still ran, and a retry could start
    # beside it.
    req = request("kappa", f"{sys.executable} -c '{SLOW_TO_DIE}'")
    ex.dispatch([req])
    running(ex, req)
    eventually(lambda: "ready" in (ex.attempt_dir(req.key) / "stdout.log").read_text(),
               what="the track to hold its memory")
    st = status(ex, req)
    os.kill(st["supervisor_pid"], signal.SIGKILL)
    eventually(lambda: not alive(st["supervisor_pid"]), what="the supervisor to die")

    assert observe(ex, req).phase == TrackPhase.FAILED
    assert not group_alive(st["pgid"])


# --------------------------------------------------------------------------- task cap


def test_max_concurrent_runs_attempts_one_after_another(work_dir: Path) -> None:
    ex = LocalExecutor(work_dir, max_concurrent=1, kill_grace_seconds=GRACE)
    reqs = [request(f"cap{i}", "sleep 0.3") for i in range(3)]

    results = ex.dispatch(reqs)  # returns at once: waiting happens in the supervisors
    assert [r.error for r in results] == [None, None, None]
    seen = ex.observe([handle(r) for r in reqs])
    assert sum(o.phase == TrackPhase.RUNNING for o in seen.values()) <= 1

    done = [final(ex, r) for r in reqs]

    assert [o.phase for o in done] == [TrackPhase.COMPLETE] * 3
    spans = sorted((o.started_at, o.finished_at) for o in done)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end is not None and start is not None and end <= start


def test_cancel_while_waiting_for_a_slot(work_dir: Path) -> None:
    ex = LocalExecutor(work_dir, max_concurrent=1, kill_grace_seconds=GRACE)
    first, second = request("busy", "sleep 60"), request("waiting", "true")
    ex.dispatch([first])
    running(ex, first)
    ex.dispatch([second])
    eventually(lambda: (ex.attempt_dir(second.key) / "status.json").exists())
    assert observe(ex, second).phase is None  # queued: still `dispatched`

    ex.cancel(handle(second))
    assert final(ex, second).phase == TrackPhase.CANCELLED
    ex.cancel(handle(first))
    assert final(ex, first).phase == TrackPhase.CANCELLED
    assert [entry["key"] for entry in launches(ex)] == [first.key]


# --------------------------------------------------------------------------- idempotency

DISPATCH_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from orchestrator.executors.base import DispatchRequest
    from orchestrator.executors.local import LocalExecutor
    from orchestrator.config.models import TrackSpec

    work, go, run, run_id = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    if os.environ.get("CRASH_BEFORE_SUPERVISOR"):
        # Die like a tick killed between creating launch.json and starting the
        # supervisor.
        LocalExecutor._start_supervisor = lambda self, folder: os._exit(9)
    ex = LocalExecutor(Path(work))
    req = DispatchRequest(run_id=run_id, track="race", attempt=1,
                          spec=TrackSpec(name="race", run=run))
    while not go.exists():
        time.sleep(0.005)
    [res] = ex.dispatch([req])
    print(json.dumps({"key": res.key, "handle": res.handle, "error": res.error}))
""")


def _dispatchers(work_dir: Path, go: Path, run: str, n: int,
                 env: dict[str, str] | None = None) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [sys.executable, "-c", DISPATCH_SCRIPT, str(work_dir), str(go), run, RUN_ID],
            stdout=subprocess.PIPE, text=True, env=env,
        )
        for _ in range(n)
    ]


@pytest.mark.slow
def test_one_key_dispatched_by_eight_processes_at_once_launches_once(
    work_dir: Path, tmp_path: Path, ex: LocalExecutor
) -> None:
    go = tmp_path / "go"
    procs = _dispatchers(work_dir, go, "echo ran >> \"$ORCHESTRATOR_RESULT.count\"", 8)
    time.sleep(0.5)  # let the interpreters start, so the dispatches really overlap
    go.touch()
    outputs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8

    req = request("race", "unused")
    assert {json.dumps(o, sort_keys=True) for o in outputs} == {json.dumps(
        {"key": req.key, "handle": ex._handle(req.key), "error": None},
        sort_keys=True)}
    assert final(ex, req).phase == TrackPhase.COMPLETE
    assert [entry["key"] for entry in launches(ex)] == [req.key]
    assert (ex.attempt_dir(req.key) / "result.json.count").read_text() == "ran\n"


def test_redispatching_a_key_returns_the_same_handle_and_launches_nothing(
    ex: LocalExecutor,
) -> None:
    req = request("again", "true")
    [first] = ex.dispatch([req])
    final(ex, req)
    [second] = ex.dispatch([req])

    assert second == first
    assert len(launches(ex)) == 1


def test_lookup_finds_a_dispatch_made_by_another_process(
    work_dir: Path, tmp_path: Path, ex: LocalExecutor
) -> None:
    go = tmp_path / "go"
    go.touch()
    [proc] = _dispatchers(work_dir, go, "true", 1)
    proc.communicate(timeout=60)
    req = request("race", "true")
    other = request("other", "true")

    found = ex.lookup([req, other])

    assert found[other.key] is None  # asked, and never dispatched
    hit = found[req.key]
    assert hit is not None and hit.handle["key"] == req.key
    assert final(ex, req).phase == TrackPhase.COMPLETE
    assert len(launches(ex)) == 1


def _dispatcher_died(work_dir: Path, tmp_path: Path) -> DispatchRequest:
    """The request of a dispatch whose dispatcher died after writing ``launch.json`` and
    before starting the supervisor."""
    go = tmp_path / "go"
    go.touch()
    [proc] = _dispatchers(work_dir, go, "sleep 0.2", 1,
                          env={**os.environ, "CRASH_BEFORE_SUPERVISOR": "1"})
    proc.communicate(timeout=60)
    assert proc.returncode == 9
    return request("race", "sleep 0.2")


def test_a_dispatch_whose_dispatcher_died_before_the_supervisor_is_adopted_once(
    work_dir: Path, tmp_path: Path, ex: LocalExecutor
) -> None:
    req = _dispatcher_died(work_dir, tmp_path)
    folder = ex.attempt_dir(req.key)
    assert (folder / "launch.json").exists() and not (folder / "status.json").exists()

    assert observe(ex, req).phase is None  # too young to adopt: its dispatcher may be slow
    time.sleep(0.05)
    assert launches(ex) == []

    ex.adopt_after_seconds = 0
    # Several repairs at once (lookup, observe, dispatch) start several supervisors;
    # exactly one of them claims the attempt.
    assert req.key in ex.lookup([req])
    observe(ex, req)
    ex.dispatch([req])

    assert final(ex, req).phase == TrackPhase.COMPLETE
    assert [entry["key"] for entry in launches(ex)] == [req.key]


def test_a_dispatch_is_aged_on_its_writers_clock_not_on_the_files_time(
    work_dir: Path, tmp_path: Path, ex: LocalExecutor
) -> None:
    # A work folder on a share whose server clock runs an hour behind: the file's time
    # says old, the dispatcher's clock says just written. Adopting it would start a
    # second supervisor beside a dispatcher that is merely slow.
    req = _dispatcher_died(work_dir, tmp_path)
    launch = ex.attempt_dir(req.key) / "launch.json"
    hour_ago = time.time() - 3600
    os.utime(launch, (hour_ago, hour_ago))

    assert observe(ex, req).phase is None
    assert launches(ex) == []

    # A launch written before `created_unix` existed is aged by its file's time.
    data = json.loads(launch.read_text())
    del data["created_unix"]
    launch.write_text(json.dumps(data))
    os.utime(launch, (hour_ago, hour_ago))
    assert final(ex, req).phase == TrackPhase.COMPLETE
    assert [entry["key"] for entry in launches(ex)] == [req.key]


# --------------------------------------------------------------------------- validation


def test_invalid_requests_are_errors_and_touch_nothing(ex: LocalExecutor) -> None:
    bad_run = DispatchRequest(run_id="../etc", track="a", attempt=1,
                              spec=TrackSpec(name="a", run="true"))
    bad_track = DispatchRequest(run_id=RUN_ID, track="../a", attempt=1,
                                spec=TrackSpec(name="a", run="true"))
    no_command = DispatchRequest(run_id=RUN_ID, track="a", attempt=1,
                                 spec=TrackSpec(name="a", inputs={"x": "1"}))

    results = ex.dispatch([bad_run, bad_track, no_command])

    assert [r.handle for r in results] == [None, None, None]
    assert all(r.error for r in results)
    assert "invalid run id" in (results[0].error or "")
    assert "invalid track name" in (results[1].error or "")
    assert "no 'run' command" in (results[2].error or "")
    assert not ex.work_dir.exists() or list(ex.work_dir.iterdir()) == []
    with pytest.raises(InvalidId):
        ex.attempt_dir("../../etc")
    bogus = Handle(key="../../etc", handle={}, timeout_minutes=1)
    assert ex.observe([bogus])["../../etc"].phase == TrackPhase.FAILED
    assert ex.lookup([bad_run]) == {bad_run.key: None}


@pytest.mark.parametrize(
    ("broken", "complaint"),
    [("script", "(exit code 2): "), ("interpreter", "No such file or directory")],
)
def test_a_supervisor_that_cannot_start_is_a_dispatch_error(
    ex: LocalExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str,
    complaint: str,
) -> None:
    # A broken installation: the supervisor's script or the interpreter is gone.
    if broken == "script":
        monkeypatch.setattr(local, "SUPERVISOR", tmp_path / "missing.py")
    else:
        monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    req = request("broken", "true")

    [res] = ex.dispatch([req])

    assert res.handle is None
    assert res.error is not None and "the supervisor failed to start" in res.error
    assert complaint in res.error
    # Closed, so that a later look-up or re-dispatch cannot start it behind the back
    # of the tick that recorded the failure.
    monkeypatch.undo()
    ex.adopt_after_seconds = 0
    ex.dispatch([req])
    assert observe(ex, req).phase == TrackPhase.FAILED
    assert launches(ex) == []


def test_observing_an_attempt_that_is_not_there_fails_it(ex: LocalExecutor) -> None:
    req = request("ghost", "true")
    obs = observe(ex, req)

    assert obs.phase == TrackPhase.FAILED
    assert obs.error is not None and "no local attempt" in obs.error


def test_each_attempt_keeps_its_own_logs(ex: LocalExecutor) -> None:
    run = "echo attempt-$ORCHESTRATOR_ATTEMPT; echo oops-$ORCHESTRATOR_ATTEMPT >&2; " \
          "test $ORCHESTRATOR_ATTEMPT -ge 2"
    first, second = request("flaky", run, attempt=1), request("flaky", run, attempt=2)
    ex.dispatch([first])
    assert final(ex, first).phase == TrackPhase.FAILED
    ex.dispatch([second])
    assert final(ex, second).phase == TrackPhase.COMPLETE

    for n, req in enumerate([first, second], start=1):
        folder = ex.attempt_dir(req.key)
        assert (folder / "stdout.log").read_text() == f"attempt-{n}\n"
        assert (folder / "stderr.log").read_text() == f"oops-{n}\n"
    assert [entry["key"] for entry in launches(ex)] == [first.key, second.key]


def test_satisfies_the_executor_protocol(ex: LocalExecutor) -> None:
    executor: Executor = ex  # checked by mypy
    assert executor.name == "local"
    assert executor.health() is None


def test_attempts_of_another_work_folder_are_left_to_their_owner(work_dir: Path,
                                                                 tmp_path: Path) -> None:
    """Two local ticks on one state branch (two machines, or two work folders) must
    not fail each other's tracks: each observes and cancels only its own."""
    mine = LocalExecutor(work_dir)
    theirs = LocalExecutor(tmp_path / "elsewhere")
    req = request("away", "sleep 5")
    [res] = theirs.dispatch([req])
    assert res.handle is not None
    handle = Handle(req.key, res.handle, 1)
    assert not mine.owns(handle) and theirs.owns(handle)
    assert mine.observe([handle]) == {}
    mine.cancel(handle)  # not ours: left alone
    assert theirs.observe([handle])[req.key].phase in (None, TrackPhase.RUNNING)
    theirs.cancel(handle)
    assert final(theirs, req).phase is TrackPhase.CANCELLED
