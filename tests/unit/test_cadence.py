"""cron-sync's tick cron, checked slot by slot against the cron evaluator (and croniter,
an independent reading of the UTC lines GitHub would run), across both daylight-saving
changes of New York and London and in UTC."""

from __future__ import annotations

import bisect
import itertools
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from orchestrator.cadence import derive as cadence
from orchestrator.cadence import tickfile
from orchestrator.config.models import Schedule, ScheduleSpec
from orchestrator.config.repository import Cadence, RepoConfig
from orchestrator.config.triggers import for_spec

START = datetime(2026, 1, 1, tzinfo=UTC)
YEAR = START + timedelta(days=365)


def sched(sid: str, expr: str, zone: str, **fields: Any) -> Schedule:
    data = {"cron": expr, "timezone": zone, "tracks": [{"name": "t", "run": "true"}], **fields}
    return Schedule(id=sid, spec=ScheduleSpec.model_validate_json(json.dumps(data)))


SCHEDULES = [
    sched("ny-daily", "0 7 * * *", "America/New_York"),
    sched("ny-night", "30 2 * * *", "America/New_York"),  # in the skipped/repeated hour
    sched("london", "30 1 * * 1-5", "Europe/London"),  # London's changes are at 01:00
    sched("london-monthly", "45 23 1 * *", "Europe/London"),  # the UTC day differs
    sched("utc-weekly", "0 9 * * 1", "UTC"),
]


def croniter_ticks(lines: list[str], start: datetime, end: datetime) -> list[datetime]:
    found: set[datetime] = set()
    for line in lines:
        it = croniter(line, start)
        while (moment := it.get_next(datetime)) <= end:
            found.add(moment.replace(tzinfo=UTC))
    return sorted(found)


@pytest.fixture(scope="module")
def derived() -> cadence.Derived:
    return cadence.derive(SCHEDULES, RepoConfig(), START)


def test_every_slot_has_a_tick_for_each_lead_on_both_sides_of_each_dst_change(
        derived: cadence.Derived) -> None:
    ticks = croniter_ticks(derived.tick_cron, START.replace(tzinfo=None) - timedelta(hours=1),
                           YEAR.replace(tzinfo=None))
    tick_set = set(ticks)
    leads = RepoConfig().cadence.lead_minutes
    checked = 0
    for schedule in SCHEDULES:
        for slot in for_spec(schedule.spec).slots(START, YEAR):  # the evaluator's slots
            for lead in leads:
                # each lead has its tick in the 5 minutes before slot - lead
                wanted = [slot - timedelta(minutes=lead + back) for back in range(5)]
                assert any(t in tick_set for t in wanted), (schedule.id, slot, lead)
            checked += 1
    assert checked > 365 * 2
    # the checks above saw the changes: the same local time at two UTC times
    ny = {s.hour for s in for_spec(SCHEDULES[0].spec).slots(START, YEAR)}
    london = {s.hour for s in for_spec(SCHEDULES[2].spec).slots(START, YEAR)}
    assert ny == {11, 12} and london == {0, 1}


def test_the_spring_and_fall_days_in_new_york_and_london(derived: cadence.Derived) -> None:
    ticks = set(croniter_ticks(derived.tick_cron, datetime(2026, 3, 1), datetime(2026, 11, 30)))
    # New York 07:00: 12:00 UTC before 8 March, 11:00 UTC from it; 12:00 again from 1 Nov
    assert datetime(2026, 3, 7, 11, 44, tzinfo=UTC) in ticks
    assert datetime(2026, 3, 8, 10, 44, tzinfo=UTC) in ticks
    assert datetime(2026, 11, 1, 11, 44, tzinfo=UTC) in ticks
    # London 01:30 on Monday 30 March (after the change of the 29th): 00:30 UTC
    assert datetime(2026, 3, 30, 0, 14, tzinfo=UTC) in ticks
    # a tick on a day without a slot costs a minute; whole months without one, none:
    # the winter-only line is not in the summer
    assert datetime(2026, 7, 15, 11, 44, tzinfo=UTC) not in ticks


def test_ticks_avoid_minute_0_and_keep_githubs_5_minute_spacing(
        derived: cadence.Derived) -> None:
    ticks = croniter_ticks(derived.tick_cron, datetime(2026, 1, 1), datetime(2027, 1, 1))
    assert all(t.minute % 5 == 4 for t in ticks)  # the safety ticks are on the grid too
    # and fill every gap the slots' ticks leave: none is longer than 6 hours and 1
    assert max(b - a for a, b in itertools.pairwise(ticks)) <= timedelta(hours=7)


