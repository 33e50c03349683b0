"""The wake-up loop: real threads, a clock passed in, consumers that block on events."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.cadence.serve import Loop
from orchestrator.errors import RemoteError

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
HANG = 60.0
"""Seconds a blocked consumer or a wait gives up after: a cap for a hang, never a
margin a test relies on."""


class Clock:
    """Wall clock and monotonic clock that move only when told to."""

    def __init__(self) -> None:
        self.now = T0
        self.mono = 1000.0

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.mono += seconds


def make_loop(clock: Clock, interval: float = 60) -> tuple[Loop, list[str]]:
    lines: list[str] = []
    loop = Loop(interval, clock=lambda: clock.now, monotonic=lambda: clock.mono,
                log=lines.append)
    return loop, lines


def wait_for(predicate: object, timeout: float = HANG) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.005)
    raise AssertionError("condition not met in time")


def test_consumers_get_the_instant_of_the_wake_up() -> None:
    clock = Clock()
    loop, lines = make_loop(clock)
    seen: list[datetime] = []
    loop.add("tick", lambda now: seen.append(now) or None)
    loop.wake()
    clock.advance(60)
    loop.wake()
    assert loop.drain(5)
    assert seen == [T0, T0 + timedelta(minutes=1)]
    assert lines == ["2026-12-01T07:00:00Z wake-up 1: started tick",
                     "2026-12-01T07:01:00Z wake-up 2: started tick"]


def test_a_consumer_still_running_is_skipped_not_overlapped() -> None:
    clock = Clock()
    loop, lines = make_loop(clock)
    release = threading.Event()
    active = 0
    most = 0
    lock = threading.Lock()

    def slow(now: datetime) -> None:
        nonlocal active, most
        with lock:
            active += 1
            most = max(most, active)
        release.wait(HANG)
        with lock:
            active -= 1

    consumer = loop.add("tick", slow)
    loop.wake()
    wait_for(lambda: active == 1)
    for _ in range(3):
        clock.advance(60)
        loop.wake()
    assert lines[-1] == "2026-12-01T07:03:00Z wake-up 4: nothing due; skipped tick " \
                        "(still running)"
    assert consumer.runs == 1 and consumer.skipped == 3
    release.set()
    assert loop.drain(5)
    clock.advance(60)
    loop.wake()
    assert loop.drain(5)
    assert consumer.runs == 2 and most == 1


def test_a_slow_consumer_does_not_hold_back_the_others() -> None:
    clock = Clock()
    loop, lines = make_loop(clock)
    release = threading.Event()
    ticks: list[datetime] = []
    loop.add("compact", lambda now: release.wait(HANG) and None)
    loop.add("tick", lambda now: ticks.append(now) or None)
    for step in range(3):
        loop.wake()
        wait_for(lambda step=step: len(ticks) == step + 1)
        clock.advance(60)
    assert len(ticks) == 3
    assert lines[1].endswith("started tick; skipped compact (still running)")
    release.set()
    assert loop.drain(5)


def test_every_and_initial_delay_space_out_a_consumer() -> None:
    clock = Clock()
    loop, _ = make_loop(clock, interval=60)
    loop._started = clock.mono
    runs: list[datetime] = []
    loop.add("heartbeat", lambda now: runs.append(now) or None, every=15 * 60,
             initial_delay=15 * 60)
    for _ in range(46):  # 45 minutes of wake-ups
        loop.wake()
        loop.drain(5)
        clock.advance(60)
    assert runs == [T0 + timedelta(minutes=15), T0 + timedelta(minutes=30),
                    T0 + timedelta(minutes=45)]


def test_a_failing_consumer_is_logged_and_the_loop_goes_on() -> None:
    clock = Clock()
    loop, lines = make_loop(clock)
    calls = 0

    def flaky(now: datetime) -> list[str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RemoteError("origin: connection refused")
        if calls == 2:
            raise KeyError("boom")
        return ["fired nightly--20261201T0700Z"]

    loop.add("tick", flaky)
    for _ in range(3):
        loop.wake()
        loop.drain(5)
        clock.advance(60)
    assert [line for line in lines if line.startswith("  ")] == [
        "  tick: failed: origin: connection refused",
        "  tick: failed unexpectedly: KeyError: 'boom'",
        "  tick: fired nightly--20261201T0700Z",
    ]


def test_wake_ups_are_aligned_to_the_interval_on_the_wall_clock() -> None:
    clock = Clock()
    clock.now = T0 + timedelta(seconds=42.5)
    loop, _ = make_loop(clock, interval=60)
    assert loop.delay() == pytest.approx(17.5)
    clock.now = T0
    assert loop.delay() == pytest.approx(60)


def test_stop_starts_nothing_more_and_run_waits_for_the_running_consumer() -> None:
    """The loop's own clock (real time, short interval): stop() mid-run, from another
    thread as a signal handler would, lets the running work finish."""
    lines: list[str] = []
    loop = Loop(0.02, log=lines.append)
    started = threading.Event()
    go = threading.Event()
    finished: list[datetime] = []

    def work(now: datetime) -> None:
        started.set()
        go.wait(HANG)  # runs until the test has stopped the loop, however slow it is
        finished.append(now)

    loop.add("tick", work)
    runner = threading.Thread(target=loop.run, daemon=True)
    runner.start()
    assert started.wait(HANG)
    loop.stop("SIGTERM")
    wait_for(lambda: "SIGTERM: stopping; waiting for tick to finish" in lines)
    assert runner.is_alive() and finished == []  # run() waits for the running tick
    go.set()
    runner.join(HANG)
    assert not runner.is_alive()
    assert len(finished) == 1  # the running tick completed; no new one started
    assert "SIGTERM: stopping; waiting for tick to finish" in lines
    assert all("started tick" not in line for line in lines[lines.index(
        "SIGTERM: stopping; waiting for tick to finish"):])


def test_run_wakes_repeatedly_until_max_wakeups() -> None:
    lines: list[str] = []
    loop = Loop(0.01, log=lines.append)
    seen: list[datetime] = []
    loop.add("tick", lambda now: seen.append(now) or None)
    loop.run(max_wakeups=5)
    assert loop.wakeups == 5 and len(seen) >= 1
    assert seen == sorted(seen)


def test_names_are_unique_and_the_interval_positive() -> None:
    loop = Loop(1)
    loop.add("tick", lambda now: None)
    with pytest.raises(ValueError, match="already registered"):
        loop.add("tick", lambda now: None)
    with pytest.raises(ValueError):
        Loop(0)


def test_a_due_moment_between_intervals_wakes_the_loop_at_its_second() -> None:
    """Real clock: an interval of an hour, a consumer that announces a moment 0.5 s on.
    Only that moment can wake the loop before the hour: a second wake-up at all, not
    before the moment, is the proof (how late it comes is the machine's load)."""
    loop = Loop(3600, log=lambda line: None)
    seen: list[datetime] = []

    def work(now: datetime) -> None:
        seen.append(now)
        if len(seen) == 1:
            loop.wake_at(now + timedelta(seconds=0.5))
        else:
            loop.stop()

    loop.add("tick", work)
    runner = threading.Thread(target=loop.run, daemon=True)
    runner.start()
    runner.join(HANG)
    assert not runner.is_alive()
    assert len(seen) == 2
    assert (seen[1] - seen[0]).total_seconds() >= 0.5  # at the moment, never before


@pytest.mark.slow
def test_a_watch_that_fires_wakes_the_loop_between_its_intervals() -> None:
    # An hour's interval on a clock that stands still: only the watch can wake it.
    clock = Clock()
    loop, _lines = make_loop(clock, interval=3600)
    ended = threading.Event()
    looks = 0

    def watch() -> bool:
        nonlocal looks
        looks += 1
        return ended.is_set()

    # the tick sets the watch on the tracks it left open, as `serve`'s does
    loop.add("tick", lambda now: loop.wake_when(watch))
    runner = threading.Thread(target=loop.run, kwargs={"max_wakeups": 2}, daemon=True)
    runner.start()
    wait_for(lambda: looks >= 1)  # the loop asked the watch while it slept
    assert loop.wakeups == 1  # the watch says nothing yet
    ended.set()  # a track ended
    wait_for(lambda: loop.wakeups == 2)
    runner.join(HANG)
    assert not runner.is_alive()
