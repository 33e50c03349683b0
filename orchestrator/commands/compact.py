"""``orchestrator compact``: archive finished runs, keeping the old tip under a tag
(see :mod:`orchestrator.runs.compaction`)."""

from __future__ import annotations

import click

from ..runs.compaction import archive_tag, compact
from ..store import GitStateStore
from ..support.times import parse_now
from .context import Config, pass_config


@click.command("compact")
@click.option("--keep-days", type=click.IntRange(min=0), required=True, metavar="N",
              help="Keep runs that finished in the last N days.")
@click.option("--now", metavar="ISO", help="Reference time (default: the clock).")
@pass_config
def command(cfg: Config, keep_days: int, now: str | None) -> int:
    """Archive finished runs older than N days, and queue items done as long ago, from
    the state branch (old tip kept under the tag orchestrator-archive/<timestamp>)."""
    moment = parse_now(now)
    done = compact(GitStateStore(cfg.repo, cfg.remote, cfg.state_branch), keep_days, moment)
    if done is None:
        click.echo("nothing to archive")
        return 0
    items = f", {done.items} done queue item(s)" if done.items else ""
    click.echo(f"archived {len(done.runs)} run(s){items} and {len(done.dead_letters)} "
               f"discarded dead letter(s); the previous history is kept as tag "
               f"{archive_tag(moment)}")
    for run_id in done.runs:
        click.echo(f"  {run_id}")
    return 0
