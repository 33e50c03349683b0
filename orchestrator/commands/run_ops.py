"""``orchestrator runs cancel RUN`` and ``runs retry RUN``: an operator's decisions
about one run, each through a tick (see :mod:`._operate`)."""

from __future__ import annotations

import click

from ..config.fieldtypes import check_id, check_run_id
from ..config.models import TrackSpec
from ..errors import NotFound, UserError
from ..planner import CancelRequest
from ..runs import retry as retrying
from ..state.phases import RunStatus
from ..state.records import Run
from . import _operate
from .context import Config, pass_config
from .runs import read_state


def _open_run(cfg: Config, run_id: str) -> Run:
    check_run_id(run_id)
    run = read_state(cfg).runs.get(run_id)
    if run is None:
        raise NotFound(f"no run {run_id!r} on branch {cfg.state_branch!r}")
    return run


@click.command("cancel")
@click.argument("run_id", metavar="RUN")
@_operate.options_with_reason
@pass_config
def cancel(cfg: Config, run_id: str, reason: str, by: str | None, now_text: str | None,
               executor: str) -> int:
    """Cancel an open run: stop its tracks, compensate, render its brief."""
    run = _open_run(cfg, run_id)
    if run.status not in (RunStatus.SCHEDULED, RunStatus.RUNNING):
        raise UserError(f"run {run_id} is {run.status.value}: only a scheduled or running "
                        "run can be cancelled")
    if not reason.strip():
        raise UserError("--reason: say why the run is cancelled")
    act = _operate.act(by, now_text, reason)
    request = CancelRequest(run_id, act)
    result = _operate.tick(cfg, executor, act.at, (request,))
    line = _operate.answer(result, request)
    if "not cancelled" in line:
        raise UserError(line)
    _operate.report("runs cancel", line)
    return 0


def _current_tracks(cfg: Config, run: Run) -> dict[str, TrackSpec]:
    """The tracks of ``run``'s schedule as the checkout defines them now, by name."""
    try:
        schedule = _operate.schedule(cfg, run.schedule_id)
    except UserError as exc:
        raise UserError(f"{exc.message}; retry with --as-fired to rerun the tracks as "
                        "the run fired them") from None
    return {t.name: t for t in schedule.spec.run_tracks}


@click.command("retry")
@click.argument("run_id", metavar="RUN")
@click.option("--track", "names", multiple=True, metavar="T", help="A track to rerun "
              "(repeatable); the tracks that need it rerun after it.")
@click.option("--failed", is_flag=True, help="Rerun every failed, tapped out, cancelled "
              "or skipped track.")
@click.option("--as-fired", is_flag=True, help="Rerun the tracks as the run fired them, "
              "not as the schedule defines them now.")
@_operate.options
@pass_config
def retry(cfg: Config, run_id: str, names: tuple[str, ...], failed: bool, as_fired: bool,
          reason: str, by: str | None, now_text: str | None, executor: str) -> int:
    """Rerun tracks of RUN as a fresh attempt, in the same run, as the schedule defines
    them now (--as-fired: as the run fired them)."""
    run = _open_run(cfg, run_id)
    for name in names:
        check_id(name, "track name")
    act = _operate.act(by, now_text, reason)
    current = None if as_fired else _current_tracks(cfg, run)
    store = cfg.store()
    store.transact(lambda snap: retrying.retry(snap.files, run_id, names, failed, act,
                                               current),
                   f"runs retry {run_id}")
    picked = read_state(cfg).runs[run_id].retries[-1].tracks
    _operate.tick(cfg, executor, act.at)
    which = "as the run fired them" if as_fired else "as the schedule defines them now"
    _operate.report("runs retry", f"{run_id}: retrying {', '.join(picked)} "
                    f"{act.describe()}, {which}")
    return 0
