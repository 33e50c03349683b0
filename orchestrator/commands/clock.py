"""``orchestrator clock setup --kind systemd|compose|http``: the external clock's files.

It writes what a team runs on a machine it has, or gives a hosted scheduler: a systemd
unit or a compose file for ``serve --clock-only``
(:mod:`orchestrator.cadence.machine`), or the request and each entry's schedule in
EventBridge Scheduler's, Cloud Scheduler's and cron-job.org's syntax
(:mod:`orchestrator.cadence.hosted`). The token is never written: only where it is kept.
Each kind writes its files and ``<kind>.md``, which says how to start it. A file that
exists stays unless ``--force``.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..cadence import clock as external
from ..cadence import hosted, machine
from ..config.files import load_all
from ..config.repository import load_repo_config
from ..errors import EXIT_OK, UserError
from ..github import API_VERSION, DEFAULT_API_URL, api_url_of
from ..support.atomic import write_text
from .context import Config, pass_config
from .cron_sync import default_branch, external_report, repository_of
from .schedules import INSTANT

KINDS = ("systemd", "compose", "http")
TOKEN_FILES = {"systemd": "/etc/orchestrator/clock-token",
               "compose": "~/.config/orchestrator/clock-token"}
"""Where the token is kept by default: root's alone for systemd, which copies it to the
service; the owner's for compose, whose secret is read as the container's user."""
HTTP_FILE = "http.json"


@click.group("clock")
def command() -> None:
    """The external clock that starts tick.yml at each slot (cadence.mode "external")."""


@command.command("setup")
@click.option("--kind", type=click.Choice(KINDS), required=True,
              help="systemd: a service running `serve --clock-only`; compose: the same in "
              "a container; http: the request and schedules for a hosted scheduler.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("clock"),
              show_default=True, help="Folder for the files (relative to the repository).")
@click.option("--force", is_flag=True, help="Replace files that exist.")
@click.option("--repository", metavar="OWNER/REPO",
              help="The repository on GitHub (default: GITHUB_REPOSITORY, else the remote).")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Where the machine keeps the token (systemd: /etc/orchestrator/"
              "clock-token; compose: ~/.config/orchestrator/clock-token). Never read.")
@click.option("--via", type=click.Choice(["workflow_dispatch", "repository_dispatch"]),
              default="workflow_dispatch", show_default=True,
              help="The request that starts tick.yml (the workflow dispatch needs the "
              "narrower token).")
@click.option("--from", "start", type=INSTANT, default=None, metavar="ISO",
              help="With --kind http: derive from this instant's next year (default: now).")
@pass_config
def setup(cfg: Config, kind: str, out: Path, force: bool, repository: str | None,
          token_file: Path | None, via: str, start: datetime | None) -> int:
    """Write the external clock's files for a machine you have (systemd, compose) or a
    hosted scheduler (http), and say how to start it. The token never goes in a file."""
    repository = _checked(cfg, kind, repository, token_file)
    folder = out if out.is_absolute() else cfg.repo / out
    if kind == "http":
        files = _http_files(cfg, repository, via, start or datetime.now(UTC))
    else:
        files = _machine_files(kind, _machine(cfg, kind, repository, token_file, via))
    _write(folder, files, force)
    for name in files:
        click.echo(f"wrote {_shown(cfg, folder / name)}")
    click.echo(files[f"{kind}.md"].split("\n", 2)[2].rstrip())
    return EXIT_OK


def _checked(cfg: Config, kind: str, repository: str | None, token_file: Path | None
             ) -> str:
    """The repository on GitHub, once the options and ``orchestrator.json`` allow a
    setup."""
    if kind == "http" and token_file is not None:
        raise click.UsageError("--token-file is for systemd and compose: a hosted "
                               "scheduler keeps the token in its own secrets")
    _require_external(cfg)
    if kind == "http" and load_repo_config(cfg.repo).cadence.clock_confirms:
        raise UserError("clock setup: orchestrator.json says clock_confirms, and a hosted "
                        "scheduler does not confirm its calls: a lost call would wait for "
                        "the weekly backstop. Remove clock_confirms and run `orchestrator "
                        "cron-sync`, or use --kind systemd or compose")
    repository = repository or repository_of(cfg)
    if repository == "OWNER/REPO":
        raise UserError("clock setup: name the repository with --repository OWNER/REPO "
                        "(the remote is not on github.com)")
    return repository


def _require_external(cfg: Config) -> None:
    mode = load_repo_config(cfg.repo).cadence.mode
    if mode != "external":
        raise UserError(f"clock setup: orchestrator.json's cadence.mode is {mode!r}; set "
                        "\"mode\": \"external\" and run `orchestrator cron-sync` first (see "
                        "docs/how-to/cadence.md)")


def _shown(cfg: Config, path: Path) -> str:
    try:
        return path.relative_to(cfg.repo).as_posix()
    except ValueError:
        return str(path)


def _write(folder: Path, files: dict[str, str], force: bool) -> None:
    """Every file or none: one that exists stops it all, unless ``force``."""
    there = sorted(name for name in files if (folder / name).exists())
    if there and not force:
        raise UserError(f"clock setup: {folder} already has {', '.join(there)} (--force "
                        "replaces them)")
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        write_text(folder / name, text)


# --------------------------------------------------------------------------- a machine


def _machine(cfg: Config, kind: str, repository: str, token_file: Path | None,
             via: str) -> machine.Machine:
    path = Path(os.path.expanduser(token_file or TOKEN_FILES[kind])).absolute()
    if path.is_relative_to(cfg.repo):
        raise UserError(f"clock setup: keep the token file out of the repository "
                        f"({path}): a commit would publish it")
    api_url = api_url_of(os.environ)
    return machine.Machine(
        repository=repository, ref=default_branch(cfg), repo=cfg.repo, token_file=path,
        via=via, python=sys.executable, user=getpass.getuser(),
        uid_gid=f"{os.getuid()}:{os.getgid()}", version=__version__,
        api_url=None if api_url == DEFAULT_API_URL else api_url)


def _token_line(spec: machine.Machine) -> str:
    request = external.requests(spec.repository, spec.ref)[spec.via]
    return f"The token: {request.token}."


def _machine_files(kind: str, spec: machine.Machine) -> dict[str, str]:
    if kind == "systemd":
        return {machine.UNIT: machine.systemd_unit(spec), "systemd.md": _systemd_readme(spec)}
    return {machine.COMPOSE: machine.compose_file(spec), "compose.md": _compose_readme(spec)}


_CONFIRMS = """\
This clock confirms its calls: 5 minutes after a call it reads whether the slot fired,
and calls again if not. Set `"clock_confirms": true` in orchestrator.json's `cadence`
and run `orchestrator cron-sync`: tick.yml then keeps one backstop tick a week instead
of its safety ticks, and watchdog.yml checks weekly. That is about a quarter of the
clock's cost on GitHub for a daily schedule (docs/how-to/cadence.md)."""


