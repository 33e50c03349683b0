"""The wall-clock times an expression matches, as whole seconds since 1970-01-01 00:00
(naive: read in no zone), a calendar year at a time.

A search walks these tables instead of the calendar: a year in which ``0 0 29 2 *``
cannot match is an empty table, skipped at once, and the days of an expression are
computed once per year however many schedules share them (``* * *`` is most of a
repository).
"""

from __future__ import annotations

import bisect
import functools
import operator
from datetime import date

from .fields import CronExpr

EPOCH_DAY = date(1970, 1, 1).toordinal()
DAY = 86_400


def _month_length(year: int, month: int) -> int:
    if month == 12:
        return 31
    return (date(year, month + 1, 1) - date(year, month, 1)).days


def _compute(expr: CronExpr, year: int) -> tuple[int, ...]:
    found: list[int] = []
    for month in sorted(expr.months):
        first = date(year, month, 1)
        weekday = first.isoweekday() % 7  # 0 = Sunday, as cron counts
        base = first.toordinal() - EPOCH_DAY
        for day in range(1, _month_length(year, month) + 1):
            dom = day in expr.days
            dow = (weekday + day - 1) % 7 in expr.weekdays
            if (dom and dow) if (expr.day_star or expr.weekday_star) else (dom or dow):
                found.append(base + day - 1)
    return tuple(found)


_SHARED: dict[tuple[tuple[str, str, str], int], tuple[int, ...]] = {}


def year_days(expr: CronExpr, year: int) -> tuple[int, ...]:
    """The days of ``year`` that ``expr`` matches, as days since 1970-01-01, ascending.

    Keyed on the three day fields, so expressions that differ only in their times
    share one table."""
    key = ((expr.fields[2], expr.fields[3], expr.fields[4]), year)
    days = _SHARED.get(key)
    if days is None:
        if len(_SHARED) > 4096:
            _SHARED.clear()  # a bound for a long-lived process; tables are cheap
        days = _SHARED[key] = _compute(expr, year)
    return days


@functools.lru_cache(maxsize=4096)
def times_of_day(expr: CronExpr) -> tuple[int, ...]:
    """The seconds after midnight ``expr`` matches on a day it matches, ascending."""
    return tuple(h * 3600 + m * 60 for h in expr.hours for m in expr.minutes)


def matching_seconds(expr: CronExpr, after: int, until: int, limit: int) -> list[int]:
    """Matched wall times ``w`` with ``after < w <= until`` (seconds), ascending: all of
    them, or at least the first ``limit`` (a day's worth more may follow)."""
    found: list[int] = []
    if until <= after:
        return found
    tod = times_of_day(expr)
    first_day, last_day = after // DAY, until // DAY
    first_year = date.fromordinal(first_day + EPOCH_DAY).year
    for year in range(first_year, date.fromordinal(last_day + EPOCH_DAY).year + 1):
        if _add_year(found, year_days(expr, year), tod, after, until, limit):
            return found
    return found


def _add_year(found: list[int], days: tuple[int, ...], tod: tuple[int, ...], after: int,
              until: int, limit: int) -> bool:
    """Add to ``found`` the matched wall times among one year's ``days`` (as
    :func:`matching_seconds`); whether it now holds ``limit`` of them."""
    i = bisect.bisect_left(days, after // DAY)
    stop = bisect.bisect_right(days, until // DAY)
    while i < stop:
        missing = limit - len(found)
        if missing <= len(tod):  # one day may do: only the times needed
            base = days[i] * DAY
            a = bisect.bisect_right(tod, after - base)
            b = min(bisect.bisect_right(tod, until - base), a + missing)
            found += [base + t for t in tod[a:b]]
            if len(found) >= limit:
                return True
            i += 1
            continue
        # Enough days for what is missing, one more for a first day cut short.
        j = min(stop, i + missing // len(tod) + 2)
        chunk = [day * DAY + t for day in days[i:j] for t in tod]
        found += chunk[bisect.bisect_right(chunk, after):bisect.bisect_right(chunk, until)]
        if len(found) >= limit:
            return True
        i = j
    return False


def plain_spacing(expr: CronExpr, after: int, until: int, n: int) -> int | None:
    """The shortest time between consecutive ones of the first ``n`` matched wall times
    after ``after`` (seconds), read off the expression's structure: every time of day
    of a matching day is among them (it has at most ``n // 2``), so the gaps within a
    day are all there, and between days only the closest two days matter.

    ``None`` when that does not hold, or the ``n``-th is not well before ``until``
    (then walk them)."""
    tod = times_of_day(expr)
    k = len(tod)
    if not 0 < k <= n // 2:
        return None
    first_day, last_day = after // DAY, until // DAY
    year = date.fromordinal(first_day + EPOCH_DAY).year
    table = year_days(expr, year)
    i = bisect.bisect_left(table, first_day)
    # Matches on the first day: those after `after` (none if it does not match).
    first = k - bisect.bisect_right(tod, after - first_day * DAY) if (
        i < len(table) and table[i] == first_day) else k
    if first == 0:
        i += 1
        first = k
    needed = 1 + max(0, -(-(n - first) // k))  # days holding the first n matches
    days = list(table[i:i + needed])
    while len(days) < needed:
        year += 1
        if year > date.fromordinal(last_day + EPOCH_DAY).year:
            return None
        days += year_days(expr, year)[:needed - len(days)]
    if days[-1] >= last_day:
        return None
    # n >= 2k: the first n span at least two days
    between = min(map(operator.sub, days[1:], days[:-1])) * DAY - (tod[-1] - tod[0])
    return min([between, *map(operator.sub, tod[1:], tod[:-1])])
