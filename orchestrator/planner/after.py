"""Firing on other schedules' runs: the ``after`` step of the planner.

- An upstream run counts in the tick whose fan-in moved it to ``consolidating``: the
  planner reads only open runs, and that tick's commit finishes it. Its end is the one
  :func:`~.fan_in.finish` gives, the same the shell records beside its brief.
- Each upstream run is counted once: its id joins the downstream cursor's ``seen`` list
  in the commit that records its end (and creates any run it fires). A lost
  compare-and-swap decides again on a tip where the upstream run is finished.
- A qualifying run waits in the cursor until every upstream of the ``after`` has one;
  then one run fires, named by its upstream runs (:func:`~orchestrator.state.layout.after_run_id`).
- A downstream that is disabled, paused or at its daily cap consumes nothing: its
  upstream runs wait, up to ``within_minutes`` after their end, and the log says why.
- Catch-up applies as for clock slots: ``all`` fires once per waiting set, oldest first;
  ``latest`` and ``none`` fire the newest and note the others. Overlap applies as for a slot.
- A tick scoped to one run (a fan-in job's) is given the run's downstreams, so the
  fan-in that ends the run fires them. When one needs a full tick, it is given none
  and leaves the run open instead (:func:`orchestrator.tick.scope.downstreams`).
- The step may run twice in a tick (before dispatch, and after the last settling, for a
  run that fanned in at dispatch): the ``seen`` list makes the second a no-op.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..config.chains import AfterSpec
from ..config.models import CatchupPolicy, Schedule
from ..state.layout import after_run_id, parse_run_id
from ..state.phases import RunStatus
from ..state.records import AfterCursor, Cursor, Run, UpstreamEnd, utc_date_key
from ..support.times import iso_minute
from .context import Context
from .fan_in import finish
from .fire import create_run, overlap_allows

SEEN_KEEP = 50
"""Upstream run ids remembered per downstream cursor: far more than can be open at once."""
WAITING_KEEP = 20
"""Qualifying upstream runs kept waiting per upstream schedule (the newest)."""


def fire_after(ctx: Context) -> None:
    """Count the upstream runs that end in this tick and fire each schedule whose every
    upstream has a qualifying run waiting."""
    for sid in sorted(ctx.schedules):
        schedule = ctx.schedules[sid]
        cursor = ctx.state.cursors.get(sid)
        if schedule.spec.upstreams and cursor is not None:
            _after_schedule(ctx, schedule, cursor)


def _after_schedule(ctx: Context, schedule: Schedule, cursor: Cursor) -> None:
    before = cursor.after or AfterCursor()
    after = _expire(ctx, schedule, _collect(ctx, schedule, before))
    stop = blocked(schedule, cursor)
    if stop and after != before:
        waiting = sum(len(v) for v in after.waiting.values())
        ctx.decision.log.append(f"{schedule.id}: after: {waiting} upstream run(s) wait, "
                                f"none consumed: {stop}")
    elif not stop and _ready(schedule, after):
        cursor, after = _fire_ready(ctx, schedule, cursor, after)
    if after != before:  # a quiet downstream keeps its cursor as it was
        ctx.state.cursors[schedule.id] = cursor.model_copy(update={"after": after})


def _ready(schedule: Schedule, state: AfterCursor) -> bool:
    """Whether every upstream of the schedule has a qualifying run waiting."""
    return all(state.waiting.get(up.schedule) for up in schedule.spec.upstreams)


def _collect(ctx: Context, schedule: Schedule, state: AfterCursor) -> AfterCursor:
    """``state`` with the upstream runs that end in this tick counted."""
    seen, waiting = list(state.seen), {k: list(v) for k, v in state.waiting.items()}
    for up in schedule.spec.upstreams:
        for run in _ending(ctx, up.schedule, seen):
            seen.append(run.run_id)
            status = _end_of(ctx, run)
            if status.value in up.status:
                waiting.setdefault(up.schedule, []).append(
                    UpstreamEnd(run_id=run.run_id, ended_at=_ended_at(run, ctx.now)))
                waiting[up.schedule] = waiting[up.schedule][-WAITING_KEEP:]
            else:
                ctx.decision.log.append(f"{schedule.id}: after: {run.run_id} ended "
                                        f"{status.value}, not counted ({up.describe()})")
    return AfterCursor(waiting=waiting, seen=seen[-SEEN_KEEP:])


def _ending(ctx: Context, upstream: str, seen: list[str]) -> list[Run]:
    """The runs of ``upstream`` that end in this tick and were not counted yet."""
    return [r for r in ctx.open_runs(upstream)
            if r.status is RunStatus.CONSOLIDATING and r.run_id not in seen]


def _end_of(ctx: Context, run: Run) -> RunStatus:
    """How a consolidating run ends, as the shell will record it beside its brief."""
    state = ctx.state
    return finish(run, state.tracks.get(run.run_id, {}).values(), ctx.now,
                  state.undos.get(run.run_id, {}).values()).status


def _ended_at(run: Run, now: datetime) -> datetime:
    """When the run's tracks were all terminal: its step to ``consolidating``."""
    steps = [h.at for h in run.state_history if h.to == RunStatus.CONSOLIDATING.value]
    return steps[-1] if steps else now


