"""State records: what the tick writes on the state branch.

- Strict, frozen, unknown fields rejected, like the schedule models.
- Datetimes are always aware UTC.
- A track record carries the spec it was created with, so an edited schedule file
  never changes a run that already fired.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import (
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from ..config.fieldtypes import WORKFLOW_RE, Frozen, Id, UTCDateTime, ZoneName
from ..config.models import TrackSpec
from ..config.policies import Pause
from .layout import run_id_for as run_id_for  # where run ids are made; named here too
from .phases import RunStatus, TrackPhase

# --------------------------------------------------------------------------- state


class Transition(Frozen):
    """One entry of a ``state_history``."""

    model_config = ConfigDict(populate_by_name=True)

    from_: str = Field(alias="from")
    to: str
    at: UTCDateTime
    reason: str = ""


class Work(Frozen):
    """What a drain track's worker owns: the items it claimed when it was dispatched."""

    drain: Id
    """The drain track it works for (a track of the same run)."""
    queue: Id
    items: list[str]
    """The ids it claimed, in the order it works them."""
    wall_minutes: float = Field(gt=0)
    """Its wall clock: it starts no item after it, and releases the one in flight."""
    lease_until: UTCDateTime
    """Its claims' ``locked_until``: without an outcome from it, they hold until then."""


class Gate(Frozen):
    """Where a track's approval gate stands (its spec's ``approval``), for one attempt."""

    attempt: int = Field(1, ge=1)
    """The attempt it gates: each new attempt (a retry, a requeue) waits anew."""
    since: UTCDateTime | None = None
    """When it began to wait: the tick that found it otherwise due to go (on GitHub
    with an environment, the tick that saw its leg held)."""
    approved: Act | None = None
    """Who let it start, when and why."""
    rejected: Act | None = None
    """Who stopped it (the track ends ``rejected``), when and why."""

    @property
    def decided(self) -> Act | None:
        return self.approved or self.rejected


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
    polls: int = Field(0, ge=0)
    """"Not yet" answers in the current attempt; part of the dispatch key when > 0."""
    url: str | None = None
    """Link to the CI run or the local log of the current attempt."""
    result: dict[str, Any] | None = None
    """What the track reported (a JSON object; ``summary`` is shown in the brief)."""
    error_log: list[str] = Field(default_factory=list)
    state_history: list[Transition] = Field(default_factory=list)
    runner: str | None = None
    """The runner label the current attempt was sent to (``runs_on``)."""
    leaving_since: UTCDateTime | None = None
    """When the tick last asked to cancel the current attempt's run because no runner
    of its label took it: the track goes to the next label only once the leg is seen
    cancelled, so it never runs twice."""
    compensating: bool = False
    """The compensation of track ``name`` (``state/runs/<run_id>/undo/<name>.json``)."""
    work: Work | None = None
    """Set on a worker of a drain track (``<drain>-w<n>``), never on the track itself."""
    claimed_by: str | None = None
    """The machine the current dispatch was marked for (a local executor's work folder,
    by its ``machine-id``): only that one launches it or looks it up; the others leave
    it alone. ``None``: any machine (GitHub; a record from before claims)."""
    gate: Gate | None = None
    """Its approval gate, once it waits or a person decided (:mod:`orchestrator.planner.
    approvals`)."""

    @property
    def current_gate(self) -> Gate | None:
        """Its gate for the current attempt: an older attempt's decision is spent."""
        gate = self.gate
        return gate if gate is not None and gate.attempt == self.attempt else None

    @property
    def awaits_approval(self) -> bool:
        """Whether it waits for a person now: its gate's wait began, nobody decided, and
        it has not started (held by the tick, or its leg by GitHub's reviewers)."""
        gate = self.current_gate
        return (gate is not None and gate.since is not None and gate.decided is None
                and self.started_at is None
                and self.phase in (TrackPhase.PENDING, TrackPhase.DISPATCHED))

    @property
    def key(self) -> str:
        undo = "--undo" if self.compensating else ""
        poll = f".{self.polls}" if self.polls else ""
        return f"{self.run_id}--{self.name}{undo}--{self.attempt}{poll}"

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler,
              info: SerializationInfo) -> dict[str, Any]:
        return _drop_defaults(handler(self), {"leaving_since": None, "gate": None})


class Act(Frozen):
    """An operator's act on a run or a schedule: who, when and why."""

    by: str
    at: UTCDateTime
    reason: str = ""
    request_id: str | None = None
    """The request id that makes the act idempotent (``trigger``)."""
    tracks: list[Id] = Field(default_factory=list)
    """The tracks it named (``runs retry``)."""
    definition: Literal["current", "as-fired"] | None = None
    """Which definition of the tracks a ``runs retry`` reran: the schedule's as it was
    then (``current``), or the one the run fired with (``as-fired``)."""

    def describe(self) -> str:
        return f"by {self.by}" + (f": {self.reason}" if self.reason else "")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler,
              info: SerializationInfo) -> dict[str, Any]:
        return _drop_defaults(handler(self), {"definition": None})


RunOrigin = Literal["cron", "manual", "backfill", "after", "queue", "event"]


_REQUESTED = {"manual": "manual run", "event": "event"}
"""How :meth:`Run.acts` names who asked for a run, by its origin (else backfilled)."""