def test_uncovered_names_the_slots_a_stale_cron_misses() -> None:
    stale = ["7,22,37,52 * * * *"]  # the old fixed cadence covers everything...
    assert cadence.uncovered(stale, SCHEDULES, Cadence(), START, YEAR) == {}
    only_ny = cadence.derive(SCHEDULES[:1], RepoConfig(), START).tick_cron
    missing = cadence.uncovered(only_ny, SCHEDULES, Cadence(), START, YEAR)
    assert set(missing) == {"ny-night", "london", "london-monthly", "utc-weekly"}
    assert missing["utc-weekly"][0] == datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def test_a_fixed_cadence_is_written_as_configured() -> None:
    config = RepoConfig.model_validate({"cadence": {"mode": "fixed",
                                                    "fixed_cron": ["*/10 * * * *"]}})
    derived = cadence.derive(SCHEDULES, config, START)
    assert derived.tick_cron == ["*/10 * * * *"]
    # ticks 10 minutes apart: 60 + 10 + 15 minutes; checked every hour
    assert (derived.watchdog_cron, derived.max_staleness_minutes) == ("41 * * * *", 85)


def test_the_watchdog_follows_the_longest_gap_between_ticks() -> None:
    assert cadence.watchdog_for(timedelta(hours=6)) == ("41 */12 * * *", 735)
    assert cadence.watchdog_for(timedelta(minutes=15)) == ("41 * * * *", 90)
    assert cadence.watchdog_for(timedelta(hours=24)) == ("41 0 * * *", 2895)
    assert cadence.watchdog_for(timedelta(minutes=50)) == ("41 */2 * * *", 125)


def test_compress_restricts_one_day_field_and_merges_lines() -> None:
    moments = [datetime(2026, 12, 31, 16, 59, tzinfo=UTC)]  # a one-shot: day and month
    assert cadence.compress(moments) == ["59 16 31 12 *"]
    june = [datetime(2026, 6, d, 6, m, tzinfo=UTC) for d in range(1, 31) for m in (4, 9)]
    weekdays = [moment for moment in june if moment.weekday() < 5]
    assert cadence.compress(weekdays) == ["4,9 6 * 6 1-5"]
    # a monthly slot: the day of the month says more than its weekdays
    firsts = [datetime(2026, m, 1, 22, 29, tzinfo=UTC) for m in range(1, 13)]
    assert cadence.compress(firsts) == ["29 22 1 * *"]


def test_the_schedule_block_is_rewritten_and_read_back() -> None:
    text = ('on:\n  schedule:\n    # old\n    - cron: "7 * * * *"\n  workflow_dispatch:\n'
            'jobs: {}\n')
    new = tickfile.with_crons(text, ["4 6 * * *", "17 */6 * * *"], ["new"])
    assert new == ('on:\n  schedule:\n    # new\n    - cron: "4 6 * * *"\n'
                   '    - cron: "17 */6 * * *"\n  workflow_dispatch:\njobs: {}\n')
    assert tickfile.read_crons(new) == ["4 6 * * *", "17 */6 * * *"]
    with pytest.raises(ValueError, match="no 'on: schedule:' block"):
        tickfile.with_crons("on:\n  push:\n", [], [])


