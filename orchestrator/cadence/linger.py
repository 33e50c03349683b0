"""``tick --linger``: tick, then wait for the next due moment and tick again.

GitHub starts scheduled runs minutes late (and drops some), so a tick that ran
shortly before a slot stays on its runner and ticks at the slot itself. It keeps
going while the next due moment worth waiting for (``Wake.linger_target``: a daily
slot is, an hourly one or a run's deadline is not) falls within ``window`` of the
tick that just ran,
and never past ``max_total`` after it started: the job's runner minutes are bounded
whatever the schedules say.

:meth:`Linger.stop` (the command's SIGTERM and SIGINT handlers call it) ends the
wait at once; a tick already running finishes first, as under ``serve``. This is
the shell: it reads the clock and sleeps; the due moments come from
:mod:`orchestrator.cadence.wake`, which does neither.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from .wake import Wake

TickFn = Callable[[datetime], Wake | None]
"""Runs one tick at the given instant; returns the next due moment after it."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Linger:
    """The loop of one lingering tick job."""

    def __init__(self, window: timedelta, max_total: timedelta, *,
                 clock: Callable[[], datetime] = _utc_now,
                 log: Callable[[str], None] = print) -> None:
        self.window = window
        self.max_total = max_total
        self.ticks = 0
        self.stop_reason: str | None = None
        self._clock = clock
        self._log = log
        self._stop = threading.Event()
        self._last: Wake | None = None

    def stop(self, reason: str = "stop requested") -> None:
        """End the wait; safe from a signal handler (it only sets a flag)."""
        self.stop_reason = reason
        self._stop.set()

    def _tick(self, tick: TickFn) -> Wake | None:
        self.ticks += 1
        self._last = tick(self._clock())
        return self._last

    def run(self, tick: TickFn) -> int:
        """Tick now, then at each due moment inside the window; return the ticks run."""
        start = self._clock()
        end = start + self.max_total
        wake = _target(self._tick(tick))
        while not self._stop.is_set():
            now = self._clock()
            if wake is None:
                self._log("linger: nothing will fall due; done" if self._last is None else
                          f"linger: next due {self._last.describe(now)}: not worth a "
                          "waiting runner, nor anything after it; done")
                break
            if wake.at - now > self.window:
                self._log(f"linger: next due {wake.describe(now)}: beyond the "
                          f"{_minutes(self.window)} window; done")
                break
            if wake.at > end:
                self._log(f"linger: next due {wake.describe(now)}: past --max-linger "
                          f"({_minutes(self.max_total)} after the first tick); done")
                break
            self._log(f"linger: waiting for {wake.describe(now)}")
            # Wait in slices of the remaining time: a timer may wake a little early.
            while not self._stop.is_set():
                left = (wake.at - self._clock()).total_seconds()
                if left <= 0:
                    break
                self._stop.wait(left)
            if self._stop.is_set():
                break
            wake = _target(self._tick(tick))
        if self._stop.is_set():
            self._log(f"linger: {self.stop_reason}: stopping after {self.ticks} tick(s)")
        return self.ticks


def _target(wake: Wake | None) -> Wake | None:
    """What to wait for: a frequent schedule's slot, a timeout or a deadline is not
    worth a waiting runner (:mod:`orchestrator.cadence.wake` says which), a later moment may be."""
    return wake.linger_target if wake is not None else None


def _minutes(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 60:g} min"
