"""bench/cost.py's bound on punctual slots, integrated from the delay model, against the
simulator that bills the same lead ticks: the bound must not exceed what they cost."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import ModuleType

import pytest

from orchestrator.cadence.estimate import CronDelay, Setup, simulate
from orchestrator.config.models import Schedule, ScheduleSpec
from tests.builders import bench_module


@pytest.fixture(scope="module")
def cost() -> ModuleType:
    return bench_module("cost")


def test_the_integrated_lead_set_agrees_with_the_simulated_one(cost: ModuleType) -> None:
    daily = Schedule(id="d", spec=ScheduleSpec.model_validate_json(json.dumps(
        {"cron": "0 7 * * *", "tracks": [{"name": "t", "run": "true"}]})))
    # cron-sync's ticks for 07:00: 06:44, 06:49 and 06:54 (16, 11 and 6 minutes before)
    predicted = cost.lead_set((16, 11, 6), CronDelay())
    days = 1500
    figures = simulate([daily], Setup(["44,49,54 6 * * *"], 20, 45),
                       datetime(2026, 1, 1, tzinfo=UTC), days=days, seed=3)
    on_time = sum(s < 60 for s in figures.lateness_seconds) / figures.slots
    assert on_time == pytest.approx(predicted.covered, abs=0.01)
    # every fire pays the wait, the set-up, the billed minute's rounding and the ticks
    # that find nothing: above the bound's per-fire figure, not far above it
    per_fire = figures.runner_minutes["ticks"] * days / 30 / figures.slots
    assert predicted.per_fire < per_fire < predicted.per_fire + 4


@pytest.mark.slow
def test_the_cheapest_punctual_lead_set_reaches_the_target_and_nothing_beats_it(
        cost: ModuleType) -> None:
    delay = CronDelay()
    bound = cost.punctual_bound(delay)
    assert bound.covered >= 0.95
    for leads in [(16, 11, 6), (16, 11), (21, 16, 11, 6), (31, 21, 11), (13, 8)]:
        other = cost.lead_set(leads, delay)
        assert other.covered < 0.95 or other.wait_minutes >= bound.wait_minutes, leads
    # a cron that starts its runs sooner needs less of a wait
    assert cost.punctual_bound(CronDelay(median_minutes=1, p95_minutes=8)).wait_minutes < (
        bound.wait_minutes)


@pytest.mark.slow
def test_on_cron_syncs_grid_the_defaults_daily_floor_is_above_4_5_times(
        cost: ModuleType) -> None:
    """Why the derived default cannot come within 4.5 times GitHub's own schedule for the
    daily case at its lateness: the legs, the fan-in job and the cheapest punctual lead
    set on the grid already cost more."""
    bound = cost.grid_bound()
    assert bound.covered >= 0.95 and all(lead % 5 == 1 for lead in bound.leads)
    assert bound.wait_minutes > 10.9
    # nothing on the grid with the same coverage waits less
    for leads in [(16, 11, 6), (11, 6, 1), (16, 6), (21, 11, 1), (11, 6, 1)]:
        other = cost.lead_set(leads, CronDelay())
        assert other.covered < 0.95 or other.wait_minutes >= bound.wait_minutes, leads
    github = 4 * 30 * (1 - 22 / 280)  # bench/cost.py's GitHub schedule: 111 a month
    assert 150 + 30 * bound.per_fire > 4.5 * github
    # off the grid the bound is lower: the grid, not the model, sets this floor
    assert cost.punctual_bound(CronDelay()).wait_minutes < bound.wait_minutes - 2


def test_the_external_clock_is_on_time_and_no_cheaper_than_its_floor(
        cost: ModuleType) -> None:
    """bench/cost.py's external clock rows, two seeds: p95 under 90 s in the daily and
    the mixed case; runner-minutes above Bound 3's floor (a billed tick job a fire)."""
    for case, floor in (("one daily schedule, 4 tracks", 1.36),
                        ("ten schedules, 5 hourly + 5 daily", 1.53)):
        schedules = [cost.without_fan_in_job(s) for s in cost.CASES[case]]
        setup = cost.derived_setup(schedules, cost.TICK_LINGER, cost.EXTERNAL_DAILY)
        assert setup.clock is not None and setup.cadence.mode == "external"
        ours = cost.pooled([cost.orchestrator_month(schedules, setup, cost.START, s)
                            for s in range(2)])
        github = cost.pooled([cost.simulate_github_schedule(cost.CASES[case], cost.START,
                                                            days=cost.DAYS, seed=s)
                              for s in range(2)])
        p95 = ours.lateness(0.95)
        assert p95 is not None and 30 < p95 < 90, (case, p95)
        assert ours.total_minutes / github.total_minutes > floor * 0.97, case


def test_a_clock_that_confirms_stays_within_1_6_times_githubs_schedule(
        cost: ModuleType) -> None:
    """Issue 42.5's target on bench/cost.py's rows, two seeds: `serve --clock-only` with
    `clock_confirms` and `fan_in: next_tick`, within 1.6 times GitHub's own schedule in
    the daily and the mixed case, p95 under 90 s, no slot missed, above Bound 3's floor.
    tick.yml keeps the weekly backstop alone, watchdog.yml a weekly check."""
    for case, floor in (("one daily schedule, 4 tracks", 1.36),
                        ("ten schedules, 5 hourly + 5 daily", 1.53)):
        schedules = [cost.without_fan_in_job(s) for s in cost.CASES[case]]
        setup = cost.derived_setup(schedules, cost.TICK_LINGER, cost.CONFIRMING)
        assert setup.clock is not None and setup.clock.confirms
        assert setup.tick_cron == ["17 0 * * 1"] and setup.watchdog_cron == ["41 12 * * 4"]
        ours = cost.pooled([cost.orchestrator_month(schedules, setup, cost.START, s)
                            for s in range(2)])
        github = cost.pooled([cost.simulate_github_schedule(cost.CASES[case], cost.START,
                                                            days=cost.DAYS, seed=s)
                              for s in range(2)])
        ratio = ours.total_minutes / github.total_minutes
        p95 = ours.lateness(0.95)
        assert floor * 0.97 < ratio < 1.6, (case, ratio)
        assert p95 is not None and 30 < p95 < 90, (case, p95)
        assert ours.missed == 0, case
