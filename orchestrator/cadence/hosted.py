"""The external clock's entries in hosted schedulers' own syntax (``clock setup --kind http``).

What it owns:

- each entry of ``cron-sync --external --json`` as AWS EventBridge Scheduler's
  ``cron(...)`` (six fields) or ``at(...)`` with its time zone and dates, Google Cloud
  Scheduler's unix-cron with its time zone, and cron-job.org's schedule object;
- one line for each part of an entry a service cannot express (excluded dates, a life
  span, the daylight-saving policy, a one-shot that would repeat).

Invariants:

- a service's schedule never calls less than the entry, except where a line says so:
  where it cannot be exact it calls more (on excluded dates, on more days), and a tick
  started then fires nothing;
- both day fields restricted is cron's OR: split into two schedules for a service that
  reads the two fields otherwise (EventBridge needs ``?`` in one of them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ..cron import CronExpr, DstPolicy, SlotKind, explain, parse_cron

EVENTBRIDGE = "eventbridge_scheduler"
CLOUD_SCHEDULER = "cloud_scheduler"
CRON_JOB_ORG = "cron_job_org"
SERVICES = {EVENTBRIDGE: "AWS EventBridge Scheduler", CLOUD_SCHEDULER: "Google Cloud Scheduler",
            CRON_JOB_ORG: "cron-job.org"}

_WEEK = frozenset(range(7))
_MONTH_DAYS = frozenset(range(1, 32))


@dataclass(frozen=True)
class Fields:
    """One schedule's values per field; ``None`` is every value."""

    minutes: tuple[int, ...] | None
    hours: tuple[int, ...] | None
    days: tuple[int, ...] | None
    months: tuple[int, ...] | None
    weekdays: tuple[int, ...] | None
    """0 = Sunday ... 6 = Saturday."""


def _values(found: frozenset[int] | tuple[int, ...], every: frozenset[int]
            ) -> tuple[int, ...] | None:
    return None if every <= set(found) else tuple(sorted(found))


def alternatives(expr: CronExpr) -> tuple[list[Fields], bool]:
    """The schedules that together call at ``expr``'s times, each matching all of its
    fields; and whether they call at more times than ``expr`` does."""
    base = Fields(_values(expr.minutes, frozenset(range(60))),
                  _values(expr.hours, frozenset(range(24))),
                  _values(expr.days, _MONTH_DAYS), _values(expr.months, frozenset(range(1, 13))),
                  _values(expr.weekdays, _WEEK))
    if expr.both_days_restricted:  # cron's OR of the two day fields
        if base.days is None or base.weekdays is None:
            return [replace(base, days=None, weekdays=None)], False
        return [replace(base, weekdays=None), replace(base, days=None)], False
    if base.days is not None and base.weekdays is not None:
        # a stepped '*' in one day field ANDs it with the other: no service says that
        return [replace(base, weekdays=None)], True
    return [base], False


def runs(values: tuple[int, ...] | None, shift: int = 0) -> str:
    """``values`` as cron writes them: ``*``, or ranges and single values (``1-5,7``)."""
    if values is None:
        return "*"
    parts: list[str] = []
    start = prev = values[0]
    for value in (*values[1:], None):
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start + shift) if start == prev else f"{start + shift}-{prev + shift}")
        if value is not None:
            start = prev = value
    return ",".join(parts)


# --------------------------------------------------------------------------- the services


def unix_cron(alts: list[Fields]) -> str:
    """Cloud Scheduler's five fields: it ORs two restricted day fields, as cron does."""
    first = alts[0]
    days = next((a.days for a in alts if a.days is not None), None)
    weekdays = next((a.weekdays for a in alts if a.weekdays is not None), None)
    return " ".join([runs(first.minutes), runs(first.hours), runs(days), runs(first.months),
                     runs(weekdays)])


def eventbridge_cron(fields: Fields) -> str:
    """EventBridge's six fields: day-of-week 1 (Sunday) to 7, ``?`` in one day field."""
    days, weekdays = runs(fields.days), "?"
    if fields.weekdays is not None:
        days, weekdays = "?", runs(fields.weekdays, shift=1)
    return (f"cron({runs(fields.minutes)} {runs(fields.hours)} {days} {runs(fields.months)} "
            f"{weekdays} *)")


def _every(values: tuple[int, ...] | None) -> list[int]:
    return [-1] if values is None else list(values)


def _stamp(moment: datetime) -> int:
    """cron-job.org's ``expiresAt``: ``YYYYMMDDhhmmss`` in the job's time zone."""
    return int(moment.strftime("%Y%m%d%H%M%S"))


def cron_job_org(fields: Fields, zone: str, expires: datetime | None) -> dict[str, Any]:
    """cron-job.org's schedule object (``[-1]``: every value)."""
    return {"timezone": zone,
            "expiresAt": _stamp(expires.astimezone(ZoneInfo(zone))) if expires else 0,
            "hours": _every(fields.hours), "mdays": _every(fields.days),
            "minutes": _every(fields.minutes), "months": _every(fields.months),
            "wdays": _every(fields.weekdays)}


# --------------------------------------------------------------------------- entries


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _dates(entry: dict[str, Any]) -> dict[str, str]:
    """EventBridge's ``StartDate`` and ``EndDate`` from the entry's life span."""
    names = {"start_at": "StartDate", "end_at": "EndDate"}
    return {names[k]: entry[k] for k in names if k in entry}


