"""Schedule specifications (what users write) and state records (what the tick writes).

All models are strict, frozen and reject unknown fields: a typo in a schedule
file is an error that names the field, never a silently ignored setting. Change a
model with ``model_copy(update=...)``. Datetimes in state are always aware UTC.

The docstrings of the schedule fields become the descriptions in
``schedules/schedule.schema.json``, so editors can show them.
"""

from __future__ import annotations

import difflib
import functools
import re
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .cron import DstFold as DstFold
from .cron import DstGap as DstGap
from .cron import DstPolicy, local_to_utc, validate_cron
from .errors import InvalidId

ID_RE = re.compile(r"[a-z0-9](?:[a-z0-9_]|-(?=[a-z0-9_])){0,63}")
"""Schedule ids and track names: safe as a file name, a path segment and a git ref part.
No ``--`` and no trailing ``-``: ``--`` separates the parts of run ids, dispatch keys and
dead-letter keys, which must split back unambiguously."""

ID_RULE = ("1-64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit, "
           "without '--' or a trailing '-'")

WORKFLOW_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\.ya?ml")

RUN_ID_RE = re.compile(ID_RE.pattern + r"--\d{8}T\d{4}Z")
"""``<schedule-id>--<slot in UTC>``; the idempotency key of one firing."""


def check_id(value: str, what: str = "id") -> str:
    """Return ``value`` if it is a valid id, else raise :class:`InvalidId`.

    Ids end up in file paths (``state/runs/<run_id>/tracks/<track>.json``), so this
    is also the guard against path traversal: no ``/``, no ``..``, no upper case.
    """
    if not isinstance(value, str) or not ID_RE.fullmatch(value):
        raise InvalidId(
            f"invalid {what} {value!r}: use {ID_RULE}"
        )
    return value


def check_run_id(value: str) -> str:
    if not isinstance(value, str) or not RUN_ID_RE.fullmatch(value):
        raise InvalidId(
            f"invalid run id {value!r}: expected <schedule-id>--<YYYYMMDDTHHMMZ>, "
            "e.g. nightly--20261201T0700Z"
        )
    return value


def _id(value: str) -> str:
    if not ID_RE.fullmatch(value):
        raise ValueError(
            f"must be {ID_RULE}"
        )
    return value


@functools.lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    # The system's zones plus the tzdata package's, minus aliases of the host's own
    # zone: a schedule must mean the same on every machine.
    return frozenset(available_timezones() - {"localtime", "posixrules"})


def _zone(value: str) -> str:
    if value not in _zone_names():
        close = difflib.get_close_matches(value, sorted(_zone_names()), n=1, cutoff=0.8)
        hint = f"did you mean {close[0]!r}?" if close else (
            "use an IANA name such as 'America/New_York' or 'UTC'")
        raise ValueError(f"unknown time zone {value!r} ({hint})")
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"time zone {value!r} cannot be loaded: {exc}") from exc
    return value


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must include a UTC offset (e.g. 2026-12-01T07:00:00Z)")
    return value.astimezone(UTC)


Id = Annotated[str, AfterValidator(_id),
               Field(json_schema_extra={"pattern": f"^{ID_RE.pattern}$"})]
ZoneName = Annotated[str, AfterValidator(_zone)]
CronText = Annotated[str, AfterValidator(validate_cron)]
UTCDateTime = Annotated[datetime, AfterValidator(_utc)]


class Frozen(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", use_enum_values=False)


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


# --------------------------------------------------------------------------- schedules


class TrackSpec(Frozen):
    """One unit of parallel work in a run."""

    name: Id = Field(description="Track name, unique in the schedule; [a-z0-9][a-z0-9_-]{0,63}.")
    run: str | None = Field(
        None,
        min_length=1,
        description="Shell command run by the local executor (and by the default track "
        "workflow on GitHub Actions).",
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

    @model_validator(mode="after")
    def _has_work(self) -> TrackSpec:
        if self.run is None and not self.inputs:
            raise ValueError("a track needs 'run' or 'inputs' (or both)")
        return self


class ScheduleSpec(Frozen):
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
        json_schema_extra={"anyOf": [
            {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}"
             r"(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$"},
            {"type": "null"},
        ]},
    )
    timezone: ZoneName = Field("UTC", description="IANA time zone of `cron` and `at`.")
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
        if self.cron is None and self.at is None:
            raise PydanticCustomError("cron_or_at", "give exactly one of 'cron' and 'at'",
                                      {"field": "cron"})
        if self.cron is not None and self.at is not None:
            raise PydanticCustomError("cron_or_at", "give exactly one of 'cron' and 'at', "
                                      "not both", {"field": "at"})
        seen: set[str] = set()
        for i, track in enumerate(self.tracks):
            if track.name in seen:
                raise PydanticCustomError("duplicate_track", "duplicate track name '{name}'",
                                          {"field": f"tracks.{i}.name", "name": track.name})
            seen.add(track.name)
        return self

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


# --------------------------------------------------------------------------- state


