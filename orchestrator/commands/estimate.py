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
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from ..cadence import lateness
from ..cadence.derive import derive
from ..cadence.estimate import ClockModel, Setup, simulate, simulate_github_schedule
from ..cadence.pending import tick_crons
from ..cadence.profiles import LEDGER, PROFILES, CronProfile, from_ledger
from ..cadence.tickfile import TICK, WATCHDOG, read_crons, read_linger
from ..config.files import load_all
from ..config.models import Schedule
from ..config.repository import load_repo_config
from ..errors import OrchestratorError
from ..state import layout
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
    outside = ClockModel(confirms=config.cadence.clock_confirms) \
        if config.cadence.mode == "external" else None
    return Setup(lines, linger, most, watch, config.cadence, outside)


DEFAULT_PROFILE = "assumed"
PROFILE_HELP = ("How late GitHub's cron starts runs: 'assumed' (minutes), 'measured-2026' "
                "(hours, as public repositories measured it in 2026; bench/README.md), or "
                "'ledger' (this repository's own, state/lateness.jsonl).")


def profile_option(function: Any) -> Any:
    return click.option("--profile", type=click.Choice([*PROFILES, LEDGER]),
                        default=DEFAULT_PROFILE, show_default=True,
                        help=PROFILE_HELP)(function)


def resolve_profile(cfg: Config, name: str, now: datetime) -> tuple[str, CronProfile]:
    """The profile ``name`` stands for; the ledger's, read from the state branch, falls
    back to the assumed one with a line on stderr when it has too few samples."""
    if name != LEDGER:
        return name, PROFILES[name]
    try:
        data = cfg.store().read().files.get(layout.LATENESS)
    except OrchestratorError as exc:
        return _fallback(f"the ledger cannot be read ({exc.message})")
    samples = lateness.recent(lateness.read(data), now, lateness.KEEP_DAYS)
    measured = lateness.overall(samples, tick_crons(cfg.repo))
    found = from_ledger([s.late for s in samples], measured.dropped)
    if found is None:
        return _fallback(f"the ledger has {len(samples)} sample(s) of the last "
                         f"{lateness.KEEP_DAYS} days, fewer than {lateness.MIN_SAMPLES}")
    return LEDGER, found


def _fallback(why: str) -> tuple[str, CronProfile]:
    click.echo(f"orchestrator: {why}: the '{DEFAULT_PROFILE}' profile instead", err=True)
    return DEFAULT_PROFILE, PROFILES[DEFAULT_PROFILE]


def build(root: Path, schedules: list[Schedule], start: datetime,
          track_minutes: float = 1.0,
          profile: tuple[str, CronProfile] = (DEFAULT_PROFILE, PROFILES[DEFAULT_PROFILE])
          ) -> dict[str, Any]:
    setup = repository_setup(root, schedules, start)
    name, delay = profile
    ours = simulate(schedules, setup, start, track_minutes=track_minutes, delay=delay)
    theirs = simulate_github_schedule(schedules, start, track_minutes=track_minutes,
                                      delay=delay)
    return {
        "from": iso(start),
        "profile": name,
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


def under_profile(root: Path, schedules: list[Schedule], start: datetime,
                  tick_cron: list[str], watchdog_cron: list[str],
                  profile: tuple[str, CronProfile]) -> dict[str, Any]:
    """How late ``tick_cron`` fires the slots under ``profile``, and what it costs: what
    ``cron-sync --profile`` prints for the cron it derived."""
    setup = replace(repository_setup(root, schedules, start), tick_cron=tick_cron,
                    watchdog_cron=watchdog_cron)
    found = simulate(schedules, setup, start, delay=profile[1]).to_json()
    return {"profile": profile[0], "lateness_seconds": found["lateness_seconds"],
            "missed": found["missed"], "slots": found["slots"],
            "runner_minutes": found["runner_minutes"], "external_clock": setup.clock is not None}


KEEPS = 15 * 60
"""Seconds: a p95 past this is no longer a slot kept (GitHub's own cron, assumed, is 32 min)."""


def profile_text(found: dict[str, Any]) -> str:
    """One line on ``under_profile``'s figures, and whether the cadence keeps its slots."""
    p95 = found["lateness_seconds"]["p95"]
    head = (f"under the '{found['profile']}' cron profile: slots fire p50 "
            f"{_late(found, 'median')}, p95 {_late(found, 'p95')} late, {found['missed']:,} of "
            f"{found['slots']:,} not fired, {found['runner_minutes']:,} runner-minutes a month")
    if p95 is None or p95 <= KEEPS or found["external_clock"]:
        return head
    return (head + "; GitHub's cron starts these ticks too late to keep the slots: an "
            "external clock does (docs/how-to/cadence.md)")


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
             f"{report['track_minutes']:g} min each; model: orchestrator/estimate.py, "
             f"cron lateness profile '{report['profile']}')",
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
@profile_option
@pass_config
def command(cfg: Config, as_json: bool, track_minutes: float, start: datetime | None,
            profile: str) -> int:
    """Expected runner-minutes, pushes and API requests a month for these schedules, and
    how late their slots fire, beside GitHub's own schedule: trigger. Warns past
    GitHub's limits: 2,000 free minutes for private repositories, 1,000 API requests
    an hour, about 6 pushes a minute."""
    loaded = load_all(cfg.schedules_dir)
    for error in loaded.errors:
        click.echo(f"orchestrator: {error.message} (left out)", err=True)
    moment = (start or datetime.now(UTC)).replace(second=0, microsecond=0)
    report = build(cfg.repo, loaded.schedules, moment, track_minutes,
                   resolve_profile(cfg, profile, moment))
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        click.echo("\n".join(text(report)))
    return 0