def _minute(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def _drop_defaults(data: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the keys of ``defaults`` that hold their default: fields added
    later leave the records that never use them byte for byte as they were."""
    return {k: v for k, v in data.items() if k not in defaults or v != defaults[k]}


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
    timezone: ZoneName = "UTC"
    """The schedule's IANA zone when the run fired; checked as a schedule's is, so a
    record naming no zone is quarantined when read, not a crash of the planner."""
    workflow: str = Field("track.yml", pattern=f"^{WORKFLOW_RE.pattern}$")
    """The track workflow the run was created with (GitHub executor). A file name as a
    schedule's: it goes into the path of the dispatch request."""
    finished_at: UTCDateTime | None = None
    state_history: list[Transition] = Field(default_factory=list)
    repair: bool = False
    """Reopened by ``dlq requeue``: a repair of an old run, not a run in progress. The
    overlap policy of the schedule's new slots leaves it out."""
    work_started_at: UTCDateTime | None = None
    """When its first track's command started, as the executor measured it (set when
    the run finishes: durations are the work's, not the ticks' that noticed)."""
    work_finished_at: UTCDateTime | None = None
    """When its last track's command ended, as the executor measured it."""
    origin: RunOrigin = "cron"
    """``manual`` (``orchestrator trigger``), ``backfill``, ``after``, ``event``
    (``orchestrator event``) or ``cron`` (a tick)."""
    requested: Act | None = None
    """Who triggered or backfilled the run, and why."""
    cancelled: Act | None = None
    """Who cancelled the run (``runs cancel``), and why."""
    retries: list[Act] = Field(default_factory=list)
    """Each ``runs retry`` of the run, oldest first."""
    upstream: list[str] = Field(default_factory=list)
    """The upstream runs whose ends fired it (``origin`` after), by the order of the
    schedule's ``after``."""
    event_id: str | None = None
    """The id of the outside event that fired it (``origin`` event)."""

    @property
    def standing_cancel(self) -> Act | None:
        """The operator's cancel, unless a ``runs retry`` came after it: a retried run
        is the operator's to finish again, and may be cancelled again. A requeue from
        the dead letter queue repairs a cancelled run and leaves the cancel standing."""
        act = self.cancelled
        if act is None or any(r.at >= act.at for r in self.retries):
            return None
        return act

    def acts(self) -> list[str]:
        """What operators did to the run, one line each, oldest first (for ``status``,
        ``runs show``, the brief and the index)."""
        lines = []
        if self.requested is not None:
            what = _REQUESTED.get(self.origin, "backfilled")
            lines.append(f"{what} {self.requested.describe()} at {_minute(self.requested.at)}")
        if self.cancelled is not None:
            lines.append(f"cancelled {self.cancelled.describe()} at "
                         f"{_minute(self.cancelled.at)}")
        lines += [f"retried {', '.join(r.tracks)} {r.describe()} at {_minute(r.at)}"
                  + (f" ({r.definition} definition)" if r.definition else "")
                  for r in self.retries]
        return lines

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler,
              info: SerializationInfo) -> dict[str, Any]:
        return _drop_defaults(handler(self), {"origin": "cron", "requested": None,
                                              "cancelled": None, "retries": [],
                                              "upstream": [], "event_id": None})


class Backfill(Frozen):
    """A backfill in progress on a cursor: the slots still to fire, oldest first."""

    slots: list[UTCDateTime]
    max_parallel_runs: int = Field(1, ge=1)
    act: Act


class SlotNote(Frozen):
    """A slot that did not fire, and why (kept short: the newest few per schedule)."""

    slot: UTCDateTime
    reason: Literal["missed", "skipped", "overlap", "daily_cap", "dst_skip"]
    at: UTCDateTime


class UpstreamEnd(Frozen):
    """An upstream run that qualified for a schedule's ``after`` and is not yet consumed."""

    run_id: str
    ended_at: UTCDateTime


class AfterCursor(Frozen):
    """Where a schedule's ``after`` stands: what waits, and what was already counted.
    It changes in the commit that creates the run it fires, so a lost race retries."""

    waiting: dict[str, list[UpstreamEnd]] = Field(default_factory=dict)
    """Upstream schedule id -> its qualifying runs not yet consumed, oldest first."""
    seen: list[str] = Field(default_factory=list)
    """Upstream runs already counted (qualified or not), newest last: never twice."""


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
    paused: Pause | None = None
    """Set while the schedule is paused (``pause_after_failures``); it fires nothing."""
    failures_in_a_row: int = Field(0, ge=0)
    """Runs of the schedule that ended ``failed`` in a row, counted as each finishes
    (a tick reads only open runs, so the count cannot be taken from finished ones)."""
    resumed: Pause | None = None
    """The last resume: failures before it no longer count towards a pause."""
    requests: dict[str, str] = Field(default_factory=dict)
    """Request id -> the manual run it started (the newest few): a repeated
    ``trigger`` starts nothing."""
    backfill: Backfill | None = None
    after: AfterCursor | None = None
    """The upstream runs of the schedule's ``after``."""
    queue_fired_at: UTCDateTime | None = None
    """When ``on_queue`` last fired a run: what that run's drain left waits anew from then."""
    events: dict[str, str] = Field(default_factory=dict)
    """Hash of an event id -> the run it fired (the newest few): with the runs that
    exist, what tells an event already seen."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler,
              info: SerializationInfo) -> dict[str, Any]:
        return _drop_defaults(handler(self), {"requests": {}, "backfill": None,
                                              "after": None, "queue_fired_at": None,
                                              "events": {}})


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
