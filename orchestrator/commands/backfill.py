"""``orchestrator backfill SCHEDULE --from ISO --to ISO``: fire every slot of a range.

The backfill is a request the tick honours (:class:`~orchestrator.planner.BackfillRequest`)
and then keeps on the schedule's cursor: each tick starts its next slots, oldest
first, while fewer than ``--max-parallel-runs`` runs of the schedule are open. A slot's
run has its ordinary id, so a slot that already ran, or that a tick fires, is never
fired twice.
"""

from __future__ import annotations

from datetime import timedelta

import click

from ..config.fieldtypes import check_id
from ..config.triggers import for_spec
from ..errors import UserError
from ..planner import BackfillRequest
from ..planner.requests import refusal
from ..state.layout import run_id_for
from ..support.times import iso_minute, parse_now
from . import _operate
from .context import Config, pass_config


@click.command("backfill")
@click.argument("schedule_id", metavar="SCHEDULE")
@click.option("--from", "start_text", required=True, metavar="ISO",
              help="First instant of the range (inclusive).")
@click.option("--to", "end_text", required=True, metavar="ISO",
              help="Last instant of the range (inclusive).")
@click.option("--max", "most", type=click.IntRange(min=1), default=100, show_default=True,
              help="Refuse a range of more slots than this.")
@click.option("--max-parallel-runs", type=click.IntRange(min=1), default=1,
              show_default=True, help="Backfilled runs open at once; the others wait.")
@click.option("--dry-run", is_flag=True, help="List the slots it would fire; change nothing.")
@_operate.options
@pass_config
def command(cfg: Config, schedule_id: str, start_text: str, end_text: str, most: int,
            max_parallel_runs: int, dry_run: bool, reason: str,
            by: str | None, now_text: str | None, executor: str) -> int:
    """Fire every slot of SCHEDULE from --from to --to, oldest first."""
    check_id(schedule_id, "schedule id")
    start, end = parse_now(start_text, "--from"), parse_now(end_text, "--to")
    if start > end:
        raise UserError(f"--from {start_text} is after --to {end_text}")
    schedule = _operate.schedule(cfg, schedule_id)
    found = for_spec(schedule.spec).next(start - timedelta(microseconds=1), most + 1).found
    slots = tuple(s.at for s in found if s.at <= end)
    if len(slots) > most:
        raise UserError(f"{schedule_id}: the range has more than {most} slots; "
                        "narrow it or raise --max")
    if not slots:
        raise UserError(f"{schedule_id}: no slot from {start_text} to {end_text}")
    state = _operate.read_state(cfg)
    ran = {s for s in slots if run_id_for(schedule_id, s) in state.runs
           or run_id_for(schedule_id, s) in state.known_runs}
    if dry_run:
        for slot in slots:
            click.echo(f"{iso_minute(slot)}  {run_id_for(schedule_id, slot)}"
                       + ("  (already has a run: skipped)" if slot in ran else ""))
        click.echo(f"{len(slots) - len(ran)} slot(s) to fire, {len(ran)} already ran")
        return 0
    why = refusal(schedule, state.cursors.get(schedule_id))
    if why is not None:  # a backfill waits while the schedule is disabled or paused
        raise UserError(f"{schedule_id}: no backfill: {why}")
    act = _operate.act(by, now_text, reason)
    request = BackfillRequest(schedule_id, slots, act, max_parallel_runs)
    result = _operate.tick(cfg, executor, act.at, (request,))
    line = _operate.answer(result, request)
    if "no backfill" in line:
        raise UserError(line)
    _operate.report("backfill", line)
    return 0
