"""The linger loop on the real clock, with a tick function that only records when it ran.

A tick may come late on a loaded machine, never early: the tests bound how early it
comes, and bound lateness only by the moments a wrong loop would wait for (the window,
a moment it should have refused), which lie a minute or more away.
"""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.cadence.linger import Linger, TickFn
from orchestrator.cadence.wake import Wake

HANG = 30.0
"""Seconds after which a loop that should have ended is taken for hung."""


def ticker(offsets: list[float]) -> tuple[list[datetime], TickFn]:
    """A tick that reports, after its n-th run, a due moment offsets[n] seconds later."""
    ran: list[datetime] = []

    def tick(now: datetime) -> Wake | None:
        ran.append(now)
        i = len(ran) - 1
        if i >= len(offsets):
            return None
        return Wake(now + timedelta(seconds=offsets[i]), f"due {i}")

    return ran, tick


def test_ticks_again_at_each_due_moment_inside_the_window() -> None:
    ran, tick = ticker([0.3, 0.3])
    lines: list[str] = []
    loop = Linger(timedelta(minutes=1), timedelta(minutes=10), log=lines.append)
    assert loop.run(tick) == 3
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(ran)]
    # at each moment, not before it, nor at the window's end a minute on
    assert all(0.3 <= g < HANG for g in gaps), gaps
    assert lines[-1] == "linger: nothing will fall due; done"


def test_a_moment_beyond_the_window_ends_it_at_once() -> None:
    ran, tick = ticker([120])
    lines: list[str] = []
    Linger(timedelta(minutes=1), timedelta(minutes=10), log=lines.append).run(tick)
    assert len(ran) == 1
    assert "beyond the 1 min window; done" in lines[-1]


def test_never_past_max_linger_after_the_first_tick() -> None:
    # the third moment is a minute after the third tick: past the 30 s limit however
    # late the ticks came, and inside the window
    ran, tick = ticker([0.4, 0.4, 60])
    lines: list[str] = []
    Linger(timedelta(minutes=5), timedelta(seconds=30), log=lines.append).run(tick)
    assert len(ran) == 3  # at 0, 0.4 and 0.8 s; a minute on is past the limit
    assert datetime.now(UTC) < ran[-1] + timedelta(seconds=60)  # it did not wait for it
    assert "past --max-linger" in lines[-1]


def test_stop_ends_the_wait_at_once() -> None:
    ran, tick = ticker([600])
    lines: list[str] = []
    loop = Linger(timedelta(minutes=15), timedelta(minutes=30), log=lines.append)
    runner = threading.Thread(target=loop.run, args=(tick,), daemon=True)
    runner.start()
    # the stop comes while the loop waits, ten minutes before the moment it waits for
    end = datetime.now(UTC) + timedelta(seconds=HANG)
    while not any(line.startswith("linger: waiting for") for line in lines):
        assert datetime.now(UTC) < end, lines
        runner.join(0.01)
    loop.stop("SIGTERM")
    runner.join(HANG)
    assert not runner.is_alive(), "the stop did not end the wait"
    assert len(ran) == 1
    assert lines[-1] == "linger: SIGTERM: stopping after 1 tick(s)"


def test_waits_for_the_moment_worth_it_not_an_earlier_one_that_is_not() -> None:
    ran: list[datetime] = []

    def tick(now: datetime) -> Wake | None:
        ran.append(now)
        if len(ran) > 1:
            return None
        later = Wake(now + timedelta(seconds=0.4), "daily: slot")
        return Wake(now + timedelta(seconds=0.1), "hourly: slot", False, later)

    lines: list[str] = []
    Linger(timedelta(seconds=2), timedelta(seconds=10), log=lines.append).run(tick)
    assert len(ran) == 2
    assert (ran[1] - ran[0]).total_seconds() >= 0.4  # the later moment, not the earlier
    assert "waiting for" in lines[0] and "daily: slot" in lines[0]


def test_nothing_worth_waiting_for_ends_it_at_once() -> None:
    ran: list[datetime] = []

    def tick(now: datetime) -> Wake | None:
        ran.append(now)
        return Wake(now + timedelta(seconds=1), "hourly: slot", False)

    lines: list[str] = []
    Linger(timedelta(minutes=5), timedelta(minutes=10), log=lines.append).run(tick)
    assert len(ran) == 1
    assert "not worth a waiting runner" in lines[-1]


@pytest.mark.parametrize(("executor", "speaks_of_runners"), [("github", True), ("local", False)])
def test_the_tick_summary_speaks_of_waiting_runners_only_where_ticks_run_on_them(
        executor: str, speaks_of_runners: bool) -> None:
    from orchestrator.commands.tick import summary_lines
    from orchestrator.tick.result import TickResult

    now = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
    later = Wake(now + timedelta(hours=24), "daily: slot")
    wake = Wake(now + timedelta(hours=4), "run deadline", False, later)
    last = summary_lines(TickResult(now=now, executor=executor, dry_run=True, wake=wake))[-1]
    assert last.startswith("  next due 2026-12-01T11:00:00Z")
    assert ("not worth a waiting runner; a lingering tick waits for" in last) \
        is speaks_of_runners, last
