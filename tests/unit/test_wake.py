"""The next due moment and why, from schedules, state and ``now`` (plain datetimes)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from orchestrator.cadence.wake import (
    Wake,
    due_moments,
    lingering_slots,
    lingers_before,
    next_wake,
    until_words,
)
from orchestrator.cadence.wake import cron_slots as evaluator_slots
from orchestrator.config.models import Schedule, ScheduleSpec
from orchestrator.config.repository import Cadence
from orchestrator.executors.base import Observation
from orchestrator.planner import Observations, plan
from orchestrator.state.model import State
from orchestrator.state.phases import TrackPhase

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


def sched(sid: str = "job", **fields: Any) -> Schedule:
    data: dict[str, Any] = {"cron": "0 * * * *", "tracks": [{"name": "t", "run": "true"}]}
    data.update(fields)
    if "at" in fields:
        data.pop("cron")
    return Schedule(id=sid, spec=ScheduleSpec.model_validate_json(json.dumps(data)))


def test_the_next_slot_of_the_soonest_schedule() -> None:
    schedules = [sched("hourly"), sched("daily", cron="0 7 * * *",
                                        timezone="America/New_York")]
    wake = next_wake(schedules, State(), T0 + timedelta(minutes=10))
    assert wake == Wake(T0 + timedelta(hours=1), "hourly: slot 2026-12-01T08:00Z")
    moments = due_moments(schedules, State(), T0 + timedelta(minutes=10))
    # 07:00 in New York is 12:00 UTC in December
    assert [m.at for m in moments] == [T0 + timedelta(hours=1), T0 + timedelta(hours=5)]


def test_a_slot_exactly_now_is_not_next_the_tick_at_now_served_it() -> None:
    assert next_wake([sched()], State(), T0) == Wake(T0 + timedelta(hours=1),
                                                     "job: slot 2026-12-01T08:00Z")


def test_disabled_schedules_and_fired_one_shots_never_fall_due() -> None:
    at = "2026-12-01T09:30:00Z"
    one_shot = sched("once", at=at)
    assert next_wake([sched(enabled=False)], State(), T0) is None
    assert next_wake([one_shot], State(), T0) == Wake(
        T0 + timedelta(hours=2, minutes=30), "once: one-shot at 2026-12-01T09:30Z")
    fired = plan([one_shot], State(), Observations(), T0 + timedelta(hours=3)).state
    # what is left is the run it started, not the one-shot again
    assert [m.reason for m in due_moments([one_shot], fired, T0 + timedelta(hours=3))] == [
        "once--20261201T0930Z: run deadline"]


def test_a_retry_falls_due_when_its_back_off_ends() -> None:
    schedule = sched(tracks=[{"name": "t", "run": "false", "max_attempts": 2,
                              "retry_backoff_seconds": 120}])
    first = plan([schedule], State(), Observations(), T0)
    failed = Observations(seen={r.key: Observation(key=r.key, phase=TrackPhase.FAILED)
                                for r in first.dispatch})
    later = T0 + timedelta(seconds=30)
    second = plan([schedule], first.state, failed, later)
    wake = next_wake([schedule], second.state, later)
    assert wake == Wake(later + timedelta(seconds=120), "job--20261201T0700Z: t retry")


def test_a_waiting_poll_falls_due_at_its_next_poll() -> None:
    schedule = sched(tracks=[{"name": "t", "run": "check", "poll_interval_minutes": 7}])
    first = plan([schedule], State(), Observations(), T0)
    later = T0 + timedelta(seconds=30)
    not_yet = Observations(seen={r.key: Observation(key=r.key, phase=TrackPhase.WAITING,
                                                    finished_at=later)
                                 for r in first.dispatch})
    second = plan([schedule], first.state, not_yet, later)
    wake = next_wake([schedule], second.state, later)
    assert wake == Wake(later + timedelta(minutes=7), "job--20261201T0700Z: t next poll")


def test_jitter_a_timeout_and_the_run_deadline_are_due_moments() -> None:
    schedule = sched(jitter_seconds=600, deadline_minutes=90,
                     tracks=[{"name": "t", "run": "sleep 1", "timeout_minutes": 20}])
    created = plan([schedule], State(), Observations(), T0).state
    fire_at = created.runs["job--20261201T0700Z"].fire_at
    assert fire_at > T0  # the jitter of this run id is not zero
    assert next_wake([schedule], created, T0) == Wake(fire_at, "job--20261201T0700Z: t "
                                                      "not before")
    dispatched = plan([schedule], created, Observations(), fire_at)
    (request,) = dispatched.dispatch
    started = Observations(seen={request.key: Observation(
        key=request.key, phase=TrackPhase.RUNNING, started_at=fire_at)})
    running = plan([schedule], dispatched.state, started, fire_at).state
    reasons = {m.reason: m.at for m in due_moments([schedule], running, fire_at)}
    assert reasons["job--20261201T0700Z: t timeout"] == fire_at + timedelta(minutes=20)
    assert reasons["job--20261201T0700Z: run deadline"] == (
        running.runs["job--20261201T0700Z"].deadline)
    # Past the timeout it is no longer "next": the tick at that moment taps it out.
    late = fire_at + timedelta(minutes=21)
    assert "job--20261201T0700Z: t timeout" not in {
        m.reason for m in due_moments([schedule], running, late)}


def test_describe_says_when_in_words() -> None:
    wake = Wake(T0 + timedelta(minutes=4, seconds=5), "job: slot 2026-12-01T07:04Z")
    assert wake.describe(T0) == "2026-12-01T07:04:05Z (in 4 min): job: slot 2026-12-01T07:04Z"
    assert until_words(timedelta(seconds=12)) == "in 12 s"
    assert until_words(timedelta(hours=3, minutes=5)) == "in 3 h 5 min"
    assert until_words(timedelta(days=3)) == "in 3 days"


def test_a_slot_is_worth_waiting_for_when_its_schedule_has_no_other_slot_in_12_hours() -> None:
    default = Cadence()
    assert lingers_before(sched(cron="0 7 * * *"), T0, default)
    assert lingers_before(sched(cron="0 7 * * 1"), T0, default)
    assert not lingers_before(sched(cron="0 * * * *"), T0, default)
    assert not lingers_before(sched(cron="0 7,19 * * *"), T0, Cadence(
        linger_min_interval_hours=13))
    assert lingers_before(sched(cron="0 * * * *"), T0, Cadence(linger_min_interval_hours=0))
    assert lingers_before(sched(cron="0 * * * *"), T0, Cadence(linger_schedules={"job": True}))
    assert not lingers_before(sched(cron="0 7 * * *"), T0,
                              Cadence(linger_schedules={"job": False}))
    assert lingers_before(sched(at="2026-12-01T07:00:00Z"), T0, default)


def test_lingering_slots_says_slot_by_slot_what_lingers_before_says() -> None:
    # 07:00 comes 23 hours after the day before's 08:00; 08:00 an hour after 07:00
    twice = sched(cron="0 7,8 * * *")
    slots = evaluator_slots(twice.spec, T0 - timedelta(hours=1), T0 + timedelta(days=3))
    flags = lingering_slots(twice, slots, Cadence())
    assert flags == [lingers_before(twice, s, Cadence()) for s in slots]
    assert flags == [s.hour == 7 for s in slots] and len(slots) == 7


def test_the_tick_waits_for_the_earliest_moment_worth_a_runner() -> None:
    hourly, daily = sched("hourly"), sched("daily", cron="30 7 * * *")
    wake = next_wake([hourly, daily], State(), T0 + timedelta(minutes=50))
    assert wake is not None and wake.reason == "hourly: slot 2026-12-01T08:00Z"
    assert not wake.worth_waiting  # status shows it; tick --linger waits for the next
    assert wake.linger_target is not None
    assert wake.linger_target.reason == "daily: slot 2026-12-02T07:30Z"
    alone = next_wake([hourly], State(), T0)
    assert alone is not None and alone.linger_target is None


def test_a_timeout_or_a_deadline_is_not_worth_a_waiting_runner_a_retry_is() -> None:
    schedule = sched(cron="0 7 * * *", deadline_minutes=90,
                     tracks=[{"name": "t", "run": "sleep 1", "timeout_minutes": 20,
                              "max_attempts": 2}])
    dispatched = plan([schedule], State(), Observations(), T0)
    (request,) = dispatched.dispatch
    started = Observations(seen={request.key: Observation(
        key=request.key, phase=TrackPhase.RUNNING, started_at=T0)})
    running = plan([schedule], dispatched.state, started, T0).state
    worth = {m.reason: m.worth_waiting for m in due_moments([schedule], running, T0)}
    assert worth == {"job--20261201T0700Z: t timeout": False,
                     "job--20261201T0700Z: run deadline": False,
                     "job: slot 2026-12-02T07:00Z": True}
    failed = Observations(seen={request.key: Observation(
        key=request.key, phase=TrackPhase.FAILED)})
    later = T0 + timedelta(minutes=5)
    retry = plan([schedule], running, failed, later).state
    wake = next_wake([schedule], retry, later)
    assert wake is not None and wake.reason.endswith("t retry") and wake.worth_waiting


def test_after_a_tick_in_the_future_the_next_slot_is_the_first_it_left_unsettled() -> None:
    # `tick --now 08:30` settled the slots up to 08:30; at 07:14 the next tick fires
    # nothing before 09:00, and the next due moment says so.
    schedules = [sched("hourly")]
    future = T0 + timedelta(hours=1, minutes=30)
    settled = plan(schedules, State(), Observations(), future).state
    settled.runs.clear()
    settled.tracks.clear()
    real = T0 + timedelta(minutes=14)
    assert next_wake(schedules, settled, real) == Wake(T0 + timedelta(hours=2),
                                                       "hourly: slot 2026-12-01T09:00Z")
    again = plan(schedules, settled, Observations(), T0 + timedelta(hours=1, minutes=1))
    assert not again.state.runs  # 08:00 was settled by the tick at 08:30: it never fires
