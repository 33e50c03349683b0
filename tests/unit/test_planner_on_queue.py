"""``on_queue``: a drain schedule fired by its queue's backlog, in ticks on the in-memory
store with plain datetimes: ``min_ready`` ready items or ``max_wait_minutes`` of the
oldest, whichever first; once per crossing; the queue's summary only."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.config.models import Schedule
from orchestrator.runs import queues
from orchestrator.state import codec, layout, queueload, queueops
from orchestrator.state import index as state_index
from orchestrator.state.items import NewItem
from orchestrator.state.layout import queue_run_id
from orchestrator.state.queue import QueueBook
from orchestrator.store import InMemoryStateStore, as_state_files
from tests.builders import schedule
from tests.memory_executor import MemoryExecutor
from tests.memory_tick import MemoryShell
from tests.unit.test_drain import finish

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


def drain(task_cap: int = 25, **on_queue: Any) -> Schedule:
    return schedule("crawl", cron=None, on_queue={"queue": "pages", **on_queue}, tracks=[{
        "name": "pages", "run": "true",
        "drain": {"queue": "pages", "task_cap": task_cap, "max_workers": 2}}])


def enqueue(shell: MemoryShell, count: int, at: datetime) -> None:
    items = [NewItem(payload=n) for n in range(count)]
    shell.store.transact(lambda s: queues.add(s.files, "pages", items, at, "me")[0], "add")


def runs(shell: MemoryShell) -> list[str]:
    return sorted(shell.state().runs)


@pytest.fixture
def shell_of(memory_store: InMemoryStateStore, memory_executor: MemoryExecutor
             ) -> Callable[[Schedule], MemoryShell]:
    def make(spec: Schedule) -> MemoryShell:
        shell = MemoryShell(memory_store, memory_executor, [spec])
        shell.run(T0)  # the schedule's cursor
        return shell
    return make


def test_99_ready_items_fire_nothing_and_the_100th_fires_one_drain(
        shell_of: Callable[[Schedule], MemoryShell]) -> None:
    shell = shell_of(drain(min_ready=100))
    enqueue(shell, 99, T0)
    shell.run(T0 + timedelta(minutes=1))
    assert runs(shell) == []
    enqueue(shell, 1, T0 + timedelta(minutes=1))
    result = shell.run(T0 + timedelta(minutes=2))
    fired = queue_run_id("crawl", T0 + timedelta(minutes=2), 100)
    assert runs(shell) == [fired] == ["crawl--20261201T0702Z-queue-100"]
    assert shell.run_record(fired).origin == "queue"
    assert f"{fired}: fired on queue pages: 100 ready (min_ready 100)" in " ".join(
        result.decision.log)
    assert len(result.dispatched) == 2  # its drain's workers, sent in that tick
    enqueue(shell, 100, T0 + timedelta(minutes=2))
    shell.run(T0 + timedelta(minutes=3))
    assert runs(shell) == [fired]  # its drain is in flight: no second one


def test_max_wait_minutes_fires_a_smaller_backlog_once_its_oldest_item_waited(
        shell_of: Callable[[Schedule], MemoryShell]) -> None:
    shell = shell_of(drain(min_ready=100, max_wait_minutes=30))
    enqueue(shell, 5, T0 + timedelta(minutes=1))
    enqueue(shell, 5, T0 + timedelta(minutes=20))
    shell.run(T0 + timedelta(minutes=30))
    assert runs(shell) == []
    shell.run(T0 + timedelta(minutes=31))
    assert runs(shell) == ["crawl--20261201T0731Z-queue-10"]


def test_what_a_drain_left_waits_anew_from_its_start(
        shell_of: Callable[[Schedule], MemoryShell]) -> None:
    """Once per crossing: 110 ready fire one drain, which takes 6; the 104 left are
    over min_ready again once it ended, but 50 of them are not, and wait 30 minutes
    from the drain's start."""
    shell = shell_of(drain(task_cap=3, min_ready=100, max_wait_minutes=30))
    enqueue(shell, 110, T0)
    shell.run(T0 + timedelta(minutes=1))
    finish(shell, T0 + timedelta(minutes=2))
    shell.run(T0 + timedelta(minutes=3))
    first = "crawl--20261201T0701Z-queue-110"
    assert [shell.run_record(r).status.value for r in runs(shell)] == ["completed"]
    assert runs(shell) == [first]
    book = state_index.load(shell.files).state.queues["pages"]
    assert book.counts["ready"] == 104 and book.oldest_ready == T0
    shell.run(T0 + timedelta(minutes=4))
    assert runs(shell) == [first, "crawl--20261201T0704Z-queue-110"]  # 104 >= 100


def test_a_short_backlog_left_by_a_drain_waits_max_wait_from_the_drain_s_start(
        shell_of: Callable[[Schedule], MemoryShell]) -> None:
    shell = shell_of(drain(task_cap=3, max_wait_minutes=30))
    enqueue(shell, 10, T0)
    shell.run(T0 + timedelta(minutes=30))
    finish(shell, T0 + timedelta(minutes=31))
    shell.run(T0 + timedelta(minutes=32))
    assert runs(shell) == ["crawl--20261201T0730Z-queue-10"]
    shell.run(T0 + timedelta(minutes=59))  # the 4 left were enqueued at T0
    assert len(runs(shell)) == 1
    shell.run(T0 + timedelta(minutes=60))
    assert runs(shell)[-1] == "crawl--20261201T0800Z-queue-10"


def test_a_paused_or_disabled_drain_says_why_it_did_not_fire(
        shell_of: Callable[[Schedule], MemoryShell]) -> None:
    shell = shell_of(drain(min_ready=1))
    shell.schedules = [drain(min_ready=1).model_copy(update={"spec": drain(
        min_ready=1).spec.model_copy(update={"enabled": False})})]
    enqueue(shell, 1, T0)
    result = shell.run(T0 + timedelta(minutes=1))
    assert runs(shell) == []
    assert ("crawl: on queue pages: 1 ready (min_ready 1); not fired: the schedule is "
            "disabled") in result.decision.log


def test_the_summary_keeps_when_the_oldest_ready_item_was_enqueued() -> None:
    """A lower bound kept by every write, exact again once nothing is ready, and
    exact when the summary is rebuilt from the items."""
    book = QueueBook.empty("pages", {})
    queueops.enqueue(book, [NewItem(payload=1)], T0, "me")
    queueops.enqueue(book, [NewItem(payload=2)], T0 + timedelta(minutes=5), "me")
    assert book.summary().oldest_ready == T0
    first, second = sorted((book.item(i) for b in book.blocks for i in book.entries(b)),
                           key=lambda i: i.seq)
    later = T0 + timedelta(minutes=6)
    queueops.claim(book, [first], "w--a--1", later, 1, later, "me")
    assert book.oldest_ready == T0  # never later than the truth
    items = {layout.item_path("pages", i.id): codec.to_json(i) for i in (
        book.item(first.id), second)}
    rebuilt = queueload.rebuild("pages", as_state_files(items), "test")
    assert rebuilt.oldest_ready == T0 + timedelta(minutes=5)  # exact from the items
    queueops.claim(book, [second], "w--a--1", later, 1, later, "me")
    assert book.oldest_ready is None and book.summary().oldest_ready is None
