"""``orchestrator demo``: the whole loop on this machine, in a throwaway workspace.

It builds a bare ``origin``, a clone holding one schedule of four short local tracks
(one fails once and succeeds on its retry, one overruns its timeout and is tapped
out), then ticks with the local executor until the run is terminal, printing what
each tick decided, and finally prints the path of the brief.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from .. import executors
from ..errors import UserError
from ..state import layout
from ..state import model as state_model
from ..state.machine import RUN_TERMINAL
from ..support.times import iso
from ..tick.settings import Clock, TickSettings
from .context import Config
from .tick import build


def _result(summary: str) -> str:
    """A shell snippet writing ``{"summary": ...}`` to $ORCHESTRATOR_RESULT."""
    return f"printf '%s\\n' '{json.dumps({'summary': summary})}' > \"$ORCHESTRATOR_RESULT\""


def demo_schedule(at: datetime) -> dict[str, object]:
    return {
        "$schema": "./schedule.schema.json",
        "description": "Demo: four tracks in parallel, one flaky, one too slow",
        "at": iso(at),
        "deadline_minutes": 2,
        "tracks": [
            {"name": "collect", "run": f"sleep 1 && {_result('collected 1,204 records')}",
             "timeout_minutes": 1},
            {"name": "analyze",
             "run": 'if [ "$ORCHESTRATOR_ATTEMPT" = 1 ]; then '
                    'echo "upstream not ready (simulated flake)" >&2; exit 3; fi; '
                    f"sleep 1 && {_result('3 anomalies found on the retry')}",
             "timeout_minutes": 1, "max_attempts": 2, "retry_backoff_seconds": 1},
            {"name": "publish", "run": f"sleep 2 && {_result('report published')}",
             "timeout_minutes": 1},
            {"name": "crawl", "run": "echo crawling; sleep 120",
             "timeout_minutes": 0.05},
        ],
    }


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


def build_workspace(root: Path, now: datetime) -> Path:
    """A bare origin and a clone with the demo schedule committed on main."""
    origin = root / "origin.git"
    repo = root / "repo"
    _git("init", "--quiet", "--bare", "--initial-branch=main", str(origin), cwd=root)
    _git("clone", "--quiet", str(origin), str(repo), cwd=root)
    (repo / "schedules").mkdir()
    (repo / "schedules" / "demo.json").write_text(
        json.dumps(demo_schedule(now), indent=2) + "\n", encoding="utf-8")
    ident = ["-c", "user.name=orchestrator demo", "-c", "user.email=demo@localhost"]
    _git("add", "schedules", cwd=repo)
    _git(*ident, "commit", "--quiet", "-m", "Add the demo schedule", cwd=repo)
    _git("push", "--quiet", "origin", "HEAD:main", cwd=repo)
    return repo


@click.command("demo")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Workspace folder (default: a new temporary folder).")
@click.option("--interval", type=click.FloatRange(min=0.1), default=1.0, show_default=True,
              help="Seconds between ticks.")
@click.option("--max-seconds", type=click.FloatRange(min=5), default=90, show_default=True,
              help="Give up after this long.")
@click.option("--keep", is_flag=True,
              help="Keep the workspace (the brief, the state, the dead letter) to look at.")
def command(directory: Path | None, interval: float, max_seconds: float, keep: bool) -> int:
    """Run the whole loop locally and print what it did; the workspace is removed at the
    end unless --keep (then it prints the path of the brief)."""
    root = (directory or Path(tempfile.mkdtemp(prefix="orchestrator-demo-"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise UserError(f"demo workspace {root} is not empty")
    try:
        return _run(root, interval, max_seconds, keep)
    finally:
        if not keep:
            _clean(root, given=directory is not None)


def _clean(root: Path, *, given: bool) -> None:
    """Remove what the demo made: the folder itself, or a given folder's contents."""
    if not given:
        shutil.rmtree(root, ignore_errors=True)
        return
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
    click.echo(f"workspace {root} emptied (--keep keeps it)")


def _run(root: Path, interval: float, max_seconds: float, keep: bool) -> int:
    started = datetime.now(UTC).replace(microsecond=0)
    repo = build_workspace(root, started)
    cfg = Config(repo=repo, remote="origin", state_branch="orchestrator-state")
    click.echo(f"workspace: {root}")
    run_id = None
    deadline = time.monotonic() + max_seconds
    number = 0
    while time.monotonic() < deadline:
        number += 1
        now = datetime.now(UTC)
        result = build(cfg, now, TickSettings(executor_name=executors.LOCAL,
                                              clock=Clock(machine=now))).run()
        for line in result.log:
            click.echo(f"tick {number}: {line}")
        snap = cfg.store().read()
        state = state_model.load(snap.files, all_tracks=True)
        run_id = next(iter(sorted(state.runs)), None)
        if run_id and state.runs[run_id].status in RUN_TERMINAL:
            brief = root / "brief.html"
            brief.write_bytes(snap.files[layout.brief_path(run_id)])
            phases = sorted(f"{t.name} {t.phase.value} (attempt {t.attempt})"
                            for t in state.tracks[run_id].values())
            click.echo(f"run {run_id} {state.runs[run_id].status.value}: {', '.join(phases)}")
            click.echo("as intended: 'analyze' fails once and passes on its retry; 'crawl' "
                       "overruns its timeout and is parked in the dead letter queue"
                       + (":" if keep else " (`demo --keep` to look at it and the brief)"))
            if keep:
                click.echo(f"  orchestrator --repo {repo} dlq list")
                click.echo(f"brief: {brief}")
            return 0
        time.sleep(interval)
    click.echo(f"demo did not finish within {max_seconds:g}s (run {run_id})", err=True)
    return 4
