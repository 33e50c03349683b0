"""``runs retry`` of drain runs with the real CLI, real git and real worker processes of
the local executor: a retried drain works under fresh keys, and a retry of a failed
drain never wedges the ticks of the other schedules."""

from __future__ import annotations

import fcntl
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from orchestrator.state import codec, layout, machine
from orchestrator.state import index as state_index
from orchestrator.state import model as state_model
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.store import GitStateStore
from tests import queues
from tests.builders import spec_data
from tests.drive import STATE_BRANCH, cli, cli_tick, finished, launches, read_state, wait_until
from tests.gitrepo import clone, make_origin

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "crawl--20261201T0700Z"


KILLER = ('echo "$ORCHESTRATOR_ITEM_ID" >> {log}; '
          'if grep -q \'"fail"\' "$ORCHESTRATOR_ITEM"; then kill -9 $PPID; fi')
"""A worker command that kills its worker (the local supervisor) on an item that says
``fail``: the worker, and so the drain track, fails."""


def stamp(at: datetime) -> str:
    return f"{at:%Y-%m-%dT%H:%M:%SZ}"


def drain_schedule(run: str) -> dict[str, Any]:
    return {"cron": "0 7 * * *", "tracks": [{
        "name": "work", "run": run, "max_attempts": 1, "timeout_minutes": 5,
        "drain": {"queue": queues.QUEUE, "task_cap": 10, "max_workers": 1}}]}


def add(repo: Path, *keys: str, payload: str = '{"kind": "ok"}') -> None:
    for key in keys:
        cli(repo, "queue", "add", queues.QUEUE, "--payload", payload, "--key", key,
            "--now", stamp(T0 - timedelta(hours=1)), check=True)


