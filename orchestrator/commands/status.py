"""``orchestrator status``: is the clock still ticking, and what is it doing?

The heartbeat is ``state/ticks.jsonl`` on the state branch: every tick that commits
appends a line, and an idle tick still appends one once ``--heartbeat-every``
minutes (default 60) have passed. So the default ``--max-staleness`` is larger than
that plus the longest gap between the ticks tick.yml schedules (90 minutes without a
tick.yml): a healthy but idle repository is never reported stale.

Exit codes: 0 when the last tick is recent enough, 5 (:class:`~orchestrator.errors.Stale`)
when it is older than ``--max-staleness`` or there is none, 3 when the remote cannot
be read. The report is printed in every case, so a watchdog's log shows what it saw.
"""

from __future__ import annotations

import json
from datetime import timedelta

import click

from ..cli import Config, pass_config
from ..errors import Stale
from ..schedules import load_all
from ..status import DEFAULT_MAX_STALENESS, age_text, build, text
from ..store import GitStateStore
from ..times import parse_now


@click.command("status")
@click.option("--max-staleness", type=click.FloatRange(min=1), metavar="MINUTES",
              envvar="ORCHESTRATOR_MAX_STALENESS", default=None,
              help="Exit 5 when the last tick is older than this (default: what the "
                   "cadence of .github/workflows/tick.yml allows, else 90).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--now", "now_text", metavar="ISO", help="Judge as of this instant.")
@pass_config
def command(cfg: Config, max_staleness: float | None, as_json: bool,
            now_text: str | None) -> int:
    """Last tick and how stale it is, next slots, open runs, dead letters, breakers.

    Exits 5 when the last tick is older than --max-staleness (or there is none), for
    a watchdog workflow or any external monitor.
    """
    now = parse_now(now_text)
    if max_staleness is None:
        # ticks hours apart (a derived cadence) are healthy: judge by the tick's cron
        from ..cadence import staleness_limit

        max_staleness = staleness_limit(cfg.repo, now) or DEFAULT_MAX_STALENESS
    snap = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch).read()
    loaded = load_all(cfg.schedules_dir)
    report = build(snap.files, loaded.schedules, [e.message for e in loaded.errors], now,
                   timedelta(minutes=max_staleness))
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        click.echo("\n".join(text(report)))
    if report["stale"]:
        limit = f"{max_staleness:g} minutes"
        if report["last_tick"] is None:
            raise Stale(f"no tick recorded on branch {cfg.state_branch!r} of {cfg.remote}")
        raise Stale(f"the last tick ({report['last_tick']}) is "
                    f"{age_text(report['age_minutes'])} old, more than {limit}")
    return 0
