"""Cron slots: window semantics, Vixie DST behaviour, policies, parsing and words.

Every DST expectation is a plain datetime: nothing reads the clock.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from orchestrator import cron
from orchestrator.config.models import ScheduleSpec
from orchestrator.config.triggers import for_spec
from orchestrator.cron import SlotInfo
from tests.builders import schedule_spec

NY = "America/New_York"
FALL_BACK = date(2026, 11, 1)  # New York: 02:00 EDT -> 01:00 EST
SPRING_FORWARD = date(2026, 3, 8)  # New York: 02:00 EST -> 03:00 EDT


# spec(expression, zone, **fields): a one-track spec, read as a schedule file is read.
spec = schedule_spec


def slots(s: ScheduleSpec, after: datetime, until: datetime) -> list[datetime]:
    return for_spec(s).slots(after, until)


def explain(s: ScheduleSpec, after: datetime, until: datetime) -> list[SlotInfo]:
    return for_spec(s).explain(after, until)


def next_slots(s: ScheduleSpec, start: datetime, n: int) -> list[datetime]:
    return [i.at for i in for_spec(s).next(start, n).found]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def local_day(s: ScheduleSpec, day: date) -> list[datetime]:
    """The slots whose local date is ``day``."""
    zone = s.zone
    start = datetime(day.year, day.month, day.day, tzinfo=zone).astimezone(UTC)
    # Search a generous window, then keep what falls on that local date.
    found = slots(s, start - timedelta(hours=6), start + timedelta(hours=36))
    return [t for t in found if t.astimezone(zone).date() == day]


# --------------------------------------------------------------------------- issue cases


def test_fixed_time_in_the_repeated_hour_runs_once_at_the_first_occurrence() -> None:
    got = local_day(spec("30 1 * * *", NY), FALL_BACK)
    assert got == [utc(2026, 11, 1, 5, 30)]  # 01:30 EDT
    assert got[0].astimezone(ZoneInfo(NY)).tzname() == "EDT"


def test_fixed_time_in_the_gap_runs_once_at_the_end_of_the_gap() -> None:
    got = local_day(spec("30 2 * * *", NY), SPRING_FORWARD)
    assert got == [utc(2026, 3, 8, 7, 0)]
    local = got[0].astimezone(ZoneInfo(NY))
    assert (local.hour, local.minute, local.tzname()) == (3, 0, "EDT")


@pytest.mark.parametrize(("day", "count"), [(FALL_BACK, 25), (SPRING_FORWARD, 23),
                                            (date(2026, 6, 1), 24)])
def test_hourly_runs_in_elapsed_time(day: date, count: int) -> None:
    got = local_day(spec("0 * * * *", NY), day)
    assert len(got) == count
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(got))


@pytest.mark.parametrize("tz", [NY, "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"])
@pytest.mark.parametrize("expr", ["30 1 * * *", "30 2 * * *", "15 2 * * *", "45 1 * * *",
                                  "0 0 * * *", "5 12 * * *"])
def test_daily_fixed_time_fires_exactly_once_per_local_day_all_year(tz: str, expr: str) -> None:
    s = spec(expr, tz)
    zone = s.zone
    start = datetime(2026, 1, 1, tzinfo=zone).astimezone(UTC)
    end = datetime(2027, 1, 1, tzinfo=zone).astimezone(UTC)
    got = slots(s, start - timedelta(seconds=1), end - timedelta(seconds=1))
    per_day = Counter(t.astimezone(zone).date() for t in got)
    assert len(per_day) == 365
    assert set(per_day.values()) == {1}
    assert got == sorted(set(got))


# --------------------------------------------------------------------------- policies


def test_gap_skip_drops_the_slot_that_day_only() -> None:
    s = spec("30 2 * * *", NY, dst={"gap": "skip"})
    assert local_day(s, SPRING_FORWARD) == []
    assert local_day(s, date(2026, 3, 9)) == [utc(2026, 3, 9, 6, 30)]
    info = explain(s, utc(2026, 3, 8, 0), utc(2026, 3, 8, 12))
    assert [(i.kind, i.fires) for i in info] == [(cron.SlotKind.SKIPPED, False)]


def test_fold_both_runs_at_both_occurrences() -> None:
    s = spec("30 1 * * *", NY, dst={"fold": "both"})
    assert local_day(s, FALL_BACK) == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6, 30)]
    names = [t.astimezone(s.zone).tzname() for t in local_day(s, FALL_BACK)]
    assert names == ["EDT", "EST"]


def test_fold_first_reports_the_second_occurrence_as_not_firing() -> None:
    info = explain(spec("30 1 * * *", NY), utc(2026, 11, 1, 0), utc(2026, 11, 1, 12))
    assert [(i.at, i.kind, i.fires) for i in info] == [
        (utc(2026, 11, 1, 5, 30), cron.SlotKind.NORMAL, True),
        (utc(2026, 11, 1, 6, 30), cron.SlotKind.REPEATED, False),
    ]
    assert "runs only at the first occurrence" in (cron.dst_note(info[1], NY) or "")


def test_elapsed_time_jobs_ignore_the_policy() -> None:
    # Minute field starts with '*': both passes of the repeated hour, nothing in the gap.
    s = spec("*/30 1-2 * * *", NY, dst={"gap": "shift", "fold": "first"})
    fall = local_day(s, FALL_BACK)
    assert len(fall) == 6  # 01:00 01:30 EDT, 01:00 01:30 EST, 02:00 02:30 EST
    spring = local_day(s, SPRING_FORWARD)
    assert [t.astimezone(s.zone).strftime("%H:%M") for t in spring] == ["01:00", "01:30"]


@pytest.mark.parametrize("day", [FALL_BACK, SPRING_FORWARD])
def test_every_15_minutes_keeps_a_steady_beat_across_transitions(day: date) -> None:
    s = spec("*/15 * * * *", NY)
    got = slots(s, utc(day.year, day.month, day.day) - timedelta(days=1),
                     utc(day.year, day.month, day.day) + timedelta(days=2))
    assert all(b - a == timedelta(minutes=15) for a, b in itertools.pairwise(got))
    assert len(local_day(s, day)) == (100 if day == FALL_BACK else 92)


def test_two_gap_times_and_a_real_time_collapse_into_one_run() -> None:
    s = spec("0,30 2,3 * * *", NY)
    got = [t.astimezone(s.zone).strftime("%H:%M %Z") for t in local_day(s, SPRING_FORWARD)]
    assert got == ["03:00 EDT", "03:30 EDT"]
    info = explain(s, utc(2026, 3, 8, 0), utc(2026, 3, 8, 12))
    assert sum(1 for i in info if i.kind is cron.SlotKind.SHIFTED) == 2
    assert sum(1 for i in info if i.fires) == 2


# Lord Howe Island moves its clocks by 30 minutes: 02:00 -> 02:30 on 2026-10-04,
# 02:00 -> 01:30 on 2026-04-05.
LORD_HOWE = "Australia/Lord_Howe"


def test_lord_howe_gap_of_thirty_minutes() -> None:
    s = spec("15 2 * * *", LORD_HOWE)
    (got,) = local_day(s, date(2026, 10, 4))
    assert got.astimezone(s.zone).strftime("%H:%M %z") == "02:30 +1100"
    assert local_day(spec("15 2 * * *", LORD_HOWE, dst={"gap": "skip"}), date(2026, 10, 4)) == []
    # 02:45 exists; an elapsed-time job sees 01:00-01:59, then 02:30 onwards.
    hourly = local_day(spec("*/15 * * * *", LORD_HOWE), date(2026, 10, 4))
    assert len(hourly) == 96 - 2


def test_lord_howe_fold_of_thirty_minutes() -> None:
    first = local_day(spec("45 1 * * *", LORD_HOWE), date(2026, 4, 5))
    both = local_day(spec("45 1 * * *", LORD_HOWE, dst={"fold": "both"}), date(2026, 4, 5))
    assert len(first) == 1
    assert first[0].astimezone(ZoneInfo(LORD_HOWE)).strftime("%H:%M %z") == "01:45 +1100"
    assert [b - a for a, b in itertools.pairwise(both)] == [timedelta(minutes=30)]
    assert len(local_day(spec("*/15 * * * *", LORD_HOWE), date(2026, 4, 5))) == 96 + 2


def test_a_window_starting_inside_the_second_pass_still_knows_it_is_the_second() -> None:
    s = spec("30 1 * * *", NY)
    # 06:10 UTC is 01:10 EST, the second pass; the fall-back itself is before the window.
    assert slots(s, utc(2026, 11, 1, 6, 10), utc(2026, 11, 1, 7)) == []
    both = spec("30 1 * * *", NY, dst={"fold": "both"})
    assert slots(both, utc(2026, 11, 1, 6, 10), utc(2026, 11, 1, 7)) == [
        utc(2026, 11, 1, 6, 30)]


@pytest.mark.parametrize("expr", ["30 1 * * *", "30 2 * * *", "0,30 2,3 * * *", "*/15 * * * *",
                                  "0 * * * *"])
@pytest.mark.parametrize("dst", [{}, {"gap": "skip", "fold": "both"}])
def test_consecutive_windows_give_each_slot_exactly_once(expr: str, dst: dict[str, str]) -> None:
    # The tick asks for (cursor, now] on every run: cutting an interval anywhere must
    # neither lose nor repeat a slot, also across both transitions.
    rng = random.Random(expr)
    for zone_name, day in [(NY, SPRING_FORWARD), (NY, FALL_BACK), (LORD_HOWE, date(2026, 10, 4)),
                           (LORD_HOWE, date(2026, 4, 5))]:
        s = spec(expr, zone_name, dst=dst)
        start = utc(day.year, day.month, day.day) - timedelta(hours=12)
        end = start + timedelta(hours=48)
        whole = slots(s, start, end)
        cuts = sorted({start + timedelta(minutes=rng.randrange(0, 48 * 60)) for _ in range(40)}
                      | {start, end} | {c.at for c in cron.zone_changes(s.zone, start, end)})
        pieces = [t for a, b in itertools.pairwise(cuts) for t in slots(s, a, b)]
        assert pieces == whole, (zone_name, day)


# --------------------------------------------------------------------------- brute force


def brute_force(s: ScheduleSpec, after: datetime, until: datetime) -> list[datetime]:
    """Elapsed-time semantics by definition: every UTC minute whose wall time matches."""
    expr = cron.parse_cron(s.cron or "")
    out = []
    t = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while t <= until:
        wall = t.astimezone(s.zone).replace(tzinfo=None)
        if any(True for _ in expr.matches(wall, wall + timedelta(minutes=1))):
            out.append(t)
        t += timedelta(minutes=1)
    return out


@pytest.mark.parametrize("tz", [NY, "Europe/London", LORD_HOWE, "America/Santiago"])
@pytest.mark.parametrize("expr", ["*/15 * * * *", "0 * * * *", "30 * * * *",
                                  "*/7 1-3 * * *", "* 2 * * *", "*/20 */2 * * 0"])
def test_elapsed_time_jobs_equal_a_minute_by_minute_scan(tz: str, expr: str) -> None:
    s = spec(expr, tz)
    zone = s.zone
    for change in cron.zone_changes(zone, utc(2026, 1, 1), utc(2027, 1, 1)):
        after, until = change.at - timedelta(hours=5), change.at + timedelta(hours=5)
        assert slots(s, after, until) == brute_force(s, after, until), change


def test_matches_a_reference_implementation_in_utc() -> None:
    # croniter is right wherever no DST is involved; compare on random expressions.
    rng = random.Random(20261201)

    def field(low: int, high: int, star_step: bool) -> str:
        kind = rng.choice(["*", "n", "range", "list", "rstep"] + (["sstep"] if star_step else []))
        a, b = sorted(rng.sample(range(low, high + 1), 2))
        if kind == "n":
            return str(a)
        if kind == "range":
            return f"{a}-{b}"
        if kind == "list":
            return ",".join(str(x) for x in sorted(rng.sample(range(low, high + 1), 3)))
        if kind == "rstep":
            return f"{a}-{b}/{rng.randint(1, 4)}"
        if kind == "sstep":
            return f"*/{rng.randint(2, 9)}"
        return "*"

    start = utc(2026, 1, 1)
    for _ in range(150):
        expr = " ".join([field(0, 59, True), field(0, 23, True), field(1, 28, False),
                         field(1, 12, True), field(0, 6, False)])
        s = spec(expr)
        ours = next_slots(s, start, 30)
        it = croniter(expr, start)
        theirs = [it.get_next(datetime) for _ in range(30)]
        assert ours == theirs, expr


# --------------------------------------------------------------------------- windows


def test_window_is_after_exclusive_until_inclusive() -> None:
    s = spec("0 * * * *")
    assert slots(s, utc(2026, 5, 1, 1), utc(2026, 5, 1, 3)) == [
        utc(2026, 5, 1, 2), utc(2026, 5, 1, 3)]
    assert slots(s, utc(2026, 5, 1, 3), utc(2026, 5, 1, 3)) == []
    assert slots(s, utc(2026, 5, 1, 4), utc(2026, 5, 1, 3)) == []


def test_next_slots_are_strictly_after_start_and_ascending() -> None:
    s = spec("0 2 * * 1-5", NY)
    got = next_slots(s, utc(2026, 11, 2, 7), 5)  # exactly Monday 02:00 EST
    assert got[0] == utc(2026, 11, 3, 7)
    assert len(got) == 5 and got == sorted(got)
    assert all(t.tzinfo is UTC for t in got)


def test_rare_and_far_slots() -> None:
    assert next_slots(spec("0 0 29 2 *"), utc(2026, 3, 1), 2) == [
        utc(2028, 2, 29), utc(2032, 2, 29)]


def test_naive_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        slots(spec("* * * * *"), datetime(2026, 1, 1), utc(2026, 1, 2))


def test_one_shot_slot_inside_the_window_only() -> None:
    s = spec(None, NY, at="2026-12-24T18:00:00")
    assert slots(s, utc(2026, 12, 1), utc(2026, 12, 31)) == [utc(2026, 12, 24, 23)]
    assert slots(s, utc(2026, 12, 24, 23), utc(2026, 12, 31)) == []
    assert next_slots(s, utc(2026, 1, 1), 3) == [utc(2026, 12, 24, 23)]
    aware = spec(None, NY, at="2026-12-24T18:00:00+01:00")
    assert slots(aware, utc(2026, 12, 1), utc(2026, 12, 31)) == [utc(2026, 12, 24, 17)]


def test_one_shot_in_a_gap_is_shifted_and_in_a_fold_means_the_first() -> None:
    gap = spec(None, NY, at="2026-03-08T02:30:00")
    assert gap.at_utc() == utc(2026, 3, 8, 7)
    (info,) = explain(gap, utc(2026, 3, 1), utc(2026, 3, 9))
    assert info.kind is cron.SlotKind.SHIFTED
    assert spec(None, NY, at="2026-11-01T01:30:00").at_utc() == utc(2026, 11, 1, 5, 30)


def test_zone_changes_are_found_to_the_second() -> None:
    changes = cron.zone_changes(ZoneInfo(NY), utc(2026, 1, 1), utc(2027, 1, 1))
    assert [(c.at, c.is_gap) for c in changes] == [
        (utc(2026, 3, 8, 7), True), (utc(2026, 11, 1, 6), False)]
    assert cron.zone_changes(ZoneInfo("Asia/Kolkata"), utc(2026, 1, 1), utc(2027, 1, 1)) == []


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(("expr", "message"), [
    ("0 2 * *", "5 fields"),
    ("0 0 2 * * *", "got 6"),
    ("61 * * * *", "minute field: 61 is out of range 0-59"),
    ("* 24 * * *", "hour field: 24"),
    ("* * 0 * *", "day-of-month field: 0"),
    ("* * * 13 *", "month field: 13"),
    ("* * * * 8", "day-of-week field: 8"),
    ("*/0 * * * *", "step 0"),
    ("5-2 * * * *", "backwards"),
    ("0 0 L * *", "'L' uses L .*unsupported extension"),
    ("0 0 LW * *", "'LW' uses L .*unsupported extension"),
    ("0 0 * * 5L", "day-of-week field: '5L' uses L .*unsupported extension"),
    ("0 0 15W * *", "'15W' uses W .*unsupported extension"),
    ("0 0 ? * *", "'?' uses ? .*unsupported extension"),
    ("0 0 * * 1#2", "'1#2' uses # .*unsupported extension"),
    ("H * * * *", "minute field: 'H' uses H .*unsupported extension"),
    ("H(0-29)/15 * * * *", "'H\\(0-29\\)/15' uses H .*unsupported extension"),
    ("0 0 * jxl *", "not a number or a name"),
    ("0 0 * foo *", "not a number or a name"),
    ("@reboot", "unknown cron alias"),
    ("0 0 30 2 *", "never fires: day 30 does not occur in February"),
    ("0 0 31 4,6 *", "never fires"),
])
def test_bad_expressions_say_what_is_wrong(expr: str, message: str) -> None:
    pattern = message.replace("'?'", r"'\?'").replace("uses ?", r"uses \?")
    with pytest.raises(ValueError, match=pattern):
        cron.validate_cron(expr)


def test_names_that_contain_extension_letters_are_still_names() -> None:
    # jul, wed, thu: the letters of L, W and H inside a name are not extensions.
    assert cron.parse_cron("0 0 * jul wed,thu").months == frozenset({7})


@pytest.mark.parametrize(("expr", "same_as"), [
    ("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"), ("@weekly", "0 0 * * 0"),
    ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"),
    ("@midnight", "0 0 * * *"),
    # A step larger than its range matches only the range's first value (Debian cron).
    ("*/61 * * * *", "0 * * * *"), ("0 */24 * * *", "0 0 * * *"),
    ("30/45 * * * *", "30 * * * *"), ("0 0 */40 * *", "0 0 1 * *"),
    ("0 9 * jan-mar mon-fri", "0 9 * 1-3 1-5"), ("0 9 * * 7", "0 9 * * 0"),
    ("5/20 * * * *", "5,25,45 * * * *"), ("0 9 * * 5-7", "0 9 * * 0,5,6"),
])
def test_aliases_names_and_sunday_seven(expr: str, same_as: str) -> None:
    start = utc(2026, 1, 1)
    assert next_slots(spec(expr), start, 20) == next_slots(spec(same_as), start, 20)
    assert cron.validate_cron(expr) == expr


def test_a_step_larger_than_its_range_is_accepted_with_a_note() -> None:
    assert cron.parse_cron("*/61 * * * *").notes == (
        "minute field: step 61 in '*/61' is larger than its range 0-59, so it matches "
        "only 0",)
    assert cron.parse_cron("0 */24 * * *").notes == (
        "hour field: step 24 in '*/24' is larger than its range 0-23, so it matches "
        "only 0",)
    assert cron.parse_cron("*/59 */23 * * *").notes == ()  # 0 and 59, 0 and 23
    assert cron.describe("*/61 * * * *") == "at minute 0 of every hour"
    assert cron.describe("0 */24 * * *") == "at 00:00 every day"


def test_day_fields_or_when_both_restricted_and_when_one_starts_with_star() -> None:
    # 2026-06-01 is a Monday. Both restricted: the 1st OR any Monday.
    either = next_slots(spec("0 0 1,15 * 1"), utc(2026, 5, 31), 4)
    assert [t.day for t in either] == [1, 8, 15, 22]
    # '*/2' starts with '*': Vixie ANDs them (odd days that are Mondays).
    both = next_slots(spec("0 0 */2 * 1"), utc(2026, 5, 31), 3)
    assert [(t.day, t.isoweekday()) for t in both] == [(1, 1), (15, 1), (29, 1)]


def test_fixed_time_follows_the_first_character_of_minute_and_hour() -> None:
    assert cron.parse_cron("30 2 * * *").fixed
    assert cron.parse_cron("0-59 0-23 * * *").fixed
    assert not cron.parse_cron("*/5 2 * * *").fixed
    assert not cron.parse_cron("0 * * * *").fixed
    assert not cron.parse_cron("@hourly").fixed
    assert cron.parse_cron("@daily").fixed


# --------------------------------------------------------------------------- words


@pytest.mark.parametrize(("expr", "words"), [
    ("0 2 * * 1-5", "at 02:00 on Monday through Friday"),
    ("*/15 * * * *", "every 15 minutes"),
    ("* * * * *", "every minute"),
    ("7 * * * *", "at minute 7 of every hour"),
    ("0 */2 * * *", "at minute 0 past every 2nd hour"),
    ("30 9 1 * *", "at 09:30 on day 1 of the month"),
    ("0 9 * * 6,0", "at 09:00 on Saturday and Sunday"),
    ("0 9 1 * 1", "at 09:00 on day 1 of the month or on Monday"),
    ("0 0 1 1 *", "at 00:00 on day 1 of the month in January"),
    ("*/5 9-17 * * *", "every 5 minutes during hours 9 through 17"),
    ("0,30 8 * * *", "at 08:00 and 08:30 every day"),
])
def test_cron_in_words(expr: str, words: str) -> None:
    assert cron.describe(expr) == words


def test_describe_a_spec_names_its_zone() -> None:
    assert for_spec(spec("0 2 * * 1-5", NY)).describe() == (
        "at 02:00 on Monday through Friday (America/New_York)")
    assert for_spec(spec(None, "Europe/London", at="2026-12-24T18:00:00")).describe() == (
        "once at 2026-12-24 18:00 (Europe/London)")


# --------------------------------------------------------------------------- horizon


def test_the_search_for_next_slots_says_where_it_stopped() -> None:
    leap = for_spec(spec("0 12 29 2 *"))
    start = utc(2026, 12, 1)
    found = leap.next(start, 8)
    assert [s.at for s in found.found] == [utc(2028, 2, 29, 12), utc(2032, 2, 29, 12),
                                           utc(2036, 2, 29, 12)]
    assert found.horizon == start + cron.NEXT_HORIZON == utc(2036, 12, 8)
    assert leap.next(start, 3).horizon is None  # all found: nothing to say
    # A one-shot ends; that is not a search giving up.
    once = for_spec(spec(None, at="2027-01-01T00:00:00Z")).next(start, 8)
    assert [s.at for s in once.found] == [utc(2027, 1, 1)] and once.horizon is None


def test_the_cron_package_imports_nothing_else_of_orchestrator() -> None:
    """The evaluator takes (expression, zone, dst); models import it, never the reverse."""
    import ast
    from pathlib import Path

    outside = []
    for path in Path(cron.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level > 1 or (
                    node.level == 0 and (node.module or "").startswith("orchestrator"))):
                outside.append(f"{path.name}: {node.module}")
    assert outside == []
