"""What a month of this repository costs on GitHub Actions, on a virtual clock.

One model, shared by ``orchestrator estimate`` and ``bench/cost.py`` /
``bench/lateness.py``, so the command and the benchmarks agree by construction.
Nothing waits: the month is simulated from the tick's cron, GitHub's cron lateness
(a profile of :mod:`.profiles`, seeded), and the rules the tick follows:

- a tick job starts when GitHub starts its scheduled run (late, or never: dropped);
  runs of ``tick.yml`` share one concurrency group, so one runs, at most one waits
  and a newer one replaces the waiting one (the replaced one costs nothing);
- the job sets up (checkout, Python, install), ticks, and lingers as
  ``tick --linger`` does: while the next slot worth waiting for
  (:func:`~orchestrator.cadence.wake.lingers_before`, from ``orchestrator.json``'s cadence)
  falls within ``--linger`` minutes of the tick that just ran and before
  ``--max-linger`` after the first one; a job that ticks and finds nothing to do
  (one queued behind a lingering tick, a lead tick arriving after its slot) is
  billed its minute like any other;
- a lingering job that ends cancels the scheduled job waiting behind it when that
  job would find nothing (:mod:`.pending`, ``cadence.cancel_idle_pending``): created
  before the last tick, no slot due within :data:`~.pending.GRACE` and none worth
  waiting for before the next cron tick or within the linger window. It never
  started, so it costs nothing;
- a tick fires a schedule's slots that fell due since the last one: under
  ``catchup: latest`` only the newest inside the catch-up window (the others are
  missed); dispatch is the tick's end. Lateness is slot to dispatch (for GitHub's
  own ``schedule:``: slot to the run's start), i.e. until the work is handed to
  GitHub's runners, which both then wait for alike;
- each fired run costs its track legs (whole minutes per job, setup included in the
  given durations) and one fan-in job (none under ``fan_in: next_tick``, whose batch a
  later tick records); jobs are billed by the started minute.

Under an external clock (:class:`ClockModel`, ``"mode": "external"``) a second kind
of tick job starts at each call :mod:`.clock` lists: the clock is punctual to the
second, drops a share of its calls, and the tick runs a runner's start-up after the
call, once, without lingering. Those jobs have their own concurrency group (the
clock's ``workflow_dispatch`` or ``repository_dispatch``), beside the scheduled
safety ticks'; a slot whose call was lost waits for the next tick of either.

Not modelled: retries, timeouts and deadlines (they add ticks only when something
fails), and runs observed by later ticks (fan-in jobs settle them at once).
"""

from __future__ import annotations

import bisect
import math
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..config.models import CatchupPolicy, Schedule
from ..config.policies import FanIn
from ..config.preview import GITHUB_MIN_INTERVAL
from ..config.repository import Cadence
from .clockmodel import ClockModel, clock_arrivals
from .derive import schedule_slots, scheduled
from .pending import GRACE
from .profiles import CronDelay, CronProfile, CronVisits, started
from .wake import lingering_slots

MONTH_DAYS = 30
FREE_MINUTES = 2000
"""GitHub Free: runner minutes a month for private repositories (public ones are free)."""
API_PER_HOUR = 1000
"""GITHUB_TOKEN: REST API requests an hour per repository."""
PUSHES_PER_MINUTE = 6
"""GitHub asks for at most about 6 pushes a minute per repository."""


@dataclass(frozen=True)
class Billing:
    """How long jobs take, and what each costs in pushes and API requests."""

    setup_seconds: float = 40.0
    """Checkout, setup-python and install before ``orchestrator`` runs."""
    tick_seconds: float = 10.0
    """One tick: fetch, plan, commit, dispatch."""
    fan_in_seconds: float = 50.0
    watchdog_seconds: float = 50.0
    heartbeat_every: timedelta = timedelta(minutes=60)


@dataclass(frozen=True)
class Setup:
    """The repository's tick and watchdog, as the workflows configure them."""

    tick_cron: list[str]
    linger_minutes: float = 0.0
    max_linger_minutes: float = 60.0
    watchdog_cron: list[str] = field(default_factory=list)
    cadence: Cadence = field(default_factory=Cadence)
    """``orchestrator.json``'s cadence: which slots a lingering tick waits for."""
    clock: ClockModel | None = None
    """An external clock calling at the slots (``"mode": "external"``), or none."""


