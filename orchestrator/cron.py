"""Cron slots with daylight-saving semantics.

A slot is the UTC instant at which a schedule is due. Time is always a parameter:
:func:`slots` takes the interval, nothing here reads the clock.

Expressions are standard five-field cron (minute hour day-of-month month day-of-week:
numbers, ``jan``-``dec``/``sun``-``sat`` names, ``*``, ``,``, ``-`` and ``/``) or one of
the ``@hourly``-style aliases, evaluated in the schedule's time zone. As in
Vixie/Debian cron, when both day fields are restricted a day matches if *either*
does; when either starts with ``*`` both must match.

Daylight saving follows Debian/Vixie cron (as does cronsim), unless ``spec.dst`` says
otherwise:

- a **fixed-time** job (neither the minute nor the hour field starts with ``*``) whose
  local time falls in a spring-forward gap runs once, at the first valid instant after
  the gap (``dst.gap = shift``; ``skip`` drops it); one whose local time occurs twice
  on a fall-back day runs once, at the first occurrence (``dst.fold = first``; ``both``
  runs it at both);
- a job whose minute or hour field starts with ``*`` runs in real elapsed time: both
  passes of a repeated hour, nothing for wall times that do not exist.

How: matching is done on naive local wall-clock times, and the mapping to UTC is done
here, piecewise between the zone's offset changes. croniter is not used for
evaluation: its DST handling is wrong (7.0.0 fires ``30 1 * * *`` twice on a fall-back
day), and walking wall-clock time directly also lets a 60-minute window cost a few
matches rather than a per-minute scan.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from .models import DstFold, DstGap, ScheduleSpec

ALIASES: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

MINUTE = timedelta(minutes=1)
_DAY = timedelta(days=1)
_TICK = timedelta(microseconds=1)

ZONE_SCAN_STEP = timedelta(hours=6)
"""Offsets are sampled this far apart to find a zone's changes. Two changes closer than
this that return to the same offset would be missed; no IANA zone has such a pair."""

FOLD_LOOKBACK = timedelta(days=1)
"""How far before an interval to look for a fall-back whose repeated hour reaches into
it. Larger than any backward jump in the IANA database (DST is 30 minutes to 2 hours)."""

NEXT_HORIZON = timedelta(days=366 * 10)
""":func:`next_slots` gives up after this (covers 29 February, once in 4 or 8 years)."""

_FIELDS = (
    # name, low, high, names
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day-of-month", 1, 31, None),
    ("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun",
                      "jul", "aug", "sep", "oct", "nov", "dec")),
    ("day-of-week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # 29: leap years exist
_ITEM_RE = re.compile(r"(?P<range>\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(?P<step>[0-9]+))?")

DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December")


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class CronExpr:
    """A parsed five-field expression: the allowed values of each field."""

    text: str
    """The five fields as evaluated (aliases expanded)."""
    fields: tuple[str, str, str, str, str]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    """0 = Sunday ... 6 = Saturday (a 7 in the expression is Sunday too)."""

    @property
    def fixed(self) -> bool:
        """Fixed-time job in Vixie's sense: neither minute nor hour starts with ``*``.

        Fixed-time jobs get the DST gap/fold policy; the others run in elapsed time.
        """
        return not (self.fields[0].startswith("*") or self.fields[1].startswith("*"))

    @property
    def day_star(self) -> bool:
        return self.fields[2].startswith("*")

    @property
    def weekday_star(self) -> bool:
        return self.fields[4].startswith("*")

    @property
    def both_days_restricted(self) -> bool:
        """Both day fields restricted: cron ORs them (a day matches if either does)."""
        return not (self.day_star or self.weekday_star)

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = day.isoweekday() % 7 in self.weekdays
        if self.day_star or self.weekday_star:
            return dom and dow
        return dom or dow

    def matches(self, start: datetime, stop: datetime) -> Iterator[datetime]:
        """Naive wall-clock minutes ``m`` with ``start <= m < stop`` that match, ascending."""
        for base, offsets in self.hour_matches(start, stop):
            for offset in offsets:
                yield base + offset

    def hour_matches(self, start: datetime, stop: datetime
                     ) -> Iterator[tuple[datetime, tuple[timedelta, ...]]]:
        """Like :meth:`matches`, grouped by hour: ``(start of hour, minute offsets)``.

        Grouping lets callers map an hour to UTC once, not every minute: the tick
        evaluates every schedule on every run.
        """
        if start >= stop:
            return
        first = start.replace(second=0, microsecond=0)
        if first < start:
            first += MINUTE
        every = tuple(_MINUTES[m] for m in self.minutes)
        day = first.date()
        last_day = (stop - _TICK).date()
        while day <= last_day:
            if day.month not in self.months:
                day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
                continue
            if self.day_matches(day):
                midnight = datetime(day.year, day.month, day.day)
                for hour in self.hours:
                    base = midnight + _HOURS[hour]
                    if base >= stop:
                        break
                    end = base + _HOURS[1]
                    if end <= first:
                        continue
                    if base >= first and end <= stop:
                        yield base, every
                    else:
                        part = tuple(o for o in every if first <= base + o < stop)
                        if part:
                            yield base, part
            day += _DAY


_MINUTES = tuple(timedelta(minutes=m) for m in range(60))
_HOURS = tuple(timedelta(hours=h) for h in range(25))


def _value(token: str, low: int, high: int, names: tuple[str, ...] | None, field: str) -> int:
    if token.isdigit():
        number = int(token)
    elif names is not None and token in names:
        number = names.index(token) + (1 if field == "month" else 0)
    else:
        hint = f" or a name such as {names[0]!r}" if names else ""
        raise ValueError(f"{field} field: {token!r} is not a number{hint}")
    if not low <= number <= high:
        raise ValueError(f"{field} field: {number} is out of range {low}-{high}")
    return number


def _parse_field(text: str, index: int) -> set[int]:
    field, low, high, names = _FIELDS[index]
    values: set[int] = set()
    for item in text.split(","):
        match = _ITEM_RE.fullmatch(item)
        if match is None:
            raise ValueError(
                f"{field} field: cannot read {item!r} (use numbers, names, '*', ',', '-' "
                "and '/'; extensions such as L, W, # and ? are not supported)"
            )
        part, step_text = match["range"], match["step"]
        step = 1
        if step_text is not None:
            step = int(step_text)
            if not 1 <= step <= high:
                raise ValueError(f"{field} field: step {step} is out of range 1-{high}")
        if part == "*":
            start, end = low, high
        elif "-" in part:
            a, b = part.split("-")
            start, end = (_value(a, low, high, names, field), _value(b, low, high, names, field))
            if start > end:
                raise ValueError(f"{field} field: range {part!r} runs backwards")
        else:
            start = _value(part, low, high, names, field)
            end = high if step_text is not None else start  # "5/15" means 5-max/15
        values.update(range(start, end + 1, step))
    return values


@functools.lru_cache(maxsize=4096)
def parse_cron(expr: str) -> CronExpr:
    """Parse a five-field expression or alias; raise ValueError with a clear message."""
    if not isinstance(expr, str):
        raise ValueError("cron must be a string")
    text = " ".join(expr.lower().split())
    if text.startswith("@"):
        if text not in ALIASES:
            raise ValueError(f"unknown cron alias {expr.strip()!r} (use one of "
                             f"{', '.join(sorted(ALIASES))})")
        text = ALIASES[text]
    parts = text.split()
    if len(parts) != 5:
        raise ValueError(
            f"cron must have 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(parts)}: {expr.strip()!r}"
        )
    sets = [_parse_field(part, i) for i, part in enumerate(parts)]
    weekdays = frozenset(d % 7 for d in sets[4])
    parsed = CronExpr(
        text=text,
        fields=(parts[0], parts[1], parts[2], parts[3], parts[4]),
        minutes=tuple(sorted(sets[0])),
        hours=tuple(sorted(sets[1])),
        days=frozenset(sets[2]),
        months=frozenset(sets[3]),
        weekdays=weekdays,
    )
    if parsed.weekday_star:
        # Day-of-month (with month) alone decides which days match: it must name a date.
        possible = [m for m in parsed.months if min(parsed.days) <= _MONTH_DAYS[m - 1]]
        if not possible:
            months = ", ".join(MONTH_NAMES[m - 1] for m in sorted(parsed.months))
            raise ValueError(f"cron {expr.strip()!r} never fires: day {min(parsed.days)} "
                             f"does not occur in {months}")
    return parsed


def validate_cron(expr: str) -> str:
    """Return ``expr`` if it is a five-field cron expression or an alias, else raise ValueError."""
    parse_cron(expr)
    return expr


# --------------------------------------------------------------------------- zones


@dataclass(frozen=True)
class ZoneChange:
    """An instant at which a zone's UTC offset changes."""

    at: datetime
    """UTC instant of the change: the first instant with the new offset."""
    before: timedelta
    after: timedelta

    @property
    def is_gap(self) -> bool:
        """Clocks jump forward: the wall times in between do not exist."""
        return self.after > self.before


