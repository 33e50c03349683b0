"""How late slots fire, by ``--linger``, under a model of GitHub's cron delays.

Four weeks of four schedules (every 5 minutes, hourly at minute 0, daily 07:00 in
America/New_York, weekly Monday 09:00 UTC), each alone in its repository with the
tick cron ``orchestrator cron-sync`` derives for it (default leads 15, 10 and 5
minutes, a safety tick every 6 hours). Ticks run on a virtual clock (nothing waits):
GitHub starts each scheduled tick late or drops it (``CronDelay``: log-normal delay,
median 4 minutes, 95th percentile 32, 3 % dropped, twice as late and twice as often
dropped at minute 0), and the tick lingers as ``tick --linger`` does. The model is
``orchestrator/estimate.py``, the one ``orchestrator estimate`` runs.

For each linger (0, 5, 10, 15 and 20 minutes; 20 is tick.yml's), with lead ticks
and lingering before every slot (``orchestrator.json``: ``linger_min_interval_hours:
0``), it prints slot-to-dispatch lateness (median, 95th percentile, maximum), slots
missed, and runner-minutes a day spent by tick jobs, pooled over ``--seeds``
independent four-week runs; then the default cadence (lead ticks and lingering only
for slots 12 hours or more after the schedule's previous one, else a tick just after
the slot), an external clock (``"mode": "external"``: a call at each slot's second,
the tick 20 to 60 s later, 1 % of calls lost), GitHub's own ``schedule:`` (a workflow
per schedule) and the old fixed quarter-hour tick (minutes 7, 22, 37, 52, no linger)
for comparison.

    python bench/lateness.py [--seeds 10] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.cadence.derive import derive
from orchestrator.cadence.estimate import (
    ClockModel,
    Figures,
    Setup,
    simulate,
    simulate_github_schedule,
)
from orchestrator.cadence.profiles import PROFILES
from orchestrator.config.models import Schedule, ScheduleSpec
from orchestrator.config.repository import RepoConfig

START = datetime(2026, 10, 5, tzinfo=UTC)  # four weeks across New York's fall-back
DAYS = 28
LINGERS = (0, 5, 10, 15, 20)
MAX_LINGER = 45
FIXED = ["7,22,37,52 * * * *"]
EVERY_SLOT = RepoConfig.model_validate({"cadence": {"linger_min_interval_hours": 0}})
EXTERNAL = RepoConfig.model_validate({"cadence": {"mode": "external"}})


def schedule(sid: str, expr: str, zone: str = "UTC", tracks: int = 1) -> Schedule:
    data: dict[str, Any] = {"cron": expr, "timezone": zone,
                            "tracks": [{"name": f"t{i}", "run": "true"} for i in range(tracks)]}
    return Schedule(id=sid, spec=ScheduleSpec.model_validate_json(json.dumps(data)))


SCHEDULES = [
    ("every 5 minutes", schedule("five", "*/5 * * * *")),
    ("hourly (minute 0)", schedule("hourly", "0 * * * *")),
    ("daily 07:00 New York", schedule("daily", "0 7 * * *", "America/New_York")),
    ("weekly Monday 09:00", schedule("weekly", "0 9 * * 1")),
]


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


def row(label: str, linger: str, f: Figures) -> list[str]:
    per_day = f.runner_minutes.get("ticks", 0) / 30
    return [label, linger, late(f.lateness(0.5)), late(f.lateness(0.95)),
            late(max(f.lateness_seconds, default=None)),
            f"{f.missed} of {f.slots}", f"{per_day:.0f}"]


def measured_rows(label: str, sched: Schedule, seeds: range) -> list[list[str]]:
    """The default cadence, the external clock and GitHub's own schedule under the
    profile fitted to 2026's public measurements (hours late)."""
    delay = PROFILES["measured-2026"]
    ways = {
        "default cadence": Setup(derive([sched], RepoConfig(), START).tick_cron,
                                 LINGERS[-1], MAX_LINGER),
        "external clock": Setup(derive([sched], EXTERNAL, START).tick_cron, LINGERS[-1],
                                MAX_LINGER, cadence=EXTERNAL.cadence, clock=ClockModel()),
    }
    rows = [row(label, f"{how}, measured-2026", pooled([
        simulate([sched], setup, START, days=DAYS, seed=s, delay=delay) for s in seeds]))
        for how, setup in ways.items()]
    github = [simulate_github_schedule([sched], START, days=DAYS, seed=s, delay=delay)
              for s in seeds]
    return [*rows, row(label, "GitHub schedule:, measured-2026", pooled(github))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    seeds = range(args.seeds)
    head = ["schedule", "linger", "median", "p95", "max", "missed", "tick min/day"]
    rows: list[list[str]] = []
    for label, sched in SCHEDULES:
        lines = derive([sched], EVERY_SLOT, START).tick_cron
        for linger in LINGERS:
            setup = Setup(lines, linger, MAX_LINGER, cadence=EVERY_SLOT.cadence)
            runs = [simulate([sched], setup, START, days=DAYS, seed=s) for s in seeds]
            rows.append(row(label, f"{linger} min", pooled(runs)))
        default = Setup(derive([sched], RepoConfig(), START).tick_cron, LINGERS[-1],
                        MAX_LINGER)
        runs = [simulate([sched], default, START, days=DAYS, seed=s) for s in seeds]
        rows.append(row(label, "default cadence", pooled(runs)))
        outside = Setup(derive([sched], EXTERNAL, START).tick_cron, LINGERS[-1], MAX_LINGER,
                        cadence=EXTERNAL.cadence, clock=ClockModel())
        runs = [simulate([sched], outside, START, days=DAYS, seed=s) for s in seeds]
        rows.append(row(label, "external clock", pooled(runs)))
        fixed = [simulate([sched], Setup(FIXED, 0, 0), START, days=DAYS, seed=s)
                 for s in seeds]
        rows.append(row(label, "fixed :07/15", pooled(fixed)))
        github = [simulate_github_schedule([sched], START, days=DAYS, seed=s) for s in seeds]
        rows.append(row(label, "GitHub schedule:", pooled(github)))
    rows += [r for label, sched in SCHEDULES for r in measured_rows(label, sched, seeds)]
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
