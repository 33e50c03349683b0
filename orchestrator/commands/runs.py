"""``orchestrator runs list | show RUN`` (and ``schedules runs ID``): read-only views
(see :mod:`orchestrator.runs.views`); ``runs cancel`` and ``runs retry`` are in
:mod:`.run_ops`."""

from __future__ import annotations

import importlib
import json
from typing import Any

import click

from ..config.fieldtypes import check_id, check_run_id
from ..errors import NotFound
from ..runs.views import rows_text, run_detail, run_rows, run_text
from ..state import model as state_model
from ..state.phases import RunStatus
from ..state.records import Run
from .context import Config, pass_config


def read_state(cfg: Config) -> state_model.State:
    """The whole state branch, parsed (tracks of finished runs included)."""
    snap = cfg.store().read()
    return state_model.load(snap.files, all_tracks=True)


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def print_runs(state: state_model.State, runs: list[Run], as_json: bool) -> None:
    rows = run_rows(state, runs)
    if as_json:
        _echo_json(rows)
    else:
        click.echo("\n".join(rows_text(rows)))


class RunsGroup(click.Group):
    """``runs``, whose deciding verbs (``cancel``, ``retry``: :mod:`.run_ops`) are
    imported only when used, so the read-only views never load the tick shell."""

    DECIDING = ("cancel", "retry")

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.DECIDING])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.DECIDING:
            found: click.Command = getattr(importlib.import_module(f"{__package__}.run_ops"),
                                           cmd_name)
            return found
        return super().get_command(ctx, cmd_name)


@click.group("runs", cls=RunsGroup)
def command() -> None:
    """Runs recorded on the state branch."""


@command.command("list")
@click.option("--schedule", "schedule_id", help="Only runs of this schedule.")
@click.option("--status", type=click.Choice([s.value for s in RunStatus]),
              help="Only runs with this status.")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def list_runs(cfg: Config, schedule_id: str | None, status: str | None, as_json: bool) -> None:
    """List runs, newest first."""
    state = read_state(cfg)
    runs = [r for r in state.runs.values()
            if (schedule_id is None or r.schedule_id == schedule_id)
            and (status is None or r.status.value == status)]
    print_runs(state, runs, as_json)


@command.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def show_run(cfg: Config, run_id: str, as_json: bool) -> None:
    """Show one run, its tracks and their histories."""
    check_run_id(run_id)
    state = read_state(cfg)
    run = state.runs.get(run_id)
    if run is None:
        raise NotFound(f"no run {run_id!r} on branch {cfg.state_branch!r}")
    tracks = state.tracks.get(run_id, {})
    if as_json:
        _echo_json(run_detail(run, tracks))
    else:
        click.echo("\n".join(run_text(run, tracks)))


@click.command("runs")
@click.argument("schedule_id")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def schedule_runs(cfg: Config, schedule_id: str, as_json: bool) -> None:
    """List the runs of one schedule, newest first."""
    check_id(schedule_id, "schedule id")
    state = read_state(cfg)
    print_runs(state, [r for r in state.runs.values() if r.schedule_id == schedule_id], as_json)

