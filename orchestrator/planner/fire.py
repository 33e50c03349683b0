"""The tick's firing step: fire the slots due since each schedule's cursor, under the
catch-up, overlap and daily-cap policies.

Slots come from the schedule's trigger (:mod:`orchestrator.config.triggers`); the one thing
that differs by trigger is catch-up: a one-shot fires once however late it is seen.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ..config.models import CatchupPolicy, OverlapPolicy, Schedule, ScheduleSpec, TrackSpec
from ..config.triggers import Trigger, for_spec
from ..state import machine
from ..state.phases import TrackPhase
from ..state.records import Act, Cursor, Run, RunOrigin, SlotNote, Track, run_id_for, utc_date_key
from ..support.times import iso_minute
from .context import Context
from .pause import apply_pause

NOTES_KEEP = 20
"""Slot notes (missed, skipped, ...) kept per schedule cursor."""
FIRES_KEEP_DAYS = 8
"""Days of ``fires_per_day`` counters kept per cursor."""
MISSED_LOOKBACK = timedelta(days=31)
"""Missed slots older than this before the catch-up window are not enumerated."""
_EVER = datetime(1, 1, 2, tzinfo=UTC)
"""Before any slot: where a one-shot's search starts (it fires however late)."""


def jitter(run_id: str, seconds: int) -> timedelta:
    """Deterministic delay in ``0..seconds`` derived from the run id."""
    if seconds <= 0:
        return timedelta(0)
    digest = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big")
    return timedelta(seconds=digest % (seconds + 1))


def fire_due_slots(ctx: Context) -> None:
    for sid in sorted(ctx.schedules):
        schedule = ctx.schedules[sid]
        try:
            fire_schedule(ctx, schedule)
        except ValueError as exc:  # a spec the model accepted but cron cannot use
            ctx.decision.invalid.append(f"{schedule.path or sid}: {exc}")
            ctx.decision.log.append(f"{sid}: cannot evaluate: {exc}")


def fire_schedule(ctx: Context, schedule: Schedule) -> None:
    spec = schedule.spec
    sid = schedule.id
    now = ctx.now
    cursor = ctx.state.cursors.get(sid)
    first_seen = cursor is None
    if cursor is None:
        cursor = _first_cursor(schedule, now)
    cursor, may_fire = _standing(ctx, schedule, cursor)
    if not may_fire:
        ctx.state.cursors[sid] = cursor
        return
    trigger = for_spec(spec)
    at = None if trigger.repeats else spec.at_utc()
    if _spent(cursor, at):
        ctx.state.cursors[sid] = cursor
        return

    due, fire, notes = _due(trigger, spec, cursor, now, first_seen=first_seen)
    if first_seen:
        ctx.decision.log.append(first_slot_line(schedule, trigger, fire, now))
    if not due and not notes:
        ctx.state.cursors[sid] = cursor  # nothing due: cursor unchanged
        return
    _fire_and_settle(ctx, schedule, cursor, trigger, at, due, fire, notes)


def _fire_and_settle(ctx: Context, schedule: Schedule, cursor: Cursor, trigger: Trigger,
                     at: datetime | None, due: list[datetime], fire: list[datetime],
                     notes: list[SlotNote]) -> None:
    """Fire the slots in ``fire`` and move the schedule's cursor past every slot seen."""
    now = ctx.now
    fires, last_run_id, last_slot = _fire_slots(ctx, schedule, cursor, fire, notes)
    _log_left(ctx, schedule, notes)
    settled = max([cursor.since, *due, *(n.slot for n in notes)])
    ctx.state.cursors[schedule.id] = cursor.model_copy(update={
        "since": settled,
        "last_run_id": last_run_id,
        "next_run_at": _next_at(trigger, max(now, settled)),
        **_one_shot(at, fire, last_slot),
        "fires_per_day": _recent(fires, now),
        "notes": [*cursor.notes, *notes][-NOTES_KEEP:],
        "last_error": None,
    })


def _first_cursor(schedule: Schedule, now: datetime) -> Cursor:
    """The cursor of a schedule seen for the first time: with a catch-up policy, slots
    within its window count as due."""
    spec = schedule.spec
    window = timedelta(minutes=spec.catchup_window_minutes)
    start = now if spec.catchup is CatchupPolicy.NONE else now - window
    return Cursor(schedule_id=schedule.id, since=start, enabled=spec.enabled)


def _spent(cursor: Cursor, at: datetime | None) -> bool:
    """Done, and (for a one-shot) done at this very ``at``: a new ``at`` arms it again."""
    return cursor.done and (at is None or cursor.last_slot == at)


def _log_left(ctx: Context, schedule: Schedule, notes: list[SlotNote]) -> None:
    """One line per slot that was missed or skipped, with the policy that left it."""
    for note in notes:
        if note.reason in ("missed", "skipped"):
            ctx.decision.log.append(f"{schedule.id}: {iso_minute(note.slot)} {note.reason} "
                                    f"({_why(note.reason, schedule.spec)})")


