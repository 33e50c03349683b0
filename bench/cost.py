"""A month of GitHub Actions billing: the orchestrator against GitHub's own schedule.

For three cases (one daily schedule of 4 tracks; ten schedules, five hourly and five
daily; one schedule every 5 minutes), a month of runner-minutes (tick jobs with
their lingering, fan-in jobs, track legs, the watchdog), pushes and API requests,
and slot-to-dispatch lateness, for:

- the orchestrator with the cadence ``cron-sync`` derives and tick.yml's
  ``--linger 20 --max-linger 45`` (and the watchdog cron-sync derives);
- the same without lingering (``--linger 0``);
- the cheapest derived cadence (``orchestrator.json``: ``lead_minutes: [1]``,
  ``safety_every_hours: 24``) with tick.yml's linger;
- the orchestrator as it was: a tick at minutes 7, 22, 37, 52 and a watchdog twice an
  hour;
- the same tracks on GitHub's own ``schedule:`` (one workflow per schedule, a job
  per track): what a user would pick instead.

Tracks take 1 minute (a job, setup included). The model and its parameters (GitHub's
cron delays and drops, setup and tick durations) are ``orchestrator/estimate.py``,
which ``orchestrator estimate`` runs too, with the same seed, on a virtual clock.
Lateness is pooled over ``--seeds`` four-week runs; costs are their mean, per 30 days.

    python bench/cost.py [--seeds 10] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.cadence import derive
from orchestrator.estimate import (
    Figures,
    Setup,
    simulate,
    simulate_github_schedule,
)
from orchestrator.models import Schedule, ScheduleSpec
from orchestrator.repo_config import RepoConfig

START = datetime(2026, 10, 5, tzinfo=UTC)
DAYS = 28
TICK_LINGER = (20.0, 45.0)
"""tick.yml's --linger and --max-linger."""
OLD = Setup(["7,22,37,52 * * * *"], 0, 0, ["29,59 * * * *"])


def schedule(sid: str, expr: str, zone: str = "UTC", tracks: int = 1) -> Schedule:
    data: dict[str, Any] = {"cron": expr, "timezone": zone,
                            "tracks": [{"name": f"t{i}", "run": "true"} for i in range(tracks)]}
    return Schedule(id=sid, spec=ScheduleSpec.model_validate_json(json.dumps(data)))


CASES: dict[str, list[Schedule]] = {
    "one daily schedule, 4 tracks": [schedule("daily", "0 7 * * *", "America/New_York", 4)],
    "ten schedules, 5 hourly + 5 daily": (
        [schedule(f"hourly{i}", f"{7 + 11 * i} * * * *", tracks=2) for i in range(5)]
        + [schedule(f"daily{i}", f"30 {6 + 2 * i} * * *", "Europe/London", 4)
           for i in range(5)]),
    "every 5 minutes, 1 track": [schedule("five", "*/5 * * * *")],
}


CHEAP = RepoConfig.model_validate({"cadence": {"lead_minutes": [1], "safety_every_hours": 24}})
"""orchestrator.json for the cheapest derived cadence: one tick 1 to 5 minutes before
each slot, a safety tick a day."""


def derived_setup(schedules: list[Schedule], linger: tuple[float, float],
                  config: RepoConfig | None = None) -> Setup:
    """What cron-sync writes for these schedules, with tick.yml's linger."""
    derived = derive(schedules, config or RepoConfig(), START)
    return Setup(derived.tick_cron, linger[0], linger[1], [derived.watchdog_cron])


def orchestrator_month(schedules: list[Schedule], setup: Setup, start: datetime,
                       seed: int = 0, days: int = DAYS) -> Figures:
    """The figures ``orchestrator estimate`` prints for the same inputs."""
    return simulate(schedules, setup, start, days=days, seed=seed)


def pooled(runs: list[Figures]) -> Figures:
    total = Figures()
    for f in runs:
        total.lateness_seconds += f.lateness_seconds
        total.slots += f.slots
        total.missed += f.missed
        total.pushes += f.pushes / len(runs)
        total.api_requests += f.api_requests / len(runs)
        for k, v in f.runner_minutes.items():
            total.runner_minutes[k] = total.runner_minutes.get(k, 0) + v / len(runs)
    return total


def late(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    head = ["case", "how", "runner-min/month", "x GitHub", "ticks", "watchdog", "pushes",
            "API requests", "p50 late", "p95 late", "missed"]
    rows: list[list[str]] = []
    for case, schedules in CASES.items():
        ways = {
            "derived (default), linger 20": derived_setup(schedules, TICK_LINGER),
            "derived, no linger": derived_setup(schedules, (0.0, 0.0)),
            "derived cheap, linger 20": derived_setup(schedules, TICK_LINGER, CHEAP),
            "before: fixed :07/15": OLD,
        }
        github = pooled([simulate_github_schedule(schedules, START, days=DAYS, seed=s)
                         for s in range(args.seeds)])
        base = github.total_minutes
        results = {how: pooled([orchestrator_month(schedules, setup, START, s)
                                for s in range(args.seeds)]) for how, setup in ways.items()}
        results["GitHub schedule:"] = github
        for how, f in results.items():
            rows.append([case, how, f"{f.total_minutes:,.0f}", f"{f.total_minutes / base:.1f}",
                         f"{f.runner_minutes.get('ticks', 0):,.0f}",
                         f"{f.runner_minutes.get('watchdog', 0):,.0f}", f"{f.pushes:,.0f}",
                         f"{f.api_requests:,.0f}", late(f.lateness(0.5)),
                         late(f.lateness(0.95)), f"{f.missed} of {f.slots}"])
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|")
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))))


if __name__ == "__main__":
    main()
