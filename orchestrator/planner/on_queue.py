"""Firing on a queue's backlog: the ``on_queue`` step of the planner.

- It reads the queue's summary only (its count of ready items and ``oldest_ready``),
  never an item.
- The schedule is due when the queue holds ``min_ready`` ready items, or when the
  oldest ready item has waited ``max_wait_minutes``, whichever comes first.
- Once per crossing: while a run it fired is open, it fires nothing (that drain is
  taking the items). An item it left waits anew from that run's start (the cursor's
  ``queue_fired_at``), so a backlog the drain could not finish fires again only once
  it holds ``min_ready`` again, or once it has waited again.
- Disabled, paused, at its daily cap: nothing fires, and the log says why. Overlap
  applies to other open runs as for a clock slot.
- The run id names the cause: the minute and how many items the queue had taken
  (:func:`~orchestrator.state.layout.queue_run_id`); racing ticks name the same run.
- Only a full tick runs this step: a tick scoped to one run fires nothing of a queue.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..config.models import Schedule
from ..config.queuing import OnQueue
from ..state.items import ItemStatus
from ..state.layout import queue_run_id
from ..state.queue import QueueBook
from ..state.records import Cursor, utc_date_key
from ..support.times import iso_minute
from .after import blocked
from .context import Context
from .fire import create_run, overlap_allows


def fire_on_queue(ctx: Context) -> None:
    """Fire each schedule whose queue's backlog calls for a drain."""
    for sid in sorted(ctx.schedules):
        schedule = ctx.schedules[sid]
        cursor = ctx.state.cursors.get(sid)
        watched = schedule.spec.on_queue
        if watched is not None and cursor is not None and not _in_flight(ctx, sid):
            _judge(ctx, schedule, cursor, watched)


def _in_flight(ctx: Context, schedule_id: str) -> bool:
    """Whether a run the queue fired is still open."""
    return any(r.origin == "queue" for r in ctx.open_runs(schedule_id))


def _judge(ctx: Context, schedule: Schedule, cursor: Cursor, watched: OnQueue) -> None:
    book = ctx.state.queues.get(watched.queue)  # not state.queue(): that adds an empty one
    why = "" if book is None else due(watched, book, cursor.queue_fired_at, ctx.now)
    if book is None or not why:
        return
    stop = blocked(schedule, cursor) or _capped(ctx, schedule, cursor)
    if stop:
        ctx.decision.log.append(f"{schedule.id}: on queue {watched.queue}: {why}; "
                                f"not fired: {stop}")
        return
    _fire(ctx, schedule, cursor, book, why)


def due(watched: OnQueue, book: QueueBook, fired_at: datetime | None,
        now: datetime) -> str:
    """Why the queue calls for a drain at ``now``, or ``""``: its ready items, or how
    long the oldest has waited (counted from ``fired_at`` at the earliest)."""
    ready = book.counts.get(ItemStatus.READY.value, 0)
    if watched.min_ready is not None and ready >= watched.min_ready:
        return f"{ready} ready (min_ready {watched.min_ready})"
    since = book.oldest_ready
    if watched.max_wait_minutes is None or not ready or since is None:
        return ""
    since = since if fired_at is None else max(since, fired_at)
    if now - since < timedelta(minutes=watched.max_wait_minutes):
        return ""
    return (f"{ready} ready, the oldest waiting since {iso_minute(since)} "
            f"(max_wait_minutes {watched.max_wait_minutes:g})")


def _capped(ctx: Context, schedule: Schedule, cursor: Cursor) -> str:
    """Why the daily cap keeps the schedule from firing, or ``""``."""
    cap = schedule.spec.max_runs_per_day
    day = utc_date_key(ctx.now, schedule.spec.zone)
    if cap is None or cursor.fires_per_day.get(day, 0) < cap:
        return ""
    return f"daily cap of {cap} reached"


def _fire(ctx: Context, schedule: Schedule, cursor: Cursor, book: QueueBook,
          why: str) -> None:
    minute = ctx.now.replace(second=0, microsecond=0)
    run_id = queue_run_id(schedule.id, minute, book.next_seq)
    if run_id in ctx.state.runs or run_id in ctx.state.known_runs:
        return  # fired already (idempotency key)
    if not overlap_allows(ctx, schedule, minute):
        return
    create_run(ctx, schedule, minute, run_id, origin="queue")
    ctx.decision.note(run_id, f"fired on queue {book.name}: {why}, with "
                      f"{len(schedule.spec.run_tracks)} track(s)")
    day = utc_date_key(ctx.now, schedule.spec.zone)
    fires = {**cursor.fires_per_day, day: cursor.fires_per_day.get(day, 0) + 1}
    ctx.state.cursors[schedule.id] = cursor.model_copy(update={
        "last_run_id": run_id, "fires_per_day": fires, "queue_fired_at": ctx.now})