def cron_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A cron entry in each service's syntax, with what each cannot express."""
    alts, wider = alternatives(parse_cron(entry["cron"]))
    zone = entry["timezone"]
    end = _instant(entry["end_at"]) if "end_at" in entry else None
    return {
        "schedules": entry["schedules"], "cron": entry["cron"], "timezone": zone,
        EVENTBRIDGE: [{"ScheduleExpression": eventbridge_cron(a),
                       "ScheduleExpressionTimezone": zone,
                       "FlexibleTimeWindow": {"Mode": "OFF"}, **_dates(entry)} for a in alts],
        CLOUD_SCHEDULER: {"schedule": unix_cron(alts), "timeZone": zone},
        CRON_JOB_ORG: [{"schedule": cron_job_org(a, zone, end)} for a in alts],
        "not_expressed": _cron_gaps(entry, wider),
    }


def once_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A one-shot entry: EventBridge's ``at(...)``, a yearly cron elsewhere."""
    at = _instant(entry["at"])
    fields = Fields((at.minute,), (at.hour,), (at.day,), (at.month,), None)
    return {
        "schedules": entry["schedules"], "at": entry["at"], "timezone": "UTC",
        EVENTBRIDGE: [{"ScheduleExpression": f"at({at:%Y-%m-%dT%H:%M:%S})",
                       "ScheduleExpressionTimezone": "UTC",
                       "FlexibleTimeWindow": {"Mode": "OFF"}}],
        CLOUD_SCHEDULER: {"schedule": unix_cron([fields]), "timeZone": "UTC"},
        CRON_JOB_ORG: [{"schedule": cron_job_org(fields, "UTC", at + timedelta(minutes=1))}],
        "not_expressed": {CLOUD_SCHEDULER: [
            f"one-shot at {entry['at']}: the job repeats every year on that date; delete it "
            "once it has called"]},
    }


def _cron_gaps(entry: dict[str, Any], wider: bool) -> dict[str, list[str]]:
    """Per service, one line for each part of a cron entry it cannot express."""
    everywhere = [line for line in (_excluded(entry), _wider(entry, wider)) if line]
    gaps: dict[str, list[str]] = {name: list(everywhere) for name in SERVICES}
    for name, line in [*_span(entry), *_daylight(entry).items()]:
        gaps[name].append(line)
    return {name: lines for name, lines in gaps.items() if lines}


def _span(entry: dict[str, Any]) -> list[tuple[str, str]]:
    """What a service without a start (or an end) does outside the entry's life span:
    EventBridge has both, cron-job.org's expiry is an end."""
    found: list[tuple[str, str]] = []
    if "start_at" in entry:
        found += [(name, f"start_at {entry['start_at']}: it calls before too (the tick "
                         "fires nothing then); create the job at that time to save them")
                  for name in (CLOUD_SCHEDULER, CRON_JOB_ORG)]
    if "end_at" in entry:
        found.append((CLOUD_SCHEDULER, f"end_at {entry['end_at']}: it keeps calling after "
                                       "(the tick fires nothing then); delete the job then"))
    return found


def _excluded(entry: dict[str, Any]) -> str | None:
    dates = entry.get("exclude") or []
    if not dates:
        return None
    return (f"exclude: it calls on the {len(dates)} excluded date(s) too (first {dates[0]}); "
            "the tick fires nothing then, for a billed minute")


def _wider(entry: dict[str, Any], wider: bool) -> str | None:
    if not wider:
        return None
    return (f"{entry['cron']!r} ANDs a stepped '*' day field with the other: it calls on "
            "every day of the month field; the tick fires nothing on the others")


def _meets_a_change(entry: dict[str, Any]) -> bool:
    """Whether a wall time of the entry falls in a skipped or repeated hour of the year."""
    zone, policy = ZoneInfo(entry["timezone"]), DstPolicy.model_validate(entry.get("dst", {}),
                                                                     strict=False)
    for around in entry.get("around_changes", []):
        change = _instant(around["change"])
        found = explain(entry["cron"], zone, policy, change - _NEAR, change + _NEAR)
        if any(slot.kind is not SlotKind.NORMAL for slot in found):
            return True
    return False


_NEAR = timedelta(hours=3)
"""Every zone's skipped or repeated hour lies within this of the change it reports."""


def _daylight(entry: dict[str, Any]) -> dict[str, str]:
    """What each service does in a skipped or repeated hour, when a wall time of the
    entry falls in one (AWS documents its rule; the others do not)."""
    if not _meets_a_change(entry):
        return {}
    dst = entry.get("dst", {})
    policy = f"dst gap {dst.get('gap')}, fold {dst.get('fold')}"
    late = "a slot it misses waits for the safety tick"
    found = {EVENTBRIDGE: (f"daylight saving in {entry['timezone']}: EventBridge skips a time "
                           f"the clock jumps over and calls once in a repeated hour, not "
                           f"{policy}; {late}")}
    for name in (CLOUD_SCHEDULER, CRON_JOB_ORG):
        found[name] = (f"daylight saving in {entry['timezone']}: {SERVICES[name]} applies its "
                       f"own rule in a skipped or repeated hour, not {policy}; {late}")
    return found


def hosted(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every entry of ``cron-sync --external --json``'s report in each service's syntax."""
    return [once_entry(e) if "at" in e else cron_entry(e) for e in report["entries"]]


def notes(report: dict[str, Any]) -> list[str]:
    """What no hosted scheduler does, whatever the entry: one line each."""
    lines = ["a retry's back-off end and a poll's next time get no call: the safety ticks "
             "take them (`serve --clock-only` calls at them too)"]
    lines += [f"{sid!r} has jitter_seconds: the call comes at the slot and its run waits for "
              "the next tick" for sid in report.get("jittered", [])]
    return lines
