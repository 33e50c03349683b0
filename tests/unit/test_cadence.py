"""cron-sync's tick cron, checked slot by slot against the cron evaluator (and croniter,
an independent reading of the UTC lines GitHub would run), across both daylight-saving
changes of New York and London and in UTC."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from croniter import croniter

from orchestrator import cadence
from orchestrator.models import Schedule, ScheduleSpec
from orchestrator.repo_config import Cadence, RepoConfig
from orchestrator.triggers import for_spec

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
    assert all(t.minute % 5 == 4 or t.minute == 17 for t in ticks)
    assert derived.tick_cron[-1] == "17 */6 * * *"  # the safety tick


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
    new = cadence.with_crons(text, ["4 6 * * *", "17 */6 * * *"], ["new"])
    assert new == ('on:\n  schedule:\n    # new\n    - cron: "4 6 * * *"\n'
                   '    - cron: "17 */6 * * *"\n  workflow_dispatch:\njobs: {}\n')
    assert cadence.read_crons(new) == ["4 6 * * *", "17 */6 * * *"]
    with pytest.raises(ValueError, match="no 'on: schedule:' block"):
        cadence.with_crons("on:\n  push:\n", [], [])
