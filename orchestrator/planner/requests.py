"""An operator's requests, honoured inside a tick: ``trigger``, ``backfill``,
``runs cancel`` and ``queue add --executor`` (:class:`TriggerRequest`,
:class:`BackfillRequest`, :class:`CancelRequest`, :class:`EnqueueRequest`); an outside
system's ``event`` (:class:`EventRequest`) is honoured by :mod:`.events`, and
``approve`` and ``reject`` (:class:`~.approvals.ApprovalRequest`) by :mod:`.approvals`.

A request is an input of :func:`orchestrator.planner.plan`, so the run it starts is
dispatched, capped and routed by the tick's own code, and committed by the tick's
compare-and-swap. A lost race plans the request again on the new tip.

Invariants:

- A trigger starts at most one run per request id: the schedule's cursor keeps the
  newest request ids it honoured (:data:`REQUESTS_KEEP`) and the run each started.
- A backfilled slot's run has the ordinary id of its slot, so a tick and a backfill
  never both fire it; a slot that has a run is skipped.
- A backfill request is known by a hash of what it asks
  (:attr:`BackfillRequest.request_id`): a second request, even by the same person at
  the same instant, is never taken for a replay of the first.
- A backfill lives on the cursor (:class:`~orchestrator.state.records.Backfill`) and
  every tick starts its next slots, oldest first, while fewer than
  ``max_parallel_runs`` runs of the schedule are open.
- An enqueue is applied first, so the drain its items call for (``on_queue``) fires,
  and is sent, in the same commit.
- Every request gets one line in :attr:`Decision.answers`, saying what it did.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ..config.events import Event
from ..config.models import OverlapPolicy, Schedule
from ..state import machine, queueops
from ..state.items import NewItem
from ..state.layout import cursor_path, is_manual, manual_run_id, run_id_for
from ..state.phases import RunStatus
from ..state.records import Act, Backfill, Cursor, Track
from ..support.times import iso, iso_minute
from .approvals import ApprovalRequest
from .compensation import cancel_open, compensate
from .context import Context
from .fire import create_run, overlap_allows

REQUESTS_KEEP = 100
"""Request ids a cursor remembers."""


@dataclass(frozen=True)
class TriggerRequest:
    """Start a run of ``schedule_id`` now (``orchestrator trigger``)."""

    schedule_id: str
    request_id: str
    act: Act
    inputs: Mapping[str, str] = field(default_factory=dict)
    force: bool = False
    """Also when the schedule is disabled or paused."""


@dataclass(frozen=True)
class BackfillRequest:
    """Fire ``slots`` of ``schedule_id``, oldest first (``orchestrator backfill``)."""

    schedule_id: str
    slots: tuple[datetime, ...]
    act: Act
    max_parallel_runs: int = 1

    @property
    def request_id(self) -> str:
        """Its identity: a hash of everything it asks, so two different requests never
        share one, and the same request planned again (a lost race) is known."""
        parts = [self.schedule_id, *map(iso, self.slots), str(self.max_parallel_runs),
                 self.act.by, iso(self.act.at), self.act.reason]
        digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()
        return f"backfill-{digest[:16]}"


@dataclass(frozen=True)
class CancelRequest:
    """Cancel the open run ``run_id`` (``orchestrator runs cancel``)."""

    run_id: str
    act: Act


@dataclass(frozen=True)
class EnqueueRequest:
    """Add ``items`` to ``queue`` (``orchestrator queue add --executor``)."""

    queue: str
    items: tuple[NewItem, ...]
    by: str


@dataclass(frozen=True)
class EventRequest:
    """Fire ``event``'s schedule once per event id (``orchestrator event``)."""

    event: Event
    act: Act


Request = (TriggerRequest | BackfillRequest | CancelRequest | EnqueueRequest | EventRequest
           | ApprovalRequest)


def key_of(request: Request) -> str:
    """The key of ``request``'s line in :attr:`Decision.answers`."""
    if isinstance(request, TriggerRequest):
        return request.request_id
    if isinstance(request, BackfillRequest):
        return f"backfill {request.schedule_id}"
    if isinstance(request, EnqueueRequest):
        return f"enqueue {request.queue}"
    if isinstance(request, EventRequest):
        return f"event {request.event.schedule_id} {request.event.digest}"
    if isinstance(request, ApprovalRequest):
        return request.key
    return f"cancel {request.run_id}"


