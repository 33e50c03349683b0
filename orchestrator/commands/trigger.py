"""``orchestrator trigger SCHEDULE``: start a run of a schedule now, outside its cron.

The run is a request the tick honours (:class:`~orchestrator.planner.TriggerRequest`),
so the schedule's overlap policy, the caps and ``runs_on`` apply as to any run. Its
id says it is manual (``<schedule>--<minute>-manual-<n>``). A request id makes the
command idempotent: repeating it, or two operators at once, starts one run.
"""

from __future__ import annotations

import hashlib

import click

from ..config.fieldtypes import check_id
from ..errors import UserError
from ..planner import TriggerRequest
from ..planner.requests import refusal
from . import _operate
from .context import Config, pass_config


def default_request_id(schedule_id: str, minute: str, reason: str) -> str:
    """The request id of a trigger without ``--request-id``: the same schedule, minute
    and reason make the same request, so a command run twice by mistake starts once."""
    digest = hashlib.sha256(f"{schedule_id}\n{minute}\n{reason}".encode()).hexdigest()
    return f"{schedule_id}-{minute}-{digest[:10]}"


def parse_inputs(pairs: tuple[str, ...]) -> dict[str, str]:
    inputs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--input {pair!r}: expected KEY=VALUE")
        inputs[key] = value
    return inputs


@click.command("trigger")
@click.argument("schedule_id", metavar="SCHEDULE")
@click.option("--input", "pairs", multiple=True, metavar="K=V",
              help="An input every track gets, over the schedule's (repeatable).")
@click.option("--request-id", help="Makes the command idempotent (default: derived from "
              "the schedule, the minute and the reason).")
@click.option("--force", is_flag=True, help="Also when the schedule is disabled or paused.")
@_operate.options
@pass_config
def command(cfg: Config, schedule_id: str, pairs: tuple[str, ...], request_id: str | None,
            force: bool, reason: str, by: str | None, now_text: str | None,
            executor: str) -> int:
    """Start a run of SCHEDULE now, with its tracks and policies."""
    check_id(schedule_id, "schedule id")
    inputs = parse_inputs(pairs)
    act = _operate.act(by, now_text, reason)
    minute = act.at.strftime("%Y%m%dT%H%MZ")
    rid = request_id or default_request_id(schedule_id, minute, reason)
    if not rid or len(rid) > 200 or not rid.isprintable():
        raise UserError("--request-id: give 1-200 printable characters")
    schedule = _operate.schedule(cfg, schedule_id)
    why = refusal(schedule, _operate.read_state(cfg).cursors.get(schedule_id))
    if why is not None and not force:
        raise UserError(f"{schedule_id}: not triggered: {why} (--force starts it anyway)")
    request = TriggerRequest(schedule_id, rid, act.model_copy(update={"request_id": rid}),
                             inputs, force)
    result = _operate.tick(cfg, executor, act.at, (request,))
    line = _operate.answer(result, request)
    if "not triggered" in line:
        raise UserError(line)
    _operate.report("trigger", line)
    return 0
