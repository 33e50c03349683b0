"""The cost model on a virtual clock: exact figures where the delay model is switched
off, GitHub's limits, and the delay model's documented shape."""

from __future__ import annotations

import json
import random
import statistics
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.cadence.estimate import (
    Billing,
    CronDelay,
    Setup,
    billed,
    simulate,
    simulate_github_schedule,
)
from orchestrator.cadence.profiles import PROFILES, CronVisits, from_ledger
from orchestrator.config.models import Schedule, ScheduleSpec
from orchestrator.config.repository import Cadence

START = datetime(2026, 12, 7, tzinfo=UTC)  # a Monday
ON_TIME = CronDelay(median_minutes=0.001, p95_minutes=0.002, drop_rate=0.0)


def sched(expr: str, tracks: int = 1, **fields: Any) -> Schedule:
    data = {"cron": expr, "tracks": [{"name": f"t{i}", "run": "true"} for i in range(tracks)],
            **fields}
    return Schedule(id="s", spec=ScheduleSpec.model_validate_json(json.dumps(data)))


def test_jobs_are_billed_by_the_started_minute() -> None:
    assert [billed(s) for s in (1, 59, 60, 61, 600)] == [1, 1, 1, 2, 10]


def test_a_lead_tick_lingers_until_the_slot_and_fires_it_at_once() -> None:
    """Daily 07:00 UTC, one tick at 06:45 arriving on time, linger 20."""
    daily = sched("0 7 * * *", tracks=4)
    figures = simulate([daily], Setup(["45 6 * * *"], 20, 45), START, days=30, delay=ON_TIME)
    # the tick starts at 06:45, sets up 40 s, ticks, waits until 07:00, ticks 10 s
    assert figures.runner_minutes == {"ticks": 30 * billed(15 * 60 + 10),
                                      "tracks": 30 * 4, "fan-in": 30}
    assert figures.lateness(0.95) == pytest.approx(Billing().tick_seconds, abs=1)
    assert (figures.slots, figures.missed, figures.tick_jobs) == (30, 0, 30)
    assert figures.pushes == 30 * (1 + 2 + 1)  # heartbeat at 06:45, mark + record, fan-in


def test_fan_in_next_tick_bills_no_fan_in_job_and_keeps_the_pushes_and_requests() -> None:
    setup = Setup(["45 6 * * *"], 20, 45)
    job = simulate([sched("0 7 * * *", tracks=4)], setup, START, days=30, delay=ON_TIME)
    tick = simulate([sched("0 7 * * *", tracks=4, fan_in="next_tick")], setup, START,
                    days=30, delay=ON_TIME)
    assert job.runner_minutes.pop("fan-in") == 30
    assert tick.runner_minutes == job.runner_minutes
    # the batch is still listed, downloaded and recorded: by a tick instead of a job
    assert (tick.pushes, tick.api_requests) == (job.pushes, job.api_requests)


def test_without_linger_the_slot_waits_for_the_next_tick() -> None:
    daily = sched("0 7 * * *", catchup_window_minutes=600)
    figures = simulate([daily], Setup(["45 6 * * *", "17 */6 * * *"], 0, 0), START, days=30,
                       delay=ON_TIME)
    # fired by the 12:17 safety tick: 5 h 17 min and a setup late
    assert figures.lateness(0.5) == pytest.approx((5 * 3600 + 17 * 60) + 40 + 10, abs=1)
    narrow = simulate([sched("0 7 * * *", catchup_window_minutes=60)],
                      Setup(["45 6 * * *", "17 */6 * * *"], 0, 0), START, days=30,
                      delay=ON_TIME)
    assert narrow.missed == 30 and narrow.lateness_seconds == []


def test_max_linger_caps_a_job_that_would_linger_forever() -> None:
    every5 = sched("*/5 * * * *")
    always = Cadence(linger_min_interval_hours=0)  # every slot is worth waiting for
    figures = simulate([every5], Setup(["4 * * * *"], 20, 45, cadence=always), START, days=1,
                       delay=ON_TIME)
    # each hourly job (from :04) ticks at :04:40, then at the slots up to 45 minutes
    # after that: the last at :45, done at :45:10; the next slot is past --max-linger
    assert figures.tick_jobs == 24
    assert figures.runner_minutes["ticks"] == 30 * 24 * billed(41 * 60 + 10)