def test_a_frequent_schedule_gets_one_tick_just_after_each_slot_and_no_lead_ticks() -> None:
    hourly = sched("hourly", "7 * * * *", "UTC")
    ny_hourly = sched("ny-hourly", "30 8-17 * * 1-5", "America/New_York")
    derived = cadence.derive([hourly, ny_hourly], RepoConfig(), START)
    ticks = croniter_ticks(derived.tick_cron, START.replace(tzinfo=None), YEAR.replace(
        tzinfo=None))
    tick_set = set(ticks)
    waited = 0
    for schedule in (hourly, ny_hourly):
        slots = for_spec(schedule.spec).slots(START, YEAR - timedelta(hours=1))
        for slot in slots:
            # New York's 08:30 comes 15 hours after 17:30: worth waiting for; the rest not
            if schedule.id == "ny-hourly" and slot.astimezone(ZoneInfo(
                    "America/New_York")).hour == 8:
                waited += 1
                wanted = [slot - timedelta(minutes=lead + b) for lead in (5, 10, 15)
                          for b in range(cadence.GRID)]
            else:
                wanted = [slot + timedelta(minutes=m) for m in range(cadence.GRID)]
            assert any(t in tick_set for t in wanted), (schedule.id, slot)
    assert waited > 250
    # one tick an hour for the hourly slots (no safety tick: they leave no gap), lead
    # ticks before New York's first slot of a weekday (12:30 or 13:30 UTC), a tick
    # after each of its others (13:34 to 21:34 or 14:34 to 22:34 UTC)
    assert derived.tick_cron == ["9 * * * *", "14,19,24 12 * 3-10 1-5",
                                 "14,19,24 13 * 1-3,11,12 1-5", "34 13 * 3-10 1-5",
                                 "34 14-21 * * 1-5", "34 22 * 1-3,11,12 1-5"]
    assert cadence.uncovered(derived.tick_cron, [hourly, ny_hourly], Cadence(), START,
                             YEAR) == {}
    # a tick before an hourly slot does not cover it: no tick waits there for it
    early = cadence.uncovered(["4 * * * *"], [hourly], Cadence(), START, YEAR)
    assert len(early["hourly"]) > 8000


def test_orchestrator_json_decides_per_schedule_or_for_all() -> None:
    daily, hourly = sched("daily", "0 7 * * *", "UTC"), sched("hourly", "30 * * * *", "UTC")
    config = RepoConfig.model_validate({"cadence": {"linger_schedules": {"daily": False,
                                                                         "hourly": True}}})
    derived = cadence.derive([daily, hourly], config, START)
    # the hourly slot gets lead ticks (15, 10, 5 before, on the grid); the daily slot
    # the tick just after it, at 07:04
    assert derived.tick_cron == ["14,19,24 * * * *", "4 7 * * *"]
    everything = RepoConfig.model_validate({"cadence": {"linger_min_interval_hours": 0}})
    assert cadence.derive([hourly], everything, START).tick_cron == ["14,19,24 * * * *"]
    # a stale tick.yml for the policy fails the check both ways
    assert cadence.uncovered(["34 * * * *"], [daily, hourly], config.cadence, START,
                             YEAR).keys() == {"daily", "hourly"}


def test_the_safety_tick_only_where_the_slots_ticks_leave_a_longer_gap() -> None:
    daily = sched("daily", "0 7 * * *", "America/New_York")
    six = cadence.derive([daily], RepoConfig(), START).tick_cron
    # the lead ticks are the day's first safety tick: three more, 6, 12 and 18 hours
    # after the last lead tick (10:54 UTC in summer time, 11:54 in winter), where a
    # fixed safety line would add four
    assert six == ["44,49,54 10 * 3-10 *", "44,49,54 11 * 1-3,11,12 *", "54 16,22 * 3-10 *",
                   "54 4 * 3-11 *", "54 5,17,23 * 1-3,11,12 *"]
    ticks = croniter_ticks(six, datetime(2026, 6, 1), datetime(2026, 6, 2, 23, 59))
    assert [f"{t:%H:%M}" for t in ticks] == ["04:54", "10:44", "10:49", "10:54", "16:54",
                                             "22:54"] * 2
    config = RepoConfig.model_validate({"cadence": {"safety_every_hours": 24}})
    # daily lead ticks come every 23 to 25 hours (daylight saving): the safety tick too
    assert cadence.derive([daily], config, START).tick_cron == [
        "44,49,54 10 * 3-10 *", "44,49,54 11 * 1-3,11,12 *"]
    weekly = sched("weekly", "0 9 * * 1", "UTC")
    # a weekly slot's lead ticks, then a safety tick every 24 hours after the last one
    assert cadence.derive([weekly], config, START).tick_cron == ["54 8 * * 0,2-6",
                                                                 "44,49,54 8 * * 1"]
    # the same lines whatever the hour cron-sync runs at (the safety ticks follow the
    # slots' ticks, not the moment of the derivation)
    for hour in (0, 7, 13, 23):
        later = START.replace(month=2, hour=hour, minute=31)
        assert cadence.derive([daily], RepoConfig(), later).tick_cron == six
    # a year with one slot, or none, keeps the plain safety line
    once = Schedule(id="once", spec=ScheduleSpec.model_validate_json(json.dumps(
        {"at": "2026-06-01T10:00:00Z", "tracks": [{"name": "t", "run": "true"}]})))
    assert cadence.derive([once], RepoConfig(), START).tick_cron == ["44,49,54 9 1 6 *",
                                                                     "17 */6 * * *"]
    assert cadence.derive([], RepoConfig(), START).tick_cron == ["17 */6 * * *"]


