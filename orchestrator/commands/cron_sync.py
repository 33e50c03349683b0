"""``orchestrator cron-sync``: write tick.yml's cron (and the watchdog's) from schedules/.

GitHub's token cannot edit workflow files, so the tick never rewrites its own
cron: the change travels in the pull request that changes a schedule, and
``validate`` (the pull request check) fails until it does. Under an external clock
it also writes the clock's schedule (``.github/orchestrator-clock.json``), and
``--external`` prints what the clock must do: when to call, how, with which token.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import click

from ..cadence import clock
from ..cadence.derive import HORIZON, Derived, derive, utc_spec
from ..cadence.profiles import LEDGER, PROFILES
from ..cadence.tickfile import TICK, dropped_zones, sync
from ..config.files import LoadResult, load_all
from ..config.files import write_schedule as write_atomically
from ..config.models import Schedule
from ..config.repository import RepoConfig, load_repo_config
from ..errors import EXIT_OK, EXIT_USER, UserError
from ..github import API_VERSION, api_url_of
from ..support.times import iso
from .context import Config, pass_config
from .estimate import profile_text, resolve_profile, under_profile
from .schedules import INSTANT

_GITHUB_REMOTE = re.compile(
    r"(?:https?://(?:[^@/]+@)?|ssh://git@|git@)github\.com[:/]"
    r"(?P<repo>[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9_.-]+?)(?:\.git)?/?$")
NEXT_CALLS = 5


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def repository_of(cfg: Config) -> str:
    """``owner/name`` on GitHub: ``GITHUB_REPOSITORY``, else the remote's URL, else a
    placeholder the user replaces."""
    named = os.environ.get("GITHUB_REPOSITORY")
    if named:
        return named
    url = _git(cfg.repo, "remote", "get-url", cfg.remote) or cfg.remote
    found = _GITHUB_REMOTE.match(url)
    return found["repo"] if found else "OWNER/REPO"


def default_branch(cfg: Config) -> str:
    """The branch tick.yml runs from: ``ORCHESTRATOR_DISPATCH_REF``, else the remote's
    HEAD as the clone knows it, else ``main``."""
    named = os.environ.get("ORCHESTRATOR_DISPATCH_REF")
    if named:
        return named
    head = _git(cfg.repo, "symbolic-ref", "--short", f"refs/remotes/{cfg.remote}/HEAD")
    return head.split("/", 1)[1] if "/" in head else "main"


def offset_changes(zone: str, start: datetime, until: datetime) -> list[datetime]:
    """The instants in ``(start, until]`` at which ``zone``'s UTC offset changes (to the
    hour: every zone changes on a whole hour of UTC or half of one, and a change is
    reported at the first hour after it)."""
    tz = ZoneInfo(zone)
    changes: list[datetime] = []
    moment = start.replace(minute=0, second=0, microsecond=0)
    before = moment.astimezone(tz).utcoffset()
    while moment < until:
        moment += timedelta(hours=1)
        offset = moment.astimezone(tz).utcoffset()
        if offset != before:
            changes.append(moment)
            before = offset
    return changes


def external_report(cfg: Config, schedules: list[Schedule], start: datetime) -> dict[str, Any]:
    """What the external clock must do for the year from ``start``: its entries, every
    UTC call, the two requests and their tokens (``--external``, ``--json``)."""
    until = start + HORIZON
    repository = repository_of(cfg)
    api_url = api_url_of(os.environ)
    jittered = sorted(s.id for s in schedules if s.spec.enabled and s.spec.jitter_seconds)
    return {
        "from": iso(start), "until": iso(until), "repository": repository,
        "entries": [_entry_report(entry, schedules, start, until)
                    for entry in clock.entries(schedules)],
        "calls": [iso(c) for c in clock.calls(schedules, start, until)],
        "requests": {name: request.to_json(api_url, API_VERSION) for name, request in
                     clock.requests(repository, default_branch(cfg)).items()},
        "token_variable": clock.TOKEN_VARIABLE,
        "jittered": jittered,
        "confirms": load_repo_config(cfg.repo).cadence.clock_confirms,
    }


def _entry_report(entry: dict[str, Any], schedules: list[Schedule], start: datetime,
                  until: datetime) -> dict[str, Any]:
    """One entry of the external clock with its calls: how many, the next few, and
    those on either side of each change of its zone's offset."""
    ids = set(entry["schedules"])
    mine = clock.calls([s for s in schedules if s.id in ids], start, until)
    around = [_around(change, mine)
              for change in offset_changes(entry.get("timezone", "UTC"), start, until)]
    return {**entry, "calls": len(mine), "next": [iso(c) for c in mine[:NEXT_CALLS]],
            "around_changes": around}


