"""``orchestrator approve RUN TRACK``: let a track held by its approval gate start.

The decision is a request the tick honours (:mod:`orchestrator.planner.approvals`), in
the tick's own compare-and-swap commit, so two approvals racing start the track once:
the second is told it was approved already. ``reject`` (:mod:`.reject`) shares it.
"""

from __future__ import annotations

import click

from ..config.fieldtypes import check_id, check_run_id
from ..errors import NotFound, UserError
from ..planner import ApprovalRequest
from ..planner.approvals import DONE, Verdict
from ..state.machine import RUN_TERMINAL
from . import _operate
from .context import Config, pass_config


def decide(cfg: Config, verdict: Verdict, run_id: str, track: str, reason: str,
           by: str | None, now_text: str | None, executor: str) -> int:
    """Send the verdict through a tick; one line refusing it, or saying what it did."""
    check_run_id(run_id)
    check_id(track, "track name")
    done = DONE[verdict]
    if not reason.strip():
        raise UserError(f"--reason: say why the track is {done}")
    act = _operate.act(by, now_text, reason)
    run = _operate.read_state(cfg).runs.get(run_id)
    if run is None:
        raise NotFound(f"no run {run_id!r} on branch {cfg.state_branch!r}")
    if run.status in RUN_TERMINAL:
        raise UserError(f"run {run_id} is {run.status.value}: only an open run's track "
                        f"can be {done}")
    request = ApprovalRequest(run_id, track, verdict, act)
    result = _operate.tick(cfg, executor, act.at, (request,))
    line = _operate.answer(result, request)
    if f": not {done}: " in line:
        raise UserError(line)
    _operate.report(verdict, line)
    return 0


@click.command("approve")
@click.argument("run_id", metavar="RUN")
@click.argument("track", metavar="TRACK")
@_operate.options_with_reason
@pass_config
def command(cfg: Config, run_id: str, track: str, reason: str, by: str | None,
            now_text: str | None, executor: str) -> int:
    """Approve TRACK of RUN, held by its approval gate: the tick dispatches it."""
    return decide(cfg, "approve", run_id, track, reason, by, now_text, executor)
