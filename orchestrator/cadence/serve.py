"""One wake-up loop, many consumers: the engine of ``orchestrator serve``.

The loop wakes every ``interval`` seconds, on whole multiples of the interval in
wall-clock time (``--interval 60`` wakes at second 0 of each minute, when cron slots
fall due), and also at any due moment a consumer announced (:meth:`Loop.wake_at`:
the tick's next slot, retry or deadline); it reads the clock once and hands that
instant to every consumer that is due. Consumers are registered in a small
:class:`Loop` registry: the tick is the first, compaction and the heartbeat check
are others.

Guarantees, per consumer:

- **never overlaps itself**: a consumer still running when its next wake-up comes is
  skipped for that wake-up (and the wake-up's log line says so); it runs again on the
  first wake-up after it finished;
- **never delays the others**: each run happens in its own thread, so a slow
  compaction does not hold back the next tick;
- **fails alone**: an exception is logged as one line and the loop goes on; the next
  wake-up tries again (state lives in git, so there is nothing to repair in memory).

:meth:`Loop.stop` (called by the signal handlers of the command) ends the loop: no
further wake-up starts anything, :meth:`Loop.run` waits for the running consumers to
finish and returns. Only the loop reads the clock; consumers get ``now`` passed in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..errors import OrchestratorError
from ..support.times import iso

WATCH_EVERY = 1.0
"""Seconds between two looks of a watch (:meth:`Loop.wake_when`) while the loop sleeps."""

Work = Callable[[datetime], list[str] | None]
"""A consumer's work: gets the wake-up's instant, returns lines worth logging."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Consumer:
    """One thing the loop runs."""

    name: str
    work: Work
    every: float = 0.0
    """Seconds between starts; 0 runs it on every wake-up."""
    initial_delay: float = 0.0
    """Seconds after the loop starts before the first run."""
    runs: int = 0
    """Runs started so far."""
    skipped: int = 0
    """Wake-ups skipped because the previous run was still going."""
    _thread: threading.Thread | None = field(default=None, repr=False)
    _last_start: float | None = field(default=None, repr=False)

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def due(self, mono: float, started: float) -> bool:
        if mono - started < self.initial_delay:
            return False
        return self._last_start is None or mono - self._last_start >= self.every


