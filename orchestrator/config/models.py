"""Schedule specifications: what users write in ``schedules/<id>.json``.

- Every model is strict, frozen and rejects unknown fields: a typo in a schedule file
  is an error that names the field, never a silently ignored setting.
- Change a model with ``model_copy(update=...)``.
- The docstrings of the fields become the descriptions in
  ``schedules/schedule.schema.json``, so editors can show them.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Annotated
from zoneinfo import ZoneInfo

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..cron import DstPolicy, local_to_utc
from .chains import AfterSpec, upstreams
from .events import OnEvent
from .fieldtypes import (
    AT_YEARS,
    MAX_RUN_BYTES,
    WORKFLOW_RE,
    CronText,
    Frozen,
    Id,
    RunCommand,
    ZoneName,
)
from .needs import CONSOLIDATE, graph_error
from .policies import SchedulePolicies, TrackPolicies, compensation_problem
from .queuing import WORKER_SUFFIX, Drain, OnQueue, worker_names

# --------------------------------------------------------------------------- policies


class OverlapPolicy(StrEnum):
    """What to do when a slot comes due while an earlier run of the schedule is open."""

    SKIP = "skip"
    """Do not start the new run; record the slot as skipped. (Kubernetes ``Forbid``.)"""
    BUFFER_ONE = "buffer_one"
    """Start the new run once the open one finishes; at most one run waits."""
    ALLOW = "allow"
    """Start the new run at once; runs may overlap."""
    CANCEL_PREVIOUS = "cancel_previous"
    """Cancel the open run's unfinished tracks, then start the new run. (``Replace``.)"""


class CatchupPolicy(StrEnum):
    """Which slots to fire when the tick arrives late or after an outage.

    Only slots inside ``catchup_window_minutes`` before the tick are eligible; older
    ones are recorded as missed and never fired.
    """

    LATEST = "latest"
    """Fire only the newest eligible slot; earlier eligible slots are recorded as skipped."""
    ALL = "all"
    """Fire every eligible slot, oldest first; except on a schedule's first tick, which
    never back-fills (it fires at most the latest slot, as ``latest`` does)."""
    NONE = "none"
    """Never fire a slot from before the schedule was first seen or re-enabled; otherwise
    like ``latest``."""


class When(StrEnum):
    """When a track with ``needs`` runs, once every needed track is terminal."""

    SUCCESS = "success"
    """Only if every needed track completed; otherwise it is ``skipped``."""
    ALWAYS = "always"
    """Whatever their outcome (a clean-up or consolidation step)."""


# --------------------------------------------------------------------------- schedules




