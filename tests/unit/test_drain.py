"""Drain tracks decided by the pure planner and committed by the tick shell, on the
in-memory store with the in-memory executor (:mod:`tests.memory_tick`): sizing, claims
in the mark commit, settling workers, leases, late and foreign reports, enqueue."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.runs import queues
from orchestrator.state import index as state_index
from orchestrator.state import model as state_model
from orchestrator.state.items import ItemReport, ItemStatus, NewItem
from orchestrator.state.phases import TrackPhase
from orchestrator.state.queue import QueueBook
from orchestrator.state.records import Track
from orchestrator.store import InMemoryStateStore
from tests.builders import schedule
from tests.memory_executor import MemoryExecutor
from tests.memory_tick import MemoryShell

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "crawl--20261201T0700Z"


def drain_schedule(task_cap: int = 3, max_workers: int = 2, **track: Any) -> Any:
    return schedule("crawl", cron="0 * * * *", tracks=[{
        "name": "pages", "run": "true", "max_attempts": 2, "retry_backoff_seconds": 60,
        "drain": {"queue": "pages", "task_cap": task_cap, "max_workers": max_workers,
                  "lease_minutes": 15}, **track}])


@pytest.fixture
def drained(memory_store: InMemoryStateStore, memory_executor: MemoryExecutor
            ) -> Callable[..., MemoryShell]:
    def make(count: int, *schedules: Any, **spec: Any) -> MemoryShell:
        shell = MemoryShell(memory_store, memory_executor,
                            list(schedules) or [drain_schedule(**spec)])
        if count:
            enqueue(shell, [NewItem(payload=n, key=f"k{n}") for n in range(count)])
        return shell
    return make


def enqueue(shell: MemoryShell, items: list[NewItem], at: datetime = T0) -> None:
    shell.store.transact(lambda s: queues.add(s.files, "pages", items, at, "me")[0], "add")


def book(shell: MemoryShell) -> QueueBook:
    return state_index.load(shell.files).state.queues["pages"]


def workers(shell: MemoryShell) -> dict[str, Track]:
    tracks = state_model.load(shell.files, all_tracks=True).tracks.get(RUN, {})
    return {n: t for n, t in tracks.items() if t.work is not None}


def finish(shell: MemoryShell, at: datetime, outcome: Callable[[str, int], str] | None = None,
           *, items: bool = True, phase: TrackPhase = TrackPhase.COMPLETE) -> None:
    """Every dispatched worker ends at ``at``, with a report on each of its items."""
    for key, attempt in shell.executor.attempts.items():
        if attempt.phase in (TrackPhase.COMPLETE, TrackPhase.FAILED):
            continue
        reports = tuple(ItemReport(id=w.id, outcome=(outcome(w.id, n) if outcome else "done"),
                                   attempt=w.attempt, started_at=at, finished_at=at)
                        for n, w in enumerate(attempt.request.items))
        shell.executor.finish(key, at, phase, items=reports if items else None)


def test_a_fire_dispatches_ceil_backlog_over_task_cap_workers_at_most_max_workers(
        drained: Callable[..., MemoryShell]) -> None:
    shell = drained(5)
    result = shell.run(T0)
    assert sorted(result.dispatched) == [f"{RUN}--pages-w1--1", f"{RUN}--pages-w2--1"]
    sizes = sorted(len(a.request.items) for a in shell.executor.attempts.values())
    assert sizes == [2, 3]  # ceil(5 / 3) = 2 workers, shared evenly
    assert book(shell).counts == {"claimed": 5}
    # the claims landed in the tick's mark commit: no push of their own
    assert [m for m in shell.commits if m.startswith("tick")] == [
        f"tick {T0:%Y-%m-%dT%H:%M:%SZ}: decide", f"tick {T0:%Y-%m-%dT%H:%M:%SZ}: record dispatch"]


def test_a_big_backlog_is_capped_at_max_workers_times_task_cap(
        drained: Callable[..., MemoryShell]) -> None:
    shell = drained(20)
    shell.run(T0)
    assert [len(a.request.items) for a in shell.executor.attempts.values()] == [3, 3]
    assert book(shell).counts == {"claimed": 6, "ready": 14}


def test_an_empty_queue_completes_the_track_without_a_worker(
        drained: Callable[..., MemoryShell]) -> None:
    shell = drained(0)
    result = shell.run(T0)
    assert result.dispatched == () and shell.executor.starts == []
    assert result.rendered == (RUN,)
    track = shell.track(RUN, "pages")
    assert track.phase is TrackPhase.COMPLETE and track.result is not None
    assert track.result["summary"] == "queue pages empty: no worker dispatched"


def test_a_worker_s_reports_are_applied_and_what_it_did_not_report_goes_back(
        drained: Callable[..., MemoryShell]) -> None:
    shell = drained(6)
    shell.run(T0)
    w1 = shell.executor.attempts[f"{RUN}--pages-w1--1"]
    [first, second, third] = [w.id for w in w1.request.items]
    shell.executor.finish(f"{RUN}--pages-w1--1", T0 + timedelta(minutes=1), items=(
        ItemReport(id=first, outcome="done", attempt=1),
        ItemReport(id=second, outcome="failed", attempt=1, exit_code=2, error="boom"),
        # third: never reported (its wall clock came first)
    ))
    finish(shell, T0 + timedelta(minutes=1), lambda _, n: "back" if n == 0 else "released")
    result = shell.run(T0 + timedelta(minutes=2))
    assert RUN in result.rendered
    after = book(shell)
    assert after.counts == {"done": 1, "failed": 1, "ready": 4}
    failed = after.item(second)
    assert failed is not None and failed.attempt == 1 and "boom" in failed.error_log[-1]
    assert failed.retry_at == T0 + timedelta(minutes=3)  # the drain's retry back-off
    assert after.item(third).attempt == 0  # type: ignore[union-attr]
    drain = shell.track(RUN, "pages")
    assert drain.phase is TrackPhase.COMPLETE and drain.result is not None
    assert (drain.result["drained"], drain.result["failed"], drain.result["released"],
            drain.result["back"], drain.result["remaining"]) == (1, 1, 3, 1, 5)


def test_a_report_on_an_item_the_worker_does_not_own_is_refused_in_one_line(
        drained: Callable[..., MemoryShell]) -> None:
    shell = drained(6, task_cap=3, max_workers=1)
    shell.run(T0)
    [key] = shell.executor.attempts
    theirs = book(shell).claimable(T0, 1)[0].id  # still ready: nobody's
    mine = shell.executor.attempts[key].request.items[0].id
    shell.executor.finish(key, T0 + timedelta(minutes=1), items=(
        ItemReport(id=theirs, outcome="done", attempt=1),
        ItemReport(id=mine, outcome="done", attempt=1)))
    result = shell.run(T0 + timedelta(minutes=2))
    refused = [line for line in result.decision.log if "refused:" in line]
    assert len(refused) == 1 and theirs in refused[0] and "\n" not in refused[0]
    assert "not one it was given" in refused[0]
    after = book(shell)
    assert after.item(theirs).status is ItemStatus.READY  # type: ignore[union-attr]
    assert after.item(mine).status is ItemStatus.DONE  # type: ignore[union-attr]


def test_the_last_failed_attempt_parks_the_item_with_the_same_alert_as_a_track(
        drained: Callable[..., MemoryShell]) -> None:
    shell = drained(1, task_cap=1, max_workers=1)
    for fire in range(2):
        at = T0 + timedelta(hours=fire)
        shell.run(at)
        finish(shell, at + timedelta(minutes=1), lambda *_: "failed")
        result = shell.run(at + timedelta(minutes=2))
    item = book(shell).claimable(T0 + timedelta(days=1), 1)
    assert item == []
    [dead] = queues.dead_letters(shell.files)
    assert dead.attempt == 2 and dead.dead_reason == "max_retries_exceeded"
    assert result.parked == {f"pages/{dead.id}": "max_retries_exceeded"}  # the /fail ping


def test_a_worker_without_an_account_holds_its_items_until_its_lease_ends(
        drained: Callable[..., MemoryShell]) -> None:
    shell = drained(2, task_cap=2, max_workers=1)
    shell.run(T0)
    finish(shell, T0 + timedelta(minutes=1), items=False)  # e.g. its artifact is lost
    shell.run(T0 + timedelta(minutes=2))
    assert book(shell).counts == {"claimed": 2}  # not taken: an outcome may still come
    assert shell.track(RUN, "pages-w1").phase is TrackPhase.DISPATCHED
    shell.run(T0 + timedelta(minutes=16))  # the lease (15 minutes) has passed
    assert book(shell).counts == {"ready": 2}
    assert shell.track(RUN, "pages").phase is TrackPhase.COMPLETE


def test_a_claim_whose_worker_is_gone_is_released_once_its_lease_passes(
        drained: Callable[..., MemoryShell]) -> None:
    shell = drained(2, task_cap=2, max_workers=1)
    shell.run(T0)
    # the run's records vanish (a bad hand edit); its claims remain
    shell.store.transact(lambda s: {p: None for p in s.files if p.startswith(
        f"state/runs/{RUN}/")}, "lost")
    quiet = MemoryShell(shell.store, shell.executor, [])  # no schedule fires
    quiet.run(T0 + timedelta(minutes=5))
    assert book(shell).counts == {"claimed": 2}  # the lease still holds
    result = quiet.run(T0 + timedelta(minutes=16))
    assert book(shell).counts == {"ready": 2} and book(shell).claims == {}
    assert any("its lease passed" in line for line in result.decision.log)


def test_a_fan_in_tick_leaves_other_runs_claims_alone(
        drained: Callable[..., MemoryShell]) -> None:
    other = schedule("other", cron="0 * * * *", tracks=[{
        "name": "pages", "run": "true",
        "drain": {"queue": "pages", "task_cap": 1, "max_workers": 1, "lease_minutes": 1}}])
    shell = drained(3, drain_schedule(task_cap=1, max_workers=1), other)
    shell.run(T0)
    assert book(shell).counts == {"claimed": 2, "ready": 1}
    scoped = shell.tick(T0 + timedelta(hours=2), scope=RUN).run()  # a fan-in job's tick
    assert not any("other--" in line and "lease" in line for line in scoped.decision.log)
    claims = book(shell).claims
    assert any(k.startswith("other--") for k in claims)


def test_a_completed_track_s_enqueue_lands_in_the_commit_that_records_it(
        drained: Callable[..., MemoryShell]) -> None:
    feed = schedule("crawl", cron="0 * * * *", tracks=[
        {"name": "find", "run": "true"},
        {"name": "pages", "run": "true", "needs": ["find"],
         "drain": {"queue": "pages", "task_cap": 50, "max_workers": 2}}])
    shell = drained(0, feed)
    shell.run(T0)
    [key] = shell.executor.attempts
    shell.executor.finish(key, T0 + timedelta(minutes=1), enqueue=tuple(
        NewItem(queue="pages", payload=n, key=f"f{n}") for n in range(60)))
    before = len(shell.commits)
    result = shell.run(T0 + timedelta(minutes=2))
    assert len(shell.commits) == before + 2  # the mark (enqueue, claims) and the record
    assert len(result.dispatched) == 2
    assert book(shell).counts == {"claimed": 60}


def test_exit_75_puts_an_item_back_without_using_an_attempt(
        drained: Callable[..., MemoryShell]) -> None:
    shell = drained(1, task_cap=1, max_workers=1)
    for fire in range(3):
        at = T0 + timedelta(hours=fire)
        shell.run(at)
        finish(shell, at + timedelta(minutes=1), lambda *_: "back")
        shell.run(at + timedelta(minutes=2))
    [item] = book(shell).claimable(T0 + timedelta(hours=4), 1)
    assert item.attempt == 0 and item.status is ItemStatus.READY
    assert [h.to for h in item.state_history].count("claimed") == 3


def test_a_worker_whose_claims_were_all_released_is_cancelled_not_run(
        drained: Callable[..., MemoryShell]) -> None:
    shell = drained(2, task_cap=2, max_workers=1)
    shell.executor.dispatch_fails = "the backend fell over"  # nothing recorded
    shell.run(T0)
    shell.executor.dispatch_fails = None

    def release_all(snap: Any) -> dict[str, bytes | None]:  # e.g. by a hand edit
        from orchestrator.state import queueops

        target = queues.book(snap.files, "pages")
        for claim in list(target.claims.values()):
            for item_id in claim.items:
                item = target.item(item_id)
                assert item is not None
                queueops.release(target, item, T0, "ops", "by hand")
        return target.dump()

    shell.store.transact(release_all, "released by hand")
    result = shell.run(T0 + timedelta(minutes=15))  # past the grace: dispatched again
    assert result.dispatched == () and shell.executor.starts == []
    assert shell.track(RUN, "pages-w1").phase is TrackPhase.CANCELLED
    assert shell.track(RUN, "pages").phase is TrackPhase.FAILED  # no worker completed


def test_a_worker_stopped_by_the_deadline_keeps_what_it_finished(
        memory_store: InMemoryStateStore, memory_executor: MemoryExecutor) -> None:
    crawl = schedule("crawl", cron="0 * * * *", deadline_minutes=30, tracks=[{
        "name": "pages", "run": "true", "timeout_minutes": 60,
        "drain": {"queue": "pages", "task_cap": 3, "max_workers": 1}}])
    shell = MemoryShell(memory_store, memory_executor, [crawl])
    enqueue(shell, [NewItem(payload=n, key=f"k{n}") for n in range(3)])
    [key] = shell.run(T0).dispatched
    shell.executor.start(key, T0)
    shell.run(T0 + timedelta(minutes=31))  # the deadline stops the worker
    assert shell.executor.cancelled == [key]
    assert workers(shell)["pages-w1"].phase is TrackPhase.TAPPED_OUT
    assert book(shell).counts == {"claimed": 3}  # its account is not in yet
    first, second, _ = [w.id for w in shell.executor.attempts[key].request.items]
    at = T0 + timedelta(minutes=31)
    shell.executor.finish(key, at, TrackPhase.CANCELLED, items=(
        ItemReport(id=first, outcome="done", attempt=1, started_at=at, finished_at=at),
        ItemReport(id=second, outcome="released", attempt=1)))
    result = shell.run(T0 + timedelta(minutes=32))
    assert book(shell).counts == {"done": 1, "ready": 2}
    assert RUN in result.rendered