@dataclass
class Figures:
    """A month (``MONTH_DAYS``) of one way of running the schedules."""

    runner_minutes: dict[str, float] = field(default_factory=dict)
    pushes: float = 0.0
    api_requests: float = 0.0
    peak_api_per_hour: int = 0
    peak_pushes_per_minute: int = 0
    lateness_seconds: list[float] = field(default_factory=list)
    slots: int = 0
    missed: int = 0
    tick_jobs: int = 0
    slots_by: Counter[str] = field(default_factory=Counter)
    """Settled slots (fired or missed) per schedule."""
    missed_by: Counter[str] = field(default_factory=Counter)
    tick_minutes_by: dict[str, float] = field(default_factory=dict)
    """Tick job minutes by kind (:data:`TICK_KINDS`): where the ticks' share goes."""

    @property
    def total_minutes(self) -> float:
        return sum(self.runner_minutes.values())

    def lateness(self, q: float) -> float | None:
        if not self.lateness_seconds:
            return None
        data = sorted(self.lateness_seconds)
        return data[min(len(data) - 1, int(q * len(data)))]

    def warnings(self, private: bool = True) -> list[str]:
        out = []
        if private and self.total_minutes > FREE_MINUTES:
            out.append(f"{self.total_minutes:,.0f} runner-minutes a month: more than the "
                       f"{FREE_MINUTES:,} GitHub Free gives a private repository")
        if self.peak_api_per_hour > API_PER_HOUR:
            out.append(f"up to {self.peak_api_per_hour} API requests in an hour: more than "
                       f"GITHUB_TOKEN's {API_PER_HOUR}")
        if self.peak_pushes_per_minute > PUSHES_PER_MINUTE:
            out.append(f"up to {self.peak_pushes_per_minute} pushes in a minute: more than "
                       f"the about {PUSHES_PER_MINUTE} GitHub asks for")
        for sid, slots in sorted(self.slots_by.items()):
            missed = self.missed_by[sid]
            if slots and missed * 2 > slots:
                out.append(f"{sid} misses {missed:,} of its {slots:,} slots in the simulated "
                           f"weeks ({100 * missed / slots:.0f}%): its slots come faster than "
                           "the ticks, and a tick fires only the newest under catchup: latest")
        return out

    def to_json(self) -> dict[str, Any]:
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 1)

        return {
            "runner_minutes": round(self.total_minutes),
            "runner_minutes_by_job": {k: round(v) for k, v in sorted(self.runner_minutes.items())},
            "pushes": round(self.pushes),
            "api_requests": round(self.api_requests),
            "peak_api_requests_per_hour": self.peak_api_per_hour,
            "peak_pushes_per_minute": self.peak_pushes_per_minute,
            "lateness_seconds": {"median": r(self.lateness(0.5)), "p95": r(self.lateness(0.95)),
                                 "max": r(max(self.lateness_seconds, default=None) or None)},
            "slots": self.slots,
            "missed": self.missed,
            "tick_jobs": self.tick_jobs,
            "warnings": self.warnings(),
        }


TICK_KINDS = ("clock, 1 min", "clock, 2 min or more", "scheduled, fired",
              "scheduled, found nothing")
"""Tick jobs by who started them (the clock; GitHub's cron) and their minutes or use."""


def billed(seconds: float) -> int:
    """GitHub bills each job by the started minute."""
    return max(1, math.ceil(seconds / 60 - 1e-9))


def _all_slots(schedules: Iterable[Schedule], start: datetime,
               end: datetime) -> list[tuple[datetime, str]]:
    found: list[tuple[datetime, str]] = []
    for schedule in schedules:
        if not schedule.spec.enabled:
            continue
        found += [(slot, schedule.id) for slot in schedule_slots(schedule, start, end)]
    return sorted(found)


def _waited_for(schedules: Iterable[Schedule], cadence: Cadence, start: datetime,
                end: datetime) -> list[datetime]:
    """The slots a lingering tick waits for, ascending."""
    found: set[datetime] = set()
    for schedule in schedules:
        if not schedule.spec.enabled:
            continue
        slots = schedule_slots(schedule, start, end)
        found.update(s for s, lingers in zip(slots, lingering_slots(schedule, slots, cadence),
                                             strict=True) if lingers)
    return sorted(found)


