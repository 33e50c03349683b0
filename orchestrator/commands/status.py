"""``orchestrator status``: is the clock still ticking, and what is it doing?

The heartbeat is ``state/ticks.jsonl`` on the state branch: every tick that commits
appends a line, and an idle tick still appends one once ``--heartbeat-every``
minutes (default 60) have passed. So the default ``--max-staleness`` is larger than
that plus the longest gap between the ticks tick.yml schedules (90 minutes without a
tick.yml): a healthy but idle repository is never reported stale.

With ``--notify`` (what ``watchdog.yml`` runs) a stale clock or a rewound state branch
also goes to the channels of ``orchestrator.json`` (:mod:`orchestrator.notify.watch`),
and the watchdog's issue is closed once ticks resume.

Exit codes: 0 when the last tick is recent enough, 5 (:class:`~orchestrator.errors.Stale`)
when it is older than ``--max-staleness`` or there is none, 7
(:class:`~orchestrator.errors.InvalidSchedules`) while a schedule file (or
``orchestrator.json``) is invalid, 6 (:class:`~orchestrator.errors.DeadLettersWaiting`)
with ``--fail-on-dead-letters`` while dead letters wait, 3 when the remote cannot be
read. The report is printed in every case, so a watchdog's log shows what it saw.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..cadence import lateness
from ..cadence.pending import tick_crons
from ..config.files import load_all
from ..config.repository import RepoSettings
from ..errors import DeadLettersWaiting, InvalidSchedules, RemoteError, Rewound, Stale
from ..planner import Caps
from ..runs import retention
from ..runs.status import age_text, build, staleness_for, text
from ..state import layout
from ..support.times import parse_now
from .context import Config, pass_config

if TYPE_CHECKING:
    from ..store import GitStateStore


def workflows_report(files: Mapping[str, bytes], now: datetime,
                     repo: Path | None = None) -> dict[str, Any]:
    """The scheduled workflows as the last weekly check recorded them, and as GitHub
    says now when this runs with a repository and a token (the watchdog does); with
    ``repo``, whether GitHub's 60 days without a commit are near."""
    from ..cadence import keepalive

    record = keepalive.read_record(files)
    report = keepalive.describe(record)
    # only where the repository runs on GitHub: a tick checked there, or this runs there
    on_github = record.checked_at is not None or bool(os.environ.get("GITHUB_REPOSITORY"))
    report["inactivity"] = keepalive.inactivity_warning(
        keepalive.last_activity(repo), now) if repo is not None and on_github else []
    return _live_workflows(report, now)


def _live_workflows(report: dict[str, Any], now: datetime) -> dict[str, Any]:
    from ..cadence import keepalive
    from ..errors import OrchestratorError
    from ..github import WorkflowAdmin

    if not os.environ.get("GITHUB_REPOSITORY"):
        return report  # not on GitHub Actions (nor pointed at a repository)
    try:
        with WorkflowAdmin.from_env(os.environ, now=now, max_wait_seconds=10, timeout=5,
                                    max_attempts=1) as api:
            found = keepalive.live(api)
    except OrchestratorError:
        return report  # no GitHub here, or it did not answer: the record alone
    report["live"] = found
    report["warnings"] = keepalive.warnings(keepalive.Record(now, found))
    return report


def workflow_lines(report: Mapping[str, Any]) -> list[str]:
    states = report.get("live") or report.get("states") or {}
    soon = [f"  warning: {w}" for w in report.get("inactivity", [])]
    if not states:
        return ["workflows", *soon] if soon else []
    when = "now" if report.get("live") else f"as of {report.get('checked_at')}"
    listed = ", ".join(f"{k} {v}" for k, v in sorted(states.items()))
    return [f"workflows     {listed} ({when})"] + [
        f"  warning: {w}" for w in report["warnings"]] + soon


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
@click.option("--notify", is_flag=True, envvar="ORCHESTRATOR_NOTIFY",
              help="Send tick_stale (or rewind_refused) to the channels of "
                   "orchestrator.json, and close the watchdog's issue once ticks resume.")
@click.option("--heartbeat-url", envvar="ORCHESTRATOR_HEARTBEAT_URL", metavar="URL",
              help="On a failure (exit 3, 5, 6 or 7), GET this URL + '/fail' (Healthchecks.io's "
                   "failure signal); a success sends nothing, the tick's ping does.")
@click.option("--heartbeat-fail-url", envvar="ORCHESTRATOR_HEARTBEAT_FAIL_URL", metavar="URL",
              help="GET this URL instead on a failure ('none': no signal).")
@pass_config
def command(cfg: Config, max_staleness: float | None, fail_on_dead_letters: bool,
            as_json: bool, now_text: str | None, accept_rewind: bool, notify: bool,
            heartbeat_url: str | None, heartbeat_fail_url: str | None) -> int:
    """Last tick and how stale it is, next slots, open runs, dead letters, breakers.

    Exits 5 when the last tick is older than --max-staleness (or there is none),
    for a watchdog workflow or any external monitor. Exits 7 (when the clock is
    fresh) while a schedule file or orchestrator.json is invalid, which every tick
    ignores. With --fail-on-dead-letters, exits 6 while dead letters wait for a
    decision. Exits 3 when the state branch cannot be read, or was rewound behind its
    high-water mark (ticks refuse to fire until it is accepted). With
    --heartbeat-url, each of those failures is also signalled there. GitHub tells of
    a failed scheduled run only the person who last changed its cron, which after
    `cron-sync` commits by a bot may be nobody.
    """
    try:
        return _status(cfg, max_staleness, fail_on_dead_letters, as_json, now_text,
                       accept_rewind, notify)
    except (RemoteError, Stale, DeadLettersWaiting, InvalidSchedules) as exc:
        from ._heartbeat import heartbeat_target, ping

        target = heartbeat_target(heartbeat_url, heartbeat_fail_url, True) \
            if heartbeat_url else None
        if target:
            problem = ping(target)
            click.echo(f"alert: {problem}" if problem else
                       f"alert: signalled the failure ({exc.exit_code}) to the heartbeat URL",
                       err=True)
        raise


