"""A work queue on the state branch (:mod:`orchestrator.state.queue`, ``queueops``):
ids and idempotency, claim order, the summary that spares reading items, its rebuild
when it cannot be trusted, and bad records costing only themselves. In memory."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.errors import IllegalTransition
from orchestrator.state import layout, queueload, queueops
from orchestrator.state import queue as queue_state
from orchestrator.state.items import Item, ItemReport, ItemStatus, NewItem, key_id
from orchestrator.state.queue import QueueBook
from orchestrator.state.queueformat import BLOCK_SIZE
from orchestrator.store import MemoryFiles, Stamped

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
KEY = "crawl--20261201T0700Z--pages-w1--1"


class Reads(MemoryFiles):
    """Files that count what is read (a listing reads nothing)."""

    def __init__(self, files: Mapping[str, bytes]) -> None:
        super().__init__(files)
        self.read: list[str] = []

    def __getitem__(self, path: str) -> bytes:
        self.read.append(path)
        return super().__getitem__(path)


def commit(files: dict[str, bytes], change: Mapping[str, bytes | None]) -> dict[str, bytes]:
    """``change`` applied as a store applies it: stamps filled with the new tree's id."""
    out = dict(files)
    for path, data in change.items():
        if data is None:
            out.pop(path, None)
        elif not isinstance(data, Stamped):
            out[path] = data
    for path, data in change.items():
        if isinstance(data, Stamped):
            out[path] = data.fill(MemoryFiles(out).object_id(data.folder))
    return out


def queue_with(new: list[NewItem], now: datetime = T0) -> dict[str, bytes]:
    book = QueueBook.empty("pages", {})
    queueops.enqueue(book, new, now, "me")
    return commit({}, book.dump())


def loaded(files: Mapping[str, bytes]) -> QueueBook:
    books, stray = queueload.load(files)
    assert stray == []
    return books["pages"]


def test_a_key_names_one_item_and_a_repeated_enqueue_adds_nothing() -> None:
    files = queue_with([NewItem(payload=n, key=f"k{n % 3}") for n in range(5)])
    book = loaded(files)
    assert book.counts == {"ready": 3} and book.note is None
    done = queueops.enqueue(book, [NewItem(payload="again", key="k1"), NewItem(payload=9)],
                            T0, "me")
    assert [i.payload for i in done.added] == [9] and done.existing == (key_id("pages", "k1"),)
    assert book.item(key_id("pages", "k1")).payload == 1  # type: ignore[union-attr]
    unkeyed = queue_with([NewItem(payload=1), NewItem(payload=1)])
    assert loaded(unkeyed).counts == {"ready": 2}  # no key: no dedupe


def test_claims_go_highest_priority_first_then_oldest_and_skip_what_is_not_due() -> None:
    later = T0 + timedelta(hours=1)
    files = queue_with([NewItem(payload=n, key=f"k{n}") for n in range(4)]
                       + [NewItem(payload="soon", key="soon", not_before=later),
                          NewItem(payload="vip", key="vip", priority=10)])
    book = loaded(files)
    order = [i.payload for i in book.claimable(T0, 10)]
    assert order == ["vip", 0, 1, 2, 3]
    assert [i.payload for i in book.claimable(later, 2)] == ["vip", 0]
    assert "soon" in [i.payload for i in book.claimable(later, 10)]


def test_sizing_reads_the_first_backlog_blocks_and_no_other_item() -> None:
    new = [NewItem(payload=n, key=f"k{n}") for n in range(3 * BLOCK_SIZE)]
    files = Reads(queue_with(new))
    book = loaded(files)
    files.read.clear()
    picked = book.claimable(T0, 10)
    assert len(picked) == 10
    blocks = [p for p in files.read if "/backlog/" in p]
    items = [p for p in files.read if "/items/" in p]
    assert len(blocks) == 1 and len(items) == 10


def test_ready_items_are_claimed_whatever_waits_in_front_of_them() -> None:
    # 1,000 items that wait months, spread over more blocks than one look reads
    # (a priority each), in front of 5 ready items of the lowest priority
    months = T0 + timedelta(days=90)
    waiting = [NewItem(payload=f"w{n}", key=f"w{n}", priority=1 + n % 100,
                       not_before=months) for n in range(1000)]
    ready = [NewItem(payload=f"r{n}", key=f"r{n}") for n in range(5)]
    files = Reads(queue_with(waiting + ready))
    book = loaded(files)
    assert len(book.blocks) > queue_state.SCAN_BLOCKS
    files.read.clear()
    assert [i.payload for i in book.claimable(T0, 10)] == [f"r{n}" for n in range(5)]
    # the waiting blocks were passed over by the summary alone, not read
    assert [p for p in files.read if "/backlog/" in p] == [
        layout.backlog_path("pages", b) for b in sorted(book.blocks)[-1:]]
    # once they are due, they come first again (their priority is higher)
    assert [i.payload for i in book.claimable(months, 1)] == ["w99"]


