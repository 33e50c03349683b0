"""Parsing five-field cron expressions and their aliases.

Standard five-field cron (minute hour day-of-month month day-of-week: numbers,
``jan``-``dec``/``sun``-``sat`` names, ``*``, ``,``, ``-`` and ``/``) or one of the
``@hourly``-style aliases. As in Vixie/Debian cron, when both day fields are restricted
a day matches if *either* does; when either starts with ``*`` both must match.

Extensions of other crons (Quartz's ``L``, ``W``, ``#`` and ``?``, Jenkins' ``H``) are
refused by name: read as a number they would give a puzzling message. A step larger
than its range (``*/61``) is accepted, as Debian cron and GitHub Actions accept it,
and matches only the first value; :attr:`CronExpr.notes` says so for ``validate``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

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

MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December")

EXTENSIONS = {
    "L": "last day or last weekday of the month",
    "W": "nearest weekday",
    "#": "nth weekday of the month",
    "?": "no specific value",
    "H": "hashed value",
}
"""Syntax of other crons (Quartz, Jenkins) that this one does not read."""


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
    notes: tuple[str, ...] = field(default=(), compare=False)
    """What is legal but probably not meant (a step larger than its range)."""

    @property
    def fixed(self) -> bool:
        """Fixed-time job in Vixie's sense: neither minute nor hour starts with ``*``.

        Fixed-time jobs get the DST gap/fold policy; the others run in elapsed time.
        """
        return not (self.fields[0].startswith("*") or self.fields[1].startswith("*"))

    # Cached: the day loop of :meth:`hour_matches` asks for each day it visits.
    @functools.cached_property
    def day_star(self) -> bool:
        return self.fields[2].startswith("*")

    @functools.cached_property
    def weekday_star(self) -> bool:
        return self.fields[4].startswith("*")

    @functools.cached_property
    def _sorted_days(self) -> tuple[int, ...]:
        return tuple(sorted(self.days))

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
        first = _first_minute(start)
        every = tuple(_MINUTES[m] for m in self.minutes)
        day = first_day = first.date()
        last_day = (stop - _TICK).date()
        while day <= last_day:
            if self._cannot_match(day):
                day = self._next_candidate(day)
                continue
            # The hour loop of a whole day stays inline: a generator per day made long
            # spans a third slower. Only the first and the last day may be cut.
            if self.day_matches(day):
                midnight = datetime(day.year, day.month, day.day)
                if first_day < day < last_day:
                    for hour in self.hours:
                        yield midnight + _HOURS[hour], every
                else:
                    yield from self._cut_hours(midnight, first, stop, every)
            day += _DAY

    def _cut_hours(self, midnight: datetime, first: datetime, stop: datetime,
                   every: tuple[timedelta, ...]
                   ) -> Iterator[tuple[datetime, tuple[timedelta, ...]]]:
        """:meth:`hour_matches` on a day that ``first`` or ``stop`` may cut."""
        for hour in self.hours:
            base = midnight + _HOURS[hour]
            if base >= stop:
                break
            end = base + _HOURS[1]
            if end <= first:
                continue
            if base >= first and end <= stop:
                yield base, every
            elif part := _within(every, base, first, stop):
                yield base, part

    def _cannot_match(self, day: date) -> bool:
        """Whether ``day`` cannot match whatever its weekday: its month is not named, or
        only the day of the month decides and names another."""
        return day.month not in self.months or (self.weekday_star
                                                and day.day not in self.days)

    def _next_candidate(self, day: date) -> date:
        """The first day after ``day`` that may match, for a ``day`` that cannot: its
        month is not named, or only the day of the month decides and names another."""
        if day.month in self.months:
            # Only the day of the month decides: go to the next day it names.
            later = [d for d in self._sorted_days if d > day.day]
            month_end = (28 + _leap(day.year) if day.month == 2
                         else _MONTH_DAYS[day.month - 1])
            if later and later[0] <= month_end:
                return date(day.year, day.month, later[0])
        return date(day.year + day.month // 12, day.month % 12 + 1, 1)


def _first_minute(start: datetime) -> datetime:
    """The first whole minute at or after ``start``."""
    first = start.replace(second=0, microsecond=0)
    return first + MINUTE if first < start else first


def _within(offsets: tuple[timedelta, ...], base: datetime, first: datetime,
            stop: datetime) -> tuple[timedelta, ...]:
    """The ``offsets`` from ``base`` that fall in ``[first, stop)``."""
    return tuple(o for o in offsets if first <= base + o < stop)


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


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


def _extension(item: str) -> str | None:
    """The extension ``item`` uses (a key of :data:`EXTENSIONS`), if any."""
    for mark in ("#", "?"):
        if mark in item:
            return mark
    for token in re.split(r"[-/()]", item):
        if token == "h":
            return "H"
        if re.fullmatch(r"\d*lw?", token):
            return "L"
        if re.fullmatch(r"\d+w", token):
            return "W"
    return None


def _parse_field(text: str, index: int, notes: list[str]) -> set[int]:
    field, low, high, names = _FIELDS[index]
    values: set[int] = set()
    for item in text.split(","):
        if item.isdigit() and item.isascii():  # the common case, without the regexes below
            values.add(_value(item, low, high, names, field))
        elif item == "*":
            values.update(range(low, high + 1))
        else:
            values.update(_item_values(item, index, notes))
    return values


def _item_values(item: str, index: int, notes: list[str]) -> range:
    """The values of one item of field ``index``: a range, a step, a name."""
    field = _FIELDS[index][0]
    extension = _extension(item)
    if extension is not None:
        raise ValueError(
            f"{field} field: {item.upper()!r} uses {extension} "
            f"({EXTENSIONS[extension]}), an unsupported extension; use numbers, names, "
            "'*', ',', '-' and '/'")
    match = _ITEM_RE.fullmatch(item)
    if match is None:
        raise ValueError(
            f"{field} field: cannot read {item!r} (use numbers, names, '*', ',', '-' "
            "and '/')"
        )
    stepped = match["step"] is not None
    step = _step(match["step"], field)
    start, end = _bounds(match["range"], stepped, index)
    if stepped and step > end - start:
        notes.append(f"{field} field: step {step} in {item!r} is larger than its range "
                     f"{start}-{end}, so it matches only {start}")
    return range(start, end + 1, step)


def _step(text: str | None, field: str) -> int:
    """The step after a ``/`` (1 without one)."""
    if text is None:
        return 1
    step = int(text)
    if step < 1:
        raise ValueError(f"{field} field: step {step} must be at least 1")
    return step


def _bounds(part: str, stepped: bool, index: int) -> tuple[int, int]:
    """The first and last value of the range ``part`` (before any ``/``) of field
    ``index``."""
    field, low, high, names = _FIELDS[index]
    if part == "*":
        return low, high
    if "-" in part:
        a, b = part.split("-")
        start, end = (_value(a, low, high, names, field), _value(b, low, high, names, field))
        if start > end:
            raise ValueError(f"{field} field: range {part!r} runs backwards")
        return start, end
    start = _value(part, low, high, names, field)
    return start, (high if stepped else start)  # "5/15" means 5-max/15


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
    notes: list[str] = []
    sets = [_parse_field(part, i, notes) for i, part in enumerate(parts)]
    weekdays = frozenset(d % 7 for d in sets[4])
    parsed = CronExpr(
        text=text,
        fields=(parts[0], parts[1], parts[2], parts[3], parts[4]),
        minutes=tuple(sorted(sets[0])),
        hours=tuple(sorted(sets[1])),
        days=frozenset(sets[2]),
        months=frozenset(sets[3]),
        weekdays=weekdays,
        notes=tuple(notes),
    )
    if parsed.weekday_star:
        _check_a_date(parsed, expr)
    return parsed


def _check_a_date(parsed: CronExpr, expr: str) -> None:
    """Raise unless the day of the month names a date in some month named: it alone
    (with the month) decides which days match."""
    possible = [m for m in parsed.months if min(parsed.days) <= _MONTH_DAYS[m - 1]]
    if not possible:
        months = ", ".join(MONTH_NAMES[m - 1] for m in sorted(parsed.months))
        raise ValueError(f"cron {expr.strip()!r} never fires: day {min(parsed.days)} "
                         f"does not occur in {months}")


def validate_cron(expr: str) -> str:
    """Return ``expr`` if it is a five-field cron expression or an alias, else raise ValueError."""
    parse_cron(expr)
    return expr