def ended(work: Path, key: str) -> bool:
    """Whether the local attempt ``key`` ended, or its supervisor died (its lock is free:
    the next tick records it ``lost``)."""
    if finished(work, key):
        return True
    try:
        fd = os.open(work / key / "supervisor.lock", os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def wait_all_ended(work: Path) -> None:
    keys = launches(work)
    wait_until(lambda: all(ended(work, k) for k in keys))


def tick_until_ended(repo: Path, work: Path, start: datetime, ticks: int = 6) -> datetime:
    """Tick once a simulated minute, waiting for the attempts each tick launched, until
    the run has ended; the last tick's time."""
    now = start
    for _ in range(ticks):
        cli_tick(repo, stamp(now), work=work, check=True)
        wait_all_ended(work)
        if read_state(repo)[0].runs[RUN].status not in (RunStatus.SCHEDULED,
                                                        RunStatus.RUNNING,
                                                        RunStatus.CONSOLIDATING):
            return now
        now += timedelta(minutes=1)
    raise AssertionError("the run never ended")


def test_a_retried_completed_drain_works_the_new_items_under_new_keys(tmp_path: Path) -> None:
    log = tmp_path / "worked.log"
    origin = make_origin(tmp_path, {"crawl": drain_schedule(queues.worker_command(log))})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    add(repo, "a", "b")
    now = tick_until_ended(repo, work, T0)
    assert read_state(repo)[0].runs[RUN].status is RunStatus.COMPLETED
    assert sorted(queues.worked(log)) == sorted(queues.ids(["a", "b"]))
    add(repo, "c", "d")
    now += timedelta(minutes=1)
    retried = cli(repo, "runs", "retry", RUN, "--track", "work", "--now", stamp(now),
                  work=work)
    assert retried.returncode == 0, retried.stderr
    tick_until_ended(repo, work, now + timedelta(minutes=1))
    state, _ = read_state(repo)
    assert state.runs[RUN].status is RunStatus.COMPLETED
    counts = queues.worked(log)
    assert sorted(counts) == sorted(queues.ids(["a", "b", "c", "d"]))
    assert set(counts.values()) == {1}
    assert f"{RUN}--work-w1--2" in launches(work)
    assert state.tracks[RUN]["work"].result["drained"] == 2


def failed_drain(tmp_path: Path) -> tuple[Path, Path, datetime]:
    """A checkout whose drain run failed (its only worker died on item ``x``), beside
    a schedule firing every minute; one more item ``y`` waits. Its work folder, and
    the time of its last tick."""
    log = tmp_path / "worked.log"
    origin = make_origin(tmp_path, {
        "crawl": drain_schedule(KILLER.format(log=log)),
        "beat": spec_data(cron="* * * * *", tracks=["a"], run="true")})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    add(repo, "x", payload='{"kind": "fail"}')
    now = tick_until_ended(repo, work, T0)
    state, _ = read_state(repo)
    assert state.runs[RUN].status is RunStatus.FAILED
    assert state.tracks[RUN]["work"].phase is TrackPhase.FAILED
    assert state.tracks[RUN]["work-w1"].phase is TrackPhase.FAILED
    add(repo, "y")
    return repo, work, now


def beats_after(repo: Path, work: Path, now: datetime, ticks: int, *,
                clean: bool = True) -> list[str]:
    """Tick ``ticks`` times a minute apart after ``now`` (each must exit 0 and, when
    ``clean``, say nothing illegal); the ``beat`` runs the state branch then holds."""
    for _ in range(ticks):
        now += timedelta(minutes=1)
        ticked = cli_tick(repo, stamp(now), work=work)
        assert ticked.returncode == 0, ticked.stderr
        assert not clean or "illegal" not in ticked.stdout + ticked.stderr
        wait_all_ended(work)
    state, _ = read_state(repo)
    return sorted(r for r, run in state.runs.items() if run.schedule_id == "beat")


def test_a_retry_of_a_failed_drain_reruns_the_drain_and_every_tick_goes_on(
        tmp_path: Path) -> None:
    repo, work, now = failed_drain(tmp_path)
    named = cli(repo, "runs", "retry", RUN, "--track", "work-w1", work=work)
    assert named.returncode == 1
    assert named.stderr.strip().splitlines() == [
        f"orchestrator: track {RUN}/work-w1 is a worker of drain track 'work': "
        "retry work instead"]
    now += timedelta(minutes=1)
    retried = cli(repo, "runs", "retry", RUN, "--failed", "--now", stamp(now), work=work)
    assert retried.returncode == 0, retried.stderr
    assert f"{RUN}: retrying work by " in retried.stdout
    assert "illegal" not in retried.stdout + retried.stderr
    before = len(beats_after(repo, work, now, 0))
    assert len(beats_after(repo, work, now, 3)) == before + 3
    assert f"{RUN}--work-w1--2" in launches(work)
    state, _ = read_state(repo)
    assert state.runs[RUN].retries[-1].tracks == ["work"]
    assert state.tracks[RUN]["work"].attempt == 2


def test_a_run_whose_record_cannot_move_is_named_and_the_others_fire(
        tmp_path: Path) -> None:
    repo, work, now = failed_drain(tmp_path)

    def wedge(snap: Any) -> Any:
        """What a retry once wrote: the drain and its worker both pending."""
        state = state_model.load(snap.files, all_tracks=True)
        specs = codec.read_specs(snap.files, RUN)
        out: dict[str, bytes | None] = {}
        for name in ("work", "work-w1"):
            fresh = machine.retry_track(state.tracks[RUN][name], now, "retried",
                                        attempt=2, max_attempts=2, dispatch_key=None,
                                        handle=None, finished_at=None, result=None)
            out[layout.track_path(RUN, name)] = codec.record_bytes(fresh, specs)
        run = machine.reopen_run(state.runs[RUN], now, "retried", finished_at=None,
                                 deadline=now + timedelta(hours=1))
        out[layout.run_path(RUN)] = codec.to_json(run)
        return state_index.refresh(snap.files, out)

    GitStateStore(repo, "origin", STATE_BRANCH).transact(wedge, "a record that cannot move")
    before = len(beats_after(repo, work, now, 0))
    now += timedelta(minutes=1)
    ticked = cli_tick(repo, stamp(now), work=work)
    assert ticked.returncode == 0, ticked.stderr
    named = [line for line in ticked.stdout.splitlines() if f"run {RUN} left alone" in line]
    assert len(named) == 1, ticked.stdout
    assert "illegal transition dispatched -> dispatched" in named[0]
    assert len(beats_after(repo, work, now, 2, clean=False)) == before + 3
