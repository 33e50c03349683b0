"""``orchestrator lateness``: how late GitHub's cron started this repository's ticks.

The figures come from the ledger the scheduled ticks keep on the state branch
(:mod:`orchestrator.cadence.lateness`); the cron lines from ``tick.yml``.
"""

from __future__ import annotations

import json

import click

from ..cadence import lateness
from ..cadence.pending import tick_crons
from ..state import layout
from ..support.times import parse_now
from .context import Config, pass_config


@click.command("lateness")
@click.option("--days", type=click.Choice(["7", "30"]), default="7", show_default=True,
              help="The window measured, in days.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--now", "now_text", metavar="ISO", help="Measure as of this instant.")
@pass_config
def command(cfg: Config, days: str, as_json: bool, now_text: str | None) -> int:
    """p50, p95, max and dropped slots of GitHub's cron, per cron line of tick.yml.

    Lateness is the time from a cron line's slot to the creation of the run GitHub
    started for it, as the scheduled ticks recorded it. A slot with no sample counts
    as dropped (a tick that committed nothing leaves none either: an upper bound)."""
    files = cfg.store().read().files
    found = lateness.report(files.get(layout.LATENESS), tick_crons(cfg.repo),
                            parse_now(now_text), int(days))
    click.echo(json.dumps(found, indent=2, sort_keys=True) if as_json
               else "\n".join(lateness.describe(found)))
    return 0
