"""The shape of every file of the API, as models, and their JSON Schemas.

- Version 1 only grows: a later version adds fields, never renames or removes one,
  so the schemas leave additional properties open.
- Each file names its schema in ``$schema`` and its version in ``api_version``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

API_VERSION: Literal[1] = 1
SCHEMA_BASE = "https://orchestrator.invalid/api/v1"
"""Where a file's ``$schema`` points: the ``$id`` of its schema (``schema --api``)."""


class Part(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class Document(Part):
    """What every file carries."""

    schema_url: str = Field(alias="$schema")
    api_version: Literal[1] = API_VERSION


class Heartbeat(Part):
    last_tick: str | None
    age_minutes: float | None
    max_staleness_minutes: float
    stale: bool


class Lateness(Part):
    """How late GitHub's cron started the scheduled ticks (``orchestrator lateness``)."""

    days: int
    samples: int
    p50_seconds: float | None
    p95_seconds: float | None
    max_seconds: float | None
    dropped: int


class LastRun(Part):
    run_id: str
    status: str
    slot: str
    started_at: str | None
    finished_at: str | None
    href: str


class SuccessRate(Part):
    """Of the newest finished runs (at most 30); a cancelled run is neither."""

    runs: int
    succeeded: int
    failed: int
    cancelled: int
    rate: float | None


class ScheduleEntry(Part):
    id: str
    state: Literal["active", "paused", "disabled", "ended", "held"]
    next_slots: list[str]
    last_run: LastRun | None
    success: SuccessRate
    failures_in_a_row: int
    href: str
    badge: str


class RunsLink(Part):
    total: int
    pages: int
    newest_page: str | None


class Index(Document):
    generated_at: str
    heartbeat: Heartbeat
    cron_lateness: Lateness | None
    """Of the last 7 days; ``None`` when no scheduled tick left a sample."""
    schedules: list[ScheduleEntry]
    invalid_schedules: list[str]
    runs: RunsLink
    queues: str


class TrackSummary(Part):
    phase: str
    attempt: int
    summary: str | None
    url: str | None


class RunEntry(Part):
    run_id: str
    status: str
    slot: str
    started_at: str | None
    finished_at: str | None
    origin: str
    href: str
    tracks: dict[str, TrackSummary]
    tracks_left_out: int


class DeadLetterEntry(Part):
    key: str
    run_id: str
    track: str
    reason: str
    parked_at: str
    attempts: int
    discarded: bool


class ScheduleDoc(Document):
    id: str
    state: str
    definition: dict[str, Any]
    next_slots: list[str]
    runs: list[RunEntry]
    runs_total: int
    dead_letters: list[DeadLetterEntry]
    dead_letters_total: int


class RunLinks(Part):
    brief: str | None
    schedule: str
    ci: list[str]


class RunDoc(Document):
    """A run as ``runs show --json`` gives it, each track's output cut to the brief's."""

    run: dict[str, Any]
    detail: Literal["full", "short", "summary"]
    """How much of each track is kept: ``short`` and ``summary`` when ``full`` would
    make the file too large."""
    tracks: dict[str, dict[str, Any]]
    links: RunLinks


class RunRow(Part):
    run_id: str
    schedule: str
    status: str
    slot: str
    finished_at: str | None
    tracks: dict[str, int]
    origin: str
    acts: list[str]
    href: str


class RunsPage(Document):
    """Pages are numbered from the oldest, so a new run changes only the last page.
    How many pages and runs there are is the index's to say (``runs``)."""

    page: int
    runs: list[RunRow]
    older: str | None
    newer: str | None


class QueueEntry(Part):
    queue: str
    counts: dict[str, int]
    backlog: int
    in_flight: int
    dead: int
    href: str


class QueuesDoc(Document):
    generated_at: str
    queues: list[QueueEntry]


class QueueDoc(Document):
    queue: str
    counts: dict[str, int]
    backlog: int
    in_flight: int
    claimed_by: dict[str, int]
    dead: int
    throughput_per_day: dict[str, int]
    """UTC day (``YYYY-MM-DD``) -> items done that day, the newest 30 days that saw one."""


KINDS: dict[str, type[Document]] = {
    "index": Index, "schedule": ScheduleDoc, "run": RunDoc, "runs-page": RunsPage,
    "queues": QueuesDoc, "queue": QueueDoc,
}
"""Each kind of file -> its model; the kind names its schema."""


def schema_url(kind: str) -> str:
    return f"{SCHEMA_BASE}/{kind}.schema.json"


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of the files of ``kind``, as they are written (by alias)."""
    schema = KINDS[kind].model_json_schema(by_alias=True, mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": schema_url(kind), **schema}


def json_schemas() -> dict[str, dict[str, Any]]:
    """Kind -> its schema (what ``schema --api`` prints)."""
    return {kind: json_schema(kind) for kind in KINDS}
