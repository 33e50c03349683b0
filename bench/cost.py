"""A month of GitHub Actions billing: the orchestrator against GitHub's own schedule.

For three cases (one daily schedule of 4 tracks; ten schedules, five hourly and five
daily; one schedule every 5 minutes), a month of runner-minutes (tick jobs with
their lingering, fan-in jobs, track legs, the watchdog), pushes and API requests,
and slot-to-dispatch lateness, for:

- the orchestrator as shipped: the cadence ``cron-sync`` derives (lead ticks and a
  lingering tick for slots with no other slot of their schedule in the 12 hours
  before, one tick just after any other slot, a safety tick every 6 hours where those
  leave a longer gap) and tick.yml's ``--linger 20 --max-linger 45``;
- the same with a lighter tick job (15 s of set-up instead of 40: cache, no checkout);
- ``orchestrator.json`` variants: two lead ticks and a daily safety tick; lingering
  before every slot (the first version of the derived cadence); the cheapest
  (``lead_minutes: [1]``, ``safety_every_hours: 24``);
- the fixed quarter-hour tick with the watchdog cron-sync gives it, and as it was
  (watchdog twice an hour);
- every schedule with ``fan_in: next_tick`` (no fan-in jobs: a later tick records
  each batch), with the cheapest derived cadence and with a fixed tick twice an hour;
- an external clock (``"mode": "external"``): a clock outside GitHub calls tick.yml at
  each slot, to the second; the tick runs 20 to 60 s later, once; 1 % of the calls are
  lost and wait for the safety tick; with the default 6-hour safety tick, a daily one,
  and a daily one with ``fan_in: next_tick``;
- a machine of one's own that ticks itself (``serve --executor github``, not
  ``--clock-only``) with ``fan_in: next_tick``: the tracks still run on GitHub;
- the same tracks on GitHub's own ``schedule:`` (one workflow per schedule, a job
  per track): what a user would pick instead.

Then the bounds the delay model puts on the targets (:func:`punctual_bound`).

Tracks take 1 minute (a job, setup included). The model and its parameters (GitHub's
cron delays and drops, setup and tick durations) are ``orchestrator/estimate.py``,
which ``orchestrator estimate`` runs too, with the same seed, on a virtual clock.
Lateness is pooled over ``--seeds`` four-week runs; costs are their mean, per 30 days.

    python bench/cost.py [--seeds 10] [--markdown]
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import NormalDist
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench/lateness.py

from lateness import late, pooled, schedule

from orchestrator.cadence.derive import derive
from orchestrator.cadence.estimate import (
    TICK_KINDS,
    Billing,
    ClockModel,
    Figures,
    Setup,
    billed,
    simulate,
    simulate_github_schedule,
)
from orchestrator.cadence.profiles import PROFILES, CronDelay, CronProfile, CronVisits
from orchestrator.config.models import Schedule
from orchestrator.config.policies import FanIn
from orchestrator.config.repository import RepoConfig

START = datetime(2026, 10, 5, tzinfo=UTC)
DAYS = 28
TICK_LINGER = (20.0, 45.0)
"""tick.yml's --linger and --max-linger."""
OLD = Setup(["7,22,37,52 * * * *"], 0, 0, ["29,59 * * * *"])


CASES: dict[str, list[Schedule]] = {
    "one daily schedule, 4 tracks": [schedule("daily", "0 7 * * *", "America/New_York", 4)],
    "ten schedules, 5 hourly + 5 daily": (
        [schedule(f"hourly{i}", f"{7 + 11 * i} * * * *", tracks=2) for i in range(5)]
        + [schedule(f"daily{i}", f"30 {6 + 2 * i} * * *", "Europe/London", 4)
           for i in range(5)]),
    "every 5 minutes, 1 track": [schedule("five", "*/5 * * * *")],
}


def config(**cadence: Any) -> RepoConfig:
    return RepoConfig.model_validate({"cadence": cadence})