def _next_at(trigger: Trigger, after: datetime) -> datetime | None:
    upcoming = trigger.next(after, 1).found
    return upcoming[0].at if upcoming else None


def _one_shot(at: datetime | None, fire: list[datetime], last_slot: datetime | None
              ) -> dict[str, Any]:
    """The cursor's ``done`` and ``last_slot``. A one-shot has had its chance once its
    instant came (fired, or skipped by policy and noted, like any cron slot);
    ``last_slot`` remembers which instant."""
    fired = at is not None and bool(fire)
    return {"done": fired, "last_slot": at if fired else last_slot}


def _recent(fires: dict[str, int], now: datetime) -> dict[str, int]:
    """The fires per day within :data:`FIRES_KEEP_DAYS` of ``now``, by day."""
    keep_from = (now - timedelta(days=FIRES_KEEP_DAYS)).date().isoformat()
    return {k: v for k, v in sorted(fires.items()) if k >= keep_from}


def _standing(ctx: Context, schedule: Schedule, cursor: Cursor) -> tuple[Cursor, bool]:
    """``cursor`` after the schedule's ``enabled`` and its pause, and whether it may fire."""
    spec, sid = schedule.spec, schedule.id
    if not spec.enabled:
        if cursor.enabled:
            cursor = cursor.model_copy(update={"enabled": False})
            ctx.decision.log.append(f"{sid}: disabled")
        return cursor, False
    if not cursor.enabled:
        since = ctx.now if spec.catchup is CatchupPolicy.NONE else cursor.since
        cursor = cursor.model_copy(update={"enabled": True, "since": since})
        ctx.decision.log.append(f"{sid}: enabled again")
    cursor = apply_pause(ctx, schedule, cursor)
    return cursor, cursor.paused is None


def _fire_slots(ctx: Context, schedule: Schedule, cursor: Cursor, fire: list[datetime],
                notes: list[SlotNote]) -> tuple[dict[str, int], str | None, datetime | None]:
    """Create a run for each slot of ``fire`` that the daily cap and the overlap policy
    allow, noting the others in ``notes``. Returns the cursor's new ``fires_per_day``,
    ``last_run_id`` and ``last_slot``."""
    spec, sid = schedule.spec, schedule.id
    fires = dict(cursor.fires_per_day)
    last_run_id = cursor.last_run_id
    last_slot = cursor.last_slot
    for slot in fire:
        run_id = run_id_for(sid, slot)
        if run_id in ctx.state.runs or run_id in ctx.state.known_runs:
            continue  # already fired (idempotency key)
        day = utc_date_key(slot, spec.zone)
        if spec.max_runs_per_day is not None and fires.get(day, 0) >= spec.max_runs_per_day:
            notes.append(SlotNote(slot=slot, reason="daily_cap", at=ctx.now))
            ctx.decision.log.append(f"{sid}: {iso_minute(slot)} not fired: "
                                    f"daily cap of {spec.max_runs_per_day} reached")
            continue
        if not overlap_allows(ctx, schedule, slot):
            notes.append(SlotNote(slot=slot, reason="overlap", at=ctx.now))
            continue
        create_run(ctx, schedule, slot, run_id)
        fires[day] = fires.get(day, 0) + 1
        last_run_id, last_slot = run_id, slot
    return fires, last_run_id, last_slot


def first_slot_line(schedule: Schedule, trigger: Trigger, fire: list[datetime],
                    now: datetime) -> str:
    """The one line a new schedule gets: where it starts."""
    if fire:
        first: datetime | None = fire[0]
    else:
        upcoming = trigger.next(now, 1).found
        first = upcoming[0].at if upcoming else None
    when = f"first slot at {iso_minute(first)}" if first else "no slot ahead"
    return f"{schedule.id}: new schedule: {when}"


def _why(reason: str, spec: ScheduleSpec) -> str:
    """Skipped and missed differ: a skipped slot was due and left by the policy, a
    missed one was already past the catch-up window when a tick came."""
    if reason == "skipped":
        return f"catchup={spec.catchup.value}: a tick found several due and fired the newest"
    return (f"catchup={spec.catchup.value}: older than catchup_window_minutes="
            f"{spec.catchup_window_minutes:g} when a tick came")


def _due(trigger: Trigger, spec: ScheduleSpec, cursor: Cursor, now: datetime, *,
         first_seen: bool = False) -> tuple[list[datetime], list[datetime], list[SlotNote]]:
    """The slots due now, those of them to fire, and notes on the others."""
    if not trigger.repeats:
        due = trigger.slots(_EVER, now)  # a one-shot fires once, however late
        return due, due, []
    notes: list[SlotNote] = []
    window = timedelta(minutes=spec.catchup_window_minutes)
    # A slot exactly `window` old is still eligible: slots() excludes `after`.
    lower = max(cursor.since, now - window - timedelta(microseconds=1))
    if lower > cursor.since:
        floor = max(cursor.since, lower - MISSED_LOOKBACK)
        notes += [SlotNote(slot=s, reason="missed", at=now)
                  for s in trigger.slots(floor, lower)[-NOTES_KEEP:]]
    due = trigger.slots(lower, now)
    if first_seen:
        # Never a back-fill, whatever the policy: slots from before the file was
        # first seen were nobody's promise, so they are not noted either.
        return due, due[-1:], notes
    if spec.catchup is CatchupPolicy.ALL:
        return due, due, notes
    notes += [SlotNote(slot=s, reason="skipped", at=now) for s in due[:-1]]
    return due, due[-1:], notes


