"""``orchestrator event SCHEDULE --id ID``: an outside system's event fires a schedule
that declares ``on_event``, once per event id.

The event is a request the tick honours (:mod:`orchestrator.planner.events`), in the
tick's own compare-and-swap commit, so racing senders fire one run. ``--payload``
(or ``ORCHESTRATOR_EVENT_PAYLOAD``) takes the event as JSON, as a ``repository_dispatch``
carries it: tick.yml passes GitHub's ``client_payload`` that way, in the environment.
The payload is hostile input: size-capped, strict, one line naming what is wrong.
"""

from __future__ import annotations

import click

from ..config.events import Event, EventRefused, check_event_id, check_inputs, read_payload
from ..config.fieldtypes import check_id
from ..errors import UserError
from ..planner import EventRequest
from ..planner.events import refused
from . import _operate
from .context import Config, pass_config
from .trigger import parse_inputs

PAYLOAD_ENV = "ORCHESTRATOR_EVENT_PAYLOAD"


def _event(schedule_id: str | None, event_id: str | None, pairs: tuple[str, ...],
           payload: str | None) -> Event:
    """The event the flags, or the payload, describe; one line naming a bad field."""
    if payload is not None:
        if schedule_id or event_id or pairs:
            raise UserError("give SCHEDULE, --id and --input, or --payload, not both")
        return read_payload(payload)
    if not schedule_id or event_id is None:
        raise UserError("give SCHEDULE and --id (or --payload)")
    check_id(schedule_id, "schedule id")
    return Event(schedule_id, check_event_id(event_id), parse_inputs(pairs))


@click.command("event")
@click.argument("schedule_id", metavar="[SCHEDULE]", required=False)
@click.option("--id", "event_id", help="The event's id: one run per id, ever "
              "(1-200 printable characters).")
@click.option("--input", "pairs", multiple=True, metavar="K=V",
              help="An input the schedule's on_event declares (repeatable).")
@click.option("--payload", envvar=PAYLOAD_ENV, show_envvar=True, metavar="JSON",
              help="The event as JSON (schedule, event_id, inputs), as a "
              "repository_dispatch's client_payload.")
@_operate.options
@pass_config
def command(cfg: Config, schedule_id: str | None, event_id: str | None,
            pairs: tuple[str, ...], payload: str | None, reason: str, by: str | None,
            now_text: str | None, executor: str) -> int:
    """Fire SCHEDULE for an outside event, once per event id, with its inputs checked
    against the schedule's on_event."""
    try:
        event = _event(schedule_id, event_id, pairs, payload)
        schedule = _operate.schedule(cfg, event.schedule_id)
        if schedule.spec.on_event is None:
            raise EventRefused(f"{event.schedule_id}: takes no events (give it 'on_event')")
        check_inputs(schedule.spec.on_event, event.inputs)
    except EventRefused as exc:
        raise UserError(f"event not fired: {exc}") from None
    act = _operate.act(by, now_text, reason)
    request = EventRequest(event, act)
    result = _operate.tick(cfg, executor, act.at, (request,))
    line = _operate.answer(result, request)
    if refused(event, line):
        raise UserError(line)
    _operate.report("event", line)
    return 0
