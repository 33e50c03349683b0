"""Firing on events from outside (``orchestrator event``, a ``repository_dispatch``):
the ``fire_events`` step of the planner.

- An event fires its schedule at most once per event id: the run's id carries a hash
  of the id (:func:`~orchestrator.state.layout.event_run_id`), and the run is created
  in the tick's compare-and-swap commit. A lost race decides again on a tip that has it.
- An event is seen when a run of its schedule carries its hash (the runs that exist,
  finished ones too), or when the cursor's ``events`` remembers it (the newest
  :data:`EVENTS_KEEP`, for runs archived since). A seen event fires nothing.
- Its inputs are checked against the schedule's ``on_event`` in the decision itself: a
  bad payload fires nothing, and the answer names the field.
- A schedule without ``on_event``, disabled, paused, at its daily cap, or whose
  overlap policy refuses a new run consumes nothing: the answer says why, and the same
  event sent again later may fire.
- The inputs reach every track as its ``inputs`` do (over the track's own), and the
  event id as ``ORCHESTRATOR_EVENT_ID`` (:func:`.dispatch.run_environment`).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..config.events import Event, EventRefused, check_inputs
from ..config.models import Schedule
from ..state.layout import event_run_id, fired_by_event
from ..state.records import Cursor, utc_date_key
from .context import Context
from .fire import create_run, overlap_allows
from .requests import EventRequest, Request, key_of, refusal, unplanned

EVENTS_KEEP = 200
"""Event ids (hashed) a cursor remembers beyond the runs that exist."""
NOT_FIRED = ": not fired: "


def fire_events(ctx: Context, requests: Iterable[Request]) -> None:
    """Fire each event request's schedule, unless its event was seen or is refused;
    every request gets one line in :attr:`Decision.answers`."""
    for request in requests:
        if isinstance(request, EventRequest):
            line = _fire(ctx, request)
            ctx.decision.answers[key_of(request)] = line
            ctx.decision.log.append(line)


def refused(event: Event, line: str) -> bool:
    """Whether the answer ``line`` to ``event`` says it fired nothing and was not seen."""
    return line.startswith(f"{_name(event)}{NOT_FIRED}")


def _name(event: Event) -> str:
    return f"{event.schedule_id}: event {event.event_id!r}"


def _fire(ctx: Context, request: EventRequest) -> str:
    """Fire the event's run; the line that says what happened."""
    event = request.event
    sid, name = event.schedule_id, _name(event)
    schedule = ctx.schedules.get(sid)
    if schedule is None:
        return f"{name}{NOT_FIRED}{unplanned(ctx, sid)}"
    cursor = ctx.state.cursors.get(sid) or Cursor(schedule_id=sid, since=ctx.now)
    seen = _seen(ctx, cursor, sid, event.digest)
    if seen is not None:
        return f"{name}: already seen, it fired {seen}; nothing fired"
    try:
        inputs = _inputs(ctx, schedule, cursor, request)
    except EventRefused as exc:
        return f"{name}{NOT_FIRED}{exc}"
    minute = ctx.now.replace(second=0, microsecond=0)
    if not overlap_allows(ctx, schedule, minute):
        return (f"{name}{NOT_FIRED}a run is still open "
                f"(overlap={schedule.spec.overlap.value}); send it again later")
    run_id = event_run_id(sid, minute, event.digest)
    run = create_run(ctx, schedule, minute, run_id, origin="event", act=request.act,
                     inputs=inputs)
    ctx.state.runs[run_id] = run.model_copy(update={"event_id": event.event_id})
    ctx.state.cursors[sid] = _counted(ctx, schedule, cursor, event.digest, run_id)
    return f"{run_id}: fired by event {event.event_id!r}"


def _seen(ctx: Context, cursor: Cursor, sid: str, digest: str) -> str | None:
    """The run the event of ``digest`` fired already, or ``None``."""
    if digest in cursor.events:
        return cursor.events[digest]
    runs = (*ctx.state.runs, *ctx.state.known_runs)
    return next((r for r in sorted(runs) if fired_by_event(r, sid, digest)), None)


def _inputs(ctx: Context, schedule: Schedule, cursor: Cursor, request: EventRequest
            ) -> dict[str, str]:
    """The event's inputs, checked; :class:`EventRefused` says why the schedule takes
    no event now, or which input is wrong."""
    spec = schedule.spec
    if spec.on_event is None:
        raise EventRefused("the schedule takes no events (give it 'on_event')")
    why = refusal(schedule, cursor)
    if why is not None:
        raise EventRefused(why)
    day = utc_date_key(ctx.now, spec.zone)
    if spec.max_runs_per_day is not None \
            and cursor.fires_per_day.get(day, 0) >= spec.max_runs_per_day:
        raise EventRefused(f"daily cap of {spec.max_runs_per_day} reached")
    return check_inputs(spec.on_event, request.event.inputs)


def _counted(ctx: Context, schedule: Schedule, cursor: Cursor, digest: str, run_id: str
             ) -> Cursor:
    """``cursor`` with the event remembered and the run counted against the daily cap."""
    day = utc_date_key(ctx.now, schedule.spec.zone)
    fires = {**cursor.fires_per_day, day: cursor.fires_per_day.get(day, 0) + 1}
    events = dict(list({**cursor.events, digest: run_id}.items())[-EVENTS_KEEP:])
    return cursor.model_copy(update={"events": events, "fires_per_day": fires})
