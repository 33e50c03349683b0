"""The tick's cadence as a user meets it: init derives tick.yml from the example,
validate fails once a new schedule's slots have no tick before them, cron-sync fixes
it, and estimate prints what bench/cost.py computes for the same inputs."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from orchestrator.cadence.estimate import Setup, simulate_github_schedule
from orchestrator.cadence.tickfile import read_crons, read_linger
from orchestrator.config.files import load_all
from orchestrator.config.repository import Cadence
from tests.acceptance.cliuser import git, new_repository
from tests.builders import bench_module

FROM = "2026-12-01T00:00:00Z"


def test_validate_fails_on_a_stale_tick_yml_until_cron_sync(tmp_path: Path) -> None:
    user, _ = new_repository(tmp_path)
    tick = user.cwd / ".github" / "workflows" / "tick.yml"
    # init derived the tick's cron from the example (02:15 New York on weekdays)
    assert "4,9 6 * 3-11 1-5" in read_crons(tick.read_text())
    user.run("validate")
    user.run("cron-sync", "--check")

    user.run("schedules", "add", "lunch", "--every", "day", "--time", "12:30",
             "--timezone", "Europe/London", "--track", "t=true")
    failed = user.run("validate", "--format", "markdown", expect=1)
    assert "no tick in the 20 minutes before" in failed.stderr
    assert "'lunch'" in failed.stderr and "run `orchestrator cron-sync`" in failed.stderr
    assert "> ❌" in failed.stdout  # the pull request's summary says it too
    user.run("cron-sync", "--check", expect=1)

    synced = user.run("cron-sync")
    assert "wrote .github/workflows/tick.yml" in synced.stdout
    crons = read_crons(tick.read_text())
    # 12:30 in London: 11:30 UTC in summer time (late March to late October), else 12:30
    assert "14,19,24 11 * 3-10 *" in crons and "14,19,24 12 * 1-3,10-12 *" in crons
    ok = user.run("validate", "--format", "markdown")
    assert "✅ tick.yml has the ticks every slot of the next year needs." in ok.stdout
    assert "### Estimate: a month on GitHub Actions" in ok.stdout
    assert "M .github/workflows/tick.yml" in git("status", "--porcelain", cwd=user.cwd)
    user.run("cron-sync", "--check")


def test_estimate_prints_what_the_bench_model_computes(tmp_path: Path) -> None:
    user, _ = new_repository(tmp_path)
    report = user.json("estimate", "--json", "--from", FROM)
    text = user.run("estimate", "--from", FROM).stdout
    assert "runner-minutes a month" in text and "GitHub schedule:" in text

    cost = bench_module("cost")
    workflows = user.cwd / ".github" / "workflows"
    tick = (workflows / "tick.yml").read_text()
    setup = Setup(read_crons(tick), *read_linger(tick),
                  read_crons((workflows / "watchdog.yml").read_text()))
    assert setup.linger_minutes == 20 and setup.max_linger_minutes == 45
    schedules = load_all(user.cwd / "schedules").schedules
    start = datetime.fromisoformat(FROM.replace("Z", "+00:00"))
    assert report["orchestrator"] == cost.orchestrator_month(schedules, setup, start).to_json()
    assert report["github_schedule"] == simulate_github_schedule(schedules, start).to_json()
    ours = report["orchestrator"]
    assert ours["slots"] == 20 and ours["missed"] == 0  # four weeks of weekdays
    assert ours["runner_minutes_by_job"]["tracks"] == round(20 * 4 * 30 / 28)
    assert json.dumps(report)  # plain JSON all the way down


def test_estimate_follows_orchestrator_json_on_which_slots_a_tick_waits_for(
        tmp_path: Path) -> None:
    user, _ = new_repository(tmp_path)
    waited = user.json("estimate", "--json", "--from", FROM)["orchestrator"]
    # the example's weekday slot is at least 24 hours after the one before: by default a
    # tick waits for it; with a 100-hour threshold none does (tick.yml unchanged)
    (user.cwd / "orchestrator.json").write_text(json.dumps(
        {"cadence": {"linger_min_interval_hours": 100}}))
    report = user.json("estimate", "--json", "--from", FROM)
    workflows = user.cwd / ".github" / "workflows"
    tick = (workflows / "tick.yml").read_text()
    setup = Setup(read_crons(tick), *read_linger(tick),
                  read_crons((workflows / "watchdog.yml").read_text()),
                  Cadence(linger_min_interval_hours=100))
    schedules = load_all(user.cwd / "schedules").schedules
    start = datetime.fromisoformat(FROM.replace("Z", "+00:00"))
    ours = report["orchestrator"]
    assert ours == bench_module("cost").orchestrator_month(schedules, setup, start).to_json()
    assert ours["runner_minutes_by_job"]["ticks"] < waited["runner_minutes_by_job"]["ticks"]
    assert ours["lateness_seconds"]["median"] > 60 > waited["lateness_seconds"]["median"]


def test_lateness_says_no_sample_before_any_scheduled_tick(tmp_path: Path) -> None:
    user, _ = new_repository(tmp_path)
    text = user.run("lateness").stdout
    assert "cron lateness (7 days): p50 -, p95 -, max -, 0 sample(s), 0 dropped" in text
    report = user.json("lateness", "--json", "--days", "30")
    assert report["days"] == 30 and report["samples"] == 0
    assert "4,9 6 * 3-11 1-5" in report["by_cron"]  # tick.yml's lines, each listed


def test_a_pull_request_that_moves_a_schedule_is_previewed_as_a_change(tmp_path: Path) -> None:
    user, _ = new_repository(tmp_path)
    user.run("schedules", "add", "lunch", "--every", "day", "--time", "12:30",
             "--timezone", "Europe/London", "--track", "t=true")
    user.run("cron-sync")
    git("add", ".", cwd=user.cwd)
    git("commit", "--quiet", "-m", "lunch", cwd=user.cwd)
    user.run("schedules", "remove", "lunch")
    user.run("schedules", "add", "lunch", "--every", "weekday", "--time", "13:00",
             "--timezone", "Europe/London", "--track", "t=true")
    user.run("cron-sync")
    git("add", ".", cwd=user.cwd)
    git("commit", "--quiet", "-m", "lunch later, on weekdays", cwd=user.cwd)
    out = user.run("validate", "--format", "markdown", "--base", "HEAD^1", "--from",
                   FROM).stdout
    changed = out[out.index("## What this pull request changes"):]
    assert "1 schedule differs." in changed and "### `lunch`" in changed
    assert "`nightly`" not in changed  # unchanged
    # December 2026 from Tuesday the 1st: 22 weekdays move, 8 weekend days go
    assert "**22 moved**" in changed and "**8 removed**" in changed
    assert "Cost: -16 runner-minutes a month" in changed
