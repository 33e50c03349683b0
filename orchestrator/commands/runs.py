"""``orchestrator runs list | show RUN`` (and ``schedules runs ID``): read-only views."""

from __future__ import annotations

import json
from typing import Any

import click

from .. import state as st
from ..cli import Config, pass_config
from ..errors import NotFound
from ..models import Run, RunStatus, Track, check_id, check_run_id
from ..store import GitStateStore
from ..times import iso


def read_state(cfg: Config) -> st.State:
    """The whole state branch, parsed (tracks of finished runs included)."""
    snap = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch).read()
    return st.load(snap.files, all_tracks=True)


def _iso(value: Any) -> str:
    return value.strftime("%Y-%m-%dT%H:%MZ") if value is not None else "-"


def run_row(run: Run, tracks: dict[str, Track]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for t in tracks.values():
        counts[t.phase.value] = counts.get(t.phase.value, 0) + 1
    return {
        "run_id": run.run_id,
        "schedule": run.schedule_id,
        "status": run.status.value,
        "slot": iso(run.slot),
        "finished_at": iso(run.finished_at) if run.finished_at else None,
        "tracks": dict(sorted(counts.items())),
    }


def print_runs(state: st.State, runs: list[Run], as_json: bool) -> None:
    rows = [run_row(r, state.tracks.get(r.run_id, {}))
            for r in sorted(runs, key=lambda r: (r.slot, r.run_id), reverse=True)]
    if as_json:
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    if not rows:
        click.echo("no runs")
        return
    width = max(len(r["run_id"]) for r in rows)
    for row in rows:
        tracks = ", ".join(f"{n} {p}" for p, n in row["tracks"].items())
        click.echo(f"{row['run_id']:<{width}}  {row['status']:<13}  {tracks}")


@click.group("runs")
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
        click.echo(json.dumps({
            "run": run.model_dump(mode="json", by_alias=True),
            "tracks": {n: t.model_dump(mode="json", by_alias=True)
                       for n, t in sorted(tracks.items())},
        }, indent=2, sort_keys=True))
        return
    click.echo(f"{run.run_id}  {run.status.value}")
    click.echo(f"  schedule  {run.schedule_id}  {run.cron or ''} {run.timezone}".rstrip())
    click.echo(f"  slot      {_iso(run.slot)}   fire at {_iso(run.fire_at)}   "
               f"deadline {_iso(run.deadline)}")
    for h in run.state_history:
        click.echo(f"  {_iso(h.at)}  {h.from_} -> {h.to}  {h.reason}")
    for name, t in sorted(tracks.items()):
        summary = (t.result or {}).get("summary", "")
        click.echo(f"  track {name}: {t.phase.value} (attempt {t.attempt}/{t.max_attempts})"
                   + (f"  {summary}" if summary else "") + (f"  {t.url}" if t.url else ""))
        for line in t.error_log[-3:]:
            click.echo(f"    ! {line}")


@click.command("runs")
@click.argument("schedule_id")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def schedule_runs(cfg: Config, schedule_id: str, as_json: bool) -> None:
    """List the runs of one schedule, newest first."""
    check_id(schedule_id, "schedule id")
    state = read_state(cfg)
    print_runs(state, [r for r in state.runs.values() if r.schedule_id == schedule_id], as_json)
