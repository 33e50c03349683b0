"""``orchestrator compact``: archive finished runs, keeping the old tip under a tag
(see :mod:`orchestrator.runs.compaction`)."""

from __future__ import annotations

import click

from ..runs import retention
from ..runs.compaction import archive_tag, compact, plan
from ..support.times import parse_now
from .context import Config, pass_config


@click.command("compact")
@click.option("--keep-days", type=click.IntRange(min=0), required=True, metavar="N",
              help="Keep runs that finished in the last N days.")
@click.option("--now", metavar="ISO", help="Reference time (default: the clock).")
@click.option("--dry-run", is_flag=True,
              help="Say what would be archived; change nothing.")
@pass_config
def command(cfg: Config, keep_days: int, now: str | None, dry_run: bool) -> int:
    """Archive finished runs older than N days, and queue items done as long ago, from
    the state branch (old tip kept under the tag orchestrator-archive/<timestamp>)."""
    moment = parse_now(now)
    if dry_run:
        # the plan compact would commit, on the branch as it is now
        would = plan(cfg.store().read().files, keep_days, moment)
        items = f", {would.items} done queue item(s)" if would.items else ""
        click.echo(f"would archive {len(would.runs)} run(s){items} and "
                   f"{len(would.dead_letters)} discarded dead letter(s) (--dry-run: nothing "
                   "changed)")
        for run_id in would.runs:
            click.echo(f"  {run_id}")
        for line in would.skipped:
            click.echo(f"  {line}")
        return 0
    done = compact(cfg.git(), keep_days, moment, extra=retention.by_hand(keep_days, moment))
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