class _Month:
    """The tick jobs of one month, on a virtual clock."""

    def __init__(self, schedules: list[Schedule], setup: Setup, track_minutes: float,
                 billing: Billing, figures: Figures) -> None:
        self.specs = {s.id: s.spec for s in schedules}
        self.setup = setup
        self.track_minutes = track_minutes
        self.b = billing
        self.f = figures
        self.settled = 0
        """Slots before this index were fired or missed."""
        self.slots: list[tuple[datetime, str]] = []
        self.times: list[datetime] = []
        self.waited: list[datetime] = []
        """The slots worth waiting for (a subset of ``times``)."""
        self.cron_ticks: list[datetime] = []
        """When tick.yml's cron fires (the next one bounds what a held job would do)."""
        self.last_tick: datetime | None = None
        """The last tick of the job :meth:`job` ran last."""
        self.last_commit: datetime | None = None
        self.api: Counter[datetime] = Counter()
        self.push: Counter[datetime] = Counter()

    def tick(self, now: datetime) -> int:
        """Fire what fell due up to ``now``; dispatch lands at the tick's end. Returns
        how many slots it fired."""
        done = now + timedelta(seconds=self.b.tick_seconds)
        hi = bisect.bisect_right(self.times, now)
        due: dict[str, list[datetime]] = {}
        for slot, sid in self.slots[self.settled:hi]:  # the clock only moves forward
            due.setdefault(sid, []).append(slot)
        self.settled = max(self.settled, hi)
        fired = sum(self._fire(sid, slots, now, done) for sid, slots in due.items())
        if fired:
            self._push(done, 2)  # the mark, then the record of the dispatch
            self.last_commit = done
        elif self.last_commit is None or done - self.last_commit >= self.b.heartbeat_every:
            self._push(done, 1)  # the idle tick's heartbeat line
            self.last_commit = done
        return fired

    def _fire(self, sid: str, slots: list[datetime], now: datetime, done: datetime) -> int:
        """Fire what the catch-up policy keeps of one schedule's due ``slots``; how many."""
        spec = self.specs[sid]
        window = timedelta(minutes=spec.catchup_window_minutes)
        eligible = [s for s in slots if now - s <= window]
        fire = eligible if spec.catchup is CatchupPolicy.ALL else eligible[-1:]
        self.f.missed += len(slots) - len(fire)
        self.f.slots_by[sid] += len(slots)
        self.f.missed_by[sid] += len(slots) - len(fire)
        for slot in fire:
            self.f.lateness_seconds.append((done - slot).total_seconds())
            self._run(sid, done)
        return len(fire)

    def _run(self, sid: str, dispatched: datetime) -> None:
        legs = len(self.specs[sid].run_tracks)
        minutes = self.f.runner_minutes
        minutes["tracks"] = minutes.get("tracks", 0) + legs * billed(self.track_minutes * 60)
        end = dispatched + timedelta(minutes=self.track_minutes)
        self._api(dispatched, 1)  # the workflow_dispatch of the batch
        # the fan-in job, or with `fan_in: next_tick` a later tick, lists and downloads
        # the legs' artifacts and records the batch (counted at the legs' end)
        self._api(end, 1 + legs)
        self._push(end, 1)
        if self.specs[sid].fan_in is FanIn.JOB:
            minutes["fan-in"] = minutes.get("fan-in", 0) + billed(self.b.fan_in_seconds)

    def idle(self, created: datetime, last_tick: datetime, now: datetime) -> bool:
        """Whether a lingering job whose last tick ran at ``last_tick`` and that ends at
        ``now`` cancels the scheduled job created at ``created`` and waiting behind it:
        :func:`~.pending.keeps` on the slots, as the tick decides it."""
        if not (self.setup.linger_minutes and self.setup.cadence.cancel_idle_pending) \
                or created >= last_tick:
            return False
        i = bisect.bisect_right(self.cron_ticks, now)
        if i == len(self.cron_ticks):
            return False  # no next scheduled tick known: the tick does not cancel
        j = bisect.bisect_right(self.times, last_tick)
        if j < len(self.times) and self.times[j] <= now + GRACE:
            return False
        k = bisect.bisect_right(self.waited, last_tick)
        horizon = max(self.cron_ticks[i],
                      now + timedelta(minutes=self.setup.linger_minutes) + GRACE)
        return k == len(self.waited) or self.waited[k] > horizon

    def _api(self, at: datetime, n: int) -> None:
        self.f.api_requests += n
        self.api[at.replace(minute=0, second=0, microsecond=0)] += n

    def _push(self, at: datetime, n: int) -> None:
        self.f.pushes += n
        self.push[at.replace(second=0, microsecond=0)] += n

    def job(self, begin: datetime, startup: float | None = None) -> datetime:
        """One tick job from its start; returns when it ends (and bills it). With a
        ``startup`` (seconds), a job the clock started: it ticks once, after it."""
        first = now = begin + timedelta(seconds=self.b.setup_seconds if startup is None
                                        else startup)
        if startup is not None:  # the runner's wait before the set-up is not billed
            begin = max(begin, first - timedelta(seconds=self.b.setup_seconds))
        linger = timedelta(minutes=self.setup.linger_minutes if startup is None else 0)
        ceiling = first + timedelta(minutes=self.setup.max_linger_minutes)
        fired = 0
        while True:
            fired += self.tick(now)
            self.last_tick = now
            end = now + timedelta(seconds=self.b.tick_seconds)
            upcoming = self._lingers_for(now, end, linger, ceiling)
            if upcoming is None:
                break
            now = max(upcoming, end)
        if startup is not None and self.setup.clock is not None \
                and not self.setup.clock.on_runner:
            return end  # a tick on the clock's own machine: no job, no runner-minutes
        self.f.tick_jobs += 1
        cost = billed((end - begin).total_seconds())
        minutes = self.f.runner_minutes
        minutes["ticks"] = minutes.get("ticks", 0) + cost
        kind = _tick_kind(startup is not None, cost, fired)
        self.f.tick_minutes_by[kind] = self.f.tick_minutes_by.get(kind, 0) + cost
        return end

    def _lingers_for(self, now: datetime, end: datetime, linger: timedelta,
                     ceiling: datetime) -> datetime | None:
        """The next slot worth waiting for after ``now``, if the job lingers for it."""
        i = bisect.bisect_right(self.waited, now)
        upcoming = self.waited[i] if i < len(self.waited) else None
        if not linger or upcoming is None or upcoming - end > linger or upcoming > ceiling:
            return None
        return upcoming