def enqueue(ctx: Context, requests: Iterable[Request]) -> None:
    """First of all steps: the items are in the queue that every later step reads."""
    for request in requests:
        if isinstance(request, EnqueueRequest):
            done = queueops.enqueue(ctx.state.queue(request.queue), request.items,
                                    ctx.now, request.by)
            ctx.decision.enqueued[request.queue] = done
            _answer(ctx, request, f"{request.queue}: {len(done.added)} added, "
                    f"{len(done.existing)} already there")


def cancel_runs(ctx: Context, requests: Iterable[Request]) -> None:
    """Before ``on_failure``: so the saga of a cancelled run starts in the same tick."""
    for request in requests:
        if isinstance(request, CancelRequest):
            _cancel(ctx, request)


def start_runs(ctx: Context, requests: Iterable[Request]) -> None:
    """After the cron slots fired: triggers, new backfills, then every backfill's next
    slots."""
    for request in requests:
        if isinstance(request, TriggerRequest):
            _trigger(ctx, request)
        elif isinstance(request, BackfillRequest):
            _begin_backfill(ctx, request)
    for sid in sorted(ctx.schedules):
        cursor = ctx.state.cursors.get(sid)
        if cursor is not None and cursor.backfill is not None:
            continue_backfill(ctx, ctx.schedules[sid], cursor)


def _answer(ctx: Context, request: Request, line: str) -> None:
    ctx.decision.answers[key_of(request)] = line
    ctx.decision.log.append(line)


def _not_now(ctx: Context, run_id: str) -> str | None:
    """Why the run ``run_id`` cannot be cancelled, or ``None``: it is not open, a cancel
    stands already, or its work ended (too late: work done stays done)."""
    run = ctx.state.runs.get(run_id)
    if run is None or run.status not in (RunStatus.SCHEDULED, RunStatus.RUNNING):
        return "no open run" if run is None else f"{run.status.value}"
    if run.standing_cancel is not None:
        return f"already cancelled {run.standing_cancel.describe()}"
    return _too_late(ctx, run_id)


def _too_late(ctx: Context, run_id: str) -> str | None:
    """Why a cancel of ``run_id`` comes too late (every track ended), or ``None``."""
    tracks = ctx.state.tracks.get(run_id, {}).values()
    if not tracks or any(t.phase in machine.TRACK_OPEN for t in tracks):
        return None
    return f"too late, its work ended ({', '.join(sorted({t.phase.value for t in tracks}))})"


def _cancel(ctx: Context, request: CancelRequest) -> None:
    why_not = _not_now(ctx, request.run_id)
    if why_not is not None:
        _answer(ctx, request, f"{request.run_id}: not cancelled: {why_not}")
        return
    run = ctx.state.runs[request.run_id]
    why = f"cancelled {request.act.describe()}"
    elsewhere = cancel_open(ctx, run, why)
    schedule = ctx.schedules.get(run.schedule_id)
    if schedule is not None and schedule.spec.on_failure.value == "compensate":
        compensate(ctx, run, why)
    ctx.state.runs[run.run_id] = machine.revise(run, cancelled=request.act)
    _answer(ctx, request, f"{run.run_id}: {why}" if not elsewhere else _requested(
        run.run_id, request, elsewhere))


def _requested(run_id: str, request: CancelRequest, elsewhere: list[Track]) -> str:
    """The answer to a cancel whose tracks run on another machine: recorded, not done."""
    where = ", ".join(f"{t.name} on {t.claimed_by}" for t in elsewhere)
    return (f"{run_id}: cancel requested {request.act.describe()}; still running: "
            f"{where}; their machine's next tick stops them")


def refusal(schedule: Schedule, cursor: Cursor | None) -> str | None:
    """Why an operator's run of ``schedule`` needs ``--force``, or ``None``."""
    if not schedule.spec.enabled:
        return "the schedule is disabled"
    if cursor is not None and cursor.paused is not None:
        return f"the schedule is paused ({cursor.paused.reason})"
    return None


def unplanned(ctx: Context, sid: str) -> str:
    """Why schedule ``sid`` is not among those the tick plans: its state record is
    quarantined (the file is fine), or it has no valid file."""
    path = cursor_path(sid)
    why = ctx.state.quarantined.get(path)
    if why is not None:
        return (f"its state record is quarantined ({why}); once a person repairs or "
                "deletes it on the state branch, the schedule fires again")
    return "no such valid schedule"


