"""Which pending scheduled tick a lingering tick cancels (:mod:`orchestrator.cadence.pending`):
the decision on given datetimes, and the runs it picks from GitHub's listing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orchestrator.cadence.pending import GRACE, idle_runs, keeps
from orchestrator.cadence.wake import Wake

NOW = datetime(2026, 12, 1, 7, 0, 10, tzinfo=UTC)
WINDOW = timedelta(minutes=20)
NEXT_TICK = NOW + timedelta(hours=6)


def test_nothing_due_before_the_next_tick_is_idle() -> None:
    tomorrow = Wake(NOW + timedelta(days=1), "nightly: slot")
    assert keeps(tomorrow, NOW, NEXT_TICK, WINDOW) is None
    assert keeps(None, NOW, NEXT_TICK, WINDOW) is None


def test_a_moment_worth_waiting_for_before_the_next_tick_keeps_it() -> None:
    retry = Wake(NOW + timedelta(hours=1), "run: a retry")
    assert "it would wait for" in (keeps(retry, NOW, NEXT_TICK, WINDOW) or "")
    # the next tick is sooner than the retry, but the held run would linger for it
    soon = NOW + timedelta(minutes=2)
    within = Wake(NOW + WINDOW + GRACE - timedelta(seconds=1), "run: a retry")
    assert keeps(within, NOW, soon, WINDOW) is not None
    assert keeps(Wake(NOW + WINDOW + GRACE + timedelta(seconds=1), "run: a retry"), NOW,
                 soon, WINDOW) is None


def test_a_deadline_keeps_it_only_when_due_before_it_would_tick() -> None:
    later = Wake(NOW + timedelta(hours=3), "run: run deadline", False)
    assert keeps(later, NOW, NEXT_TICK, WINDOW) is None
    due = Wake(NOW + GRACE, "run: run deadline", False)
    assert "is due before it would tick" in (keeps(due, NOW, NEXT_TICK, WINDOW) or "")
    # not worth waiting for, but the next moment that is comes before the next tick
    hung = replace_wait(later, Wake(NOW + timedelta(hours=4), "run: a retry"))
    assert keeps(hung, NOW, NEXT_TICK, WINDOW) is not None


def test_no_known_next_tick_keeps_it() -> None:
    assert keeps(None, NOW, None, WINDOW) == "tick.yml names no next scheduled tick"


def replace_wait(wake: Wake, target: Wake) -> Wake:
    return Wake(wake.at, wake.reason, wake.worth_waiting, wait_for=target)


def test_only_scheduled_runs_created_before_the_read_other_than_its_own_are_picked() -> None:
    read_at = NOW - timedelta(seconds=10)
    before = "2026-12-01T06:55:00Z"
    runs = [
        {"id": 1, "event": "schedule", "created_at": before, "status": "pending"},
        {"id": 2, "event": "workflow_dispatch", "created_at": before, "status": "pending"},
        {"id": 3, "event": "repository_dispatch", "created_at": before, "status": "pending"},
        {"id": 4, "event": "schedule", "created_at": "2026-12-01T07:00:05Z",  # after
         "status": "pending"},
        {"id": 5, "event": "schedule", "created_at": before, "status": "pending"},  # its own
        {"id": "6", "event": "schedule", "created_at": before, "status": "pending"},
        {"id": 7, "event": "schedule", "created_at": "yesterday", "status": "queued"},
        {"id": 8, "event": "schedule", "status": "queued"},
        {"id": 1, "event": "schedule", "created_at": before, "status": "pending"},  # listed twice
    ]
    assert idle_runs(runs, own_run=5, read_at=read_at) == [1]


def test_a_run_that_started_is_never_picked_whatever_the_listing_let_through() -> None:
    read_at = NOW - timedelta(seconds=10)
    before = "2026-12-01T06:55:00Z"
    runs = [{"id": n, "event": "schedule", "created_at": before, "status": status}
            for n, status in enumerate(["queued", "pending", "in_progress", "completed",
                                        "waiting", "requested", None], start=1)]
    assert idle_runs(runs, own_run=None, read_at=read_at) == [1, 2]