def test_a_frequent_schedule_s_slot_is_not_waited_for_unless_orchestrator_json_says() -> None:
    hourly = sched("0 * * * *")
    # a tick 11 minutes before each slot: by default it ticks, finds nothing due and
    # ends (1 minute); the slot waits for the next tick, 49 minutes and a setup later
    figures = simulate([hourly], Setup(["49 * * * *"], 20, 45), START, days=1, delay=ON_TIME)
    assert figures.runner_minutes["ticks"] == 30 * 24
    assert figures.lateness(0.5) == pytest.approx(49 * 60 + 40 + 10, abs=1)
    # the schedule named in linger_schedules: each tick waits 11 minutes for its slot
    wait = Cadence(linger_schedules={"s": True})
    waited = simulate([hourly], Setup(["49 * * * *"], 20, 45, cadence=wait), START, days=1,
                      delay=ON_TIME)
    assert waited.runner_minutes["ticks"] == 30 * 24 * billed(11 * 60 + 10)
    assert waited.lateness(0.95) == pytest.approx(Billing().tick_seconds, abs=1)
    # and a daily slot is waited for by default, whatever the hourly one beside it
    daily = Schedule(id="d", spec=sched("0 7 * * *").spec)
    both = simulate([hourly, daily], Setup(["49 * * * *"], 20, 45), START, days=1,
                    delay=ON_TIME)
    assert both.runner_minutes["ticks"] == 30 * (23 + billed(11 * 60 + 10))


def test_ticks_queued_behind_a_lingering_one_wait_and_the_newest_replaces_the_older() -> None:
    daily = sched("0 7 * * *")
    # ticks at 06:40, 06:45 and 06:50: the first lingers until 07:00; the second waits,
    # the third replaces it; only the third runs, after the first, and finds nothing
    # (unless the first cancels it as it ends, the default)
    kept = Cadence(cancel_idle_pending=False)
    figures = simulate([daily], Setup(["40,45,50 6 * * *"], 25, 45, cadence=kept), START,
                       days=1, delay=ON_TIME)
    assert figures.tick_jobs == 2
    assert figures.runner_minutes["ticks"] == 30 * (billed(20 * 60 + 10) + 1)
    cancelled = simulate([daily], Setup(["40,45,50 6 * * *"], 25, 45), START, days=1,
                         delay=ON_TIME)
    assert cancelled.tick_jobs == 1
    assert cancelled.runner_minutes["ticks"] == 30 * billed(20 * 60 + 10)


def test_github_s_own_schedule_costs_the_tracks_only() -> None:
    daily = sched("0 7 * * *", tracks=4)
    figures = simulate_github_schedule([daily], START, days=30, delay=ON_TIME)
    assert figures.runner_minutes == {"tracks": 120}
    assert figures.pushes == figures.api_requests == 0


def test_the_delay_model_has_its_documented_median_p95_and_drop_rate() -> None:
    model = CronDelay()
    rng = random.Random(1)
    at = datetime(2026, 12, 7, 6, 45, tzinfo=UTC)
    samples = [model.sample(rng, at) for _ in range(20000)]
    minutes = sorted(s.total_seconds() / 60 for s in samples if s is not None)
    dropped = samples.count(None) / len(samples)
    assert 0.02 < dropped < 0.04
    assert 3.7 < statistics.median(minutes) < 4.3
    assert 28 < minutes[int(0.95 * len(minutes))] < 36
    assert max(minutes) <= 180
    top = [model.sample(rng, at.replace(minute=0)) for _ in range(20000)]
    assert 0.05 < top.count(None) / len(top) < 0.07
    late = sorted(s.total_seconds() / 60 for s in top if s is not None)
    assert 7 < statistics.median(late) < 9


def test_warnings_past_github_s_limits() -> None:
    every5 = sched("*/5 * * * *", tracks=100)  # 12 fan-ins an hour, 101 requests each
    figures = simulate([every5], Setup(["*/5 * * * *"], 0, 0), START, days=2, delay=ON_TIME)
    warnings = figures.warnings()
    assert any("more than the 2,000 GitHub Free gives" in w for w in warnings)
    assert any("API requests in an hour" in w for w in warnings)
    assert figures.to_json()["warnings"] == warnings
    assert simulate([sched("0 7 * * *")], Setup(["45 6 * * *"], 20, 45), START, days=7,
                    delay=ON_TIME).warnings() == []


