"""The idle tick (orchestrator/tick/idle.py): a tick the inputs prove has nothing to
do skips the planner and the executor, and decides exactly what the planner would.

Every tick of the suite runs with ``ORCHESTRATOR_VERIFY_IDLE`` set (tests/conftest.py),
so each tick found idle anywhere is also planned and must plan nothing; these tests
check each condition that keeps a tick from being idle, and that the check fails when
a tick is called idle wrongly.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.config.repository import RepoConfig, RepoSettings
from orchestrator.planner import TriggerRequest
from orchestrator.state import layout, queueops
from orchestrator.state.items import new_item
from orchestrator.state.queue import QueueBook
from orchestrator.state.records import Act
from orchestrator.store import Snapshot
from orchestrator.tick import idle
from orchestrator.tick.inputs import TickInputs
from orchestrator.tick.result import NOTHING_DECIDED
from tests.builders import schedule
from tests.memory_tick import MemoryShell

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
HOUR = timedelta(minutes=60)
MINUTE = timedelta(minutes=1)


def beaten(shell: MemoryShell) -> None:
    """A first tick at ``T0``: it writes the heartbeat, so the next ones may be idle."""
    result = shell.run(T0)
    assert not result.idle and result.mark_landed
    assert layout.TICKS in shell.files


def holds(inputs: TickInputs, now: datetime = T0 + MINUTE, *, scoped: bool = False,
          requested: bool = False) -> bool:
    return idle.holds(inputs, now, HOUR, scoped=scoped, requested=requested)


def test_a_tick_with_nothing_to_do_is_idle_commits_nothing_and_says_the_empty_decision(
        shell: MemoryShell) -> None:
    beaten(shell)
    commits = list(shell.commits)
    result = shell.run(T0 + MINUTE)
    assert result.idle and result.decision is None
    assert shell.commits == commits and not result.mark_landed
    assert result.to_json()["decision"] == NOTHING_DECIDED and result.to_json()["idle"]
    assert result.log == [] and result.tip == shell.store.read().tip
    # what the planner decides on the same inputs, planned the long way
    tick = shell.tick(T0 + MINUTE)
    inputs = shell.inputs()
    planned = tick.plan(inputs, tick.observe(inputs, shell.executor))
    assert planned.changes == {} and planned.decision.to_json() == NOTHING_DECIDED


def test_the_heartbeat_falling_due_ends_idleness(shell: MemoryShell) -> None:
    beaten(shell)
    inputs = shell.inputs()
    assert holds(inputs, T0 + HOUR - MINUTE)
    assert not holds(inputs, T0 + HOUR)
    assert not holds(inputs, T0 - 6 * MINUTE)  # a heartbeat ahead of now is no heartbeat
    result = shell.run(T0 + HOUR)
    assert not result.idle and result.mark_landed
    assert layout.TICKS in shell.changed()
    assert not holds(TickInputs.of(Snapshot(None, {}), [], None))  # never beaten


def test_a_schedule_to_plan_an_invalid_one_or_a_broken_index_ends_idleness(
        shell: MemoryShell) -> None:
    beaten(shell)
    snap = shell.store.read()
    assert holds(TickInputs.of(snap, []))
    assert not holds(TickInputs.of(snap, [schedule("nightly", cron="0 8 * * *")]))
    assert not holds(TickInputs.of(snap, [], invalid=["schedules/x.json: not JSON"]))
    broken = Snapshot(snap.tip, {**snap.files, "state/open.json": b"{"})
    assert TickInputs.of(broken, []).loaded.note  # the index is rebuilt: a change
    assert not holds(TickInputs.of(broken, []))


def test_an_open_run_ends_idleness(shell: MemoryShell) -> None:
    shell.schedules = [schedule("nightly", cron="0 7 * * *", tracks=("a",))]
    shell.run(T0 + MINUTE)  # fires and dispatches: the run stays open
    shell.schedules = []
    inputs = shell.inputs()
    assert inputs.state.runs and not holds(inputs, T0 + 2 * MINUTE)
    assert not shell.run(T0 + 2 * MINUTE).idle


def test_an_operator_s_request_or_a_scope_ends_idleness(shell: MemoryShell) -> None:
    beaten(shell)
    inputs = shell.inputs()
    assert not holds(inputs, requested=True) and not holds(inputs, scoped=True)
    request = TriggerRequest("nightly", "r1", Act(by="ops", at=T0, reason="now"))
    assert not shell.run(T0 + MINUTE, requests=(request,)).idle


def test_a_repository_channel_ends_idleness(shell: MemoryShell) -> None:
    beaten(shell)
    config = RepoConfig.model_validate({"notify": {"github_issues": True}})
    shell.settings = RepoSettings(config, None, b"notify")
    assert not holds(shell.inputs())
    assert not shell.run(T0 + MINUTE).idle


def test_a_work_queue_on_the_branch_ends_idleness(shell: MemoryShell) -> None:
    beaten(shell)

    def enqueue(snap: Snapshot) -> dict[str, bytes | None]:
        book = QueueBook.empty("work", snap.files)
        queueops.enqueue(book, [new_item({"payload": {"n": 1}})], T0, "test")
        return dict(book.dump())

    shell.store.transact(enqueue, "enqueue")
    inputs = shell.inputs()
    assert inputs.state.queues and not holds(inputs)


def test_calling_a_busy_tick_idle_fails_the_check(shell: MemoryShell,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The check the suite runs every idle tick through can fail: a tick with a slot due,
    forced idle, is planned and refused."""
    beaten(shell)
    shell.schedules = [schedule("nightly", cron="* * * * *", tracks=("a",))]
    monkeypatch.setattr(idle, "holds", lambda *_args, **_kwargs: True)
    with pytest.raises(AssertionError, match="found idle would have planned"):
        shell.run(T0 + MINUTE)
    monkeypatch.delenv(idle.VERIFY_ENV)
    assert shell.run(T0 + MINUTE).idle  # unchecked, it would have fired nothing
