"""``validate``'s previews and warnings as they were computed before the timing warnings
read their 64-run sample as seconds (a copy of ``orchestrator/preview.py`` at that
time): the reference of ``tests/unit/test_preview_differential.py``. Cron searches go
through ``tests/cron_reference.py``, so nothing of the evaluator under test is used for
cron schedules. Do not edit, except to follow renames.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from orchestrator import cron
from orchestrator.config.models import Schedule
from orchestrator.config.triggers import CronTrigger, Trigger, for_spec
from orchestrator.support.times import iso
from tests import cron_reference as ref

GITHUB_MIN_INTERVAL = timedelta(minutes=5)
DST_NOTES_SHOWN = 3
HORIZON_WORDS = f"{ref.NEXT_HORIZON.days // 366} years"
SAMPLE = 64


@dataclass(frozen=True)
class Search:
    found: tuple[Any, ...]
    horizon: datetime | None = None


def _next(trigger: Trigger, start: datetime, n: int) -> Search:
    if isinstance(trigger, CronTrigger):
        found = ref.search(trigger.expr, ZoneInfo(trigger.timezone), trigger.dst, start, n)
        return Search(found.found, found.horizon)
    found_at = trigger.next(start, n)
    return Search(found_at.found, found_at.horizon)


def _explain(trigger: Trigger, start: datetime, until: datetime) -> list[Any]:
    if isinstance(trigger, CronTrigger):
        return ref.explain(trigger.expr, ZoneInfo(trigger.timezone), trigger.dst, start,
                           until)
    return list(trigger.explain(start, until))


def _dst_note(slot: Any, zone_name: str) -> str | None:
    if isinstance(slot, ref.SlotInfo):
        return ref.dst_note(slot, zone_name)
    return cron.dst_note(slot, zone_name)  # a one-shot's slot (not searched by cron)


@dataclass
class Upcoming:
    slots: list[Any]
    stopped: str | None = None


def _first(found: Search, n: int) -> Search:
    if len(found.found) >= n:
        return Search(found.found[:n])
    return found


def _upcoming(found: Search, start: datetime, n: int) -> Upcoming:
    stopped = None
    if found.horizon is not None:
        count = len(found.found)
        stopped = (f"the search stopped at {iso(found.horizon)}, {HORIZON_WORDS} after "
                   f"{iso(start)}: {count} of {n} run{'s' if n != 1 else ''} found before "
                   "it (schedules this rare are not searched further)")
    return Upcoming(list(found.found), stopped)


@dataclass
class Preview:
    schedule: Schedule
    words: str
    upcoming: list[Any] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _dst_notes(trigger: Trigger, zone_name: str, start: datetime, until: datetime
               ) -> tuple[str, ...]:
    notes = [n for n in (_dst_note(s, zone_name) for s in _explain(trigger, start, until))
             if n]
    if len(notes) > DST_NOTES_SHOWN + 1:
        notes[DST_NOTES_SHOWN:] = [f"... and {len(notes) - DST_NOTES_SHOWN} more runs "
                                   "changed by daylight saving in the preview"]
    return tuple(notes)


def _timing_warnings(trigger: Trigger, catchup: str, start: datetime,
                     sample: Search) -> list[str]:
    if not sample.found:
        return [f"no run in the next {HORIZON_WORDS}"] if sample.horizon else []
    found: list[str] = []
    gaps = [b.at - a.at for a, b in itertools.pairwise(sample.found)]
    shortest = min(gaps) if gaps else None
    if shortest is not None and shortest < GITHUB_MIN_INTERVAL:
        minutes = int(shortest.total_seconds() // 60)
        found.append(f"runs as little as {minutes} minute{'s' if minutes != 1 else ''} "
                     "apart: GitHub Actions starts scheduled workflows at most every 5 "
                     f"minutes, so the tick sees several slots at once (catchup={catchup} "
                     "decides)")
    plain = sample.found if trigger.repeats else ()
    frequent = shortest is not None and shortest < GITHUB_MIN_INTERVAL
    if not frequent and any(s.at.minute == 0 for s in plain
                            if s.fires and s.kind.value != "shifted"):
        found.append("runs at minute 0 (UTC), GitHub's busiest moment, when scheduled "
                     "workflows are delayed the most; prefer an odd minute such as 7 or 23")
    return found


def preview(schedule: Schedule, start: datetime, n: int) -> Preview:
    """The preview of ``schedule`` without workflows (local use)."""
    spec = schedule.spec
    trigger = for_spec(spec)
    result = Preview(schedule, trigger.describe())
    sample = _next(trigger, start, max(n, SAMPLE))
    if n > 0:
        found = _upcoming(_first(sample, n), start, n)
        result.upcoming = found.slots
        if found.slots:
            result.warnings += _dst_notes(trigger, spec.timezone, start, found.slots[-1].at)
        if found.stopped and found.slots:
            result.warnings.append(f"preview shows fewer runs than asked: {found.stopped}")
    result.warnings += _timing_warnings(trigger, spec.catchup.value, start,
                                        _first(sample, SAMPLE))
    result.warnings += [w for w in trigger.lints(start) if w not in result.warnings]
    return result
