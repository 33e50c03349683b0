"""A schedule change as a change (:mod:`orchestrator.cadence.change`): slots paired as
moved, daylight saving that differs, the planner's first tick after merging, the cost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from orchestrator.cadence.change import compare, compare_slots, first_tick
from tests.builders import schedule

NY = ZoneInfo("America/New_York")
MONDAY = datetime(2026, 12, 7, 11, 45, tzinfo=UTC)
"""06:45 in New York, a Monday."""


def local(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=NY).astimezone(UTC)


def test_a_removed_and_an_added_slot_of_one_local_day_are_paired_in_time_order() -> None:
    old = [local(8, 7), local(8, 19), local(9, 7), local(12, 7)]
    new = [local(8, 6, 30), local(9, 7), local(10, 6, 30)]
    found = compare_slots(old, new, NY, NY)
    assert found.moved == ((local(8, 7), local(8, 6, 30)),)
    assert found.removed == (local(8, 19), local(12, 7))
    assert found.added == (local(10, 6, 30),)


def test_the_day_of_a_slot_is_its_own_zone_s() -> None:
    # 23:30 in New York is 04:30 UTC the next day: still the 8th where it runs
    old = [local(8, 23, 30)]
    new = [datetime(2026, 12, 8, 22, 0, tzinfo=UTC)]
    assert compare_slots(old, new, NY, ZoneInfo("UTC")).moved == ((old[0], new[0]),)
    assert not compare_slots(old, new, ZoneInfo("UTC"), ZoneInfo("UTC")).moved


def test_an_unchanged_schedule_is_no_change() -> None:
    nightly = schedule("nightly", cron="0 7 * * *", timezone="America/New_York")
    assert compare(nightly, nightly, MONDAY) is None


def test_weekdays_at_half_past_six_instead_of_every_day_at_seven() -> None:
    old = schedule("nightly", cron="0 7 * * *", timezone="America/New_York")
    new = schedule("nightly", cron="30 6 * * 1-5", timezone="America/New_York")
    change = compare(old, new, MONDAY)
    assert change is not None and change.kind == "changed"
    assert (change.old_count, change.new_count) == (30, 22)
    # today's 07:00 is ahead, today's 06:30 is not: the 7th loses its slot; the 30th
    # day's 06:30 comes before the window's end, its 07:00 after it
    assert len(change.slots.moved) == 21
    assert change.slots.removed[0] == local(7, 7)
    assert len(change.slots.removed) == 9
    assert change.slots.added == (datetime(2027, 1, 6, 11, 30, tzinfo=UTC),)
    assert change.dst_gained == change.dst_lost == ()
    # a track leg and a fan-in job per run, a minute each
    assert change.minutes == (60.0, 44.0)
    assert change.first_tick is not None
    assert change.first_tick.fired == (local(7, 6, 30),)


def test_daylight_saving_that_only_the_new_version_meets() -> None:
    old = schedule("nightly", cron="30 2 * * *", timezone="UTC")
    new = schedule("nightly", cron="30 2 * * *", timezone="America/New_York")
    change = compare(old, new, MONDAY)
    assert change is not None and change.dst_lost == ()
    assert change.dst_gained == (
        "2027-03-14 02:30 does not exist in America/New_York (clocks go forward): runs "
        "at 03:00 EDT (07:00 UTC) instead",)


def test_a_schedule_added_or_removed() -> None:
    new = schedule("fresh", cron="15 9 * * *")
    added = compare(None, new, MONDAY)
    removed = compare(new, None, MONDAY)
    assert added is not None and added.kind == "added" and added.minutes == (0.0, 60.0)
    assert removed is not None and removed.kind == "removed"
    assert removed.minutes == (60.0, 0.0) and removed.first_tick is None


EARLY = datetime(2026, 12, 7, 12, 10, tzinfo=UTC)
"""07:10 in New York: after the new version's 06:00 and 06:30, and the old one's 05:00."""


@pytest.mark.parametrize(("policies", "fired", "skipped", "held"), [
    # the planner's default: the newest due slot, the earlier one skipped
    ({}, [local(7, 6, 30)], [local(7, 6)], []),
    # every due slot, at once, when runs may overlap
    ({"catchup": "all", "overlap": "allow"}, [local(7, 6), local(7, 6, 30)], [], []),
    # every due slot, but the first one's run is still open for the second
    ({"catchup": "all"}, [local(7, 6)], [], [local(7, 6, 30)]),
])
def test_the_first_tick_after_merging_is_the_planner_s(
        policies: dict[str, str], fired: list[datetime], skipped: list[datetime],
        held: list[datetime]) -> None:
    old = schedule("nightly", cron="0 5 * * *", timezone="America/New_York")
    new = schedule("nightly", cron="0,30 6 * * *", timezone="America/New_York",
                   catchup_window_minutes=120, **policies)
    tick = first_tick(new, old.spec, EARLY)
    assert list(tick.fired) == fired
    assert list(tick.skipped) == skipped
    assert [at for at, _ in tick.held] == held
    assert tick.next_slot == local(8, 6)


def test_slots_older_than_the_catch_up_window_are_missed_at_the_first_tick() -> None:
    old = schedule("nightly", cron="0 5 * * *", timezone="America/New_York")
    new = schedule("nightly", cron="0 6 * * *", timezone="America/New_York",
                   catchup_window_minutes=30)
    tick = first_tick(new, old.spec, EARLY)
    assert tick.fired == () and tick.missed == (local(7, 6),)


def test_a_new_schedule_never_back_fills() -> None:
    new = schedule("fresh", cron="0,30 6 * * *", timezone="America/New_York",
                   catchup="all", catchup_window_minutes=120)
    tick = first_tick(new, None, EARLY)
    assert tick.fired == (local(7, 6, 30),)
    assert first_tick(new, None, EARLY + timedelta(hours=3)).fired == ()