class TrackPhase(StrEnum):
    """Phase of one track of a run. See :mod:`orchestrator.machine` for the transitions."""

    PENDING = "pending"
    """Waiting to be dispatched (first attempt, a retry after backoff, or jitter)."""
    DISPATCHED = "dispatched"
    """The mark commit chose to dispatch it; the executor may not have started it yet."""
    RUNNING = "running"
    """The executor reports it started."""
    COMPLETE = "complete"
    """Finished successfully. Terminal."""
    FAILED = "failed"
    """Finished unsuccessfully. Retried while attempts remain, else dead-lettered."""
    TAPPED_OUT = "tapped_out"
    """Stopped for exceeding its timeout or the run's deadline. Terminal; dead-lettered."""
    CANCELLED = "cancelled"
    """Cancelled by an overlap policy or an operator. Terminal."""


class RunStatus(StrEnum):
    """Status of one firing of a schedule."""

    SCHEDULED = "scheduled"
    """Created by the mark commit; no track dispatched yet (jitter, buffered overlap)."""
    RUNNING = "running"
    """At least one track was dispatched and some track is still open."""
    CONSOLIDATING = "consolidating"
    """Every track is terminal; the brief is being rendered."""
    COMPLETED = "completed"
    """Every track completed. Terminal."""
    FAILED = "failed"
    """Some track did not complete. Terminal (an operator's requeue may reopen it)."""


class Transition(Frozen):
    """One entry of a ``state_history``."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", populate_by_name=True)

    from_: str = Field(alias="from")
    to: str
    at: UTCDateTime
    reason: str = ""


class Track(Frozen):
    """``state/runs/<run_id>/tracks/<name>.json``: one track of one run."""

    run_id: str
    name: Id
    phase: TrackPhase = TrackPhase.PENDING
    attempt: int = Field(1, ge=1)
    max_attempts: int = Field(1, ge=1)
    spec: TrackSpec
    not_before: UTCDateTime | None = None
    """Earliest dispatch time (jitter, retry backoff)."""
    dispatch_key: str | None = None
    """``<run_id>--<track>--<attempt>``: idempotency key of the current dispatch."""
    handle: dict[str, Any] | None = None
    """Executor-specific handle of the current attempt (CI run id, process id, ...)."""
    executor: str | None = None
    dispatched_at: UTCDateTime | None = None
    started_at: UTCDateTime | None = None
    finished_at: UTCDateTime | None = None
    url: str | None = None
    """Link to the CI run or the local log of the current attempt."""
    result: dict[str, Any] | None = None
    """What the track reported (a JSON object; ``summary`` is shown in the brief)."""
    error_log: list[str] = Field(default_factory=list)
    state_history: list[Transition] = Field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.run_id}--{self.name}--{self.attempt}"


class Run(Frozen):
    """``state/runs/<run_id>/run.json``: one firing of a schedule."""

    run_id: str
    schedule_id: Id
    slot: UTCDateTime
    """The cron slot (or ``at`` instant) this run is for."""
    fire_at: UTCDateTime
    """Slot plus deterministic jitter: tracks are not dispatched before it."""
    created_at: UTCDateTime
    deadline: UTCDateTime
    status: RunStatus = RunStatus.SCHEDULED
    tracks: list[Id]
    description: str = ""
    cron: str | None = None
    timezone: str = "UTC"
    workflow: str = "track.yml"
    """The track workflow the run was created with (GitHub executor)."""
    finished_at: UTCDateTime | None = None
    state_history: list[Transition] = Field(default_factory=list)


class SlotNote(Frozen):
    """A slot that did not fire, and why (kept short: the newest few per schedule)."""

    slot: UTCDateTime
    reason: Literal["missed", "skipped", "overlap", "daily_cap", "dst_skip"]
    at: UTCDateTime


class Cursor(Frozen):
    """``state/schedules/<id>.json``: where a schedule stands."""

    schedule_id: Id
    since: UTCDateTime
    """Slots at or before this instant are settled (fired, skipped or missed)."""
    last_slot: UTCDateTime | None = None
    last_run_id: str | None = None
    next_run_at: UTCDateTime | None = None
    last_error: str | None = None
    done: bool = False
    """A one-shot (``at``) schedule that has fired."""
    enabled: bool = True
    fires_per_day: dict[str, int] = Field(default_factory=dict)
    """Runs started per local calendar day (ISO date), for ``max_runs_per_day``."""
    notes: list[SlotNote] = Field(default_factory=list)


class DeadLetter(Frozen):
    """``state/dlq/<run_id>--<track>.json``: a track that needs a human."""

    key: str
    run_id: str
    track: Id
    reason: str
    parked_at: UTCDateTime
    attempts: int
    payload: TrackSpec
    error_log: list[str] = Field(default_factory=list)
    state_history: list[Transition] = Field(default_factory=list)
    discarded: bool = False
    discarded_by: str | None = None
    discarded_reason: str | None = None


def utc_date_key(moment: datetime, zone: ZoneInfo) -> str:
    """The local calendar day of ``moment`` in ``zone`` as an ISO date."""
    return date.isoformat(moment.astimezone(zone).date())


def run_id_for(schedule_id: str, slot: datetime) -> str:
    """Deterministic run id: ``<schedule-id>--<slot UTC as YYYYMMDDTHHMMZ>``."""
    return f"{schedule_id}--{slot.astimezone(UTC):%Y%m%dT%H%MZ}"