def test_a_schedule_missing_most_of_its_slots_is_warned_about_and_github_runs_it_every_5_minutes(
        ) -> None:
    every_minute = sched("* * * * *")
    figures = simulate([every_minute], Setup(["*/5 * * * *"], 0, 0), START, days=2,
                       delay=ON_TIME)
    assert figures.missed * 2 > figures.slots
    assert any(w.startswith(f"s misses {figures.missed_by['s']:,} of its "
                            f"{figures.slots_by['s']:,} slots") for w in figures.warnings())
    # every 5 minutes it fires each slot: no warning
    every5 = simulate([sched("*/5 * * * *")], Setup(["*/5 * * * *"], 0, 0), START, days=2,
                      delay=ON_TIME)
    assert every5.missed == 0 and not any("misses" in w for w in every5.warnings())
    # GitHub's own schedule: at most every 5 minutes, so a fifth of the slots run
    theirs = simulate_github_schedule([every_minute], START, days=1, delay=ON_TIME)
    assert theirs.slots == 24 * 60
    assert theirs.slots - theirs.missed == 24 * 60 // 5
    assert theirs.runner_minutes == {"tracks": 30 * 24 * 60 // 5}  # scaled to 30 days


def test_a_lingering_job_cancels_the_lead_tick_waiting_behind_it_when_it_would_find_nothing(
        ) -> None:
    """Daily 07:00, lead ticks 06:45 and 06:50 on time: the second waits behind the first
    in the concurrency group; the first, as it ends, cancels it (a run never started is
    not billed), unless ``cancel_idle_pending`` is off."""
    daily = sched("0 7 * * *", tracks=4)
    on = simulate([daily], Setup(["45,50 6 * * *"], 20, 45), START, days=30, delay=ON_TIME)
    off = simulate([daily], Setup(["45,50 6 * * *"], 20, 45,
                                  cadence=Cadence(cancel_idle_pending=False)),
                   START, days=30, delay=ON_TIME)
    assert off.tick_jobs == 60 and on.tick_jobs == 30
    assert off.runner_minutes["ticks"] - on.runner_minutes["ticks"] == 30 * billed(60)
    assert (on.lateness(0.95), on.missed) == (off.lateness(0.95), off.missed)


def test_the_waiting_lead_tick_stays_when_a_slot_worth_waiting_for_comes_before_the_next_tick(
        ) -> None:
    """A second daily slot at 07:30, beyond the 20-minute linger after 07:00 but before the
    next cron tick (06:45 the day after): the waiting job is kept, as the tick keeps it."""
    early, late = sched("0 7 * * *"), sched("30 7 * * *")
    late = Schedule(id="late", spec=late.spec)
    figures = simulate([early, late], Setup(["45,50 6 * * *"], 20, 45), START, days=30,
                       delay=ON_TIME)
    assert figures.tick_jobs == 60


def test_the_measured_profile_runs_a_frequent_line_once_a_visit_and_a_daily_one_hours_late(
) -> None:
    visits = CronVisits(every_minutes=540, spread=0.0)
    # a */10 line: 138 cron times, one run per visit (9 hours apart), for the newest due
    times = [START + timedelta(minutes=10 * i) for i in range(138)]
    runs = [(at, begin) for at, begin in visits.visits(times, random.Random(1))
            if begin <= times[-1]]
    assert len(runs) in (2, 3)
    assert all(begin - at < timedelta(minutes=10) for at, begin in runs)
    # a daily line: every run comes, within a visit's gap of its time
    daily = [START + timedelta(days=i) for i in range(56)]
    measured = PROFILES["measured-2026"]
    assert isinstance(measured, CronVisits)
    runs = measured.visits(daily, random.Random(2))
    late = sorted((begin - at).total_seconds() / 60 for at, begin in runs)
    assert len(runs) == 56 and 150 < statistics.median(late) < 400 and late[-1] < 810
    # the ledger: too few samples are no profile; otherwise its delays and drops
    assert from_ledger([60.0] * 4, 0) is None
    found = from_ledger([3600.0] * 5, 5)
    assert found is not None and found.drop_rate == 0.5
    assert found.sample(random.Random(3), START) in (None, timedelta(hours=1))