def _trigger(ctx: Context, request: TriggerRequest) -> None:
    sid = request.schedule_id
    schedule = ctx.schedules.get(sid)
    if schedule is None:
        _answer(ctx, request, f"{sid}: not triggered: {unplanned(ctx, sid)}")
        return
    cursor = ctx.state.cursors.get(sid)
    done = cursor.requests.get(request.request_id) if cursor is not None else None
    if done is not None:
        _answer(ctx, request, f"{done}: already started by request {request.request_id}")
        return
    why = refusal(schedule, cursor)
    if why is not None and not request.force:
        _answer(ctx, request, f"{sid}: not triggered: {why} (--force starts it anyway)")
        return
    minute = ctx.now.replace(second=0, microsecond=0)
    if not overlap_allows(ctx, schedule, minute):
        _answer(ctx, request, f"{sid}: not triggered: a run is still open "
                f"(overlap={schedule.spec.overlap.value})")
        return
    run_id = manual_run_id(sid, minute, _next_number(ctx, run_id_for(sid, minute)))
    create_run(ctx, schedule, minute, run_id, origin="manual", act=request.act,
               inputs=request.inputs)
    base = cursor or Cursor(schedule_id=sid, since=ctx.now)
    kept = dict(list({**base.requests, request.request_id: run_id}.items())[-REQUESTS_KEEP:])
    ctx.state.cursors[sid] = base.model_copy(update={"requests": kept})
    _answer(ctx, request, f"{run_id}: started by request {request.request_id}")


def _next_number(ctx: Context, prefix: str) -> int:
    taken = [r for r in (*ctx.state.runs, *ctx.state.known_runs)
             if r.startswith(prefix) and is_manual(r)]
    return 1 + max((int(r.rpartition("-")[2]) for r in taken), default=0)


def _begin_backfill(ctx: Context, request: BackfillRequest) -> None:
    sid = request.schedule_id
    schedule = ctx.schedules.get(sid)
    cursor = ctx.state.cursors.get(sid)
    if schedule is None or cursor is None:
        _answer(ctx, request, f"{sid}: no backfill: {unplanned(ctx, sid)}")
        return
    if cursor.backfill is not None and cursor.backfill.act.request_id == request.request_id:
        # this request, planned again after a lost race
        _answer(ctx, request, f"{sid}: backfill {request.request_id} already planned, "
                f"{len(cursor.backfill.slots)} slot(s) still to fire")
        return
    todo = [s for s in request.slots if not _fired(ctx, sid, s)]
    if cursor.backfill is not None:
        todo = sorted({*cursor.backfill.slots, *todo})
    act = request.act.model_copy(update={"request_id": request.request_id})
    ctx.state.cursors[sid] = cursor.model_copy(update={"backfill": Backfill(
        slots=todo, max_parallel_runs=request.max_parallel_runs, act=act)})
    skipped = len(request.slots) - len(todo)
    _answer(ctx, request, f"{sid}: backfill of {len(todo)} slot(s) "
            f"({skipped} already had a run), {request.act.describe()}")


def _fired(ctx: Context, sid: str, slot: datetime) -> bool:
    run_id = run_id_for(sid, slot)
    return run_id in ctx.state.runs or run_id in ctx.state.known_runs


def continue_backfill(ctx: Context, schedule: Schedule, cursor: Cursor) -> None:
    """Start the backfill's next slots while fewer than its ``max_parallel_runs`` runs
    of the schedule are open (only backfilled ones count under ``overlap: allow``)."""
    backfill = cursor.backfill
    assert backfill is not None
    if refusal(schedule, cursor) is not None:
        return  # it waits while the schedule is disabled or paused
    sid = schedule.id
    slots = list(backfill.slots)
    while slots:
        open_runs = ctx.open_runs(sid, active=True)
        if schedule.spec.overlap is OverlapPolicy.ALLOW:
            open_runs = [r for r in open_runs if r.origin == "backfill"]
        if len(open_runs) >= backfill.max_parallel_runs:
            break
        slot = slots.pop(0)
        if _fired(ctx, sid, slot):
            ctx.decision.log.append(f"{sid}: backfill: {iso_minute(slot)} already has a run")
            continue
        create_run(ctx, schedule, slot, run_id_for(sid, slot), origin="backfill",
                   act=backfill.act)
    rest = backfill.model_copy(update={"slots": slots}) if slots else None
    if rest != backfill:
        ctx.state.cursors[sid] = cursor.model_copy(update={"backfill": rest})
