"""An external clock, as the cost model (:mod:`.estimate`) takes it.

The clock calls GitHub's API at each of its times (:func:`.clock.calls`), to the second;
a share of the calls start no tick; the tick runs a runner's start-up after the call.
A clock that confirms its calls (``serve --clock-only``) makes a lost one again."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..config.models import Schedule
from . import clock
from .clock import CONFIRM_TRIES


@dataclass(frozen=True)
class ClockModel:
    """An external clock (a model): it calls GitHub's API at each of its times, to the
    second, and the tick runs a runner's start-up later. GitHub publishes no start-up
    figures; its "Larger runners reference" says runners for labels such as
    ``ubuntu-latest`` are always "warm", so most of the start-up is the job's own
    set-up (checkout, Python, install)."""

    startup_seconds: tuple[float, float] = (20.0, 60.0)
    """From the call to the tick running, uniform in this range. GitHub bills a job from
    the runner taking it, not the wait before: the job is billed its set-up
    (:attr:`Billing.setup_seconds`, as a job GitHub's cron starts) or the whole start-up
    when that is shorter."""
    failure_rate: float = 0.01
    """Calls that never start a tick (the clock's host down, a refused request, a
    dispatch GitHub accepted and never ran)."""
    confirms: bool = False
    """``serve --clock-only``: a call that started no tick is made again
    ``confirm_after_seconds`` later (it reads the state branch), up to three times."""
    confirm_after_seconds: float = clock.CONFIRM_AFTER.total_seconds()
    on_runner: bool = True
    """False: the tick runs on the clock's own machine (``serve --executor github``, not
    ``--clock-only``), and costs no runner-minutes."""


def clock_arrivals(schedules: list[Schedule], model: ClockModel, start: datetime,
                   end: datetime, rng: random.Random) -> list[tuple[datetime, int, float]]:
    """The clock's calls that start a tick: (call, group 1, the runner's start-up)."""
    low, high = model.startup_seconds
    tries = 1 + (CONFIRM_TRIES if model.confirms else 0)
    again = timedelta(seconds=model.confirm_after_seconds)
    out = []
    for at in clock.calls(schedules, start, end):
        for n in range(tries):
            if rng.random() >= model.failure_rate:
                out.append((at + n * again, 1, rng.uniform(low, high)))
                break
    return out