def test_a_summary_without_the_blocks_waits_reads_the_blocks_as_before() -> None:
    files = dict(queue_with([NewItem(payload="later", key="l", priority=3,
                                     not_before=T0 + timedelta(days=1)),
                             NewItem(payload="now", key="n")]))
    path = layout.queue_summary_path("pages")
    old = json.loads(files[path])
    assert old.pop("waits")  # a summary written before blocks said when they are due
    files[path] = (json.dumps(old) + "\n").encode()
    book = loaded(files)
    assert book.note is None and book.waits == {}  # read as it is, not rebuilt
    assert [i.payload for i in book.claimable(T0, 5)] == ["now"]


def test_the_summary_names_its_tree_and_a_change_behind_its_back_rebuilds_it() -> None:
    files = queue_with([NewItem(payload=n, key=f"k{n}") for n in range(5)])
    assert loaded(files).note is None
    item_path = layout.item_path("pages", key_id("pages", "k2"))
    edited = dict(files)
    del edited[item_path]  # deleted by hand, summary untouched
    book = loaded(edited)
    assert book.note is not None and "rebuilt from 4 item(s)" in book.note
    assert book.counts == {"ready": 4}
    healed = commit(edited, book.dump())
    assert loaded(healed).note is None and loaded(healed).counts == {"ready": 4}


@pytest.mark.parametrize("summary", [b"{not json", b'{"format": 2, "queue": "pages"}',
                                     b"[]", b'{"queue": "other"}'])
def test_an_unreadable_summary_is_rebuilt_from_the_items(summary: bytes) -> None:
    files = queue_with([NewItem(payload=n, key=f"k{n}") for n in range(3)])
    files[layout.queue_summary_path("pages")] = summary
    book = loaded(files)
    assert book.note is not None and book.counts == {"ready": 3}
    assert [i.payload for i in book.claimable(T0, 5)] == [0, 1, 2]


def test_a_corrupt_item_costs_only_itself() -> None:
    files = queue_with([NewItem(payload=n, key=f"k{n}") for n in range(3)])
    bad = layout.item_path("pages", key_id("pages", "k1"))
    files[bad] = b'{"id": "' + b"0" * 24 + b'"}'
    book = loaded(files)
    assert [i.payload for i in book.claimable(T0, 5)] == [0, 2]
    assert bad in book.problems and "\n" not in book.problems[bad]


def test_an_entry_of_state_queues_that_is_no_queue_is_named_and_left_alone() -> None:
    files = queue_with([NewItem(payload=1)])
    files["state/queues/Bad Name.json"] = b"{}"
    books, stray = queueload.load(files)
    assert list(books) == ["pages"] and len(stray) == 1 and "Bad Name" in stray[0]


def _claimed(files: dict[str, bytes]) -> tuple[QueueBook, list[Item]]:
    book = loaded(files)
    items = queueops.claim(book, book.claimable(T0, 3), KEY, T0 + timedelta(minutes=30), 2,
                           T0, "tick")
    return book, items


def test_only_the_claim_holder_settles_an_item_and_an_attempt_is_counted_right() -> None:
    files = queue_with([NewItem(payload=n, key=f"k{n}") for n in range(3)])
    book, (done, failed, back) = _claimed(files)
    assert book.claims[KEY].items == [done.id, failed.id, back.id]
    refused = queueops.settle(book, done, ItemReport(id=done.id, outcome="done", attempt=1),
                              "someone-else--20261201T0700Z--x-w1--1", T0, timedelta(0))
    assert refused is not None and "not held by" in refused
    assert queueops.settle(book, done, ItemReport(id=done.id, outcome="done", attempt=1),
                           KEY, T0, timedelta(0)) is None
    queueops.settle(book, failed, ItemReport(id=failed.id, outcome="failed", attempt=1,
                                             exit_code=3), KEY, T0, timedelta(minutes=1))
    queueops.settle(book, back, ItemReport(id=back.id, outcome="back", attempt=1), KEY, T0,
                    timedelta(0))
    after = {i: book.item(i) for i in (done.id, failed.id, back.id)}
    assert [(a.status, a.attempt) for a in after.values() if a] == [
        (ItemStatus.DONE, 1), (ItemStatus.FAILED, 1), (ItemStatus.READY, 0)]
    assert after[failed.id].retry_at == T0 + timedelta(minutes=1)  # type: ignore[union-attr]
    assert KEY not in book.claims and book.counts == {"done": 1, "failed": 1, "ready": 1}
    with pytest.raises(IllegalTransition):
        queueops.move(after[done.id], ItemStatus.READY, T0, "me", "again")  # type: ignore[arg-type]