class TrackSpec(Frozen, TrackPolicies):
    """One unit of parallel work in a run."""

    name: Id = Field(description="Track name, unique in the schedule; [a-z0-9][a-z0-9_-]{0,63}.")
    run: RunCommand | None = Field(
        None,
        min_length=1,
        description="Shell command run by the local executor (and by the default track "
        f"workflow on GitHub Actions); at most {MAX_RUN_BYTES} bytes.",
    )
    credentials: list[Annotated[str, Field(pattern=r"^[A-Z_][A-Z0-9_]{0,99}$")]] = Field(
        default_factory=list,
        max_length=20,
        description="Orchestrator credentials (e.g. GITHUB_TOKEN) the local executor "
        "passes to `run`. None by default: a track command never sees the tick's tokens "
        "unless its schedule names them here.",
    )
    inputs: dict[str, str] = Field(
        default_factory=dict,
        description="String inputs passed to the track workflow as part of the matrix leg.",
    )
    timeout_minutes: float = Field(
        30, gt=0, le=7 * 24 * 60,
        description="Minutes a track may run before it is tapped out (fractions allowed).",
    )
    max_attempts: int = Field(
        1, ge=1, le=20, description="Attempts before a failing track is dead-lettered."
    )
    retry_backoff_seconds: int = Field(
        60, ge=0, le=24 * 3600,
        description="Seconds before the first retry; doubles on each further attempt.",
    )
    needs: list[Id] = Field(
        default_factory=list,
        description="Tracks of the same schedule that must be terminal before this one is "
        "dispatched.",
    )
    when: When = Field(
        When.SUCCESS,
        description="With `needs`: 'success' runs only if every needed track completed "
        "(else it is skipped); 'always' runs whatever their outcome.",
    )
    poll_interval_minutes: float | None = Field(
        None, gt=0, le=24 * 60,
        description="Minutes before a track that answered \"not yet\" (exit code 75, or a "
        "result without `poll_again_in_minutes`) is dispatched again; default 5.",
    )

    drain: Drain | None = Field(
        None,
        description="Work the items of a queue: dispatched as min(max_workers, "
        "ceil(backlog / task_cap)) workers, each running `run` once per item it "
        "claimed (ORCHESTRATOR_ITEM_ID, ORCHESTRATOR_ITEM, ORCHESTRATOR_ITEM_ATTEMPT). "
        "`timeout_minutes` is each worker's wall clock; `max_attempts` and "
        "`retry_backoff_seconds` apply to each item.",
    )

    @model_validator(mode="after")
    def _has_work(self) -> TrackSpec:
        if self.run is None and not self.inputs:
            raise ValueError("a track needs 'run' or 'inputs' (or both)")
        if self.drain is not None:
            if self.run is None:
                raise ValueError("a drain track needs 'run': its workers run it once per item")
            if self.compensate is not None:
                raise ValueError("a drain track has no 'compensate' step: its items "
                                 "are retried instead")
            longest = worker_names(self.name, self.drain)[-1]
            if len(longest) > 64:
                raise ValueError(f"a drain track's name must leave room for its workers' "
                                 f"names ({longest!r} is longer than 64 characters)")
        return self


class ConsolidateSpec(Frozen):
    """The schedule's final step: a track named ``consolidate`` that needs every other
    track with ``when: always`` and sees their results in ``ORCHESTRATOR_RESULTS``."""

    run: str | None = Field(None, min_length=1, description="Shell command, as a track's.")
    inputs: dict[str, str] = Field(default_factory=dict, description="As a track's `inputs`.")
    timeout_minutes: float = Field(30, gt=0, le=7 * 24 * 60, description="As a track's.")
    max_attempts: int = Field(1, ge=1, le=20, description="As a track's.")

    @model_validator(mode="after")
    def _has_work(self) -> ConsolidateSpec:
        if self.run is None and not self.inputs:
            raise ValueError("the consolidate step needs 'run' or 'inputs' (or both)")
        return self


_WHEN_PATTERN = (r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?"
                 r"(Z|[+-]\d{2}:?\d{2})?$")
"""An ISO datetime with or without an offset. Not "format: date-time": that is RFC
3339, which needs an offset, and editors would flag the naive local times accepted."""


