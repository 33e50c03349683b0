"""bench/cost.py's bound on punctual slots, integrated from the delay model, against the
simulator that bills the same lead ticks: the bound must not exceed what they cost."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import ModuleType

import pytest

from orchestrator.cadence.estimate import CronDelay, Setup, simulate
from orchestrator.spec.models import Schedule, ScheduleSpec
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