def _systemd_readme(spec: machine.Machine) -> str:
    return f"""\
# The external clock as a systemd service

1. Keep the token in `{spec.token_file}`, readable by root alone. {_token_line(spec)}
   Paste it into `sudo install -D -m 600 /dev/stdin {spec.token_file}`, then Ctrl-D.
2. `sudo cp {machine.UNIT} /etc/systemd/system/`, then `sudo systemctl daemon-reload`
   and `sudo systemctl enable --now {machine.UNIT}`.
3. `journalctl -u {machine.UNIT} -f` shows each call. systemd restarts the clock when
   it stops, and when it has not read the state branch for {machine.WATCHDOG}.

It runs as `{spec.user}` in `{spec.repo}`, whose git remote it fetches with that user's
credentials. Nothing else on the machine is writable to it.

{_CONFIRMS}
"""


def _compose_readme(spec: machine.Machine) -> str:
    return f"""\
# The external clock in a container

1. Keep the token in `{spec.token_file}`, readable by you alone. {_token_line(spec)}
   Paste it into `install -D -m 600 /dev/stdin {spec.token_file}`, then Ctrl-D.
2. `docker compose -f {machine.COMPOSE} up -d --build` starts it, and restarts it
   unless you stop it.
3. `docker compose -f {machine.COMPOSE} ps` shows its health: unhealthy when it has not
   read the state branch for {machine.HEALTH_SECONDS} seconds. `logs -f` shows each call.

The container mounts `{spec.repo}` and fetches its git remote from inside. An https
remote of a public repository works as is; a private one needs credentials git finds there.

{_CONFIRMS}
"""