class ScheduleSpec(Frozen, SchedulePolicies):  # the opt-in policies: orchestrator.config.policies
    """A schedule file: when to fire and which tracks to run in parallel."""

    schema_ref: str | None = Field(
        None, alias="$schema", description="Path or URL of the JSON Schema, for editors."
    )
    description: str = Field("", description="What this schedule is for, shown in briefs.")
    cron: CronText | None = Field(
        None,
        description="Five-field cron expression (minute hour day-of-month month day-of-week) "
        "or @hourly, @daily (or @midnight), @weekly, @monthly, @yearly (or @annually); "
        "evaluated in `timezone`. "
        "Exactly one of `cron` and `at`.",
    )
    at: datetime | None = Field(
        None,
        description="One-shot ISO datetime; without an offset it is read in `timezone`. "
        "It fires once, however late it is seen (the catch-up settings apply to `cron` "
        "only); changing it arms the schedule again. Exactly one of `cron` and `at`.",
        # Not "format: date-time": that is RFC 3339, which needs an offset, and editors
        # would flag the naive local times this field accepts.
        json_schema_extra={"anyOf": [{"type": "string", "pattern": _WHEN_PATTERN},
                                     {"type": "null"}]},
    )
    after: AfterSpec | list[AfterSpec] | None = Field(
        None,
        description="Fire when another schedule's run ends: {\"schedule\": \"ingest\", "
        "\"status\": [\"completed\"], \"within_minutes\": 1440}, or a list of them (all "
        "required). Once per qualifying upstream run, in the tick that records its end; "
        "with or without `cron`.",
    )
    on_queue: OnQueue | None = Field(
        None,
        description="Fire when a queue's backlog calls for a drain: {\"queue\": \"jobs\", "
        "\"min_ready\": 100, \"max_wait_minutes\": 30}, whichever comes first. A track "
        "of the schedule must drain the queue. Not again while a run it fired is open.",
    )
    on_event: OnEvent | None = Field(
        None,
        description="Fire once per event an outside system sends (`orchestrator event`, "
        "or a repository_dispatch of type orchestrator-event), with the inputs declared "
        "here; with or without `cron`.",
    )
    timezone: ZoneName = Field("UTC", description="IANA time zone of `cron` and `at`.")
    start_at: datetime | None = Field(
        None,
        description="No slot before this ISO datetime (without an offset, read in "
        "`timezone`); with `cron` only.",
        json_schema_extra={"anyOf": [{"type": "string", "pattern": _WHEN_PATTERN},
                                     {"type": "null"}]},
    )
    end_at: datetime | None = Field(
        None,
        description="No slot after this ISO datetime (without an offset, read in "
        "`timezone`): the schedule has ended, and `status` says so; with `cron` only.",
        json_schema_extra={"anyOf": [{"type": "string", "pattern": _WHEN_PATTERN},
                                     {"type": "null"}]},
    )
    exclude: list[date] = Field(
        default_factory=list, max_length=10000,
        description="Local dates (YYYY-MM-DD, in `timezone`) on which no slot fires, e.g. "
        "holidays; with `cron` only.",
    )
    exclude_calendars: list[Id] = Field(
        default_factory=list, max_length=100,
        description="Names of shared calendars, files `calendars/<name>.json`, whose dates "
        "are excluded as `exclude` dates are (read in `timezone`); with `cron` only. A "
        "missing or invalid calendar makes the schedule invalid.",
    )
    _calendar_dates: frozenset[date] | None = PrivateAttr(None)
    """The dates of :attr:`exclude_calendars`, set by the loader that read them."""
    enabled: bool = Field(True, description="A disabled schedule never fires.")
    tracks: list[TrackSpec] = Field(
        min_length=1, max_length=1024, description="Tracks run in parallel by each run."
    )
    workflow: str = Field(
        "track.yml",
        pattern=f"^{WORKFLOW_RE.pattern}$",  # pydantic searches; anchor it
        description="File name of the GitHub Actions workflow that runs the tracks.",
    )
    overlap: OverlapPolicy = Field(
        OverlapPolicy.SKIP,
        description="What to do when a slot comes due while an earlier run is still open: "
        "'skip' the new slot, 'buffer_one' (start it when the open run ends; at most one "
        "waits), 'allow' overlapping runs, or 'cancel_previous' (cancel the open run's "
        "unfinished tracks, then start).",
    )
    catchup: CatchupPolicy = Field(
        CatchupPolicy.LATEST,
        description="Which slots to fire when the tick arrives late: 'latest' (only the "
        "newest slot inside the catch-up window), 'all' (every slot inside the window, "
        "oldest first) or 'none' (like 'latest', but never a slot from before the schedule "
        "was first seen or re-enabled). A new schedule never back-fills: its first tick "
        "fires at most the latest slot, whatever the policy.",
    )
    catchup_window_minutes: int = Field(
        60, ge=0, le=7 * 24 * 60,
        description="How late a slot may still fire; older slots are recorded as missed.",
    )
    deadline_minutes: float = Field(
        240, gt=0, le=7 * 24 * 60,
        description="Hard ceiling for a whole run: open tracks are tapped out after it.",
    )
    max_runs_per_day: int | None = Field(
        None, ge=1, description="At most this many runs per local calendar day."
    )
    jitter_seconds: int = Field(
        0, ge=0, le=3600,
        description="Delay each run by a deterministic 0..N seconds (hash of the run id).",
    )
    consolidate: ConsolidateSpec | None = Field(
        None,
        description="A final step run once every track is terminal, whatever their outcome, "
        "with every result in the file named by ORCHESTRATOR_RESULTS; it heads the brief.",
    )
    dst: DstPolicy = Field(
        default_factory=DstPolicy,
        description="Daylight-saving behaviour of fixed-time schedules (minute and hour "
        "fields not starting with '*'); the others run in elapsed time: both passes of a "
        "repeated hour, nothing for local times that do not exist.",
    )

    model_config = ConfigDict(
        strict=True,
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        json_schema_extra={"additionalProperties": False},
    )

    @model_validator(mode="after")
    def _check(self) -> ScheduleSpec:
        # A model-level error has no location; ctx["field"] names the field for messages.
        self._check_when()
        self._check_on_queue()
        self._check_span()
        self._check_track_names()
        self._check_needs()
        return self

    def _check_when(self) -> None:
        """Exactly one of ``cron`` and ``at``, and an ``at`` in the years allowed."""
        if self.cron is None and self.at is None and not self.upstreams \
                and self.on_queue is None and self.on_event is None:
            raise PydanticCustomError("cron_or_at", "give exactly one of 'cron' and 'at' "
                                      "(or 'after', 'on_queue' or 'on_event' alone)",
                                      {"field": "cron"})
        if self.cron is not None and self.at is not None:
            raise PydanticCustomError("cron_or_at", "give exactly one of 'cron' and 'at', "
                                      "not both", {"field": "at"})
        if self.at is not None and not AT_YEARS[0] <= self.at.year <= AT_YEARS[1]:
            raise PydanticCustomError("at_range", "{at} is out of range: give a year from "
                                      "{low} to {high}", {"field": "at", "at": str(self.at),
                                                          "low": AT_YEARS[0],
                                                          "high": AT_YEARS[1]})

    def _check_on_queue(self) -> None:
        """A schedule fired by a queue drains that queue in one of its tracks."""
        watched = self.on_queue
        if watched is None or any(t.drain is not None and t.drain.queue == watched.queue
                                  for t in self.tracks):
            return
        raise PydanticCustomError("on_queue", "no track drains the queue {queue} (add a "
                                  "track with \"drain\": {\"queue\": \"{queue}\"})",
                                  {"field": "on_queue", "queue": watched.queue})

    @property
    def upstreams(self) -> list[AfterSpec]:
        """The schedules this one fires after (``after`` as a list; empty without it)."""
        return upstreams(self.after)

    def _check_track_names(self) -> None:
        """Track names are unique, and none is a drain's worker's or ``consolidate``
        (when the schedule consolidates)."""
        seen: set[str] = set()
        for i, track in enumerate(self.tracks):
            if track.name in seen:
                raise PydanticCustomError("duplicate_track", "duplicate track name '{name}'",
                                          {"field": f"tracks.{i}.name", "name": track.name})
            seen.add(track.name)
        for i, track in enumerate(self.tracks):
            taken = self._drain_naming(track)
            if taken is not None:
                raise PydanticCustomError(
                    "reserved_track", "track name '{name}' is reserved for a worker of the "
                    "drain track '{drain}' (names '{drain}{suffix}N')",
                    {"field": f"tracks.{i}.name", "name": track.name, "drain": taken,
                     "suffix": WORKER_SUFFIX})
        if self.consolidate is not None and CONSOLIDATE in seen:
            i = [t.name for t in self.tracks].index(CONSOLIDATE)
            raise PydanticCustomError(
                "reserved_track", "track name '{name}' is reserved for the schedule's "
                "'consolidate' step", {"field": f"tracks.{i}.name", "name": CONSOLIDATE})

    def _drain_naming(self, track: TrackSpec) -> str | None:
        """The other drain track whose workers' names include ``track``'s, if any."""
        return next((t.name for t in self.tracks if t.drain is not None and t is not track
                     and track.name in worker_names(t.name, t.drain)), None)

    def _check_needs(self) -> None:
        """The tracks' ``needs`` form no circle and name tracks that exist; the
        compensations fit ``on_failure``."""
        problem = graph_error([(t.name, t.needs) for t in self.tracks])
        if problem is not None:
            raise PydanticCustomError("track_graph", "{msg}", {
                "field": f"tracks.{problem[0]}.needs", "msg": problem[1]})
        undo_problem = compensation_problem(self.on_failure,
                                            [t.name for t in self.tracks if t.compensate])
        if undo_problem:
            raise PydanticCustomError("compensation", undo_problem, {"field": "on_failure"})

    def _check_span(self) -> None:
        """``start_at``, ``end_at`` and ``exclude`` bound a cron's slots: a one-shot
        has its one instant, and an end before the start would never fire."""
        self._check_span_fields()
        start, end = self.bound_utc("start_at"), self.bound_utc("end_at")
        if start is not None and end is not None and end <= start:
            raise PydanticCustomError("span_order", "end_at must be after start_at",
                                      {"field": "end_at"})

    def _check_span_fields(self) -> None:
        """Each bound on its own: none beside ``at``, and a start or end in the years a
        slot may fall in."""
        for name in ("start_at", "end_at", "exclude", "exclude_calendars"):
            if self.at is not None and getattr(self, name):
                raise PydanticCustomError("span_with_at", "'{name}' applies to 'cron' only",
                                          {"field": name, "name": name})
        for name in ("start_at", "end_at"):
            value = getattr(self, name)
            if value is not None and not AT_YEARS[0] <= value.year <= AT_YEARS[1]:
                raise PydanticCustomError("span_range", "{name} is out of range: give a "
                                          "year from {low} to {high}",
                                          {"field": name, "name": name, "low": AT_YEARS[0],
                                           "high": AT_YEARS[1]})

    def with_calendars(self, dates: frozenset[date]) -> ScheduleSpec:
        """This spec with the dates of its calendars, as the loader read them."""
        copy = self.model_copy()
        copy._calendar_dates = dates
        return copy

    def excluded_dates(self) -> frozenset[date]:
        """``exclude`` and the dates of ``exclude_calendars``: local dates with no slot.
        A spec whose calendars were never read raises :class:`ValueError`, rather than
        fire on a holiday."""
        if not self.exclude_calendars:
            return frozenset(self.exclude)
        if self._calendar_dates is None:
            raise ValueError("its calendars (exclude_calendars) were not read")
        return frozenset(self.exclude) | self._calendar_dates

    def bound_utc(self, name: str) -> datetime | None:
        """``start_at`` or ``end_at`` in UTC (a naive one is read in ``timezone``)."""
        value: datetime | None = getattr(self, name)
        if value is None:
            return None
        if value.tzinfo is not None:
            return value.astimezone(UTC)
        return local_to_utc(value, self.zone)[0]

    @property
    def run_tracks(self) -> list[TrackSpec]:
        """The tracks a run has: ``tracks``, then the ``consolidate`` step if any."""
        if self.consolidate is None:
            return list(self.tracks)
        c = self.consolidate
        step = TrackSpec(name=CONSOLIDATE, run=c.run, inputs=c.inputs,
                         timeout_minutes=c.timeout_minutes, max_attempts=c.max_attempts,
                         needs=[t.name for t in self.tracks], when=When.ALWAYS)
        return [*self.tracks, step]

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def at_utc(self) -> datetime | None:
        """The one-shot instant in UTC (a naive ``at`` is read in ``timezone``)."""
        if self.at is None:
            return None
        if self.at.tzinfo is not None:
            return self.at.astimezone(UTC)
        # A repeated local time means its first occurrence; one skipped by
        # spring-forward means the first instant after the gap (as cron shifts).
        return local_to_utc(self.at, self.zone)[0]

    def track(self, name: str) -> TrackSpec:
        for t in self.tracks:
            if t.name == name:
                return t
        raise KeyError(name)


class Schedule(Frozen):
    """A loaded schedule: its id (the file stem) and its spec."""

    id: Id
    spec: ScheduleSpec
    path: str = ""
