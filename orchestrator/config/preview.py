"""What ``validate`` and ``schedules next`` say about a schedule: its next runs and the
warnings worth a reviewer's eye. Pure: the start instant is a parameter, and the only
thing looked at outside the schedule is the list of workflow files, passed in.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..cron import (
    FOLD_LOOKBACK,
    NEXT_HORIZON,
    Search,
    SlotInfo,
    SlotKind,
    Spacing,
    dst_note,
    spacing,
    zone_changes,
)
from ..support.times import iso
from .chains import AfterSpec
from .events import pattern_warnings
from .files import LoadResult, load_all
from .models import Schedule, ScheduleSpec
from .policies import FanIn
from .track_workflow import read_workflow
from .triggers import CronTrigger, Trigger, for_spec
from .zones import advice as zone_advice

GITHUB_MIN_INTERVAL = timedelta(minutes=5)
"""GitHub Actions runs scheduled workflows at most every 5 minutes (GitHub's docs,
*Events that trigger workflows*, ``schedule``: "The shortest interval you can run
scheduled workflows is once every 5 minutes")."""

DST_NOTES_SHOWN = 3

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

HORIZON_WORDS = f"{NEXT_HORIZON.days // 366} years"
"""How far ahead the search for next runs looks, in words."""


def slot_dict(slot: SlotInfo) -> dict[str, str]:
    return {"utc": iso(slot.at), "local": slot.local.isoformat(), "kind": slot.kind.value}


@dataclass(frozen=True)
class Upcoming:
    """The next runs of a schedule, and why there are fewer than asked for, if so."""

    slots: list[SlotInfo]
    stopped: str | None = None
    """Set when the search stopped at its horizon with fewer runs than asked for."""


def upcoming(schedule: Schedule, start: datetime, n: int) -> Upcoming:
    """The next ``n`` firing slots after ``start``, with their local times."""
    return _upcoming(for_spec(schedule.spec).next(start, n), start, n)


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
    """What ``validate`` says about one valid schedule."""

    schedule: Schedule
    words: str
    upcoming: list[SlotInfo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    zone_advice: str | None = None
    """Set when the schedule's zone is a fixed offset or a legacy alias (also the first
    of :attr:`warnings`); ``validate --strict`` fails on it."""

    def to_json(self) -> dict[str, Any]:
        spec = self.schedule.spec
        return {
            "id": self.schedule.id,
            "file": self.schedule.path,
            "enabled": spec.enabled,
            "cron": spec.cron,
            "at": spec.at.isoformat() if spec.at else None,
            "timezone": spec.timezone,
            "description": spec.description,
            "when": self.words,
            "tracks": [t.name for t in spec.tracks],
            "next": [slot_dict(s) for s in self.upcoming],
            "warnings": self.warnings,
        }


def _workflow_warnings(schedule: Schedule, workflows: Path | None) -> list[str]:
    """A schedule naming a workflow that is not there would fail every dispatch."""
    spec = schedule.spec
    if workflows is None or not workflows.is_dir():
        return []  # local use: no workflows to check against
    from .github_limits import hosted_runner_warnings, job_name_warnings

    runner = hosted_runner_warnings(spec.tracks)
    if not (workflows / spec.workflow).is_file():
        return [f"workflow {spec.workflow!r} is not in .github/workflows: every dispatch "
                "on GitHub Actions would fail", *runner]
    if _names_jobs_by_key(workflows / spec.workflow):
        runner += job_name_warnings(schedule.id, spec.run_tracks, spec.workflow)
    runner = _fan_in_warnings(spec, workflows / spec.workflow) + runner
    if spec.workflow != "track.yml":
        return runner
    return [f"track {track.name!r} has no 'run': the default track.yml fails it on GitHub; "
            "name a 'workflow' that handles its inputs" for track in spec.tracks
            if track.run is None] + runner


def _fan_in_warnings(spec: ScheduleSpec, workflow: Path) -> list[str]:
    """What stands in the way of a fan-in at the next tick (``fan_in: next_tick``)."""
    from .github_limits import MAX_DOWNLOADS

    if spec.fan_in is not FanIn.NEXT_TICK:
        return []
    found: list[str] = []
    if len(spec.run_tracks) > MAX_DOWNLOADS:
        found.append(f"fan_in is 'next_tick' with {len(spec.run_tracks)} tracks: a tick "
                     f"reads at most {MAX_DOWNLOADS} outcomes from artifacts, the other legs "
                     "from their jobs' conclusions, without results or measured times; keep "
                     "the fan-in job for a batch this large")
    if not _declares_fan_in(workflow):
        found.append(f"fan_in is 'next_tick' but {spec.workflow} has no 'fan_in' input: "
                     "GitHub refuses every dispatch of this schedule (copy the shipped "
                     "track.yml)")
    return found


def _names_jobs_by_key(path: Path) -> bool:
    """Whether the workflow names its legs' jobs after the whole dispatch key (a
    ``track.yml`` from before jobs were named by a hash of it): a job's ``name``, at
    the job's indentation (a step's ``with: name:`` is an artifact's)."""
    data = read_workflow(path)
    return data is not None and re.search(
        rb"^ {4}name:\s*\$\{\{\s*matrix\.leg\.key\s*\}\}\s*$", data, re.MULTILINE) is not None


def _declares_fan_in(path: Path) -> bool:
    """Whether the workflow at ``path`` declares the ``fan_in`` input (read for the
    schedules that set ``fan_in: next_tick`` only)."""
    data = read_workflow(path)
    return data is not None and re.search(rb"^\s+fan_in:\s*$", data, re.MULTILINE) is not None


@functools.lru_cache(maxsize=1024)
def _search(trigger: Trigger, start: datetime, n: int) -> Search:
    # Schedules that share their timing (the same cron and zone: a repository of a
    # thousand schedules has far fewer timings) share one search.
    return trigger.next(start, n)


def _spacing(trigger: Trigger, start: datetime) -> Spacing:
    """The spacing of the next :data:`SAMPLE` runs: a cron expression's mostly read off
    its structure (a thousand schedules with timings of their own ask for 64 runs each)."""
    if isinstance(trigger, CronTrigger):
        return spacing(trigger.expr, trigger.zone, trigger.dst, start, SAMPLE)
    found = trigger.next(start, SAMPLE)  # a one-shot: one run at most
    return Spacing(len(found.found), None, any(
        s.at.minute == 0 and s.kind is not SlotKind.SHIFTED for s in found.found),
        found.horizon)


@functools.lru_cache(maxsize=1024)
def _dst_notes(trigger: Trigger, zone_name: str, start: datetime, until: datetime
               ) -> tuple[str, ...]:
    if isinstance(trigger, CronTrigger) and not zone_changes(
            trigger.zone, start - FOLD_LOOKBACK, until):
        return ()  # no change of offset, nothing repeated or skipped: every slot is plain
    notes = [n for n in (dst_note(s, zone_name) for s in trigger.explain(start, until)) if n]
    if len(notes) > DST_NOTES_SHOWN + 1:  # an every-minute job: an hour of notes
        notes[DST_NOTES_SHOWN:] = [f"... and {len(notes) - DST_NOTES_SHOWN} more runs "
                                   "changed by daylight saving in the preview"]
    return tuple(notes)  # shared by the schedules with this timing (cached)


SAMPLE = 64
"""Runs the timing warnings look at."""


def _timing_warnings(trigger: Trigger, catchup: str, sample: Spacing) -> list[str]:
    """Warnings about when a repeating schedule runs, from the spacing of its next
    :data:`SAMPLE` runs."""
    if not sample.count:
        return [f"no run in the next {HORIZON_WORDS}"] if sample.horizon else []
    found = _spacing_warnings(sample.shortest, catchup)
    # A DST shift to 03:00 is not the author's choice of minute; a one-shot fires at
    # the next tick however busy GitHub is.
    # A schedule that runs every few minutes is at minute 0 only as at every other
    # minute: the spacing warning is the one that matters for it.
    if trigger.repeats and sample.minute_zero and not _frequent(sample.shortest):
        found.append("runs at minute 0 (UTC), GitHub's busiest moment, when scheduled "
                     "workflows are delayed the most; prefer an odd minute such as 7 or 23")
    return found


def _frequent(shortest: timedelta | None) -> bool:
    """Whether runs come closer together than GitHub starts scheduled workflows."""
    return shortest is not None and shortest < GITHUB_MIN_INTERVAL


def _spacing_warnings(shortest: timedelta | None, catchup: str) -> list[str]:
    """The warning for runs closer together than GitHub's cron calls, if they are."""
    if shortest is None or not _frequent(shortest):
        return []
    minutes = int(shortest.total_seconds() // 60)
    return [f"runs as little as {minutes} minute{'s' if minutes != 1 else ''} "
            "apart: GitHub Actions starts scheduled workflows at most every 5 "
            f"minutes, so the tick sees several slots at once (catchup={catchup} "
            "decides)"]


@functools.lru_cache(maxsize=1024)
def _shared_timing_warnings(trigger: Trigger, catchup: str, start: datetime
                            ) -> tuple[str, ...]:
    """:func:`_timing_warnings`, once per timing (like :func:`_search`)."""
    return tuple(_timing_warnings(trigger, catchup, _spacing(trigger, start)))


def preview(schedule: Schedule, start: datetime, n: int,
            workflows: Path | None = None) -> Preview:
    """The next ``n`` runs after ``start`` and every warning worth a reviewer's eye.

    ``workflows`` is the repository's ``.github/workflows`` folder, when it has one."""
    spec = schedule.spec
    trigger = for_spec(spec)
    result = Preview(schedule, trigger.describe(), warnings=_workflow_warnings(
        schedule, workflows), zone_advice=zone_advice(spec.timezone))
    if result.zone_advice:
        result.warnings.insert(0, result.zone_advice)
    if n > 0:
        found = _upcoming(_search(trigger, start, n), start, n)
        result.upcoming = found.slots
        if found.slots:
            result.warnings += _dst_notes(trigger, spec.timezone, start, found.slots[-1].at)
        if found.stopped and found.slots:
            result.warnings.append(f"preview shows fewer runs than asked: {found.stopped}")
    result.warnings += _shared_timing_warnings(trigger, spec.catchup.value, start)
    if spec.on_event is not None:
        result.warnings += pattern_warnings(spec.on_event.inputs)
    # A lint may repeat a note of the preview (a one-shot's daylight-saving shift).
    result.warnings += [w for w in trigger.lints(start) if w not in result.warnings]
    return result


@dataclass
class Report:
    """``validate``'s whole answer: every valid schedule previewed, every problem."""

    start: datetime
    loaded: LoadResult
    previews: list[Preview]

    @property
    def ok(self) -> bool:
        return not self.loaded.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "from": iso(self.start),
            "valid": len(self.previews),
            "invalid": len(self.loaded.invalid_files),
            "schedules": [p.to_json() for p in self.previews],
            "errors": [{"file": e.file, "field": e.field, "problem": e.problem,
                        "message": e.message} for e in self.loaded.errors],
        }


def build_report(loaded: LoadResult, start: datetime, n: int,
                 workflows: Path | None = None) -> Report:
    if workflows is not None and not workflows.is_dir():
        workflows = None  # asked once, not once per schedule
    return Report(start, loaded, [preview(s, start, n, workflows) for s in loaded.schedules])


@dataclass(frozen=True)
class Chain:
    """What ``schedules show`` says of a schedule's upstreams and downstreams."""

    upstreams: list[AfterSpec]
    downstreams: list[str]

    @classmethod
    def of(cls, schedule: Schedule, directory: Path) -> Chain:
        """The chain of ``schedule`` among the valid schedule files of ``directory``."""
        down = sorted(s.id for s in load_all(directory).schedules
                      if any(a.schedule == schedule.id for a in s.spec.upstreams))
        return cls(schedule.spec.upstreams, down)

    @property
    def lines(self) -> list[str]:
        ups = ", ".join(a.describe() for a in self.upstreams)
        return ([f"  upstream:  {ups}"] if ups else []) + (
            [f"  downstream: {', '.join(self.downstreams)}"] if self.downstreams else [])

    @property
    def json(self) -> dict[str, list[str]]:
        return {"upstreams": [a.schedule for a in self.upstreams],
                "downstreams": self.downstreams}