TWO_LEADS = config(lead_minutes=[15, 10], safety_every_hours=24)
EVERY_SLOT = config(linger_min_interval_hours=0)
CHEAP = config(lead_minutes=[1], safety_every_hours=24)
"""orchestrator.json for the cheapest derived cadence: one tick 1 to 5 minutes before
a daily slot (it lingers at most that long), no separate safety tick (the daily ticks
are one)."""
FIXED = config(mode="fixed")
HALF_HOURLY = config(mode="fixed", fixed_cron=["25,55 * * * *"])
"""Two ticks an hour: each hourly slot of the mixed case (minutes 7 to 51) has one
within 30 minutes after it, well inside its 60-minute catch-up window."""
LIGHT = Billing(setup_seconds=15)
"""A tick job that restores a cached environment and checks out nothing."""
HEAVY = Billing(setup_seconds=55)
"""A tick job whose set-up takes 55 s instead of 40: with the tick, past its first
billed minute. How much the clock's figures lean on the set-up."""
EXTERNAL = config(mode="external")
EXTERNAL_DAILY = config(mode="external", safety_every_hours=24)
CONFIRMING = config(mode="external", clock_confirms=True)
"""``serve --clock-only`` as the clock: it calls again for a slot the state branch does
not show fired 5 minutes after its call, so tick.yml keeps a weekly backstop tick and
watchdog.yml a weekly check (its heartbeat consumer watches the state branch between)."""
OWN_MACHINE = Setup([], cadence=EXTERNAL.cadence,
                    clock=ClockModel(startup_seconds=(0.0, 0.0), on_runner=False))
"""``serve --executor github`` on a machine of one's own: it ticks at each slot's second
(the loop wakes for it) and no runner waits; no safety tick, no watchdog workflow (its
heartbeat consumer watches the state branch)."""


def without_fan_in_job(s: Schedule) -> Schedule:
    return Schedule(id=s.id, spec=s.spec.model_copy(update={"fan_in": FanIn.NEXT_TICK}))


def derived_setup(schedules: list[Schedule], linger: tuple[float, float],
                  config: RepoConfig | None = None) -> Setup:
    """What cron-sync writes for these schedules, with tick.yml's linger."""
    config = config or RepoConfig()
    derived = derive(schedules, config, START)
    outside = ClockModel(confirms=config.cadence.clock_confirms) \
        if config.cadence.mode == "external" else None
    return Setup(derived.tick_cron, linger[0], linger[1], [derived.watchdog_cron],
                 config.cadence, outside)


def pooled_parts(runs: list[Figures]) -> Figures:
    """:func:`pooled`, with the tick jobs' minutes by kind."""
    total = pooled(runs)
    for f in runs:
        for k, v in f.tick_minutes_by.items():
            total.tick_minutes_by[k] = total.tick_minutes_by.get(k, 0) + v / len(runs)
    return total


PARTS = ("tracks", "fan-in", *TICK_KINDS, "watchdog")


def parts_row(case: str, how: str, f: Figures) -> list[str]:
    """Where one way's runner-minutes go: legs, fan-in jobs, tick jobs by kind, watchdog."""
    spent = {**f.runner_minutes, **f.tick_minutes_by}
    return [case, how, *(f"{spent.get(k, 0):,.0f}" for k in PARTS), f"{f.total_minutes:,.0f}"]


def orchestrator_month(schedules: list[Schedule], setup: Setup, start: datetime,
                       seed: int = 0, days: int = DAYS, billing: Billing | None = None,
                       delay: CronProfile | None = None) -> Figures:
    """The figures ``orchestrator estimate`` prints for the same inputs."""
    return simulate(schedules, setup, start, days=days, seed=seed, billing=billing,
                    delay=delay)


ASSUMED, MEASURED = PROFILES


