"""``orchestrator compact``: archive finished runs, keeping the old tip under a tag.

The state branch grows by a few commits per tick. Compaction moves it to one new
root commit holding everything but the archived runs; the full history stays
reachable from the tag ``orchestrator-archive/<UTC timestamp>``. The tag and the
branch are pushed atomically and the branch with the same lease as every other
write, so a tick or a report racing the compaction is never lost: whoever loses
re-reads and re-applies. In single-branch mode the branch is not rewritten: the
archived runs are deleted by an ordinary commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

import click
from pydantic import ValidationError

from ..cli import Config, pass_config
from ..machine import RUN_TERMINAL
from ..models import DeadLetter, Run
from ..state import ROOT, CorruptState, run_dir
from ..store import Change, GitStateStore, Snapshot
from ..times import parse_now

M = TypeVar("M", Run, DeadLetter)


@dataclass(frozen=True)
class Plan:
    """What a compaction removes."""

    runs: tuple[str, ...]
    dead_letters: tuple[str, ...]
    change: Change


def _finished(run: Run) -> datetime | None:
    if run.finished_at is not None:
        return run.finished_at
    return run.state_history[-1].at if run.state_history else None


def plan(files: Mapping[str, bytes], keep_days: int, now: datetime) -> Plan:
    """The runs to archive (pure): terminal (completed or failed) and finished more than
    ``keep_days`` days before ``now``. Open runs are never touched, nor runs that still
    have a dead letter waiting for a human (a requeue needs the run); discarded dead
    letters of archived runs go with them."""
    cutoff = now - timedelta(days=keep_days)
    runs_prefix, dlq_prefix = f"{ROOT}/runs/", f"{ROOT}/dlq/"
    letters: dict[str, DeadLetter] = {}
    for path in files:
        if path.startswith(dlq_prefix) and path.endswith(".json"):
            letters[path] = _parse(DeadLetter, path, files[path])
    waiting = {letter.run_id for letter in letters.values() if not letter.discarded}
    old: list[str] = []
    for path in files:
        parts = path.split("/")
        if path.startswith(runs_prefix) and len(parts) == 4 and parts[3] == "run.json":
            run = _parse(Run, path, files[path])
            done = _finished(run)
            if (run.status in RUN_TERMINAL and done is not None and done < cutoff
                    and run.run_id not in waiting):
                old.append(run.run_id)
    old.sort()
    dirs = tuple(run_dir(run_id) + "/" for run_id in old)
    change: Change = {path: None for path in files if path.startswith(dirs)} if dirs else {}
    gone = sorted(path for path, letter in letters.items() if letter.run_id in set(old))
    change.update(dict.fromkeys(gone))
    return Plan(tuple(old), tuple(gone), change)


def _parse(model: type[M], path: str, data: bytes) -> M:
    try:
        return model.model_validate_json(data)
    except (ValidationError, json.JSONDecodeError) as exc:
        raise CorruptState(f"{path}: cannot be parsed: {exc}") from None


def archive_tag(now: datetime) -> str:
    return f"orchestrator-archive/{now:%Y%m%dT%H%M%SZ}"


@click.command("compact")
@click.option("--keep-days", type=click.IntRange(min=0), required=True, metavar="N",
              help="Keep runs that finished in the last N days.")
@click.option("--now", metavar="ISO", help="Reference time (default: the clock).")
@pass_config
def command(cfg: Config, keep_days: int, now: str | None) -> int:
    """Archive finished runs older than N days from the state branch (old tip kept
    under the tag orchestrator-archive/<timestamp>)."""
    moment = parse_now(now)
    store = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch)
    planned: dict[str, Plan] = {}

    def change(snap: Snapshot) -> Change | None:
        planned["last"] = plan(snap.files, keep_days, moment)
        return planned["last"].change

    tag = archive_tag(moment)
    result = store.archive(change, f"compact: archive runs finished before "
                                   f"{moment - timedelta(days=keep_days):%Y-%m-%dT%H:%M:%SZ}",
                           tag)
    done = planned.get("last")
    if not result.landed or done is None:
        click.echo("nothing to archive")
        return 0
    click.echo(f"archived {len(done.runs)} run(s) and {len(done.dead_letters)} discarded "
               f"dead letter(s); the previous history is kept as tag {tag}")
    for run_id in done.runs:
        click.echo(f"  {run_id}")
    return 0
