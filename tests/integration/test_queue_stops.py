"""Drain workers stopped half-way, with the local executor and real processes: what a
stopped worker finished stays finished, only the rest goes back to the queue.

A worker is stopped by ``cancel_previous`` (the next slot fires while it drains) and by
``runs cancel``; each time its account of the items it finished is read before its
claim is released, so no finished item runs again.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from orchestrator.state.items import ItemStatus
from tests import queues
from tests.drive import cli, finished, read_state, tick, wait_until
from tests.gitrepo import clone, make_origin
from tests.integration.test_queue_faults import _enqueue

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
ITEMS = 200


def _command(log: Path, allow: Path | None = None) -> str:
    """About 10 ms of work, then one line for the item: an item logged ran to its end.
    With ``allow``, an item waits until fewer items are logged than that file says: the
    test paces the drain, so how far a worker gets between fires is not the machine's
    speed."""
    gate = (f'while [ "$(cat {log} 2>/dev/null | wc -l)" -ge "$(cat {allow})" ]; '
            'do sleep 0.01; done; ') if allow is not None else ""
    return f'{gate}sleep 0.01; echo "$ORCHESTRATOR_ITEM_ID" >> {log}'


def _schedule(run: str, **spec: Any) -> dict[str, Any]:
    return {"cron": "* * * * *", **spec, "tracks": [{
        "name": "pages", "run": run, "max_attempts": 3, "retry_backoff_seconds": 0,
        "timeout_minutes": 60,
        "drain": {"queue": queues.QUEUE, "task_cap": ITEMS, "max_workers": 1}}]}


def _logged(log: Path) -> Counter[str]:
    return queues.worked(log)


def _progress(log: Path, work: Path, key: str, more: int) -> None:
    """Wait until ``more`` items beyond those logged now ran, or the worker ended."""
    target = sum(_logged(log).values()) + more
    wait_until(lambda: sum(_logged(log).values()) >= target or finished(work, key), 60)


def test_cancel_previous_every_fire_drains_200_items_each_once(tmp_path: Path) -> None:
    log, allow = tmp_path / "worked.log", tmp_path / "allow"
    allow.write_text("0\n")
    origin = make_origin(tmp_path, {"crawl": _schedule(_command(log, allow),
                                                       overlap="cancel_previous")})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    _enqueue(repo, ITEMS)
    slot, cancels, running = T0, 0, None
    for _ in range(4 * ITEMS // 20):
        result = tick(repo, slot, work)
        slot += timedelta(minutes=1)  # each fire comes before the drain could end
        if running is not None:  # this fire cancelled it: its account lands by the next
            cancels += 1
            wait_until(lambda key=running: finished(work, key), 60)
        running = result.dispatched[0] if result.dispatched else None
        if running is not None:  # 20 more items may run before the next fire stops it
            allow.write_text(f"{sum(_logged(log).values()) + 20}\n")
            _progress(log, work, running, 20)
        book = queues.book_of(read_state(repo)[1])
        if book.counts == {"done": ITEMS}:
            break
    else:
        raise AssertionError(f"not drained: {queues.book_of(read_state(repo)[1]).counts}")

    logged = _logged(log)
    assert set(logged) == set(queues.ids([f"k{n}" for n in range(ITEMS)]))
    # only the item in flight at a cancel may run again (its end raced the stop)
    assert sum(n - 1 for n in logged.values()) <= cancels
    assert cancels >= 3  # the drain took several fires, each stopping the one before
    book = queues.book_of(read_state(repo)[1])
    for n in range(ITEMS):
        item = book.item(queues.ids([f"k{n}"])[0])
        assert item is not None
        assert [h.to for h in item.state_history].count(ItemStatus.DONE.value) == 1


def test_runs_cancel_keeps_what_the_worker_finished(tmp_path: Path) -> None:
    log = tmp_path / "worked.log"
    origin = make_origin(tmp_path, {"crawl": _schedule(_command(log))})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    _enqueue(repo, 50)
    [key] = tick(repo, T0, work).dispatched
    _progress(log, work, key, 10)
    cli(repo, "runs", "cancel", "crawl--20261201T0700Z", "--reason", "enough",
        "--now", "2026-12-01T07:00:30Z", work=work, check=True)
    wait_until(lambda: finished(work, key), 60)
    done = set(_logged(log))
    tick(repo, T0 + timedelta(seconds=40), work)  # reads the account, releases the rest
    state, files = read_state(repo)
    book = queues.book_of(files)
    assert state.runs["crawl--20261201T0700Z"].status.value == "cancelled"
    assert book.counts.get("done", 0) >= len(done) - 1 >= 9  # the one in flight may go back
    assert book.counts.get("done", 0) + book.counts.get("ready", 0) == 50
    assert not book.claims