def _offset(zone: ZoneInfo, moment: datetime) -> timedelta:
    offset = moment.astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def zone_changes(zone: ZoneInfo, after: datetime, until: datetime) -> list[ZoneChange]:
    """The offset changes of ``zone`` in ``(after, until]``, ascending."""
    changes: list[ZoneChange] = []
    lo, lo_off = after, _offset(zone, after)
    while lo < until:
        hi = min(lo + ZONE_SCAN_STEP, until)
        hi_off = _offset(zone, hi)
        if hi_off != lo_off:
            # Bisect on whole seconds: zone changes happen on whole seconds.
            a, b = int(lo.timestamp()), int(-(-hi.timestamp() // 1))
            while b - a > 1:
                mid = (a + b) // 2
                if _offset(zone, datetime.fromtimestamp(mid, UTC)) == lo_off:
                    a = mid
                else:
                    b = mid
            at = datetime.fromtimestamp(b, UTC)
            changes.append(ZoneChange(at=at, before=lo_off, after=_offset(zone, at)))
        lo, lo_off = hi, hi_off
    return changes


def local_to_utc(wall: datetime, zone: ZoneInfo) -> tuple[datetime, SlotKind]:
    """Map a naive wall time to one UTC instant, the way a one-shot ``at`` is read.

    A time that occurs twice maps to its first occurrence; a time that does not
    exist (spring-forward gap) maps to the first valid instant after the gap.
    """
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if first <= second:  # equal: an ordinary time; less: the first of two
        return first, SlotKind.NORMAL
    # In a gap zoneinfo reads fold=1 with the new offset (earlier) and fold=0 with
    # the old one (later); the change lies between the two readings.
    change = zone_changes(zone, second - _TICK, first)
    return (change[0].at if change else first), SlotKind.SHIFTED


# --------------------------------------------------------------------------- slots


class SlotKind(StrEnum):
    """How a matched wall-clock time relates to daylight saving."""

    NORMAL = "normal"
    """An ordinary slot (or the first occurrence of a repeated time)."""
    SHIFTED = "shifted"
    """Its wall time falls in a spring-forward gap; moved to the first instant after it."""
    SKIPPED = "skipped"
    """Its wall time falls in a spring-forward gap and it does not run (``dst.gap =
    skip``, or a job that runs in elapsed time)."""
    REPEATED = "repeated"
    """The second occurrence of a wall time on a fall-back day. Runs for elapsed-time
    jobs and ``dst.fold = both``; not for fixed-time jobs with ``dst.fold = first``."""


@dataclass(frozen=True)
class SlotInfo:
    """One matched wall-clock time, where it lands in UTC, and whether it fires."""

    at: datetime
    """Aware UTC instant of the slot (for a skipped one: the instant of the gap)."""
    wall: datetime
    """The naive local wall-clock time the expression matched."""
    kind: SlotKind
    fires: bool
    """False for skipped and not-repeated times, and for a shifted time that coincides
    with another slot (it runs once)."""
    local: datetime
    """``at`` in the schedule's zone."""


def _utc(moment: datetime, name: str) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime, got {moment!r}")
    return moment.astimezone(UTC)


def _naive(moment: datetime) -> datetime:
    return moment.replace(tzinfo=None)


def explain(spec: ScheduleSpec, after: datetime, until: datetime) -> list[SlotInfo]:
    """Every wall time the schedule matches for instants in ``(after, until]``.

    Includes times that do not fire (skipped by a gap, not repeated in a fold) so
    that a preview can say why. :func:`slots` is the firing subset.
    """
    zone = spec.zone
    return [SlotInfo(at, wall, kind, fires, at.astimezone(zone))
            for at, _, wall, kind, fires in _resolve(spec, after, until)]


_Found = tuple[datetime, bool, datetime, SlotKind, bool]
"""(UTC instant, not-normal, wall time, kind, fires): sorts by instant, normal first."""


def _resolve(spec: ScheduleSpec, after: datetime, until: datetime) -> list[_Found]:
    after, until = _utc(after, "after"), _utc(until, "until")
    if until <= after:
        return []
    zone = spec.zone
    if spec.at is not None:
        return [(s.at, False, s.wall, s.kind, s.fires)
                for s in _explain_at(spec, zone, after, until)]
    assert spec.cron is not None
    expr = parse_cron(spec.cron)
    changes = zone_changes(zone, after - FOLD_LOOKBACK, until)
    inside = [c for c in changes if c.at > after]
    folds = [(c.at, c.at + (c.before - c.after)) for c in changes if not c.is_gap]
    repeat_fires = not expr.fixed or spec.dst.fold is DstFold.BOTH
    shift = expr.fixed and spec.dst.gap is DstGap.SHIFT
    normal, repeated = SlotKind.NORMAL, SlotKind.REPEATED

    found: list[_Found] = []
    bounds = [after, *(c.at for c in inside), until + _TICK]
    offsets = [_offset(zone, after), *(c.after for c in inside)]
    for i, offset in enumerate(offsets):
        lo, hi = bounds[i], bounds[i + 1]
        # Between two changes the offset is constant, so wall time maps 1:1 to UTC.
        for base, minutes in expr.hour_matches(_naive(lo + offset), _naive(hi + offset)):
            at_base = base.replace(tzinfo=UTC) - offset
            for minute in minutes:
                at = at_base + minute
                if at <= after:
                    continue
                if folds and any(start <= at < end for start, end in folds):
                    found.append((at, True, base + minute, repeated, repeat_fires))
                else:
                    found.append((at, False, base + minute, normal, True))
    gaps: list[_Found] = []
    for change in inside:
        if not change.is_gap:
            continue
        missing = expr.matches(_naive(change.at + change.before), _naive(change.at + change.after))
        kind = SlotKind.SHIFTED if shift else SlotKind.SKIPPED
        gaps += [(change.at, True, wall, kind, shift) for wall in missing]
    if not gaps:
        return found  # ascending already: segments are in order, and so is each one

    # A time shifted out of a gap runs once, also when it meets another slot there
    # (Vixie: "0 2,3 * * *" runs once at 03:00 on a spring-forward day).
    found += gaps
    found.sort()
    seen: set[datetime] = set()
    result: list[_Found] = []
    for item in found:
        at, rank, wall, kind, fires = item
        if fires and at in seen:
            item = (at, rank, wall, kind, False)
        elif fires:
            seen.add(at)
        result.append(item)
    return result


def _explain_at(spec: ScheduleSpec, zone: ZoneInfo, after: datetime, until: datetime
                ) -> list[SlotInfo]:
    assert spec.at is not None
    if spec.at.tzinfo is not None:
        at, kind = spec.at.astimezone(UTC), SlotKind.NORMAL
        wall = _naive(at.astimezone(zone))
    else:
        wall = spec.at
        at, kind = local_to_utc(wall, zone)
    if not after < at <= until:
        return []
    return [SlotInfo(at, wall, kind, True, at.astimezone(zone))]


def slots(spec: ScheduleSpec, after: datetime, until: datetime) -> list[datetime]:
    """The aware UTC instants at which ``spec`` is due in ``(after, until]``, ascending.

    Cost grows with the number of matches and the days spanned, not with minutes:
    callers still bound the interval (the tick uses the catch-up window).
    """
    return [at for at, _, _, _, fires in _resolve(spec, after, until) if fires]


def next_slots(spec: ScheduleSpec, start: datetime, n: int) -> list[datetime]:
    """The first ``n`` slots strictly after ``start`` (fewer if the schedule ends)."""
    found: list[datetime] = []
    lo = _utc(start, "start")
    span = timedelta(hours=1)
    while len(found) < n and lo - start < NEXT_HORIZON:
        hi = lo + span
        found += slots(spec, lo, hi)
        lo, span = hi, min(span * 2, timedelta(days=64))
    return found[:n]


def min_interval(spec: ScheduleSpec, start: datetime, sample: int = 64) -> timedelta | None:
    """The shortest gap between consecutive slots among the next ``sample`` slots."""
    upcoming = next_slots(spec, start, sample)
    gaps = [b - a for a, b in itertools.pairwise(upcoming)]
    return min(gaps) if gaps else None


def dst_note(slot: SlotInfo, zone_name: str) -> str | None:
    """One sentence on how daylight saving changes this slot, or None for a plain one."""
    wall = f"{slot.wall:%Y-%m-%d %H:%M}"
    local = f"{slot.local:%H:%M %Z}"
    if slot.kind is SlotKind.SHIFTED:
        if slot.fires:
            return (f"{wall} does not exist in {zone_name} (clocks go forward): "
                    f"runs at {local} ({slot.at:%H:%M} UTC) instead")
        return (f"{wall} does not exist in {zone_name} (clocks go forward): runs once "
                f"with the slot at {local}")
    if slot.kind is SlotKind.SKIPPED:
        return f"{wall} does not exist in {zone_name} (clocks go forward): skipped"
    if slot.kind is SlotKind.REPEATED:
        if slot.fires:
            return (f"{wall} occurs twice in {zone_name} (clocks go back): runs again at "
                    f"{local} ({slot.at:%H:%M} UTC)")
        return (f"{wall} occurs twice in {zone_name} (clocks go back): runs only at the "
                "first occurrence")
    return None


# --------------------------------------------------------------------------- words


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _join(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} and {words[-1]}"


def _runs(values: list[int], label: Callable[[int], str] = str) -> str:
    """``[1, 2, 3, 5]`` -> ``"1 through 3 and 5"`` (runs of three or more are ranges)."""

    words: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - i >= 2:
            words.append(f"{label(values[i])} through {label(values[j])}")
            i = j + 1
        else:
            words.append(label(values[i]))
            i += 1
    return _join(words)


def _star_step(field: str) -> int | None:
    match = re.fullmatch(r"\*/(\d+)", field)
    return int(match[1]) if match else None


def _time_words(expr: CronExpr) -> str:
    minute_field, hour_field = expr.fields[0], expr.fields[1]
    all_minutes = len(expr.minutes) == 60
    all_hours = len(expr.hours) == 24
    minute_step = _star_step(minute_field)
    hour_step = _star_step(hour_field)
    if all_minutes:
        minutes = "every minute"
    elif minute_step:
        minutes = f"every {minute_step} minutes"
    else:
        minutes = ""
    if all_hours:
        if minutes:
            return minutes
        label = "minute" if len(expr.minutes) == 1 else "minutes"
        return f"at {label} {_runs(list(expr.minutes))} of every hour"
    if minutes:
        hours = (f"every {_ordinal(hour_step)} hour" if hour_step else
                 f"hour {_runs(list(expr.hours))}" if len(expr.hours) == 1 else
                 f"hours {_runs(list(expr.hours))}")
        return f"{minutes} during {hours}"
    if len(expr.hours) * len(expr.minutes) <= 6:
        return "at " + _join([f"{h:02d}:{m:02d}" for h in expr.hours for m in expr.minutes])
    label = "minute" if len(expr.minutes) == 1 else "minutes"
    hours = f"every {_ordinal(hour_step)} hour" if hour_step else f"hours {_runs(list(expr.hours))}"
    return f"at {label} {_runs(list(expr.minutes))} past {hours}"


def _day_words(expr: CronExpr) -> str:
    all_days = len(expr.days) == 31
    all_weekdays = len(expr.weekdays) == 7
    day_step = _star_step(expr.fields[2])
    if day_step:
        days = f"every {_ordinal(day_step)} day of the month"
    else:
        label = "day" if len(expr.days) == 1 else "days"
        days = f"on {label} {_runs(sorted(expr.days))} of the month"
    # Monday first, so that weekends read "Saturday and Sunday".
    weekdays = _runs(sorted(d or 7 for d in expr.weekdays), lambda v: DAY_NAMES[v % 7])
    if all_days and all_weekdays:
        words = "every day"
    elif all_weekdays:
        words = days
    elif all_days:
        words = f"on {weekdays}"
    elif expr.both_days_restricted:
        words = f"{days} or on {weekdays}"
    else:
        words = f"{days} if it is a {weekdays}"
    if len(expr.months) < 12:
        words += " in " + _runs(sorted(expr.months), lambda v: MONTH_NAMES[v - 1])
    return words


def cron_words(expr: str) -> str:
    """The expression in words, e.g. ``"at 02:00 on Monday through Friday"``."""
    parsed = parse_cron(expr)
    time, days = _time_words(parsed), _day_words(parsed)
    if days == "every day" and "every" in time:
        return time  # "every 15 minutes", not "every 15 minutes every day"
    return f"{time} {days}"


def describe(spec: ScheduleSpec | str) -> str:
    """A schedule (or a bare cron expression) in words, with its time zone.

    ``"at 02:00 on Monday through Friday (America/New_York)"``,
    ``"once at 2026-12-24 18:00 (Europe/London)"``.
    """
    if isinstance(spec, str):
        return cron_words(spec)
    if spec.at is not None:
        at = spec.at if spec.at.tzinfo is None else spec.at.astimezone(spec.zone)
        return f"once at {at:%Y-%m-%d %H:%M} ({spec.timezone})"
    assert spec.cron is not None
    return f"{cron_words(spec.cron)} ({spec.timezone})"