def _tick_kind(by_clock: bool, cost: int, fired: int) -> str:
    return TICK_KINDS[(0 if cost == 1 else 1) if by_clock else (2 if fired else 3)]


def simulate(schedules: list[Schedule], setup: Setup, start: datetime, *, days: int = 28,
             track_minutes: float = 1.0, delay: CronProfile | None = None,
             billing: Billing | None = None, seed: int = 0) -> Figures:
    """A month of the orchestrator on ``setup``, scaled from ``days`` simulated days."""
    delay = delay or CronDelay()
    billing = billing or Billing()
    rng = random.Random(seed)
    end = start + timedelta(days=days)
    figures = Figures()
    month = _Month(schedules, setup, track_minutes, billing, figures)
    month.slots = _all_slots(schedules, start, end)
    month.times = [s for s, _ in month.slots]
    month.waited = _waited_for(schedules, setup.cadence, start, end)
    figures.slots = len(month.slots)
    # past the end too: the job of the last day weighs the next cron tick
    month.cron_ticks = scheduled(setup.tick_cron, start, end + timedelta(days=2))
    arrivals = _cron_arrivals(month.cron_ticks, end, delay, rng)
    if setup.clock is not None:
        arrivals += clock_arrivals(schedules, setup.clock, start, end, rng)
    _run_groups(month, sorted(arrivals, key=lambda a: (a[0], a[1])))
    # slots after the last tick are neither fired nor missed yet: leave them out
    fired = len(figures.lateness_seconds)
    figures.slots = fired + figures.missed
    for _ in started(delay, scheduled(setup.watchdog_cron, start, end), rng):
        figures.runner_minutes["watchdog"] = (figures.runner_minutes.get("watchdog", 0)
                                              + billed(billing.watchdog_seconds))
    return _per_month(figures, days, month.api, month.push)


def _cron_arrivals(ticks: list[datetime], end: datetime, delay: CronProfile,
                   rng: random.Random) -> list[tuple[datetime, int, float | None]]:
    """The cron ticks up to ``end`` that GitHub starts: (start, group 0, no start-up)."""
    return [(begin, 0, None) for _, begin in started(delay, [t for t in ticks if t <= end],
                                                     rng)]