def overlap_allows(ctx: Context, schedule: Schedule, slot: datetime) -> bool:
    spec = schedule.spec
    open_runs = ctx.open_runs(schedule.id, active=True)
    if not open_runs or spec.overlap is OverlapPolicy.ALLOW:
        return True
    stamp = iso_minute(slot)
    if spec.overlap is OverlapPolicy.SKIP:
        ctx.decision.log.append(f"{schedule.id}: {stamp} skipped: {open_runs[-1].run_id} "
                                "still open (overlap=skip)")
        return False
    if spec.overlap is OverlapPolicy.BUFFER_ONE:
        return _buffer_one(ctx, schedule, open_runs, stamp)
    _cancel_previous(ctx, open_runs, stamp)
    return True


def _buffer_one(ctx: Context, schedule: Schedule, open_runs: list[Run], stamp: str) -> bool:
    """overlap=buffer_one: the slot waits behind one open run, never behind two."""
    if len(open_runs) > 1:
        ctx.decision.log.append(f"{schedule.id}: {stamp} skipped: one run already "
                                "buffered (overlap=buffer_one)")
        return False
    ctx.decision.log.append(f"{schedule.id}: {stamp} buffered behind "
                            f"{open_runs[0].run_id} (overlap=buffer_one)")
    return True


def _cancel_previous(ctx: Context, open_runs: list[Run], stamp: str) -> None:
    """overlap=cancel_previous: cancel every open track of the open runs."""
    for run in open_runs:
        for _, track in sorted(ctx.state.tracks.get(run.run_id, {}).items()):
            if track.phase in machine.TRACK_OPEN:
                handle = ctx.handle_of(track)
                if handle is not None:
                    ctx.decision.cancel.append(handle)
                ctx.move(track, TrackPhase.CANCELLED, f"superseded by slot {stamp}",
                         finished_at=ctx.now)


def create_run(ctx: Context, schedule: Schedule, slot: datetime, run_id: str, *,
               origin: RunOrigin = "cron", act: Act | None = None,
               inputs: Mapping[str, str] | None = None) -> Run:
    """Create the run ``run_id`` of ``slot``. An operator's run (``origin`` manual or
    backfill, ``act`` saying who) starts at once, without jitter; ``inputs`` override
    every track's own."""
    spec = schedule.spec
    fire_at = slot + jitter(run_id, spec.jitter_seconds) if origin == "cron" else ctx.now
    run = Run(
        run_id=run_id, schedule_id=schedule.id, slot=slot, fire_at=fire_at,
        created_at=ctx.now,
        deadline=max(fire_at, ctx.now) + timedelta(minutes=spec.deadline_minutes),
        tracks=[t.name for t in spec.run_tracks], description=spec.description,
        cron=spec.cron, timezone=spec.timezone, workflow=spec.workflow,
        origin=origin, requested=act,
    )
    ctx.state.runs[run_id] = run
    specs = [t.model_copy(update={"inputs": {**t.inputs, **inputs}}) if inputs else t
             for t in spec.run_tracks]
    ctx.state.tracks[run_id] = _new_tracks(run_id, specs, fire_at, ctx.now)
    if act is not None:
        ctx.decision.note(run_id, f"{origin} run of {iso_minute(slot)} with {len(specs)} "
                          f"track(s), {act.describe()}")
        return run
    if origin == "cron":  # a run fired by ``after`` is noted by its step
        _note_fired(ctx, run_id, slot, len(spec.run_tracks))
    return run


def _new_tracks(run_id: str, specs: list[TrackSpec], fire_at: datetime, now: datetime
                ) -> dict[str, Track]:
    """The tracks of a new run, each pending until the run's ``fire_at``."""
    return {
        # a drain track runs once: its max_attempts are each item's
        t.name: Track(run_id=run_id, name=t.name, spec=t,
                      max_attempts=1 if t.drain is not None else t.max_attempts,
                      not_before=fire_at if fire_at > now else None)
        for t in specs
    }


def _note_fired(ctx: Context, run_id: str, slot: datetime, tracks: int) -> None:
    """The run's note of the cron slot it fired, with its lateness past a minute."""
    late = ctx.now - slot
    lateness = f", {_minutes(late)} late" if late >= timedelta(minutes=1) else ""
    ctx.decision.note(run_id, f"fired slot {iso_minute(slot)} with {tracks} "
                      f"track(s){lateness}")


def _minutes(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"
