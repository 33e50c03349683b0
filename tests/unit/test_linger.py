"""The linger loop on the real clock, with a tick function that only records when it ran."""

from __future__ import annotations

import itertools
import threading
from datetime import UTC, datetime, timedelta

from orchestrator.cadence.linger import Linger, TickFn
from orchestrator.cadence.wake import Wake


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
    loop = Linger(timedelta(seconds=1), timedelta(seconds=10), log=lines.append)
    assert loop.run(tick) == 3
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(ran)]
    assert all(0.3 <= g < 0.6 for g in gaps), gaps
    assert lines[-1] == "linger: nothing will fall due; done"


def test_a_moment_beyond_the_window_ends_it_at_once() -> None:
    ran, tick = ticker([120])
    lines: list[str] = []
    Linger(timedelta(minutes=1), timedelta(minutes=10), log=lines.append).run(tick)
    assert len(ran) == 1
    assert "beyond the 1 min window; done" in lines[-1]


def test_never_past_max_linger_after_the_first_tick() -> None:
    ran, tick = ticker([0.4, 0.4, 0.4, 0.4])
    lines: list[str] = []
    start = datetime.now(UTC)
    Linger(timedelta(seconds=5), timedelta(seconds=1), log=lines.append).run(tick)
    assert len(ran) == 3  # at 0, 0.4 and 0.8 s; 1.2 s is past the 1 s limit
    assert (datetime.now(UTC) - start).total_seconds() < 1.2
    assert "past --max-linger" in lines[-1]


def test_stop_ends_the_wait_at_once() -> None:
    ran, tick = ticker([30])
    lines: list[str] = []
    loop = Linger(timedelta(minutes=1), timedelta(minutes=5), log=lines.append)
    threading.Timer(0.2, loop.stop, args=("SIGTERM",)).start()
    start = datetime.now(UTC)
    loop.run(tick)
    assert (datetime.now(UTC) - start).total_seconds() < 2
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
    assert 0.4 <= (ran[1] - ran[0]).total_seconds() < 0.7
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