def profile_lines(seeds: int) -> str:
    """What the measured-2026 profile reproduces of the reports it is fitted to: the
    median lateness of a daily line over 8 weeks, and the runs of a ``*/10`` line
    within the 23 hours of 138 slots, over ``seeds`` workflows (10 at least)."""
    delay = PROFILES[MEASURED]
    assert isinstance(delay, CronVisits)
    medians, fired = [], []
    for seed in range(max(seeds, 10)):
        daily = simulate_github_schedule([schedule("d", "0 7 * * *")], START, days=56,
                                         delay=delay, seed=seed)
        medians.append(sorted(daily.lateness_seconds)[len(daily.lateness_seconds) // 2] / 60)
        times = [START + timedelta(minutes=10 * i) for i in range(138)]
        runs = delay.visits(times, random.Random(seed))
        fired.append(sum(1 for _, begin in runs if begin <= times[-1]))
    medians.sort()
    return (f"Profile {MEASURED}: a daily line's median lateness over 8 weeks is "
            f"{medians[len(medians) // 2]:.0f} minutes ({medians[0]:.0f} to {medians[-1]:.0f} "
            f"over {len(medians)} workflows); a */10 line runs {sum(fired) / len(fired):.1f} "
            f"times in its 138 slots on average ({min(fired)} to {max(fired)}).")


# --------------------------------------------------------------------------- the bounds


@dataclass(frozen=True)
class Bound:
    leads: tuple[int, ...]
    """Minutes before the slot of the ticks of the cheapest lead set found."""
    covered: float
    """Probability that one of them runs at the slot (fired within a minute)."""
    wait_minutes: float
    """Expected minutes a tick job waits on its runner for the slot."""

    @property
    def per_fire(self) -> float:
        """Runner-minutes per fire at the least: the wait plus one job's set-up and tick."""
        billing = Billing()
        return self.wait_minutes + (billing.setup_seconds + billing.tick_seconds) / 60


def _arrived(delay: CronDelay) -> Any:
    """P(a scheduled tick, not at minute 0, has started within x minutes)."""
    sigma = math.log(delay.p95_minutes / delay.median_minutes) / 1.6449
    normal = NormalDist()

    def cdf(x: float) -> float:
        if x <= 0:
            return 0.0
        return (1 - delay.drop_rate) * normal.cdf(math.log(x / delay.median_minutes) / sigma)

    return cdf


def lead_set(leads: tuple[int, ...], delay: CronDelay, step: float = 0.1) -> Bound:
    """Coverage and expected wait of ticks ``leads`` minutes before a slot, each late by
    the delay model independently: the first to start waits until the slot; a slot is
    fired within a minute when one started by 10 s after it (a tick takes 10 s).
    E[wait] is the integral over w of P(the first started more than w before the slot)."""
    cdf = _arrived(delay)
    covered = 1 - math.prod(1 - cdf(lead + 10 / 60) for lead in leads)
    wait, w = 0.0, step / 2
    while w < max(leads):
        wait += (1 - math.prod(1 - cdf(lead - w) for lead in leads)) * step
        w += step
    return Bound(leads, covered, wait)


def punctual_bound(delay: CronDelay, target: float = 0.95, most: int = 4) -> Bound:
    """The cheapest way, under ``delay``, to have a tick running at a slot with
    probability ``target``: over every set of up to ``most`` lead ticks 5 minutes
    apart (GitHub's shortest cron interval; cron-sync's grid) at any offset, up to an
    hour before the slot, the least expected wait among those that reach ``target``.
    It leaves out the other costs (ticks that find nothing, the billed minute's
    rounding), so no cadence under this model is cheaper."""
    best: Bound | None = None
    for offset in range(1, 6):
        grid = range(offset, 61, 5)
        for n in range(1, most + 1):
            for leads in itertools.combinations(grid, n):
                found = lead_set(tuple(sorted(leads, reverse=True)), delay, step=0.25)
                if found.covered >= target and (best is None or found.wait_minutes
                                                < best.wait_minutes):
                    best = found
    assert best is not None, "an hour of lead ticks reaches any target below 1 - drops^n"
    return lead_set(best.leads, delay)


def bound_lines(github: dict[str, Figures]) -> list[str]:
    """What the delay model allows, against the two targets, in words and figures."""
    delay = CronDelay()
    bound = punctual_bound(delay)
    daily = "one daily schedule, 4 tracks"
    fixed_daily = 30 * (4 + 1)  # four 1-minute legs and a fan-in job a day
    least = fixed_daily + 30 * bound.per_fire
    base = github[daily].total_minutes
    mixed = "ten schedules, 5 hourly + 5 daily"
    runs = 5 * 24 * 30 + 5 * 30
    legs = 5 * 24 * 30 * 2 + 5 * 30 * 4
    mixed_base = github[mixed].total_minutes
    budget = 2 * base - fixed_daily
    return [
        f"Bound 1 (daily, 95 % of slots within a minute): the cheapest lead ticks are "
        f"{', '.join(map(str, bound.leads))} minutes before the slot (P(one runs at the "
        f"slot) {bound.covered:.3f}); the first to start waits {bound.wait_minutes:.1f} "
        f"minutes on average, so a fire costs at least {bound.per_fire:.1f} tick minutes. "
        f"A month: {fixed_daily} (legs and fan-in) + 30 x {bound.per_fire:.1f} = "
        f"{least:.0f} runner-minutes, {least / base:.1f} x GitHub's {base:.0f}; the target "
        f"allows {2 * base:.0f}.",
        f"Bound 1' (daily, within 2 x): {2 * base:.0f} - {fixed_daily} (legs and fan-in) "
        f"leaves {budget:.0f} minutes a month, {budget / 30:.1f} a fire, for the ticks "
        f"and the watchdog; one tick job is a billed minute, so the wait gets at most "
        f"{budget / 30 - 1:.1f}: " + _coverage_within(delay, budget / 30 - 1) + ".",
        f"Bound 2 (mixed, within 1.5 x): {legs:,} leg minutes and {runs:,} fan-in jobs "
        f"alone are {legs + runs:,} runner-minutes, {(legs + runs) / mixed_base:.2f} x "
        f"GitHub's {mixed_base:,.0f}, before any tick; with a tick an hour (720, the "
        f"fewest that reach each hourly slot within its hour) and a watchdog every 2 "
        f"hours (360): {(legs + runs + 1080) / mixed_base:.2f} x. Without fan-in jobs "
        f"(`fan_in: next_tick`: a tick records each batch) the same is "
        f"{(legs + 1080) / mixed_base:.2f} x.",
        *external_bound_lines(github),
        grid_bound_line(github[daily].total_minutes),
    ]


def external_bound_lines(github: dict[str, Figures]) -> list[str]:
    """What an external clock cannot go below: every call starts a tick job, a billed
    minute at least, however punctual the clock."""
    daily = github["one daily schedule, 4 tracks"].total_minutes
    mixed = github["ten schedules, 5 hourly + 5 daily"].total_minutes
    legs, runs = 5 * 24 * 30 * 2 + 5 * 30 * 4, 5 * 24 * 30 + 5 * 30
    return [
        f"Bound 3 (external clock, daily, within 1.3 x): every fire is a tick job beside "
        f"the four legs, a billed minute at the least. The legs (120) and those ticks "
        f"(30) are 150 runner-minutes, {150 / daily:.2f} x GitHub's {daily:.0f}, with no "
        f"fan-in job, no safety tick and no watchdog; each of those adds 30 "
        f"({30 / daily:.2f} x).",
        f"Bound 3' (external clock, mixed, within 1.3 x): {legs:,} leg minutes and "
        f"{runs:,} tick jobs are {legs + runs:,}, {(legs + runs) / mixed:.2f} x GitHub's "
        f"{mixed:,.0f}, before any fan-in job. The slots are 11 minutes apart: one tick "
        f"cannot serve two of them within 90 s.",
        *claiming_legs_lines(daily, mixed),
    ]


def claiming_legs_lines(daily: float, mixed: float) -> list[str]:
    """The design with no tick job: the clock dispatches the legs, each leg claims its
    run by compare-and-swap before its command (so a call that came twice runs nothing
    twice) and records its outcome after it. The claim is a tick's work (fetch, plan,
    push) inside every leg, and GitHub bills each job by the started minute."""
    billing = Billing()
    leg = 60.0  # a 1-minute track, set-up included, as in every row above
    claimed = leg + billing.tick_seconds
    per_leg = billed(claimed)
    legs_daily, legs_mixed = 30 * 4, 5 * 24 * 30 * 2 + 5 * 30 * 4
    return [
        f"Bound 3'' (no tick job: legs that claim their run): a leg that claims before "
        f"its command runs {claimed:.0f} s and is billed {per_leg} minutes, so the daily "
        f"case's legs alone are {legs_daily * per_leg} runner-minutes, "
        f"{legs_daily * per_leg / daily:.2f} x GitHub's {daily:.0f}, and the mixed "
        f"case's {legs_mixed * per_leg:,}, {legs_mixed * per_leg / mixed:.2f} x. Only a "
        f"track that leaves more than {billing.tick_seconds:.0f} s of its last billed "
        f"minute free absorbs the claim; a 1-minute track does not. Below 1.3 x the "
        f"orchestrator's work for a fire must run off GitHub's runners: the own-machine "
        f"rows.",
    ]


def grid_bound(delay: CronDelay | None = None, target: float = 0.95) -> Bound:
    """:func:`punctual_bound` on cron-sync's grid (minutes 4, 9, ..., 59): a slot at
    minute 0 can have lead ticks 1, 6, 11, ... minutes before it, up to four of them."""
    delay = delay or CronDelay()
    best: Bound | None = None
    for n in (1, 2, 3, 4):
        for leads in itertools.combinations(range(1, 32, 5), n):
            found = lead_set(tuple(sorted(leads, reverse=True)), delay, step=0.25)
            if found.covered >= target and (best is None or found.wait_minutes
                                            < best.wait_minutes):
                best = found
    assert best is not None
    return lead_set(best.leads, delay)


def grid_bound_line(daily: float, delay: CronDelay | None = None) -> str:
    """The derived default's floor for the daily case on cron-sync's grid."""
    best = grid_bound(delay)
    floor = 150 + 30 * best.per_fire
    return (f"Bound 4 (the derived default, daily, on cron-sync's grid): a slot at minute 0 "
            f"can have lead ticks 1, 6, 11, ... minutes before it. The cheapest with P(one "
            f"runs at the slot) >= 0.95 are {', '.join(map(str, best.leads))} "
            f"({best.covered:.3f}): a wait of {best.wait_minutes:.1f} minutes, "
            f"{best.per_fire:.1f} a fire. A month: 150 (legs and fan-in) + 30 x "
            f"{best.per_fire:.1f} = {floor:.0f} runner-minutes, {floor / daily:.2f} x "
            f"GitHub's {daily:.0f}, before any safety tick, later lead tick or watchdog.")


def _coverage_within(delay: CronDelay, wait: float) -> str:
    """The best share of slots fired within a minute for an expected wait of ``wait``."""
    best = (0.0, (0,))
    for offset in range(1, 6):
        for n in (1, 2, 3):
            for leads in itertools.combinations(range(offset, 31, 5), n):
                found = lead_set(tuple(sorted(leads, reverse=True)), delay, step=0.25)
                if found.wait_minutes <= wait and found.covered > best[0]:
                    best = (found.covered, found.leads)
    return (f"at most {best[0]:.0%} of slots then fire within a minute (leads "
            f"{', '.join(map(str, best[1]))}); the others wait for GitHub's delay")


def ways_for(schedules: list[Schedule]) -> dict[str, tuple[list[Schedule], Setup,
                                                          Billing | None]]:
    """Each way of running ``schedules`` a row shows: (schedules, setup, billing)."""
    def plain(setup: Setup, billing: Billing | None = None) -> tuple[
            list[Schedule], Setup, Billing | None]:
        return schedules, setup, billing

    # `fan_in: next_tick` on every schedule: no fan-in jobs, a tick records batches
    cheap = [without_fan_in_job(s) for s in schedules]
    return {
        "derived (default)": plain(derived_setup(schedules, TICK_LINGER)),
        "derived, light tick job": plain(derived_setup(schedules, TICK_LINGER), LIGHT),
        "derived, leads [15, 10], safety 24 h": plain(
            derived_setup(schedules, TICK_LINGER, TWO_LEADS)),
        "derived, linger before every slot": plain(
            derived_setup(schedules, TICK_LINGER, EVERY_SLOT)),
        "derived cheapest": plain(derived_setup(schedules, TICK_LINGER, CHEAP)),
        "fixed :07/15": plain(derived_setup(schedules, (0.0, 0.0), FIXED)),
        "before: fixed :07/15, watchdog :29/:59": plain(OLD),
        "external clock": plain(derived_setup(schedules, TICK_LINGER, EXTERNAL)),
        "external clock, safety 24 h": plain(
            derived_setup(schedules, TICK_LINGER, EXTERNAL_DAILY)),
        "fan_in next_tick, derived cheapest": (
            cheap, derived_setup(cheap, TICK_LINGER, CHEAP), None),
        "fan_in next_tick, fixed :25/:55": (
            cheap, derived_setup(cheap, (0.0, 0.0), HALF_HOURLY), None),
        "fan_in next_tick, external clock, safety 24 h": (
            cheap, derived_setup(cheap, TICK_LINGER, EXTERNAL_DAILY), None),
        "fan_in next_tick, clock that confirms (serve --clock-only)": (
            cheap, derived_setup(cheap, TICK_LINGER, CONFIRMING), None),
        "fan_in next_tick, clock that confirms, set-up 55 s": (
            cheap, derived_setup(cheap, TICK_LINGER, CONFIRMING), HEAVY),
        "fan_in next_tick, own machine ticks (serve)": (cheap, OWN_MACHINE, None),
    }


def case_results(schedules: list[Schedule], seeds: int, delay: CronProfile
                 ) -> dict[str, Figures]:
    """Every way's month under ``delay``, pooled over ``seeds``, then GitHub's schedule."""
    results = {how: pooled_parts([orchestrator_month(listed, setup, START, s, billing=bill,
                                                     delay=delay) for s in range(seeds)])
               for how, (listed, setup, bill) in ways_for(schedules).items()}
    results["GitHub schedule:"] = pooled([simulate_github_schedule(
        schedules, START, days=DAYS, seed=s, delay=delay) for s in range(seeds)])
    return results


def figures_row(case: str, how: str, profile: str, f: Figures, base: float) -> list[str]:
    return [case, how, profile, f"{f.total_minutes:,.0f}", f"{f.total_minutes / base:.1f}",
            f"{f.runner_minutes.get('ticks', 0):,.0f}",
            f"{f.runner_minutes.get('watchdog', 0):,.0f}", f"{f.pushes:,.0f}",
            f"{f.api_requests:,.0f}", late(f.lateness(0.5)), late(f.lateness(0.95)),
            f"{f.missed} of {f.slots}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    head = ["case", "how", "profile", "runner-min/month", "x GitHub", "ticks", "watchdog",
            "pushes", "API requests", "p50 late", "p95 late", "missed"]
    rows: list[list[str]] = []
    parts: list[list[str]] = []
    baselines: dict[str, Figures] = {}
    for case, schedules in CASES.items():
        for profile, delay in PROFILES.items():
            results = case_results(schedules, args.seeds, delay)
            github = results["GitHub schedule:"]
            if profile == ASSUMED:
                baselines[case] = github
            rows += [figures_row(case, how, profile, f, github.total_minutes)
                     for how, f in results.items()]
            parts += [parts_row(case, f"{how} ({profile})", f)
                      for how, f in results.items() if "external" in how or "clock" in how]
    parts_head = ["case", "how", *PARTS, "total"]
    show = markdown_table if args.markdown else text_table
    show(head, rows)
    print()
    print("Where the external clock's runner-minutes go (tick jobs by kind):")
    print()
    show(parts_head, parts)
    print()
    print(profile_lines(args.seeds))
    print()
    print(("\n\n" if args.markdown else "\n").join(bound_lines(baselines)))


def markdown_table(head: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


def text_table(head: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))))


if __name__ == "__main__":
    main()