def _around(change: datetime, calls: list[datetime]) -> dict[str, Any]:
    """The last call before ``change`` and the first at or after it."""
    before = [c for c in calls if c < change][-1:]
    after = [c for c in calls if c >= change][:1]
    return {"change": iso(change), "before": [iso(c) for c in before],
            "after": [iso(c) for c in after]}


def external_text(report: dict[str, Any]) -> list[str]:
    lines = [f"external clock: {len(report['calls'])} call(s) from {report['from']} to "
             f"{report['until']}, at these times (each in its time zone; --json lists "
             "every UTC time):"]
    for entry in report["entries"]:
        lines += _entry_text(entry)
    for jittered in report["jittered"]:
        lines.append(f"  note: {jittered!r} has jitter_seconds: a clock that takes the cron "
                     "calls at the slot and the run waits for the next tick; the UTC times "
                     "of --json include the jitter")
    if report.get("confirms"):
        lines.append("clock_confirms: tick.yml keeps a weekly backstop tick; the clock must "
                     "be `orchestrator serve --clock-only`, which calls again for a slot "
                     "that did not fire (a hosted scheduler cannot)")
    else:
        lines.append("a retry's back-off end and a poll's next time are left to the safety "
                     "ticks (`serve --clock-only` calls at them too)")
    lines += _requests_text(report)
    lines.append("the workflow dispatch needs the narrower token (Actions cannot push "
                 "code, Contents can)")
    return lines


def _entry_text(entry: dict[str, Any]) -> list[str]:
    """One entry of the external clock: its cron line, its next calls, and its calls on
    either side of each change of its zone's offset (or its one call)."""
    if "at" in entry:
        return [f"  once at {entry['at']}: {', '.join(entry['schedules'])}"]
    lines = [f"  {entry['cron']} ({entry['timezone']}; daylight saving: gap "
             f"{entry['dst']['gap']}, fold {entry['dst']['fold']}): "
             f"{', '.join(entry['schedules'])}; {entry['calls']} call(s)"]
    if entry["next"]:
        lines.append(f"    next (UTC): {', '.join(entry['next'])}")
    for around in entry["around_changes"]:
        lines.append(f"    across the change at {around['change']}: "
                     f"{', '.join(around['before']) or '-'} then "
                     f"{', '.join(around['after']) or '-'}")
    return lines


def _requests_text(report: dict[str, Any]) -> list[str]:
    """The requests the external clock may make, each with the token it needs."""
    lines: list[str] = []
    for name, request in report["requests"].items():
        lines.append(f"request ({name}), token in ${report['token_variable']}:")
        lines.append(f"  {request['curl']}")
        lines.append(f"  token: {request['token']}")
    return lines


def _summary(derived: Derived, config: RepoConfig) -> list[str]:
    lines = [f"tick cron ({config.cadence.mode}, UTC):"]
    lines += [f"  {line}" for line in derived.tick_cron]
    lines.append(f"watchdog: {derived.watchdog_cron}, stale after "
                 f"{derived.max_staleness_minutes} minutes")
    return lines


@click.command("cron-sync")
@click.option("--check", is_flag=True, help="Change nothing; exit 1 if a workflow is stale.")
@click.option("--from", "start", type=INSTANT, default=None, metavar="ISO",
              help="Derive from this instant's next year of slots (default: now).")
@click.option("--external", is_flag=True,
              help="With cadence.mode \"external\": also print when the clock must call "
              "tick.yml, the request to make and the token it needs.")
@click.option("--json", "as_json", is_flag=True, help="Print what was derived as JSON.")
@click.option("--profile", type=click.Choice([*PROFILES, LEDGER]), default=None,
              help="Also say how late the derived cadence fires the slots, and what a month "
              "costs, under this profile of GitHub's cron lateness (as `estimate --profile`).")
