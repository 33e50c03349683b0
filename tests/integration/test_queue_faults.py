"""Work queues when things die: a worker killed with SIGKILL, a tick killed mid-commit,
ticks racing as separate OS processes (on separate checkouts and work folders, as two
machines would) with an enqueue among them. Real git, real processes.

The guarantee: an item completed is completed exactly once; the item a worker was in
the middle of when it died is worked again (at least once); no item is ever claimed
by two workers.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.state.items import ItemStatus, key_id
from tests import queues
from tests.drive import cli, cli_tick, read_state, run_ticks, start_cli, tick, wait_until
from tests.gitrepo import clone, make_origin
from tests.integration.test_queue_local import settle

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


def _logging(log: Path, pause: float = 0.0) -> str:
    """A worker command that logs the start and the end of each item."""
    wait = f"sleep {pause}; " if pause else ""
    return (f'echo "$ORCHESTRATOR_ITEM_ID start" >> {log}; {wait}'
            f'echo "$ORCHESTRATOR_ITEM_ID end" >> {log}')


def _schedule(run: str, *, task_cap: int = 10, max_workers: int = 1) -> dict[str, Any]:
    return {"cron": "*/10 * * * *", "tracks": [{
        "name": "pages", "run": run, "max_attempts": 3, "retry_backoff_seconds": 0,
        "drain": {"queue": queues.QUEUE, "task_cap": task_cap, "max_workers": max_workers}}]}


def _events(log: Path) -> Counter[tuple[str, str]]:
    if not log.exists():
        return Counter()
    return Counter(tuple(line.split()) for line in log.read_text().splitlines()  # type: ignore[misc]
                   if line.strip())


def _enqueue(repo: Path, count: int, prefix: str = "k") -> None:
    lines = repo.parent / f"{prefix}.jsonl"
    lines.write_text("".join(json.dumps({"payload": n, "key": f"{prefix}{n}"}) + "\n"
                             for n in range(count)))
    cli(repo, "queue", "add", queues.QUEUE, "--file", str(lines),
        "--now", "2026-12-01T06:00:00Z", check=True)


def _drain(repo: Path, work: Path, start: datetime, fires: int = 6) -> None:
    """Fire, let the workers finish, record them; until the queue holds nothing."""
    slot = start
    for _ in range(fires):
        result = tick(repo, slot, work)
        settle(work, result.dispatched)
        tick(repo, slot + timedelta(minutes=2), work)
        book = queues.book_of(read_state(repo)[1])
        if not book.backlog and not book.claims:
            return
        slot += timedelta(minutes=10)
    raise AssertionError("the queue was not drained")


def _claims(files: dict[str, bytes], count: int, prefix: str = "k") -> dict[str, int]:
    """How often each item was claimed, from its state history."""
    book = queues.book_of(files)
    out = {}
    for n in range(count):
        item = book.item(key_id(queues.QUEUE, f"{prefix}{n}"))
        assert item is not None
        out[item.id] = sum(1 for h in item.state_history if h.to == ItemStatus.CLAIMED.value)
    return out


@pytest.mark.slow
def test_a_killed_worker_s_items_are_done_by_a_later_fire_once_each(tmp_path: Path) -> None:
    log = tmp_path / "worked.log"
    origin = make_origin(tmp_path, {"crawl": _schedule(_logging(log, 0.3))})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    _enqueue(repo, 10)
    result = tick(repo, T0, work)
    [key] = result.dispatched
    wait_until(lambda: sum(1 for e in _events(log) if e[1] == "end") >= 3)
    status = json.loads((work / key / "status.json").read_text())
    os.kill(status["supervisor_pid"], signal.SIGKILL)  # the worker dies mid-item

    _drain(repo, work, T0 + timedelta(minutes=1))
    events = _events(log)
    ids = queues.ids([f"k{n}" for n in range(10)])
    assert all(events[(i, "end")] >= 1 for i in ids)  # every item done in the end
    twice = [i for i in ids if events[(i, "start")] > 1]
    assert len(twice) <= 1  # only the one in flight at the kill ran again
    _, files = read_state(repo)
    book = queues.book_of(files)
    assert book.counts == {"done": 10}
    if twice:
        redone = book.item(twice[0])
        assert redone is not None and redone.attempt == 2  # the kill used an attempt
        assert "its worker stopped while working it" in redone.error_log[-1]


@pytest.mark.parametrize("point", ["mark-planned", "after-mark"])
def test_a_tick_killed_mid_commit_claims_nothing_twice(tmp_path: Path, point: str) -> None:
    log = tmp_path / "worked.log"
    origin = make_origin(tmp_path, {"crawl": _schedule(_logging(log), task_cap=5,
                                                       max_workers=2)})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    _enqueue(repo, 10)
    crashed = cli_tick(repo, "2026-12-01T07:00:00Z", work=work, crash_at=point)
    assert crashed.returncode == -signal.SIGKILL
    assert not (work / "launches.log").exists()  # it died before dispatching
    # later ticks repair it: the claims of a mark that landed are kept, and its
    # workers dispatched under the same keys once the grace period has passed
    _drain(repo, work, T0 + timedelta(minutes=2))
    assert Counter(i for i, what in _events(log) if what == "start") == Counter(
        dict.fromkeys(queues.ids([f"k{n}" for n in range(10)]), 1))
    _, files = read_state(repo)
    assert set(_claims(files, 10).values()) == {1}


@pytest.mark.slow
def test_racing_ticks_on_three_machines_never_claim_one_item_twice(tmp_path: Path) -> None:
    """Three checkouts, each with its own schedule draining the same queue and its own
    work folder, tick at once with an enqueue racing them: each item is claimed by one
    worker only, and worked once."""
    log = tmp_path / "worked.log"
    schedules = {f"s{n}": _schedule(_logging(log), task_cap=5, max_workers=2)
                 for n in range(3)}
    origin = make_origin(tmp_path, schedules)
    repos = []
    for n in range(3):
        repo = clone(origin, tmp_path / f"machine{n}")
        for other in range(3):  # each machine plans its own schedule only
            if other != n:
                (repo / "schedules" / f"s{other}.json").unlink()
        repos.append(repo)
    _enqueue(repos[0], 30)
    extra = tmp_path / "extra.jsonl"
    extra.write_text("".join(json.dumps({"payload": n, "key": f"x{n}"}) + "\n"
                             for n in range(10)))
    works = [tmp_path / f"work{n}" for n in range(3)]
    procs = [start_cli(repo, "tick", "--now", "2026-12-01T07:00:00Z",
                       env={"ORCHESTRATOR_WORK_DIR": str(work)})
             for repo, work in zip(repos, works, strict=True)]
    procs.append(start_cli(repos[0], "queue", "add", queues.QUEUE, "--file", str(extra),
                           "--now", "2026-12-01T06:59:00Z"))
    run_ticks(procs)

    state, files = read_state(repos[0])
    workers = [t for tracks in state.tracks.values() for t in tracks.values() if t.work]
    assert len({w.run_id for w in workers}) == 3  # every machine's drain was sized
    claimed = [i for w in workers for i in w.work.items]  # type: ignore[union-attr]
    assert len(claimed) == len(set(claimed)) == 30  # disjoint, and every claim held
    assert all(n <= 1 for n in _claims(files, 30).values())
    assert queues.book_of(files).counts.get("claimed") == 30

    for repo, work in zip(repos, works, strict=True):
        keys = [f.name for f in work.iterdir() if f.is_dir() and "--pages-w" in f.name]
        settle(work, keys)
        tick(repo, T0 + timedelta(minutes=2), work)
    for repo, work in zip(repos, works, strict=True):
        _drain(repo, work, T0 + timedelta(minutes=10))
    starts = Counter(i for i, what in _events(log) if what == "start")
    everything = queues.ids([f"k{n}" for n in range(30)] + [f"x{n}" for n in range(10)])
    assert starts == Counter(dict.fromkeys(everything, 1))
