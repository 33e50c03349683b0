"""Work queues drained by the local executor: real git (a bare origin), real ticks, real
worker processes, the ``queue`` and ``dlq`` commands as a user runs them.

The acceptance backlog (:mod:`tests.queues`): 500 items, 20 of them repeating a key,
5 that always fail (``max_attempts`` 2), one of priority 10 enqueued last; a drain
track with ``task_cap`` 25 and ``max_workers`` 4 fires every 10 (virtual) minutes.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.state import index as state_index
from orchestrator.state.items import ItemStatus, key_id
from orchestrator.state.phases import TrackPhase
from orchestrator.state.records import Track
from orchestrator.store import GitStateStore
from tests import queues
from tests.drive import STATE_BRANCH, cli, tick
from tests.gitrepo import clone, make_origin

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
SLOT = timedelta(minutes=10)


def drain_schedule(run: str, **drain: Any) -> dict[str, Any]:
    return {"cron": "*/10 * * * *", "tracks": [{
        "name": "pages", "run": run, "max_attempts": 2, "retry_backoff_seconds": 0,
        "timeout_minutes": 5,
        "drain": {"queue": queues.QUEUE, "task_cap": 25, "max_workers": 4, **drain}}]}


def settle(work: Path, keys: list[str], timeout: float = 60.0) -> None:
    """Wait until every local attempt of ``keys`` has ended."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        states = []
        for key in keys:
            status = work / key / "status.json"
            states.append(json.loads(status.read_text())["state"] if status.exists() else None)
        if all(s in ("exited", "cancelled", "lost", "error", "timed_out") for s in states):
            return
        time.sleep(0.05)
    raise AssertionError(f"{keys} did not end")


def open_state(repo: Path) -> Any:
    snap = GitStateStore(repo, "origin", STATE_BRANCH).read()
    return state_index.load(snap.files).state, snap


def workers_of(state: Any) -> list[Track]:
    return [t for tracks in state.tracks.values() for t in tracks.values()
            if t.work is not None]


@pytest.mark.slow
def test_a_backlog_of_500_is_drained_exactly_once_by_capped_workers(tmp_path: Path) -> None:
    log = tmp_path / "worked.log"
    origin = make_origin(tmp_path, {"crawl": drain_schedule(queues.worker_command(log))})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    added = cli(repo, "queue", "add", queues.QUEUE, "--file",
                str(queues.write_backlog(tmp_path / "items.jsonl")),
                "--now", "2026-12-01T06:00:00Z", check=True)
    assert added.stdout.strip() == "pages: 479 added, 20 already there"
    cli(repo, "queue", "add", queues.QUEUE, "--payload", '{"url": "https://example.org/vip"}',
        "--key", queues.PRIORITY_KEY, "--priority", "10", "--now", "2026-12-01T06:30:00Z",
        check=True)

    fires: list[list[Track]] = []
    slot = T0
    for _ in range(10):
        result = tick(repo, slot, work)
        state, _ = open_state(repo)
        fires.append(workers_of(state))
        settle(work, result.dispatched)
        tick(repo, slot + timedelta(minutes=1), work)  # records the workers, ends the run
        book = queues.book_of(open_state(repo)[1].files)
        if not book.backlog and not book.claims:
            break
        slot += SLOT

    # no fire dispatched more than 4 workers, nor a worker more than 25 items
    assert all(len(workers) <= 4 for workers in fires)
    assert all(len(w.work.items) <= 25 for workers in fires for w in workers if w.work)
    assert [len(w) for w in fires[:5]] == [4, 4, 4, 4, 4]
    # the priority item went in the first fire, first in line
    first = [i for w in fires[0] if w.work for i in w.work.items]
    assert first[0] == key_id(queues.QUEUE, queues.PRIORITY_KEY)
    # every good item exactly once; the failing ones twice, then dead
    counts = queues.worked(log)
    failing = set(queues.ids(queues.failing_keys()))
    good = set(queues.ids(queues.unique_keys())) - failing
    assert {i for i, n in counts.items() if n == 1} == good
    assert {i: counts[i] for i in failing} == dict.fromkeys(failing, 2)
    assert set(counts) == good | failing
    book = queues.book_of(open_state(repo)[1].files)
    assert book.counts == {"done": len(good), "dead": len(failing)}
    listed = cli(repo, "dlq", "list", check=True).stdout
    assert sorted(line.split()[0] for line in listed.splitlines()) == sorted(
        f"{queues.QUEUE}/{i}" for i in failing)
    assert "max_retries_exceeded" in listed
    dead = json.loads(cli(repo, "queue", "show", queues.QUEUE, queues.failing_keys()[0],
                          "--json", check=True).stdout)
    assert dead["status"] == ItemStatus.DEAD.value and dead["attempt"] == 2
    assert len(dead["error_log"]) == 2 and "no such page" in dead["error_log"][-1]


def test_an_empty_queue_starts_no_worker_and_completes_the_track(tmp_path: Path) -> None:
    log = tmp_path / "worked.log"
    origin = make_origin(tmp_path, {"crawl": drain_schedule(queues.worker_command(log))})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    result = tick(repo, T0, work)
    assert result.dispatched == ()
    assert not (work / "launches.log").exists()
    run_id = "crawl--20261201T0700Z"
    assert run_id in result.rendered  # consolidated in the same tick
    snap = GitStateStore(repo, "origin", STATE_BRANCH).read()
    from orchestrator.state import model as state_model

    state = state_model.load(snap.files, all_tracks=True)
    track = state.tracks[run_id]["pages"]
    assert track.phase is TrackPhase.COMPLETE
    assert track.result is not None and "queue pages empty" in track.result["summary"]
    assert state.runs[run_id].tracks == ["pages"]
