"""The external clock: its entries and exact calls against the cron evaluator (New York,
London and UTC, across both daylight-saving changes), tick.yml's safety ticks under it,
the loop of ``serve --clock-only`` on given instants, and the cost model's clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from orchestrator.cadence import clock, tickfile
from orchestrator.cadence import derive as cadence
from orchestrator.cadence.estimate import (
    Billing,
    ClockModel,
    CronDelay,
    Setup,
    billed,
    simulate,
)
from orchestrator.cadence.wake import lingers_before
from orchestrator.config.models import Schedule, ScheduleSpec
from orchestrator.config.repository import Cadence, RepoConfig
from orchestrator.config.triggers import for_spec
from orchestrator.errors import ExecutorError
from orchestrator.planner.fire import jitter
from orchestrator.state.layout import run_id_for
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Cursor, Run
from tests.builders import track

START = datetime(2026, 1, 1, tzinfo=UTC)
YEAR = START + timedelta(days=365)
EXTERNAL = Cadence(mode="external")


def sched(sid: str, expr: str | None, zone: str = "UTC", **fields: Any) -> Schedule:
    data = {"timezone": zone, "tracks": [{"name": "t", "run": "true"}], **fields}
    if expr is not None:
        data["cron"] = expr
    return Schedule(id=sid, spec=ScheduleSpec.model_validate_json(json.dumps(data)))


SCHEDULES = [
    sched("ny-daily", "0 7 * * *", "America/New_York"),
    sched("ny-night", "30 2 * * *", "America/New_York"),  # in the skipped hour of March
    sched("ny-fold", "30 1 * * *", "America/New_York"),  # in the repeated hour of November
    sched("london", "30 1 * * 1-5", "Europe/London"),  # London's changes are at 01:00
    sched("utc-weekly", "0 9 * * 1", "UTC"),
]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_the_calls_are_the_evaluators_slots_in_utc_on_both_sides_of_each_change() -> None:
    calls = clock.calls(SCHEDULES, START, YEAR)
    expected = sorted({slot for s in SCHEDULES for slot in for_spec(s.spec).slots(START, YEAR)})
    assert calls == expected and len(calls) == 3 * 365 + 261 + 52
    called = set(calls)
    # New York 07:00: 12:00 UTC until 8 March, 11:00 from it; 12:00 again from 1 November
    assert {at("2026-03-07T12:00"), at("2026-03-08T11:00"), at("2026-10-31T11:00"),
            at("2026-11-01T12:00")} <= called
    assert not {at("2026-03-08T12:00"), at("2026-11-01T11:00")} & called
    # 02:30 does not exist on 8 March: the default gap policy runs it at 03:00 EDT
    assert at("2026-03-08T07:00") in called and at("2026-03-07T07:30") in called
    # 01:30 happens twice on 1 November: the default fold policy runs the first only
    assert at("2026-11-01T05:30") in called and at("2026-11-01T06:30") not in called
    # London 01:30 on weekdays: 01:30 UTC on Friday 27 March, 00:30 on Monday 30 March
    # (after the change of the 29th), back to 01:30 on Monday 26 October
    assert {at("2026-03-27T01:30"), at("2026-03-30T00:30"), at("2026-10-23T00:30"),
            at("2026-10-26T01:30")} <= called
    # every call of New York's 07:00 is 07:00 there, one a day
    ny = [c for c in calls if c.astimezone(ZoneInfo("America/New_York")).hour == 7]
    assert len({c.date() for c in ny}) == len(ny) == 365
    # UTC has no change: every Monday at 09:00
    assert [c for c in calls if c.hour == 9 and c.minute == 0] == sorted(
        for_spec(SCHEDULES[-1].spec).slots(START, YEAR))


def test_a_call_serves_the_schedules_of_one_instant_once_and_waits_for_the_jitter() -> None:
    twin = sched("twin", "0 7 * * *", "America/New_York")
    late = sched("late", "0 9 * * 1", "UTC", jitter_seconds=600)
    off = sched("off", "0 8 * * *", enabled=False)
    calls = clock.calls([SCHEDULES[0], twin, late, off], START, START + timedelta(days=14))
    assert len(calls) == 14 + 2
    monday = at("2026-01-05T09:00")
    assert monday + jitter(run_id_for("late", monday), 600) in calls
    assert monday not in calls and not any(c.hour == 8 for c in calls)
    # one-shots: their instant, once; a disabled schedule has no entry
    once = sched("once", None, at="2026-06-01T10:00:00Z")
    assert clock.calls([once], START, YEAR) == [at("2026-06-01T10:00")]
    assert clock.calls([once], at("2026-06-01T10:00"), YEAR) == []


def test_the_file_has_one_entry_per_timing_and_the_same_bytes_every_time() -> None:
    twin = sched("twin", "0 7 * * *", "America/New_York")
    once = sched("once", None, at="2026-06-01T10:00:00Z")
    off = sched("off", "0 8 * * *", enabled=False)
    text = clock.file_text([twin, SCHEDULES[0], once, off])
    assert text == clock.file_text([once, off, SCHEDULES[0], twin])
    data = json.loads(text)
    assert data["format"] == 1 and "do not edit by hand" in data["$comment"]
    assert data["entries"] == [
        {"at": "2026-06-01T10:00:00Z", "schedules": ["once"]},
        {"cron": "0 7 * * *", "timezone": "America/New_York",
         "dst": {"gap": "shift", "fold": "first"}, "schedules": ["ny-daily", "twin"]}]
    # no URL, no token, no time: what a checkout writes depends on the schedules alone
    assert "http" not in text and "202" not in text.replace("2026-06-01", "")


def test_uncovered_names_the_slots_no_entry_calls_at() -> None:
    triggers = [for_spec(s.spec) for s in SCHEDULES[:2]]
    missing = clock.uncovered(triggers, SCHEDULES, START, YEAR)
    assert set(missing) == {"ny-fold", "london", "utc-weekly"}
    assert missing["utc-weekly"][0] == at("2026-01-05T09:00")
    # a zone's entry at another policy misses the day it differs
    both = sched("ny-fold", "30 1 * * *", "America/New_York", dst={"fold": "both"})
    assert clock.uncovered([for_spec(SCHEDULES[2].spec)], [both], START, YEAR) == {
        "ny-fold": [at("2026-11-01T06:30")]}
    assert clock.uncovered([for_spec(s.spec) for s in SCHEDULES], SCHEDULES, START, YEAR) == {}


def test_the_requests_name_the_one_permission_githubs_docs_give_each() -> None:
    found = clock.requests("octo-org/widgets", "main")
    workflow, repository = found["workflow_dispatch"], found["repository_dispatch"]
    assert workflow.path == "repos/octo-org/widgets/actions/workflows/tick.yml/dispatches"
    assert workflow.body == {"ref": "main"} and workflow.permission == "Actions"
    assert repository.path == "repos/octo-org/widgets/dispatches"
    assert repository.body == {"event_type": "orchestrator-tick"}
    assert repository.permission == "Contents"
    line = workflow.curl("https://api.github.com", "2022-11-28")
    assert line == ('curl -sS --fail-with-body -X POST '
                    '-H "Authorization: Bearer $ORCHESTRATOR_CLOCK_TOKEN" '
                    '-H "Accept: application/vnd.github+json" '
                    '-H "X-GitHub-Api-Version: 2022-11-28" https://api.github.com/repos/'
                    "octo-org/widgets/actions/workflows/tick.yml/dispatches -d "
                    "'{\"ref\":\"main\"}'")
    assert "Actions: Read and write" in workflow.token and "only" in workflow.token


def test_under_an_external_clock_no_slot_is_worth_a_waiting_runner() -> None:
    daily = SCHEDULES[0]
    slot = at("2026-01-02T12:00")
    assert lingers_before(daily, slot, Cadence())
    assert not lingers_before(daily, slot, EXTERNAL)
    forced = Cadence(mode="external", linger_schedules={"ny-daily": True})
    assert not lingers_before(daily, slot, forced)


def test_tick_yml_keeps_a_safety_tick_just_after_each_daily_slot_and_no_lead_tick() -> None:
    daily = SCHEDULES[0]
    config = RepoConfig.model_validate({"cadence": {"mode": "external",
                                                    "safety_every_hours": 24}})
    derived = cadence.derive([daily], config, START)
    # 07:00 New York is 11:00 or 12:00 UTC: a tick 4 minutes after it catches a call
    # the clock missed (inside the 60-minute catch-up window), and is the day's safety
    assert derived.tick_cron == ["4 11 * 3-10 *", "4 12 * 1-3,11,12 *"]
    assert (derived.watchdog_cron, derived.max_staleness_minutes) == ("41 0 * * *", 2895)
    six = cadence.derive([daily], RepoConfig.model_validate(
        {"cadence": {"mode": "external"}}), START)
    ticks = cadence.scheduled(six.tick_cron, at("2026-06-01T00:00"), at("2026-06-02T00:00"))
    assert [f"{t:%H:%M}" for t in ticks] == ["05:04", "11:04", "17:04", "23:04"]
    # an hourly schedule needs no tick of its own: the clock calls at each slot
    hourly = sched("hourly", "7 * * * *")
    assert cadence.derive([hourly], config, START).tick_cron == ["17 0 * * *"]
    assert "External clock" in tickfile.tick_comment(config)[0]


def test_a_daily_slot_that_another_call_follows_closely_needs_no_tick_of_its_own() -> None:
    config = RepoConfig.model_validate({"cadence": {"mode": "external",
                                                    "safety_every_hours": 24}})
    daily = sched("daily", "30 8 * * *")
    # the hourly call at 08:40 fires 08:30 when its own call was lost: tick.yml keeps
    # the plain safety tick only
    hourly = sched("hourly", "40 * * * *")
    assert cadence.derive([daily, hourly], config, START).tick_cron == ["17 0 * * *"]
    # a call beyond gather_minutes, or beyond the slot's catch-up window, catches nothing
    late = sched("hourly", "50 * * * *")
    assert cadence.derive([daily, late], config, START).tick_cron == ["34 8 * * *"]
    narrow = sched("daily", "30 8 * * *", catchup_window_minutes=5)
    assert cadence.derive([narrow, hourly], config, START).tick_cron == ["34 8 * * *"]
    # a jittered schedule's call may come after its slot: it is not counted on
    jittered = sched("hourly", "40 * * * *", jitter_seconds=600)
    assert cadence.derive([daily, jittered], config, START).tick_cron == ["34 8 * * *"]


# --------------------------------------------------------------------------- the loop


class Recorder:
    """The clock's reads and calls, on the instants the test hands it. A call that
    succeeds does what the tick it starts would do to the state, unless ``lose`` says
    it never ran: every schedule's slots up to the call are settled, and every pending
    track whose ``not_before`` passed is dispatched."""

    def __init__(self, schedules: list[Schedule], state: State | None = None,
                 since: datetime | None = None) -> None:
        self.schedules = schedules
        self.state = state or State()
        if since is not None:
            self.settle(since)
        self.calls: list[datetime] = []
        self.fail = 0
        self.lose = 0

    def settle(self, now: datetime) -> None:
        cursors = {s.id: Cursor(schedule_id=s.id, since=now) for s in self.schedules}
        tracks = {run: {name: t.model_copy(update={"phase": TrackPhase.RUNNING})
                        if t.phase is TrackPhase.PENDING and t.not_before is not None
                        and t.not_before <= now else t for name, t in by_name.items()}
                  for run, by_name in self.state.tracks.items()}
        self.state = State(runs=self.state.runs, tracks=tracks, cursors=cursors)

    def read(self) -> tuple[list[Schedule], State, Cadence]:
        return self.schedules, self.state, EXTERNAL

    def call(self, now: datetime) -> str:
        if self.fail:
            self.fail -= 1
            raise ExecutorError("POST repos/o/r/dispatches: 503 unavailable")
        self.calls.append(now)
        if self.lose:
            self.lose -= 1
        else:
            self.settle(now)
        return "dispatched tick.yml (workflow_dispatch)"


def test_the_loop_calls_once_per_moment_that_passed_and_wakes_for_the_next() -> None:
    hourly = sched("hourly", "7 * * * *")
    rec = Recorder([hourly], since=at("2026-01-01T10:00"))
    loop = clock.Clock(rec.read, rec.call, at("2026-01-01T10:00"))
    assert loop.work(at("2026-01-01T10:05")) == [] and loop.next_at == at("2026-01-01T10:07")
    lines = loop.work(at("2026-01-01T10:07:00.2"))
    assert lines == ["dispatched tick.yml (workflow_dispatch) for hourly: slot "
                     "2026-01-01T10:07Z"]
    # the next wake-ups in the same minute, and before the next slot, call nothing
    for now in ("2026-01-01T10:07:01", "2026-01-01T10:30", "2026-01-01T11:06:59"):
        assert loop.work(at(now)) == []
    assert rec.calls == [at("2026-01-01T10:07:00.2")]
    assert loop.next_at == at("2026-01-01T11:07")
    # a loop that slept through two slots (a suspended machine) calls once for both
    loop.work(at("2026-01-01T13:30"))
    assert len(rec.calls) == 2 and loop.calls == 2


def test_the_loop_wakes_at_a_jittered_slots_fire_at_before_reading_its_run() -> None:
    jittered = sched("jittered", "0 7 * * *", jitter_seconds=600)
    fire_at = at("2026-01-01T07:00") + jitter("jittered--20260101T0700Z", 600)
    assert at("2026-01-01T07:00") < fire_at  # the run's own jitter, as the tick draws it
    rec = Recorder([jittered])  # its state never holds the run: the tick is elsewhere
    loop = clock.Clock(rec.read, rec.call, at("2026-01-01T06:59"))
    assert "slot 2026-01-01T07:00Z" in loop.work(at("2026-01-01T07:00:00.5"))[0]
    assert loop.next_at == fire_at
    assert "jitter" in loop.work(fire_at + timedelta(seconds=1))[0]
    assert rec.calls[-1] - fire_at <= timedelta(seconds=5)
    assert loop.next_at == at("2026-01-02T07:00")


def test_a_failed_call_is_tried_at_each_wake_up_then_every_five_minutes() -> None:
    rec = Recorder([sched("hourly", "7 * * * *")], since=at("2026-01-01T10:00"))
    loop = clock.Clock(rec.read, rec.call, at("2026-01-01T10:00"))
    rec.fail = 2
    assert "trying again" in loop.work(at("2026-01-01T10:07:01"))[0]
    assert "trying again" in loop.work(at("2026-01-01T10:08"))[0]
    assert loop.work(at("2026-01-01T10:09"))[0].startswith("dispatched")
    assert rec.calls == [at("2026-01-01T10:09")]
    rec.fail = 99  # GitHub's API down for a while
    loop.work(at("2026-01-01T11:07:01"))
    slower = loop.work(at("2026-01-01T11:17:30"))
    assert slower == ["call failed (POST repos/o/r/dispatches: 503 unavailable); trying "
                      "hourly: slot 2026-01-01T11:07Z again in 5 min"]
    assert loop.work(at("2026-01-01T11:18")) == []  # no call at every wake-up now
    assert loop.next_at == at("2026-01-01T11:22:30")
    rec.fail = 0  # back: the next call is the slot's, and it fires
    assert "again" in loop.work(at("2026-01-01T11:22:30"))[0]
    assert rec.calls[-1] == at("2026-01-01T11:22:30")
    assert loop.work(at("2026-01-01T11:30")) == []


def test_the_loop_calls_at_a_retry_but_not_at_a_timeout() -> None:
    daily = sched("daily", "0 7 * * *")
    run_id = "daily--20260101T0700Z"
    slot = at("2026-01-01T07:00")
    retry = track("a", TrackPhase.PENDING, run_id=run_id, attempt=2,
                  not_before=at("2026-01-01T07:20"))
    state = State(runs={run_id: Run(run_id=run_id, schedule_id="daily", slot=slot,
                                    fire_at=slot, created_at=slot, tracks=["a"],
                                    deadline=slot + timedelta(hours=3),
                                    status=RunStatus.RUNNING)},
                  tracks={run_id: {"a": retry}})
    rec = Recorder([daily], state, since=slot)
    loop = clock.Clock(rec.read, rec.call, at("2026-01-01T07:01"))
    assert loop.next_at is None
    loop.work(at("2026-01-01T07:02"))
    assert loop.next_at == at("2026-01-01T07:20")  # the retry, not the deadline
    loop.work(at("2026-01-01T07:20"))
    assert rec.calls == [at("2026-01-01T07:20")]


# --------------------------------------------------------------------------- the model

ON_TIME = CronDelay(median_minutes=0.001, p95_minutes=0.002, drop_rate=0.0)


def test_the_clocks_ticks_fire_at_once_billed_from_the_runner_and_nothing_waits() -> None:
    daily = sched("daily", "0 7 * * *", tracks=[{"name": f"t{i}", "run": "true"}
                                                 for i in range(4)])
    model = ClockModel(startup_seconds=(30.0, 30.0), failure_rate=0.0)
    setup = Setup([], cadence=EXTERNAL, clock=model)
    figures = simulate([daily], setup, at("2026-12-07T00:00"), days=30, delay=ON_TIME)
    # 30 calls, each a tick 30 s after it, 10 s long: one billed minute, no lingering
    assert figures.runner_minutes == {"ticks": 30, "tracks": 120, "fan-in": 30}
    assert figures.tick_jobs == 30 and figures.missed == 0
    assert figures.lateness(0.5) == figures.lateness(0.95) == pytest.approx(40, abs=0.5)
    # 55 s from the call: the runner's wait (15 s) is not billed, its set-up (40 s) is
    slow = simulate([daily], Setup([], cadence=EXTERNAL, clock=ClockModel(
        startup_seconds=(55.0, 55.0), failure_rate=0.0)), at("2026-12-07T00:00"), days=30,
        delay=ON_TIME)
    assert slow.runner_minutes["ticks"] == 30 * billed(40 + 10) == 30
    assert slow.lateness(0.95) == pytest.approx(65, abs=0.5)
    # a set-up of 55 s bills the job's second minute
    heavy = simulate([daily], Setup([], cadence=EXTERNAL, clock=ClockModel(
        startup_seconds=(55.0, 55.0), failure_rate=0.0)), at("2026-12-07T00:00"), days=30,
        delay=ON_TIME, billing=Billing(setup_seconds=55))
    assert figures.tick_minutes_by == {"clock, 1 min": 30}
    assert heavy.tick_minutes_by == {"clock, 2 min or more": 60}
    # a tick on the clock's own machine (serve, not --clock-only) bills nothing
    own = simulate([daily], Setup([], cadence=EXTERNAL, clock=ClockModel(
        startup_seconds=(0.0, 0.0), failure_rate=0.0, on_runner=False)),
        at("2026-12-07T00:00"), days=30, delay=ON_TIME)
    assert "ticks" not in own.runner_minutes and own.lateness(0.95) == pytest.approx(
        Billing().tick_seconds)


def test_the_tick_minutes_by_kind_tell_a_safety_tick_that_fired_from_one_that_did_not(
) -> None:
    daily = sched("daily", "0 7 * * *")
    # every call lost: the safety tick 4 minutes after each slot fires it
    lost = Setup(["4 7 * * *"], cadence=EXTERNAL, clock=ClockModel(failure_rate=1.0))
    figures = simulate([daily], lost, at("2026-12-07T00:00"), days=30, delay=ON_TIME)
    assert figures.tick_minutes_by == {"scheduled, fired": 30}
    kept = Setup(["4 7 * * *"], cadence=EXTERNAL, clock=ClockModel(
        startup_seconds=(30.0, 30.0), failure_rate=0.0))
    both = simulate([daily], kept, at("2026-12-07T00:00"), days=30, delay=ON_TIME)
    assert both.tick_minutes_by == {"clock, 1 min": 30, "scheduled, found nothing": 30}
    assert sum(both.tick_minutes_by.values()) == both.runner_minutes["ticks"]


def test_a_lost_call_waits_for_the_safety_tick_inside_the_catch_up_window() -> None:
    daily = sched("daily", "0 7 * * *")
    lost = ClockModel(failure_rate=1.0)
    # the safety tick 4 minutes after the slot fires it; without one, the slot is missed
    caught = simulate([daily], Setup(["4 7 * * *"], cadence=EXTERNAL, clock=lost),
                      at("2026-12-07T00:00"), days=30, delay=ON_TIME)
    assert caught.missed == 0
    assert caught.lateness(0.5) == pytest.approx(4 * 60 + 40 + 10, abs=1)
    missed = simulate([daily], Setup(["4 17 * * *"], cadence=EXTERNAL, clock=lost),
                      at("2026-12-07T00:00"), days=30, delay=ON_TIME)
    assert missed.missed == 30 and missed.lateness_seconds == []
    # the clock's ticks and the scheduled ones are two groups: neither waits for the other
    both = simulate([daily], Setup(["0 7 * * *"], cadence=EXTERNAL,
                                   clock=ClockModel(failure_rate=0.0)),
                    at("2026-12-07T00:00"), days=30, delay=ON_TIME)
    assert both.tick_jobs == 60 and both.missed == 0


# --------------------------------------------------------------------------- confirming


def test_a_call_whose_tick_never_ran_is_made_again_until_the_slot_reads_fired() -> None:
    rec = Recorder([sched("hourly", "7 * * * *")], since=at("2026-01-01T10:00"))
    loop = clock.Clock(rec.read, rec.call, at("2026-01-01T10:00"))
    rec.lose = 1  # GitHub answered 204, and no tick ran (or it failed)
    assert loop.work(at("2026-01-01T10:07"))[0].startswith("dispatched")
    assert loop.next_at == at("2026-01-01T10:12")  # the confirmation, before 11:07
    assert loop.work(at("2026-01-01T10:11:59")) == []  # a tick may still be starting
    again = loop.work(at("2026-01-01T10:12"))
    assert again == ["dispatched tick.yml (workflow_dispatch) for hourly: slot "
                     "2026-01-01T10:07Z again: not fired 5 min after the last call"]
    # that tick ran: nothing more until the next slot
    assert loop.work(at("2026-01-01T10:30")) == [] and loop.next_at == at("2026-01-01T11:07")
    assert rec.calls == [at("2026-01-01T10:07"), at("2026-01-01T10:12")]


def test_a_slot_that_never_reads_fired_gets_three_calls_more_and_one_line() -> None:
    rec = Recorder([sched("daily", "0 7 * * *")], since=at("2026-01-01T06:00"))
    loop = clock.Clock(rec.read, rec.call, at("2026-01-01T06:00"))
    rec.lose = 99  # tick.yml fails every time
    lines = [line for minute in range(0, 40) for line in loop.work(
        at("2026-01-01T07:00") + timedelta(minutes=minute))]
    assert rec.calls == [at(f"2026-01-01T07:{m:02}") for m in (0, 5, 10, 15)]
    assert lines[-1] == ("daily: slot 2026-01-01T07:00Z: still not fired 20 min after it, "
                         "after 4 calls; left to the next tick (is tick.yml failing, or a cap "
                         "holding it?)")
    assert loop.next_at == at("2026-01-02T07:00")


def test_a_clock_that_starts_calls_for_a_slot_it_missed_while_it_was_down() -> None:
    daily = sched("daily", "0 7 * * *")
    hourly = sched("hourly", "58 * * * *")
    rec = Recorder([daily, hourly], since=at("2026-01-01T06:00"))
    # restarted at 07:59: 07:00 passed unfired an hour ago, 07:58 a minute ago
    loop = clock.Clock(rec.read, rec.call, at("2026-01-01T07:59"))
    rec.lose = 1
    first = loop.work(at("2026-01-01T07:59"))
    assert first == ["dispatched tick.yml (workflow_dispatch) for daily: slot "
                     "2026-01-01T07:00Z again: not fired 59 min after the last call"]
    # that call was lost too; 07:58's own call may have been made before the restart:
    # both are called for again once five minutes passed since 07:58
    assert loop.next_at == at("2026-01-01T08:03")
    assert "again" in loop.work(at("2026-01-01T08:03"))[0]
    assert loop.work(at("2026-01-01T08:10")) == []
    assert rec.calls == [at("2026-01-01T07:59"), at("2026-01-01T08:03")]


def test_a_clock_that_confirms_leaves_tick_yml_a_weekly_backstop() -> None:
    with pytest.raises(ValueError, match="clock_confirms needs"):
        RepoConfig.model_validate({"cadence": {"clock_confirms": True}})
    config = RepoConfig.model_validate({"cadence": {"mode": "external",
                                                    "clock_confirms": True}})
    derived = cadence.derive([sched("daily", "0 7 * * *")], config, START)
    assert derived.tick_cron == [cadence.BACKSTOP_LINE] == ["17 0 * * 1"]
    # weekly, half a week after the backstop; the limit follows the daily calls
    assert (derived.watchdog_cron, derived.max_staleness_minutes) == ("41 12 * * 4", 2895)
    [backstop] = cadence.scheduled([derived.tick_cron[0]], START, START + timedelta(days=7))
    [watch] = cadence.scheduled([derived.watchdog_cron], backstop, backstop + timedelta(days=7))
    assert watch - backstop == timedelta(hours=84, minutes=24)
    assert watch - backstop > timedelta(minutes=derived.max_staleness_minutes)
    # a clock that calls only on weekdays: the weekend's gap sets a longer limit
    weekdays = cadence.derive([sched("daily", "0 7 * * 1-5")], config, START)
    assert weekdays.max_staleness_minutes == 2 * (65 * 60 + 17) + 15


def test_a_clock_that_confirms_makes_a_lost_call_again_five_minutes_later() -> None:
    daily = sched("daily", "0 7 * * *")
    # half the calls are lost: without a safety tick, a clock that only calls misses
    # about half the slots; one that confirms calls again, and misses about 1 in 16
    model = ClockModel(startup_seconds=(30.0, 30.0), failure_rate=0.5)
    plain = simulate([daily], Setup([], cadence=EXTERNAL, clock=model),
                     at("2026-12-07T00:00"), days=60, delay=ON_TIME, seed=3)
    confirming = simulate([daily], Setup([], cadence=EXTERNAL, clock=ClockModel(
        startup_seconds=(30.0, 30.0), failure_rate=0.5, confirms=True)),
        at("2026-12-07T00:00"), days=60, delay=ON_TIME, seed=3)
    assert plain.missed > 4 * confirming.missed and plain.missed > 5
    late = {round(x) for x in confirming.lateness_seconds}
    # fired at the call, or 5, 10, 15 minutes later: 30 s start-up and a 10 s tick each
    assert late <= {40, 340, 640, 940} and {40, 340} <= late