def test_the_last_attempt_kills_an_item_and_a_person_requeues_or_discards_it() -> None:
    files = queue_with([NewItem(payload=1, key="k")])
    book = loaded(files)
    [item] = queueops.claim(book, book.claimable(T0, 1), KEY, T0, 1, T0, "tick")
    queueops.release(book, item, T0, "tick", "its worker died", counted=True)
    dead = book.item(item.id)
    assert dead is not None and dead.status is ItemStatus.DEAD
    assert dead.dead_reason == queueops.MAX_RETRIES_EXCEEDED and item.id in book.dead
    again = queueops.requeue(book, dead, T0, "ops", "fixed")
    assert again.status is ItemStatus.READY and again.attempt == 0 and not book.dead
    assert again.state_history[-1].by == "ops"


def test_purge_removes_what_was_done_before_the_day_and_nothing_else() -> None:
    files = queue_with([NewItem(payload=n, key=f"k{n}") for n in range(4)])
    book = loaded(files)
    items = queueops.claim(book, book.claimable(T0, 4), KEY, T0, 1, T0, "tick")
    for item in items[:3]:
        queueops.settle(book, item, ItemReport(id=item.id, outcome="done", attempt=1), KEY,
                        T0, timedelta(0))
    files = commit(files, book.dump())
    book = loaded(files)
    assert queueops.purge_done(book, T0, T0) == []  # done at T0: not before it
    assert len(queueops.purge_done(book, T0 + timedelta(days=1), T0 + timedelta(days=1))) == 3
    files = commit(files, book.dump())
    assert loaded(files).counts == {"claimed": 1} and loaded(files).note is None
    assert not any("/done/" in p for p in files)


def test_purge_takes_the_items_of_the_same_day_done_before_the_cutoff_and_keeps_the_rest(
        ) -> None:
    files = queue_with([NewItem(payload=n, key=f"k{n}") for n in range(2)])
    book = loaded(files)
    early, late = queueops.claim(book, book.claimable(T0, 2), KEY, T0, 1, T0, "tick")
    for item, at in ((early, T0), (late, T0 + timedelta(hours=2))):
        queueops.settle(book, item, ItemReport(id=item.id, outcome="done", attempt=1), KEY,
                        at, timedelta(0))
    files = commit(files, book.dump())
    book = loaded(files)
    assert queueops.purge_done(book, T0 + timedelta(hours=1), T0 + timedelta(hours=3)) == [
        early.id]
    files = commit(files, book.dump())
    again = loaded(files)
    assert again.item(early.id) is None and again.counts == {"done": 1}
    kept = again.item(late.id)
    assert kept is not None and kept.status is ItemStatus.DONE
    assert [again.chunk(name) for name in again.done] == [[late.id]]


class Listed(Reads):
    """Files that fail a test when the whole tree is listed (``ls-tree -r`` in git)."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("the whole tree was listed")


@pytest.mark.parametrize("with_index", [True, False], ids=["index", "rebuilt"])
def test_a_tick_s_load_reads_the_summary_and_no_item(with_index: bool) -> None:
    """Even when the index of open runs is rebuilt (a branch without runs has none),
    nothing under the queue's folder is listed or read."""
    from orchestrator.state import index as state_index
    from tests.builders import run_files

    files = queue_with([NewItem(payload=n, key=f"k{n}") for n in range(50)])
    files.update(run_files())
    if with_index:
        files = commit(files, state_index.refresh(files, dict(run_files()),
                                                  state_index.load(files).index))
    watched = Listed(files)
    loaded_state = state_index.load(watched)
    assert loaded_state.state.queues["pages"].counts == {"ready": 50}
    assert [p for p in watched.read if p.startswith("state/queues/pages/")] == []