def test_one_tick_serves_the_frequent_slots_of_every_schedule_in_gather_minutes() -> None:
    hourly = [sched(f"h{i}", f"{7 + 11 * i} * * * *", "UTC") for i in range(5)]
    derived = cadence.derive(hourly, RepoConfig(), START)
    # slots at :07, :18, :29, :40 and :51: three ticks an hour, each at most 14 minutes
    # after the slots it serves (the fixed quarter-hour cadence would be four)
    assert derived.tick_cron == ["19,29,54 * * * *"]
    ticks = croniter_ticks(derived.tick_cron, datetime(2026, 1, 1), datetime(2026, 2, 1))
    for schedule in hourly:
        for slot in for_spec(schedule.spec).slots(START, datetime(2026, 1, 31, tzinfo=UTC)):
            i = bisect.bisect_left(ticks, slot)
            assert timedelta(0) <= ticks[i] - slot < timedelta(minutes=15), (schedule.id, slot)
    assert cadence.uncovered(derived.tick_cron, hourly, Cadence(), START, YEAR) == {}
    # each slot its own tick when asked
    own = RepoConfig.model_validate({"cadence": {"gather_minutes": 5}})
    assert cadence.derive(hourly, own, START).tick_cron == ["9,19,29,44,54 * * * *"]
    assert set(cadence.uncovered(derived.tick_cron, hourly, own.cadence, START, YEAR)) == {
        "h0", "h3"}


def test_a_gathered_tick_never_serves_two_slots_of_one_schedule() -> None:
    every5 = sched("five", "*/5 * * * *", "UTC")
    quarter = sched("quarter", "2,17,32,47 * * * *", "UTC")
    derived = cadence.derive([every5, quarter], RepoConfig(), START)
    # every 5-minute slot its own tick (15 minutes would leave two of three behind
    # under catchup: latest); the quarter-hour slots share them
    assert derived.tick_cron == ["4,9,14,19,24,29,34,39,44,49,54,59 * * * *"]
    assert cadence.gathered_ticks(
        [(datetime(2026, 1, 1, 0, m, tzinfo=UTC), "a") for m in (0, 1, 2)]
        + [(datetime(2026, 1, 1, 0, 3, tzinfo=UTC), "b")], timedelta(minutes=15)) == [
        datetime(2026, 1, 1, 0, 4, tzinfo=UTC)]  # inside one grid minute: one tick


def _gathered_in_datetimes(slots: list[tuple[datetime, str]],
                           within: timedelta) -> list[datetime]:
    """gathered_ticks as it was written first, in datetimes: the reference."""
    def on_grid(moment: datetime) -> datetime:
        moment = moment.replace(second=0, microsecond=0)
        return moment - timedelta(minutes=(moment.minute - cadence.GRID_OFFSET) % cadence.GRID)

    def after_grid(moment: datetime) -> datetime:
        earlier = on_grid(moment)
        return earlier if earlier == moment else earlier + timedelta(minutes=cadence.GRID)

    ordered = sorted(set(slots))
    ticks: list[datetime] = []
    i = 0
    while i < len(ordered):
        latest = on_grid(ordered[i][0] + within - timedelta(minutes=1))
        served = {ordered[i][1]}
        j = i + 1
        while j < len(ordered) and ordered[j][0] <= latest and ordered[j][1] not in served:
            served.add(ordered[j][1])
            j += 1
        tick = after_grid(ordered[j - 1][0])
        ticks.append(tick)
        while j < len(ordered) and ordered[j][0] <= tick:
            j += 1
        i = j
    return ticks


@pytest.mark.parametrize("seed", range(40))
def test_gathered_ticks_in_seconds_agree_with_the_datetime_reference(seed: int) -> None:
    rng = random.Random(seed)
    base = datetime(2026, 3, 1, tzinfo=UTC)
    slots = [(base + timedelta(minutes=rng.randrange(0, 3 * 24 * 60),
                               seconds=rng.choice([0, 0, 0, 30])), rng.choice("abcd"))
             for _ in range(rng.randrange(1, 400))]
    within = timedelta(minutes=rng.choice([1, 5, 10, 15, 60]))
    assert cadence.gathered_ticks(slots, within) == _gathered_in_datetimes(slots, within)