@pass_config
def command(cfg: Config, check: bool, start: datetime | None, external: bool,
            as_json: bool, profile: str | None) -> int:
    """Derive tick.yml's schedule from the schedules, in UTC and on both sides of
    daylight-saving changes, and the watchdog's from the tick's. Under an external
    clock, derive its schedule file too. Write the files that changed."""
    loaded = _load_schedules(cfg)
    config = _repo_config(cfg, external)
    moment = start or datetime.now(UTC)
    if not (cfg.repo / TICK).is_file():
        # a repository that does not run on GitHub (`init --local`): nothing to keep in step
        click.echo(f"no {TICK}: this repository does not run on GitHub Actions, so "
                   "there is no cron to write (`orchestrator init --local --github` "
                   "scaffolds the workflows)")
        return EXIT_OK
    changed = _synced(cfg, loaded.schedules, config, moment)
    derived = derive(loaded.schedules, config, moment)
    _note_dropped_zones(cfg.repo / TICK, derived)
    files = [path.relative_to(cfg.repo).as_posix() for path in changed]
    report = external_report(cfg, loaded.schedules, moment) if external else None
    found = None if profile is None else under_profile(
        cfg.repo, loaded.schedules, moment, derived.tick_cron, [derived.watchdog_cron],
        resolve_profile(cfg, profile, moment))
    click.echo(_output(derived, config, files, check, report, as_json, found))
    if check:
        return EXIT_USER if changed else EXIT_OK
    for path, text in changed.items():
        write_atomically(path, text)
    return EXIT_OK


def _load_schedules(cfg: Config) -> LoadResult:
    """The schedules, each one that cannot be read named on stderr and left out."""
    loaded = load_all(cfg.schedules_dir)
    for error in loaded.errors:
        click.echo(f"orchestrator: {error.message} (ignored)", err=True)
    return loaded


def _output(derived: Derived, config: RepoConfig, files: list[str], check: bool,
            report: dict[str, Any] | None, as_json: bool,
            found: dict[str, Any] | None = None) -> str:
    """What ``cron-sync`` prints: JSON with ``--json``, else lines of text; with
    ``--profile``, how late the derived cadence fires the slots under it."""
    if as_json:
        data = _as_json(derived, config, files, check, report)
        return json.dumps(data if found is None else {**data, "estimate": found}, indent=2)
    lines = _text(derived, config, files, check, report)
    return "\n".join(lines if found is None else [*lines, profile_text(found)])


def _repo_config(cfg: Config, external: bool) -> RepoConfig:
    """``orchestrator.json``, refused for ``--external`` unless its clock is external."""
    config = load_repo_config(cfg.repo)
    if external and config.cadence.mode != "external":
        raise UserError(f"--external: orchestrator.json's cadence.mode is "
                        f"{config.cadence.mode!r}; set \"mode\": \"external\" first (see "
                        "docs/how-to/cadence.md)")
    return config


def _synced(cfg: Config, schedules: list[Schedule], config: RepoConfig, moment: datetime
            ) -> dict[Path, str]:
    """The workflow files whose text the schedules change, with their new text."""
    try:
        return sync(cfg.repo, schedules, config, moment)
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from None


def _note_dropped_zones(tick: Path, derived: Derived) -> None:
    """Say which zoned entries of ``tick`` the UTC entries replace."""
    for line in dropped_zones(tick.read_text(encoding="utf-8"), derived.tick_cron):
        cron = utc_spec(line)
        click.echo(f"note: {TICK}'s entry {cron.cron!r} in {cron.timezone} is replaced by UTC "
                   "entries: cron-sync writes UTC, since GitHub documents nothing of a "
                   "zoned entry in the repeated hour of a fall-back night", err=True)


def _as_json(derived: Derived, config: RepoConfig, files: list[str], check: bool,
             report: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "mode": config.cadence.mode, "tick_cron": derived.tick_cron,
        "watchdog_cron": derived.watchdog_cron,
        "max_staleness_minutes": derived.max_staleness_minutes,
        "stale" if check else "written": files, "external": report,
    }


def _text(derived: Derived, config: RepoConfig, files: list[str], check: bool,
          report: dict[str, Any] | None) -> list[str]:
    """What ``cron-sync`` prints without ``--json``."""
    lines = _summary(derived, config)
    if config.cadence.mode == "external":
        lines.append(f"external clock: {clock.CLOCK_FILE.as_posix()} (see --external)")
    lines += [f"{'stale' if check else 'wrote'} {rel}" for rel in files]
    lines += [] if files else ["workflows up to date"]
    lines += external_text(report) if report is not None else []
    return lines
