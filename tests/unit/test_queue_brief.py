"""The brief of a run with a drain track: one rolled-up section, never a row per item,
so a drain of 10,000 items stays a readable page (the tick's own render, from the
state it committed, on the in-memory store and executor)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from orchestrator import brief
from orchestrator.state import layout
from orchestrator.state.items import NewItem
from orchestrator.store import InMemoryStateStore
from tests.memory_executor import MemoryExecutor
from tests.memory_tick import MemoryShell
from tests.unit.test_drain import RUN, T0, drain_schedule, enqueue, finish

ITEMS = 10_000
FAILING = 200
"""Every 50th item fails its first attempt."""


@pytest.mark.slow  # 10,000 items through the real planner: about 15 s
def test_a_drain_of_10000_items_is_one_rolled_up_section_of_a_readable_page(
        memory_store: InMemoryStateStore, memory_executor: MemoryExecutor) -> None:
    shell = MemoryShell(memory_store, memory_executor,
                        [drain_schedule(task_cap=1000, max_workers=10, max_attempts=3)])
    enqueue(shell, [NewItem(payload={"url": f"https://example.org/{n}"}, key=f"k{n}")
                    for n in range(ITEMS)])
    enqueue(shell, [NewItem(payload="later", key="later")], T0 + timedelta(minutes=1))
    shell.run(T0)
    assert len(shell.executor.attempts) == 10
    finish(shell, T0 + timedelta(minutes=1),
           lambda _, n: "failed" if n % 50 == 0 else "done")
    shell.run(T0 + timedelta(minutes=2))

    files = shell.files
    html = files[layout.brief_path(RUN)].decode()
    ctx = brief.context_from_files(files, RUN, now=T0 + timedelta(minutes=3))
    markdown = brief.render_markdown(ctx)
    [view] = brief.build_view(ctx).drains
    assert (view.drained, view.failed, view.workers) == (ITEMS - FAILING, FAILING, 10)
    assert view.remaining == FAILING + 1  # waiting for their retry, and the one added late
    assert len(view.failures) == 10 and len(view.slowest) <= 5
    assert f"{ITEMS - FAILING} drained, {FAILING} failed" in html
    assert f"{ITEMS - FAILING} drained, {FAILING} failed" in markdown
    # no row per item: of 10,000 ids, only the named failures and slowest appear
    worked = [w.id for a in shell.executor.attempts.values() for w in a.request.items]
    assert len(worked) == ITEMS
    ids = [i for i in worked if i in html]
    assert 0 < len(ids) <= 15
    assert len(html) < 64 * 1024 and len(markdown) < 16 * 1024


def test_a_drain_run_with_a_dead_item_says_so_first_with_the_command_to_requeue_it(
        memory_store: InMemoryStateStore, memory_executor: MemoryExecutor) -> None:
    shell = MemoryShell(memory_store, memory_executor,
                        [drain_schedule(task_cap=5, max_workers=1, max_attempts=1)])
    enqueue(shell, [NewItem(payload=n, key=f"k{n}") for n in range(2)])
    shell.run(T0)
    finish(shell, T0 + timedelta(minutes=1), lambda _, n: "failed" if n == 0 else "done")
    shell.run(T0 + timedelta(minutes=2))

    files = shell.files
    ctx = brief.context_from_files(files, RUN, now=T0 + timedelta(minutes=3))
    view = brief.build_view(ctx)
    assert view.counts.dead_items == 1 and view.counts.dead_letters == 1
    assert view.headline.level == "bad" and "1 dead item of queue pages" in \
        view.headline.action
    assert view.headline.command == "orchestrator dlq requeue --queue pages"
    html = files[layout.brief_path(RUN)].decode()
    assert "All 2 tracks complete" not in html and "No errors and no dead letters" not in html
    assert "Dead items of queue <code>pages</code>" in html
    card = html.index('class="count c-dlq')
    assert '<span class="n">1</span>' in html[card:card + 200]
    head = brief.render_markdown(ctx).split("| Failed |")[0]
    assert "1 dead item of queue pages" in head
    assert "`orchestrator dlq requeue --queue pages`" in head
