"""``orchestrator status``: is the clock still ticking, and what is it doing?

The heartbeat is ``state/ticks.jsonl`` on the state branch: every tick that commits
appends a line, and an idle tick still appends one once ``--heartbeat-every``
minutes (default 60) have passed. So the default ``--max-staleness`` is larger than
that plus the longest gap between the ticks tick.yml schedules (90 minutes without a
tick.yml): a healthy but idle repository is never reported stale.

Exit codes: 0 when the last tick is recent enough, 5 (:class:`~orchestrator.errors.Stale`)
when it is older than ``--max-staleness`` or there is none, 7
(:class:`~orchestrator.errors.InvalidSchedules`) while a schedule file (or
``orchestrator.json``) is invalid, 6 (:class:`~orchestrator.errors.DeadLettersWaiting`)
with ``--fail-on-dead-letters`` while dead letters wait, 3 when the remote cannot be
read. The report is printed in every case, so a watchdog's log shows what it saw.
"""

from __future__ import annotations

import json
from datetime import timedelta

import click

from ..errors import DeadLettersWaiting, InvalidSchedules, Rewound, Stale
from ..planner import Caps
from ..runs import retention
from ..runs.status import DEFAULT_MAX_STALENESS, age_text, build, text
from ..spec.config import RepoSettings
from ..spec.files import load_all
from ..store import GitStateStore
from ..support.times import parse_now
from .context import Config, pass_config


@click.command("status")
@click.option("--max-staleness", type=click.FloatRange(min=1), metavar="MINUTES",
              envvar="ORCHESTRATOR_MAX_STALENESS", default=None,
              help="Exit 5 when the last tick is older than this (default: what the "
                   "cadence of .github/workflows/tick.yml allows, else 90).")
@click.option("--fail-on-dead-letters", is_flag=True,
              envvar="ORCHESTRATOR_FAIL_ON_DEAD_LETTERS",
              help="Exit 6 while dead letters wait for a decision (requeue or discard).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--now", "now_text", metavar="ISO", help="Judge as of this instant.")
@click.option("--accept-rewind", is_flag=True,
              help="The state branch was rewound (or deleted) behind its high-water mark "
                   "and a person has checked it: fire from it as it is now.")
@pass_config
def command(cfg: Config, max_staleness: float | None, fail_on_dead_letters: bool,
            as_json: bool, now_text: str | None, accept_rewind: bool) -> int:
    """Last tick and how stale it is, next slots, open runs, dead letters, breakers.

    Exits 5 when the last tick is older than --max-staleness (or there is none), for
    a watchdog workflow or any external monitor; 7 (when the clock is fresh) while a
    schedule file or orchestrator.json is invalid, which every tick ignores; with
    --fail-on-dead-letters, 6 while dead letters wait for a decision; and 3 when the
    state branch was rewound behind its high-water mark (ticks refuse to fire until it
    is accepted).
    """
    now = parse_now(now_text)
    if max_staleness is None:
        # ticks hours apart (a derived cadence) are healthy: judge by the tick's cron
        from ..cadence.derive import staleness_limit

        max_staleness = staleness_limit(cfg.repo, now) or DEFAULT_MAX_STALENESS
    store = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch)
    if accept_rewind:
        accepted = store.accept_rewind()
        click.echo(f"accepted: {accepted}" if accepted else
                   "the state branch is not behind its high-water mark: nothing to accept")
    snap = store.read()
    loaded = load_all(cfg.schedules_dir)
    settings = RepoSettings.read(cfg.repo)
    caps = Caps(settings.max_concurrent_tracks, settings.max_dispatches_per_tick)
    problem = settings.caps_problem
    invalid = [e.message for e in loaded.errors] + ([problem] if problem else [])
    report = build(snap.files, loaded.schedules, invalid, now,
                   timedelta(minutes=max_staleness), caps)
    report["rewound"] = store.rewound
    report["retention"] = retention.describe(retention.read_record(snap.files),
                                             settings.keep_finished_runs_days)
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        click.echo("\n".join(text(report) + retention.describe_lines(report["retention"])))
    if store.rewound:
        raise Rewound(store.rewound)
    if report["stale"]:
        limit = f"{max_staleness:g} minutes"
        if report["last_tick"] is None:
            raise Stale(f"no tick recorded on branch {cfg.state_branch!r} of {cfg.remote}")
        if report["ahead"]:
            raise Stale(f"the last tick ({report['last_tick']}) is "
                        f"{age_text(-report['age_minutes'])} ahead of this machine's clock: "
                        "a tick --now in the future wrote it, and no real tick since")
        raise Stale(f"the last tick ({report['last_tick']}) is "
                    f"{age_text(report['age_minutes'])} old, more than {limit}")
    if report["invalid_schedules"]:
        files = report["invalid_schedules"]
        raise InvalidSchedules(f"{len(files)} invalid file(s), ignored by every tick until "
                               f"fixed: {'; '.join(files)}")
    if fail_on_dead_letters and report["dead_letters"]:
        raise DeadLettersWaiting(f"{report['dead_letters']} dead letter(s) wait for a "
                                 "decision: see `orchestrator dlq list`")
    return 0
