"""The operator's verbs as a person on call types them: run a schedule now, rerun what
failed, backfill missed days, stop a run that is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acceptance.cliuser import User, wait

RUN = "deploy--20261201T1400Z-manual-1"


def write_schedule(user: User, sid: str, spec: dict[str, object]) -> None:
    path = user.cwd / "schedules" / f"{sid}.json"
    path.write_text(json.dumps({"$schema": "./schedule.schema.json", **spec}, indent=2) + "\n")


@pytest.mark.slow
def test_trigger_retry_backfill_and_cancel(tmp_path: Path,
                                           scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    fixed = tmp_path / "fixed"
    write_schedule(user, "deploy", {"cron": "0 9 * * *", "tracks": [
        {"name": "build", "run": "true"},
        {"name": "migrate", "run": f"test -f '{fixed}'"},
        {"name": "notify", "run": "true", "needs": ["migrate"]}]})
    write_schedule(user, "slow", {"cron": "0 3 * * *", "tracks": [
        {"name": "crunch", "run": "sleep 120"}]})

    # -- trigger: a manual run now; the same request again starts nothing ----------------
    out = user.run("trigger", "deploy", "--reason", "hotfix 1.2.1", "--now",
                   "2026-12-01T14:00:00Z").stdout
    assert out.splitlines()[-1].startswith(f"{RUN}: started by request deploy-")
    again = user.run("trigger", "deploy", "--reason", "hotfix 1.2.1", "--now",
                     "2026-12-01T14:00:40Z").stdout
    assert f"{RUN}: already started by request" in again
    user.tick("2026-12-01T14:01:00Z")
    user.tick("2026-12-01T14:02:00Z")
    shown = user.run("runs", "show", RUN).stdout
    assert f"{RUN}  failed" in shown and "manual run by " in shown and "hotfix 1.2.1" in shown

    # -- retry: only the failed track and the one that needs it ---------------------------
    fixed.touch()
    out = user.run("runs", "retry", RUN, "--failed", "--reason", "table fixed", "--now",
                   "2026-12-01T14:03:00Z").stdout
    assert out.splitlines()[-1].startswith(f"{RUN}: retrying migrate, notify by ")
    user.tick("2026-12-01T14:04:00Z")
    user.tick("2026-12-01T14:05:00Z")
    assert f"{RUN}  completed" in user.run("runs", "show", RUN).stdout

    # -- backfill: two missed mornings, one at a time ------------------------------------
    listed = user.run("backfill", "deploy", "--from", "2026-11-29T00:00:00Z", "--to",
                      "2026-11-30T23:00:00Z", "--dry-run").stdout
    assert listed.splitlines() == ["2026-11-29T09:00Z  deploy--20261129T0900Z",
                                   "2026-11-30T09:00Z  deploy--20261130T0900Z",
                                   "2 slot(s) to fire, 0 already ran"]
    out = user.run("backfill", "deploy", "--from", "2026-11-29T00:00:00Z", "--to",
                   "2026-11-30T23:00:00Z", "--reason", "outage", "--now",
                   "2026-12-01T14:06:00Z").stdout
    assert "deploy: backfill of 2 slot(s) (0 already had a run)" in out
    for minute in range(7, 12):
        user.tick(f"2026-12-01T14:{minute:02d}:00Z")
    rows = user.run("runs", "list", "--schedule", "deploy").stdout
    assert "deploy--20261129T0900Z" in rows and "(backfill)" in rows
    assert "deploy--20261130T0900Z" in rows
    shown = user.run("schedules", "show", "deploy").stdout
    assert "manual  completed" in shown and "backfill  completed" in shown

    # -- cancel: a run that is wrong, stopped -------------------------------------------
    user.run("trigger", "slow", "--now", "2026-12-01T14:12:00Z")
    out = user.run("runs", "cancel", "slow--20261201T1412Z-manual-1", "--reason",
                   "wrong input", "--now", "2026-12-01T14:13:00Z").stdout
    assert "slow--20261201T1412Z-manual-1: cancelled by " in out and "wrong input" in out
    # a cancelled run is finished, neither open nor a failure (it used to end failed)
    status = user.run("status", "--now", "2026-12-01T14:14:00Z").stdout
    assert "slow--20261201T1412Z-manual-1" not in status
    assert "nothing needs attention" in status
    assert "slow--20261201T1412Z-manual-1  cancelled" in user.run(
        "runs", "show", "slow--20261201T1412Z-manual-1").stdout


SLOW = "slow--20261201T1412Z-manual-1"


def test_a_cancelled_run_ends_cancelled_and_asks_for_no_attention(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    write_schedule(user, "slow", {"cron": "0 3 * * *", "tracks": [
        {"name": "prepare", "run": "true"}, {"name": "crunch", "run": "sleep 300"}]})
    user.run("trigger", "slow", "--reason", "monthly figures", "--now", "2026-12-01T14:12:00Z")
    first = user.json("tick", "--now", "2026-12-01T14:12:30Z", "--json")
    work = user.cwd / ".orchestrator" / "work"
    crunch = f"{SLOW}--crunch--1"
    assert crunch in first["dispatched"] or crunch in json.dumps(
        user.json("runs", "show", SLOW, "--json"))
    wait(lambda: "pgid" in (work / crunch / "status.json").read_text()
         if (work / crunch / "status.json").exists() else False, "crunch did not start")
    user.tick("2026-12-01T14:13:00Z")  # prepare's outcome recorded; crunch still runs
    assert user.json("runs", "show", SLOW, "--json")["run"]["status"] == "running"

    out = user.run("runs", "cancel", SLOW, "--reason", "wrong month", "--by", "carol",
                   "--now", "2026-12-01T14:14:00Z").stdout
    assert f"{SLOW}: cancelled by carol: wrong month" in out
    wait(lambda: _stopped(work / crunch), "crunch was not stopped", timeout=30)
    user.tick("2026-12-01T14:15:00Z")

    shown = user.json("runs", "show", SLOW, "--json")
    assert shown["run"]["status"] == "cancelled"
    assert shown["run"]["cancelled"]["by"] == "carol"
    assert {n: t["phase"] for n, t in shown["tracks"].items()} == {
        "prepare": "complete", "crunch": "cancelled"}
    text = user.run("runs", "show", SLOW).stdout
    assert text.startswith(f"{SLOW}  cancelled\n")
    assert "cancelled by carol: wrong month at 2026-12-01 14:14 UTC" in text
    listed = user.json("runs", "list", "--status", "cancelled", "--json")
    assert [r["run_id"] for r in listed] == [SLOW]
    assert user.json("runs", "list", "--status", "failed", "--json") == []
    status = user.run("status", "--now", "2026-12-01T14:16:00Z", "--fail-on-dead-letters")
    assert "nothing needs attention" in status.stdout
    report = user.json("status", "--now", "2026-12-01T14:16:00Z", "--json")
    assert report["attention"] == [] and report["open_runs"] == []
    brief = user.state_file(f"state/runs/{SLOW}/brief.html")
    assert '<span class="status s-cancelled">cancelled</span>' in brief
    assert "Run cancelled" in brief and "by carol: wrong month" in brief


def _stopped(folder: Path) -> bool:
    try:
        state = json.loads((folder / "status.json").read_text()).get("state")
    except (FileNotFoundError, ValueError):
        return False
    return state not in ("queued", "running")
