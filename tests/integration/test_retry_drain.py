"""``runs retry`` of drain runs with the real CLI, real git and real worker processes of
the local executor: a retried drain works under fresh keys, and a retry of a failed
drain never wedges the ticks of the other schedules."""

from __future__ import annotations

import fcntl
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from orchestrator.state.phases import RunStatus
from tests import queues
from tests.drive import cli, cli_tick, finished, launches, read_state, wait_until
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