def _expire(ctx: Context, schedule: Schedule, state: AfterCursor) -> AfterCursor:
    """``state`` without the waiting runs older than their upstream's ``within_minutes``."""
    waiting: dict[str, list[UpstreamEnd]] = {}
    for up in schedule.spec.upstreams:
        oldest = ctx.now - timedelta(minutes=up.within_minutes)
        runs = state.waiting.get(up.schedule, [])
        kept = [e for e in runs if e.ended_at >= oldest]
        for gone in (e for e in runs if e.ended_at < oldest):
            ctx.decision.log.append(f"{schedule.id}: after: {gone.run_id} no longer counts "
                                    f"(ended over {up.within_minutes:g} min ago)")
        if kept:
            waiting[up.schedule] = kept
    return state.model_copy(update={"waiting": waiting})


def blocked(schedule: Schedule, cursor: Cursor) -> str:
    """Why the schedule may not fire now (disabled, paused), or ``""``."""
    if not schedule.spec.enabled:
        return "the schedule is disabled"
    if cursor.paused is not None:
        return f"paused since {iso_minute(cursor.paused.at)}"
    return ""


def _fire_ready(ctx: Context, schedule: Schedule, cursor: Cursor, state: AfterCursor
                ) -> tuple[Cursor, AfterCursor]:
    """Fire once per complete set of waiting upstream runs, as the catch-up policy says."""
    ups = schedule.spec.upstreams
    while _ready(schedule, state):
        chosen, state = _take(ctx, schedule, state)
        fired = _fire_set(ctx, schedule, cursor, chosen)
        if fired is None:
            return cursor, _put_back(state, ups, chosen)
        cursor = fired
    return cursor, state


def _take(ctx: Context, schedule: Schedule, state: AfterCursor
          ) -> tuple[list[UpstreamEnd], AfterCursor]:
    """The set of upstream runs to fire on next, and ``state`` without it (catch-up
    ``latest`` and ``none`` also drop, with a line, the older runs that waited)."""
    newest = schedule.spec.catchup is not CatchupPolicy.ALL
    chosen: list[UpstreamEnd] = []
    waiting = dict(state.waiting)
    for up in schedule.spec.upstreams:
        runs = waiting.pop(up.schedule)
        chosen.append(runs[-1] if newest else runs[0])
        left = [] if newest else runs[1:]
        for older in runs[:-1] if newest else []:
            ctx.decision.log.append(f"{schedule.id}: after: {older.run_id} skipped "
                                    f"(catchup={schedule.spec.catchup.value}: a newer run "
                                    "of it waited too)")
        if left:
            waiting[up.schedule] = left
    return chosen, state.model_copy(update={"waiting": waiting})


def _put_back(state: AfterCursor, ups: list[AfterSpec], chosen: list[UpstreamEnd]
              ) -> AfterCursor:
    """``state`` with ``chosen`` waiting again, first in line (a run that did not fire)."""
    waiting = dict(state.waiting)
    for up, end in zip(ups, chosen, strict=True):
        waiting[up.schedule] = [end, *waiting.get(up.schedule, [])]
    return state.model_copy(update={"waiting": waiting})


def _fire_set(ctx: Context, schedule: Schedule, cursor: Cursor,
              chosen: list[UpstreamEnd]) -> Cursor | None:
    """Fire the run of ``chosen``; the cursor counting it, or ``None`` when the daily
    cap keeps the set waiting. A set the overlap policy skips is consumed, as a slot."""
    spec, ids = schedule.spec, [e.run_id for e in chosen]
    slot = max(parse_run_id(r)[1] for r in ids)
    run_id = after_run_id(schedule.id, slot, ids)
    day = utc_date_key(ctx.now, spec.zone)
    fires = dict(cursor.fires_per_day)
    if spec.max_runs_per_day is not None and fires.get(day, 0) >= spec.max_runs_per_day:
        ctx.decision.log.append(f"{schedule.id}: after {', '.join(ids)}: not fired: daily "
                                f"cap of {spec.max_runs_per_day} reached; waits")
        return None
    if run_id in ctx.state.runs or run_id in ctx.state.known_runs:
        return cursor  # fired already (idempotency key)
    if not overlap_allows(ctx, schedule, ctx.now):
        return cursor
    run = create_run(ctx, schedule, slot, run_id, origin="after")
    ctx.state.runs[run_id] = run.model_copy(update={"upstream": ids})
    ctx.decision.note(run_id, f"fired after {', '.join(ids)} with "
                      f"{len(spec.run_tracks)} track(s)")
    fires[day] = fires.get(day, 0) + 1
    return cursor.model_copy(update={"last_run_id": run_id, "fires_per_day": fires})
