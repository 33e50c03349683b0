"""Profiles of GitHub's cron lateness: how late (or whether) it starts a scheduled run.

The cost model (:mod:`.estimate`) draws from one of them; ``estimate --profile`` and
``cron-sync --profile`` name it.

- ``assumed`` (:class:`CronDelay`): minutes late, log-normal; GitHub publishes no figures.
- ``measured-2026`` (:class:`CronVisits`): hours late, fitted to public measurements of
  2026 (``bench/README.md`` cites them and says how).
- ``ledger`` (:class:`CronSamples`): this repository's own samples, from
  ``state/lateness.jsonl``; none with fewer than :data:`~.lateness.MIN_SAMPLES`.
- A profile is seeded by its caller's random generator: the same seed, the same month.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from .lateness import MIN_SAMPLES


@dataclass(frozen=True)
class CronDelay:
    """GitHub's delay and drop of scheduled runs (a model; GitHub publishes no figures).

    Delays are log-normal: median ``median_minutes``, 95th percentile
    ``p95_minutes``, a long tail as community reports describe. A run is dropped
    with ``drop_rate``. At minute 0 of an hour, GitHub's busiest, delays are
    ``top_of_hour_factor`` times longer and drops that many times likelier. No delay
    exceeds ``max_minutes`` (later than that, reports speak of runs that never came)."""

    median_minutes: float = 4.0
    p95_minutes: float = 32.0
    max_minutes: float = 180.0
    drop_rate: float = 0.03
    top_of_hour_factor: float = 2.0

    def sample(self, rng: random.Random, scheduled: datetime) -> timedelta | None:
        factor = self.top_of_hour_factor if scheduled.minute == 0 else 1.0
        if rng.random() < min(1.0, self.drop_rate * factor):
            return None
        sigma = math.log(self.p95_minutes / self.median_minutes) / 1.6449
        minutes = self.median_minutes * factor * math.exp(rng.gauss(0.0, sigma))
        return timedelta(minutes=min(minutes, self.max_minutes))


@dataclass(frozen=True)
class CronVisits:
    """GitHub's cron as public repositories measured it in 2026 (a model, cited in
    ``bench/README.md``): hours late, and a frequent line fires a few times a day.

    GitHub looks at each workflow's schedule once a visit, the visits about
    ``every_minutes`` apart (uniform within ``spread`` of it). A visit creates one run,
    for the newest cron time due since the visit before; the older ones never run. A
    daily line is then late by about half a visit's gap, and a ``*/10`` line runs
    once a visit."""

    every_minutes: float = 540.0
    spread: float = 0.5

    def visits(self, times: list[datetime], rng: random.Random
               ) -> list[tuple[datetime, datetime]]:
        """(cron time, start) of the runs a workflow with cron ``times`` (ascending) gets."""
        if not times:
            return []
        low, high = (self.every_minutes * (1 - self.spread),
                     self.every_minutes * (1 + self.spread))
        visit = times[0] + timedelta(minutes=rng.uniform(0, self.every_minutes))
        out: list[tuple[datetime, datetime]] = []
        i = 0
        while i < len(times):
            j = bisect.bisect_right(times, visit)
            if j > i:
                out.append((times[j - 1], visit))
                i = j
            visit += timedelta(minutes=rng.uniform(low, high))
        return out


@dataclass(frozen=True)
class CronSamples:
    """GitHub's cron as this repository's ledger measured it (``state/lateness.jsonl``):
    each run late by one of the measured delays, drawn at random, or dropped with the
    measured share."""

    late_seconds: tuple[float, ...]
    drop_rate: float

    def sample(self, rng: random.Random, scheduled: datetime) -> timedelta | None:
        if rng.random() < self.drop_rate:
            return None
        return timedelta(seconds=rng.choice(self.late_seconds))


CronProfile = CronDelay | CronVisits | CronSamples
PROFILES: dict[str, CronProfile] = {"assumed": CronDelay(), "measured-2026": CronVisits()}
"""The named lateness profiles: the model this tool assumed (GitHub publishes no
figures), and the one fitted to the 2026 public measurements."""
LEDGER = "ledger"
"""The profile name that reads this repository's own ledger (:func:`from_ledger`)."""


def from_ledger(late_seconds: list[float], dropped: int) -> CronSamples | None:
    """The ledger's samples as a profile; ``None`` with fewer than the
    :data:`~.lateness.MIN_SAMPLES` the ledger needs for a verdict."""
    if len(late_seconds) < MIN_SAMPLES:
        return None
    return CronSamples(tuple(sorted(late_seconds)), dropped / (dropped + len(late_seconds)))


def started(delay: CronProfile, times: list[datetime], rng: random.Random
            ) -> list[tuple[datetime, datetime]]:
    """(cron time, start) of the runs GitHub starts for one workflow's cron ``times``."""
    if isinstance(delay, CronVisits):
        return delay.visits(times, rng)
    out = []
    for at in times:
        late = delay.sample(rng, at)
        if late is not None:
            out.append((at, at + late))
    return out
