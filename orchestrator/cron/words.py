"""Cron expressions in words, for previews, listings and briefs."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from .fields import MONTH_NAMES, CronExpr, parse_cron

DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


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


def _star_step(field: str, values: int) -> int | None:
    """The step of ``*/N``; None when it is not one or matches a single value (a step
    larger than the range is read as its first value, and said so)."""
    match = re.fullmatch(r"\*/(\d+)", field)
    return int(match[1]) if match and values > 1 else None


def _time_words(expr: CronExpr) -> str:
    minutes = _every_minutes(expr)
    label = "minute" if len(expr.minutes) == 1 else "minutes"
    listed = f"{label} {_runs(list(expr.minutes))}"
    if len(expr.hours) == 24:
        return minutes or f"at {listed} of every hour"
    hour_step = _star_step(expr.fields[1], len(expr.hours))
    if minutes:
        return f"{minutes} during {_hour_words(expr, hour_step, 'hour')}"
    if len(expr.hours) * len(expr.minutes) <= 6:
        return "at " + _join([f"{h:02d}:{m:02d}" for h in expr.hours for m in expr.minutes])
    return f"at {listed} past {_hour_words(expr, hour_step, 'hours')}"


def _every_minutes(expr: CronExpr) -> str:
    """``every minute``, ``every N minutes``, or empty when the minutes are listed."""
    if len(expr.minutes) == 60:
        return "every minute"
    step = _star_step(expr.fields[0], len(expr.minutes))
    return f"every {step} minutes" if step else ""


def _hour_words(expr: CronExpr, step: int | None, one: str) -> str:
    """``every Nth hour`` for a step, else the hours listed (``one``: the word for a
    single hour)."""
    if step:
        return f"every {_ordinal(step)} hour"
    word = one if len(expr.hours) == 1 else "hours"
    return f"{word} {_runs(list(expr.hours))}"


def _day_words(expr: CronExpr) -> str:
    words = _which_days(expr)
    if len(expr.months) < 12:
        words += " in " + _runs(sorted(expr.months), lambda v: MONTH_NAMES[v - 1])
    return words


def _which_days(expr: CronExpr) -> str:
    """The days of the month and of the week, as cron combines them."""
    all_days = len(expr.days) == 31
    all_weekdays = len(expr.weekdays) == 7
    days = _month_day_words(expr)
    # Monday first, so that weekends read "Saturday and Sunday".
    weekdays = _runs(sorted(d or 7 for d in expr.weekdays), lambda v: DAY_NAMES[v % 7])
    if all_days and all_weekdays:
        return "every day"
    if all_weekdays:
        return days
    if all_days:
        return f"on {weekdays}"
    if expr.both_days_restricted:
        return f"{days} or on {weekdays}"
    return f"{days} if it is a {weekdays}"


def _month_day_words(expr: CronExpr) -> str:
    """``every Nth day of the month`` for a step, else the days listed."""
    day_step = _star_step(expr.fields[2], len(expr.days))
    if day_step:
        return f"every {_ordinal(day_step)} day of the month"
    label = "day" if len(expr.days) == 1 else "days"
    return f"on {label} {_runs(sorted(expr.days))} of the month"


@functools.lru_cache(maxsize=4096)  # pure, and asked once per schedule by validate
def cron_words(expr: str) -> str:
    """The expression in words, e.g. ``"at 02:00 on Monday through Friday"``."""
    parsed = parse_cron(expr)
    time, days = _time_words(parsed), _day_words(parsed)
    if days == "every day" and "every" in time:
        return time  # "every 15 minutes", not "every 15 minutes every day"
    return f"{time} {days}"


def describe(expr: str) -> str:
    """A bare cron expression in words (:func:`cron_words`); schedules with their zone
    are described by :meth:`orchestrator.config.triggers.Trigger.describe`."""
    return cron_words(expr)