def _run_groups(month: _Month, arrivals: list[tuple[datetime, int, float | None]]) -> None:
    """Tick jobs in their concurrency groups (0: GitHub's schedule, 1: the clock's
    calls): one runs, at most one waits and a newer one replaces the waiting one, which
    then never starts; a lingering scheduled job that ends cancels the waiting one when
    it would find nothing (:meth:`_Month.idle`). ``arrivals``: (time, group, start-up
    or None), in time order."""
    running: dict[int, datetime] = {}
    last: dict[int, datetime | None] = {}
    waiting: dict[int, tuple[datetime, float | None]] = {}

    def run(group: int, begin: datetime, startup: float | None) -> None:
        running[group] = month.job(begin, startup)
        last[group] = month.last_tick if startup is None else None

    def start_waiting(until: datetime | None) -> None:
        # the waiting jobs whose group freed up by ``until`` start, earliest first
        while True:
            ready = _freed(running, waiting, until)
            if not ready:
                return
            begin, group = ready[0]
            created, startup = waiting.pop(group)
            ticked = last.get(group)
            if startup is None and ticked is not None and month.idle(created, ticked, begin):
                continue  # cancelled as the lingering job ended: never started, not billed
            run(group, begin, startup)

    for at, group, startup in arrivals:
        start_waiting(at)
        if group not in running or at >= running[group]:
            run(group, at, startup)
        else:
            waiting[group] = (at, startup)
    start_waiting(None)


def _freed(running: dict[int, datetime], waiting: Iterable[int],
           until: datetime | None) -> list[tuple[datetime, int]]:
    """(end, group) of the ``waiting`` groups free by ``until`` (``None``: ever), earliest first."""
    return sorted((running[g], g) for g in waiting if until is None or running[g] <= until)


def simulate_github_schedule(schedules: list[Schedule], start: datetime, *, days: int = 28,
                             track_minutes: float = 1.0, delay: CronProfile | None = None,
                             seed: int = 0) -> Figures:
    """The same tracks on GitHub's own ``schedule:`` trigger: one workflow per schedule,
    one job per track, no state, no fan-in."""
    delay = delay or CronDelay()
    rng = random.Random(seed)
    figures = Figures()
    specs = {s.id: s.spec for s in schedules}
    last: dict[str, datetime] = {}
    visited = _visited(schedules, start, days, delay, rng)
    for slot, sid in _all_slots(schedules, start, start + timedelta(days=days)):
        figures.slots += 1
        # GitHub runs a scheduled workflow at most every 5 minutes (GitHub's docs,
        # *Events that trigger workflows*, schedule): `* * * * *` is not run each minute
        previous = last.get(sid)
        if previous is not None and slot - previous < GITHUB_MIN_INTERVAL:
            figures.missed += 1
            continue
        last[sid] = slot
        late = visited.get((sid, slot)) if isinstance(delay, CronVisits) \
            else delay.sample(rng, slot)
        if late is None:
            figures.missed += 1
            continue
        figures.lateness_seconds.append(late.total_seconds())
        legs = len(specs[sid].run_tracks)  # the consolidate step is a leg too
        figures.runner_minutes["tracks"] = (figures.runner_minutes.get("tracks", 0)
                                            + legs * billed(track_minutes * 60))
    return _per_month(figures, days, Counter(), Counter())


def _visited(schedules: list[Schedule], start: datetime, days: int, delay: CronProfile,
             rng: random.Random) -> dict[tuple[str, datetime], timedelta]:
    """Under :class:`CronVisits`, each schedule's workflow on its own: (id, slot) ->
    lateness of the slots it runs (none for another profile)."""
    if not isinstance(delay, CronVisits):
        return {}
    found = {}
    for schedule in schedules:
        slots = _all_slots([schedule], start, start + timedelta(days=days))
        for slot, begin in delay.visits([at for at, _ in slots], rng):
            found[(schedule.id, slot)] = begin - slot
    return found


def _per_month(figures: Figures, days: int, api: Counter[datetime],
               push: Counter[datetime]) -> Figures:
    scale = MONTH_DAYS / days
    figures.runner_minutes = {k: v * scale for k, v in figures.runner_minutes.items()}
    figures.tick_minutes_by = {k: v * scale for k, v in figures.tick_minutes_by.items()}
    figures.pushes *= scale
    figures.api_requests *= scale
    figures.peak_api_per_hour = max(api.values(), default=0)
    figures.peak_pushes_per_minute = max(push.values(), default=0)
    return figures