def _status(cfg: Config, max_staleness: float | None, fail_on_dead_letters: bool,
            as_json: bool, now_text: str | None, accept_rewind: bool, notify: bool) -> int:
    now = parse_now(now_text)
    if max_staleness is None:
        # ticks hours apart (a derived cadence) are healthy: judge by the tick's cron
        max_staleness = staleness_for(cfg.repo, now).total_seconds() / 60
    store = cfg.store()
    if accept_rewind:
        store = _accept_rewind(cfg)
    snap = store.read()
    settings = RepoSettings.read(cfg.repo)
    report = _report(cfg, snap.files, settings, now, max_staleness,
                     simulated=now_text is not None)
    report["rewound"] = store.rewound
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        click.echo("\n".join(text(report) + retention.describe_lines(report["retention"])
                             + workflow_lines(report["workflows"])
                             + lateness.describe(report["cron_lateness"])[:1]))
    if notify:
        for line in alert(settings, report, store.rewound, now, max_staleness):
            click.echo(line, err=True)
    if store.rewound:
        raise Rewound(store.rewound)
    _refuse(cfg, report, max_staleness, fail_on_dead_letters)
    return 0


def _accept_rewind(cfg: Config) -> GitStateStore:
    """The git store, once it has accepted its branch's rewind (if any)."""
    git = cfg.git()
    accepted = git.accept_rewind()
    click.echo(f"accepted: {accepted}" if accepted else
               "the state branch is not behind its high-water mark: nothing to accept")
    return git


def _report(cfg: Config, files: Mapping[str, bytes], settings: RepoSettings,
            now: datetime, max_staleness: float, *, simulated: bool = False
            ) -> dict[str, Any]:
    """The status report of the state ``files`` and the working tree's schedules
    (``simulated``: ``now`` was given, so the ticks are judged on their own instants)."""
    loaded = load_all(cfg.schedules_dir)
    caps = Caps(settings.max_concurrent_tracks, settings.max_dispatches_per_tick)
    problem = settings.caps_problem
    invalid = [e.message for e in loaded.errors] + ([problem] if problem else [])
    report = build(files, loaded.schedules, invalid, now,
                   timedelta(minutes=max_staleness), caps, simulated=simulated)
    report["retention"] = retention.describe(retention.read_record(files),
                                             settings.keep_finished_runs_days)
    report["workflows"] = workflows_report(files, now, cfg.repo)
    report["cron_lateness"] = lateness.report(files.get(layout.LATENESS),
                                              tick_crons(cfg.repo), now, lateness.RISK_DAYS)
    return report


def _refuse(cfg: Config, report: dict[str, Any], max_staleness: float,
            fail_on_dead_letters: bool) -> None:
    """Raise the error ``status`` exits with when the report shows a problem."""
    if report["stale"]:
        raise _stale(cfg, report, max_staleness)
    if report["invalid_schedules"]:
        files = report["invalid_schedules"]
        raise InvalidSchedules(f"{len(files)} invalid file(s), ignored by every tick until "
                               f"fixed: {'; '.join(files)}")
    if fail_on_dead_letters and report["dead_letters"]:
        raise DeadLettersWaiting(f"{report['dead_letters']} dead letter(s) wait for a "
                                 "decision: see `orchestrator dlq list`")


def _stale(cfg: Config, report: dict[str, Any], max_staleness: float) -> Stale:
    """Why the last tick is too old: none, one from the future, or an old one."""
    if report["last_tick"] is None:
        return Stale(f"no tick recorded on branch {cfg.state_branch!r} of {cfg.remote}")
    if report["ahead"]:
        return Stale(f"the last tick ({report['last_tick']}) is "
                     f"{age_text(-report['age_minutes'])} ahead of this machine's clock: "
                     "a tick --now in the future wrote it, and no real tick since")
    return Stale(f"the last tick ({report['last_tick']}) is "
                 f"{age_text(report['age_minutes'])} old, more than {max_staleness:g} minutes")


def alert(settings: RepoSettings, report: dict[str, Any], rewound: str | None,
          now: datetime, limit: float) -> list[str]:
    """What ``--notify`` tells the channels: the rewind, the silence, or that ticks
    resumed (the watchdog's issue is closed then); one line per delivery."""
    from ..notify.events import Links
    from ..notify.watch import Watcher, rewind_event, stale_event
    from ..support.times import parse_utc

    spec = settings.notify
    if not spec.enabled:
        return ["notify: no channel in orchestrator.json (notify): nothing sent"]
    watcher = Watcher(spec, os.environ)
    links = Links.from_env(spec.brief_url, os.environ)
    last = parse_utc(report["last_tick"])
    if rewound:
        return watcher.send(rewind_event(rewound, now, links), now)
    if report["stale"]:
        return watcher.send(stale_event(last, now, limit, links), now)
    return watcher.resumed(last, now) if last is not None else []