class Loop:
    """The wake-up loop and its registry of consumers.

    ``clock`` gives the wall-clock instant handed to consumers (and used to align
    wake-ups); ``monotonic`` measures the consumers' ``every``; ``log`` receives one
    line per wake-up plus the lines consumers return and their failures.
    """

    def __init__(self, interval: float, *, clock: Callable[[], datetime] = _utc_now,
                 monotonic: Callable[[], float] = time.monotonic,
                 log: Callable[[str], None] = print) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.interval = interval
        self.consumers: list[Consumer] = []
        self.wakeups = 0
        self._clock = clock
        self._monotonic = monotonic
        self._log = log
        self._log_lock = threading.Lock()
        self._stop = threading.Event()
        self._nudge = threading.Event()
        self._due: datetime | None = None
        self._due_lock = threading.Lock()
        self._watch: Callable[[], bool] | None = None
        self._started = monotonic()
        self.stop_reason: str | None = None

    def add(self, name: str, work: Work, *, every: float = 0.0,
            initial_delay: float = 0.0) -> Consumer:
        if any(c.name == name for c in self.consumers):
            raise ValueError(f"consumer {name!r} is already registered")
        consumer = Consumer(name, work, every=every, initial_delay=initial_delay)
        self.consumers.append(consumer)
        return consumer

    # ---------------------------------------------------------------- control

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self, reason: str = "stop requested") -> None:
        """Start no more consumers; :meth:`run` returns once the running ones finish.
        Safe to call from a signal handler or another thread."""
        self.stop_reason = reason
        self._stop.set()
        self._nudge.set()

    def wake_at(self, moment: datetime) -> None:
        """Wake up at ``moment`` too (if it comes before the next interval): a consumer
        that knows its next due moment (the tick) calls this, so a slot is served at its
        second rather than at the next whole interval. Safe from any thread."""
        with self._due_lock:
            if self._due is None or moment < self._due:
                self._due = moment
        self._nudge.set()

    def wake_when(self, check: Callable[[], bool] | None) -> None:
        """Wake up as soon as ``check()`` says so too, asked every :data:`WATCH_EVERY`
        seconds while the loop sleeps (``None`` ends the watch; a wake-up ends it too,
        and the consumer that set it sets the next). The tick watches its local tracks'
        ends, so a track that ends is recorded (and its next track or retry dispatched)
        within seconds, whatever the interval."""
        self._watch = check
        self._nudge.set()

    def _watched(self) -> bool:
        check = self._watch
        if check is None:
            return False
        try:
            fired = check()
        except Exception:  # a watch that fails is no reason to wake, nor to stop
            fired = False
        if fired:
            self._watch = None
        return fired

    def running(self) -> list[str]:
        return [c.name for c in self.consumers if c.busy]

    # ---------------------------------------------------------------- one wake-up

    def wake(self) -> str:
        """Start every due, idle consumer in its own thread; return the log line."""
        now = self._clock().astimezone(UTC)
        mono = self._monotonic()
        self.wakeups += 1
        with self._due_lock:
            if self._due is not None and self._due <= now:
                self._due = None  # served by this wake-up
        self._watch = None  # served too: the tick this wake-up starts sets the next
        started: list[str] = []
        skipped: list[str] = []
        for consumer in self.consumers:
            if self._stop.is_set() or not consumer.due(mono, self._started):
                continue
            if consumer.busy:
                consumer.skipped += 1
                skipped.append(consumer.name)
                continue
            consumer._last_start = mono
            consumer.runs += 1
            consumer._thread = threading.Thread(
                target=self._run_one, args=(consumer, now),
                name=f"orchestrator-{consumer.name}", daemon=True)
            consumer._thread.start()
            started.append(consumer.name)
        line = f"{iso(now)} wake-up {self.wakeups}: " + (
            f"started {', '.join(started)}" if started else "nothing due")
        if skipped:
            line += f"; skipped {', '.join(skipped)} (still running)"
        self.say(line)
        return line

    def _run_one(self, consumer: Consumer, now: datetime) -> None:
        try:
            lines = consumer.work(now) or []
        except OrchestratorError as exc:
            lines = [f"failed: {exc.message}"]
        except Exception as exc:  # a bug in one consumer must not end the loop
            lines = [f"failed unexpectedly: {type(exc).__name__}: {exc}"]
        for line in lines:
            self.say(f"  {consumer.name}: {line}")

    def say(self, line: str) -> None:
        with self._log_lock:
            self._log(line)

    # ---------------------------------------------------------------- the loop

    def delay(self) -> float:
        """Seconds to the next whole multiple of the interval, in wall-clock time, or to
        the due moment a consumer asked for (:meth:`wake_at`) if that comes first."""
        now = self._clock()
        stamp = now.timestamp()
        rest = self.interval - stamp % self.interval
        rest = rest if rest > 1e-3 else self.interval
        with self._due_lock:
            due = self._due
        if due is not None:
            rest = min(rest, max(0.0, (due - now).total_seconds()))
        return rest

    def _sleep(self) -> None:
        """Sleep until the next wake-up; a new, earlier due moment or a watch that fires
        (:meth:`wake_when`) cuts it short."""
        while not self._stop.is_set():
            self._nudge.clear()  # before computing the delay: a later nudge is not lost
            delay = self.delay()
            watching = self._watch is not None
            if self._nudge.wait(min(delay, WATCH_EVERY) if watching else delay):
                continue
            if delay <= WATCH_EVERY or not watching or self._watched():
                return

    def run(self, *, max_wakeups: int | None = None) -> None:
        """Wake up until :meth:`stop` (or ``max_wakeups``), then wait for running
        consumers to finish."""
        self._started = self._monotonic()
        while not self._stop.is_set():
            self.wake()
            if max_wakeups is not None and self.wakeups >= max_wakeups:
                break
            self._sleep()
        if self._stop.is_set():
            running = self.running()
            what = f"waiting for {', '.join(running)} to finish" if running else "exiting"
            self.say(f"{self.stop_reason}: stopping; {what}")
        self.drain()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for running consumers; False if some still run after ``timeout``."""
        end = None if timeout is None else self._monotonic() + timeout
        for consumer in self.consumers:
            thread = consumer._thread
            if thread is None:
                continue
            left = None if end is None else max(0.0, end - self._monotonic())
            thread.join(left)
        return not self.running()
