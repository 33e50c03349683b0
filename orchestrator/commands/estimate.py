"""``orchestrator estimate``: a month of this repository's schedules on GitHub Actions.

Runner-minutes, pushes and API requests, against GitHub's limits, and how late slots
fire, for the orchestrator as its workflows are configured (tick.yml's cron and
``--linger``, watchdog.yml's cron; under ``"mode": "external"``, a clock calling at
each slot) and for the same tracks on GitHub's own ``schedule:`` trigger. The model
is :mod:`orchestrator.cadence.estimate`, the one ``bench/cost.py`` runs; it simulates
four weeks on a virtual clock (seeded, so the figures are the same on every run) and
scales them to 30 days.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from ..cadence.derive import derive
from ..cadence.estimate import ClockModel, Setup, simulate, simulate_github_schedule
from ..cadence.tickfile import TICK, WATCHDOG, read_crons, read_linger
from ..config.files import load_all
from ..config.models import Schedule
from ..config.repository import load_repo_config
from ..support.times import iso
from .context import Config, pass_config
from .schedules import INSTANT


def repository_setup(root: Path, schedules: list[Schedule], start: datetime) -> Setup:
    """The tick and watchdog as this repository's workflows configure them (what
    cron-sync would write, for a workflow that is missing), and under an external
    clock the clock's calls (:class:`ClockModel`'s start-up and failures)."""
    tick = root / TICK
    watchdog = root / WATCHDOG
    config = load_repo_config(root)
    if tick.is_file():
        text = tick.read_text(encoding="utf-8")
        lines = read_crons(text)
        linger, most = read_linger(text)
    else:
        lines = derive(schedules, config, start).tick_cron
        linger, most = 0.0, 60.0
    watch = read_crons(watchdog.read_text(encoding="utf-8")) if watchdog.is_file() else []
    outside = ClockModel() if config.cadence.mode == "external" else None
    return Setup(lines, linger, most, watch, config.cadence, outside)


def build(root: Path, schedules: list[Schedule], start: datetime,
          track_minutes: float = 1.0) -> dict[str, Any]:
    setup = repository_setup(root, schedules, start)
    ours = simulate(schedules, setup, start, track_minutes=track_minutes)
    theirs = simulate_github_schedule(schedules, start, track_minutes=track_minutes)
    return {
        "from": iso(start),
        "track_minutes": track_minutes,
        "setup": {"tick_cron": setup.tick_cron, "linger_minutes": setup.linger_minutes,
                  "max_linger_minutes": setup.max_linger_minutes,
                  "watchdog_cron": setup.watchdog_cron,
                  "external_clock": None if setup.clock is None else {
                      "startup_seconds": list(setup.clock.startup_seconds),
                      "failure_rate": setup.clock.failure_rate}},
        "orchestrator": ours.to_json(),
        "github_schedule": theirs.to_json(),
    }


def _late(row: dict[str, Any], key: str) -> str:
    value = row["lateness_seconds"][key]
    if value is None:
        return "-"
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.0f} min"


ROWS = (
    ("runner-minutes a month", lambda r: f"{r['runner_minutes']:,}"),
    ("pushes a month", lambda r: f"{r['pushes']:,}"),
    ("API requests a month", lambda r: f"{r['api_requests']:,}"),
    ("slot to dispatch, median", lambda r: _late(r, "median")),
    ("slot to dispatch, 95th percentile", lambda r: _late(r, "p95")),
    ("slots not fired (of simulated)", lambda r: f"{r['missed']:,} of {r['slots']:,}"),
)

NOT_FIRED = ("not fired: skipped (a tick found several due; catchup: latest fires the "
             "newest) or missed (older than catchup_window_minutes, or GitHub dropped or "
             "throttled the run: it runs a schedule at most every 5 minutes)")


def text(report: dict[str, Any]) -> list[str]:
    ours, theirs = report["orchestrator"], report["github_schedule"]
    outside = report["setup"]["external_clock"]
    lines = [f"a month of these schedules on GitHub Actions (tracks taken as "
             f"{report['track_minutes']:g} min each; model: orchestrator/estimate.py)",
             *([f"  with an external clock calling at each slot (start-up "
                f"{outside['startup_seconds'][0]:g} to {outside['startup_seconds'][1]:g} s, "
                f"{outside['failure_rate']:.0%} of calls lost)"] if outside else []),
             f"  {'':<34}{'orchestrator':>14}{'GitHub schedule:':>18}"]
    lines += [f"  {name:<34}{fmt(ours):>14}{fmt(theirs):>18}" for name, fmt in ROWS]
    parts = ", ".join(f"{k} {v:,}" for k, v in ours["runner_minutes_by_job"].items())
    lines.append(f"  orchestrator runner-minutes: {parts or 'none'}")
    lines.append(f"  {NOT_FIRED}")
    lines += [f"warning: {w}" for w in ours["warnings"]]
    return lines


def markdown(report: dict[str, Any]) -> str:
    ours, theirs = report["orchestrator"], report["github_schedule"]
    out = ["### Estimate: a month on GitHub Actions", "",
           "| | orchestrator | GitHub's own `schedule:` |", "|---|---:|---:|"]
    out += [f"| {name} | {fmt(ours)} | {fmt(theirs)} |" for name, fmt in ROWS]
    outside = report["setup"]["external_clock"]
    out += ["", f"Tracks taken as {report['track_minutes']:g} minute(s) each"
            + (", with an external clock calling at each slot (a tick "
               f"{outside['startup_seconds'][0]:g} to {outside['startup_seconds'][1]:g} s "
               f"later; {outside['failure_rate']:.0%} of calls lost)" if outside else "")
            + f"; `orchestrator estimate` explains the model. Slots {NOT_FIRED}.", ""]
    out += [f"> ⚠️ {w}  " for w in ours["warnings"]]
    return "\n".join(out).rstrip("\n") + "\n"


@click.command("estimate")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--track-minutes", type=click.FloatRange(min=0.1), default=1.0,
              show_default=True, help="How long each track's job takes, setup included.")
@click.option("--from", "start", type=INSTANT, default=None, metavar="ISO",
              help="Simulate the four weeks from this instant (default: now).")
@pass_config
def command(cfg: Config, as_json: bool, track_minutes: float, start: datetime | None) -> int:
    """Expected runner-minutes, pushes and API requests a month for these schedules, and
    how late their slots fire, beside GitHub's own schedule: trigger. Warns past
    GitHub's limits: 2,000 free minutes for private repositories, 1,000 API requests
    an hour, about 6 pushes a minute."""
    loaded = load_all(cfg.schedules_dir)
    for error in loaded.errors:
        click.echo(f"orchestrator: {error.message} (left out)", err=True)
    moment = (start or datetime.now(UTC)).replace(second=0, microsecond=0)
    report = build(cfg.repo, loaded.schedules, moment, track_minutes)
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        click.echo("\n".join(text(report)))
    return 0