# --------------------------------------------------------------------------- http


def _http_files(cfg: Config, repository: str, via: str, start: datetime) -> dict[str, str]:
    schedules = load_all(cfg.schedules_dir).schedules
    report = external_report(cfg, schedules, start)
    request = external.requests(repository, default_branch(cfg))[via]
    data = {"request": _request(request, api_url_of(os.environ)),
            "entries": hosted.hosted(report), "notes": hosted.notes(report)}
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return {HTTP_FILE: text, "http.md": "\n".join(_http_readme(data)) + "\n"}


def _request(request: external.Request, api_url: str) -> dict[str, Any]:
    """The exact request, the token a variable the scheduler fills from its secrets."""
    return {"method": "POST", "url": request.url(api_url),
            "headers": {"Accept": "application/vnd.github+json",
                        "Authorization": f"Bearer ${{{external.TOKEN_VARIABLE}}}",
                        "Content-Type": "application/json",
                        "X-GitHub-Api-Version": API_VERSION},
            "body": json.dumps(request.body, separators=(",", ":")),
            "token": request.token}


_HOW = {
    hosted.EVENTBRIDGE: "it calls no URL itself: target the default event bus, whose rule "
    "sends to an API destination (POST, the URL) with an API-key connection "
    "(Authorization, `Bearer` and the token) and the body as a constant input",
    hosted.CLOUD_SCHEDULER: "an HTTP target: POST, the URL, the headers and the body; "
    "whoever may view the job sees the token in its headers",
    hosted.CRON_JOB_ORG: "a job with request method POST, the headers and the body "
    "(advanced settings); the token is kept in the account's job",
}


def _http_readme(data: dict[str, Any]) -> list[str]:
    request = data["request"]
    lines = ["# The external clock on a hosted scheduler", "",
             f"Each call: `{request['method']} {request['url']}` with the body "
             f"`{request['body']}` and these headers:", ""]
    lines += [f"    {name}: {value}" for name, value in request["headers"].items()]
    lines += ["", f"The token: {request['token']}.", ""]
    lines += [f"- {hosted.SERVICES[name]}: {how}." for name, how in _HOW.items()]
    for entry in data["entries"]:
        lines += ["", *_entry_lines(entry)]
    lines += ["", *(f"Note: {note}." for note in data["notes"])]
    return lines


def _entry_lines(entry: dict[str, Any]) -> list[str]:
    """One entry: what it is, then its schedule and its gaps in each service."""
    timing = f"once at {entry['at']}" if "at" in entry else \
        f"`{entry['cron']}` in {entry['timezone']}"
    lines = [f"## {', '.join(entry['schedules'])}: {timing}", ""]
    bridge = "; ".join(f"`{s['ScheduleExpression']}` in {s['ScheduleExpressionTimezone']}"
                       for s in entry[hosted.EVENTBRIDGE])
    cloud = entry[hosted.CLOUD_SCHEDULER]
    jobs = "; ".join(json.dumps(j["schedule"], separators=(",", ":"))
                     for j in entry[hosted.CRON_JOB_ORG])
    lines += [f"- {hosted.SERVICES[hosted.EVENTBRIDGE]}: {bridge}",
              f"- {hosted.SERVICES[hosted.CLOUD_SCHEDULER]}: `{cloud['schedule']}` in "
              f"{cloud['timeZone']}",
              f"- {hosted.SERVICES[hosted.CRON_JOB_ORG]}: `{jobs}`"]
    for name, gaps in entry["not_expressed"].items():
        lines += [f"- not in {hosted.SERVICES[name]}: {gap}" for gap in gaps]
    return lines
