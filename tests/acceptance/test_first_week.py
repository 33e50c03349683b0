"""A new user's first week: init, schedules, validate, a simulated week of ticks
across the end of daylight saving time in New York (Sunday 2026-11-01, 02:00 EDT ->
01:00 EST), then runs, briefs, the index, status and compaction.

Only the installed CLI and git, as subprocesses; time is simulated with ``--now``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.acceptance.cliuser import User, git

RESULT = 'printf \'{"summary": "%s %s"}\' "$ORCHESTRATOR_TRACK" "$ORCHESTRATOR_RUN_ID" ' \
         '> "$ORCHESTRATOR_RESULT"'

# 01:30 New York: EDT (UTC-4) until Sunday 2026-11-01, EST (UTC-5) from then on; on that
# Sunday 01:30 happens twice, 05:30Z (EDT) and 06:30Z (EST).
DAILY = ["20261029T0530Z", "20261030T0530Z", "20261031T0530Z", "20261101T0530Z",
         "20261102T0630Z", "20261103T0630Z", "20261104T0630Z"]
TWICE = [*DAILY[:4], "20261101T0630Z", *DAILY[4:]]


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def slot(stamp: str) -> datetime:
    return datetime.strptime(stamp, "%Y%m%dT%H%MZ").replace(tzinfo=UTC)


@pytest.mark.slow
def test_a_week_across_the_dst_change(tmp_path: Path, scaffolded: tuple[User, Path]) -> None:
    user, origin = scaffolded

    # -- schedules: keep the example quiet, add two of our own ---------------------------
    user.run("schedules", "disable", "nightly")
    user.run("schedules", "add", "daily", "--every", "day", "--time", "01:30",
             "--timezone", "America/New_York", "--description", "Daily digest",
             "--track", f"fetch={RESULT}", "--track", f"build={RESULT}",
             "--catchup-window-minutes", "180")
    user.run("schedules", "add", "twice", "--cron", "30 1 * * *",
             "--timezone", "America/New_York", "--dst-fold", "both", "--track", "t=true")
    listing = user.run("schedules", "list", "--from", "2026-10-28T00:00:00Z").stdout
    assert "nightly  disabled" in listing
    assert "daily    enabled" in listing
    shown = user.run("schedules", "show", "daily").stdout
    assert "fold first" in shown and "fetch:" in shown

    # the preview shows the fold: once for `daily`, twice for `twice`
    nxt = user.run("schedules", "next", "daily", "--from", "2026-10-31T00:00:00Z", "-n", "3")
    assert [line.split()[0] for line in nxt.stdout.splitlines()] == [
        "2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
    nxt = user.run("schedules", "next", "twice", "--from", "2026-10-31T12:00:00Z", "-n", "2")
    assert [line.split()[0] for line in nxt.stdout.splitlines()] == [
        "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"]
    # new schedules need ticks before their slots: cron-sync writes them to tick.yml
    user.run("validate", "--from", "2026-10-31T00:00:00Z", expect=1)
    user.run("cron-sync", "--from", "2026-10-31T00:00:00Z")
    preview = user.run("validate", "--preview", "3", "--from", "2026-10-31T00:00:00Z")
    assert preview.stdout.rstrip().endswith("3 schedules valid, 0 invalid")
    git("add", "schedules", ".github", cwd=user.cwd)
    git("commit", "--quiet", "-m", "Add daily and twice", cwd=user.cwd)
    git("push", "--quiet", "origin", "HEAD:main", cwd=user.cwd)

    # -- the week --------------------------------------------------------------------------
    first = user.tick("2026-10-28T12:00:00Z")  # first sight: nothing is due yet
    assert first["dispatched"] == [] and first["committed"]
    for stamp in sorted(set(DAILY) | set(TWICE)):
        due = slot(stamp)
        fired = user.tick(iso(due + timedelta(minutes=1)))
        expected = [f"twice--{stamp}--t--1"]
        if stamp in DAILY:
            expected += [f"daily--{stamp}--build--1", f"daily--{stamp}--fetch--1"]
        assert sorted(fired["dispatched"]) == sorted(expected), (stamp, fired["log"])
        done = user.tick(iso(due + timedelta(minutes=2)))
        assert sorted(done["rendered"]) == sorted({k.rsplit("--", 2)[0] for k in expected})

    runs = user.json("runs", "list", "--json")
    assert sorted(r["run_id"] for r in runs if r["schedule"] == "daily") == [
        f"daily--{s}" for s in DAILY]
    assert sorted(r["run_id"] for r in runs if r["schedule"] == "twice") == [
        f"twice--{s}" for s in TWICE]
    assert {r["status"] for r in runs} == {"completed"}
    launches = [json.loads(line)["key"] for line in
                (user.cwd / ".orchestrator" / "work" / "launches.log").read_text().splitlines()]
    assert len(launches) == len(set(launches)) == 2 * len(DAILY) + len(TWICE)

    twice = user.json("schedules", "runs", "twice", "--json")
    assert [r["run_id"] for r in twice] == [f"twice--{s}" for s in reversed(TWICE)]

    shown = user.run("runs", "show", "daily--20261101T0530Z").stdout
    assert shown.startswith("daily--20261101T0530Z  completed")
    assert "track fetch: complete (attempt 1/1)  fetch daily--20261101T0530Z" in shown

    # -- the brief and the index -----------------------------------------------------------
    brief = tmp_path / "brief.html"
    user.run("render", "daily--20261101T0530Z", "-o", str(brief))
    html = brief.read_text()
    assert "daily--20261101T0530Z" in html and "build daily--20261101T0530Z" in html
    assert "Daily digest" in html
    committed = user.state_file("state/runs/daily--20261101T0530Z/brief.html")
    assert "fetch daily--20261101T0530Z" in committed
    markdown = user.run("render", "twice--20261101T0630Z", "--format", "markdown").stdout
    assert "twice--20261101T0630Z" in markdown
    index = user.state_file("state/index.html")
    for run_id in ("daily--20261029T0530Z", "twice--20261101T0530Z", "twice--20261101T0630Z",
                   "daily--20261104T0630Z"):
        assert run_id in index

    # -- status: fresh right after the last tick, stale a day later -------------------------
    last = slot(DAILY[-1]) + timedelta(minutes=2)
    status = user.json("status", "--json", "--now", iso(last + timedelta(minutes=10)))
    assert status["stale"] is False and status["last_tick"] == iso(last)
    assert status["open_runs"] == [] and status["dead_letters"] == 0
    assert {s["id"]: s["next"] for s in status["schedules"]} == {
        "daily": "2026-11-05T06:30:00Z", "nightly": None, "twice": "2026-11-05T06:30:00Z"}
    stale = user.run("status", "--now", iso(last + timedelta(days=1)), expect=5)
    # the limit follows tick.yml's cadence: its longest gap is the 6-hour safety tick
    assert "STALE" in stale.stdout and "more than 735 minutes" in stale.stderr

    # -- compaction: runs finished before 2 November are archived under a tag --------------
    out = user.run("compact", "--keep-days", "3", "--now", "2026-11-05T00:00:00Z").stdout
    assert out.startswith("archived 9 run(s)")
    left = sorted(r["run_id"] for r in user.json("runs", "list", "--json"))
    assert left == sorted([f"daily--{s}" for s in DAILY[4:]]
                          + [f"twice--{s}" for s in TWICE[5:]])
    tags = git("ls-remote", "--tags", str(origin), cwd=user.cwd)
    assert "refs/tags/orchestrator-archive/20261105T000000Z" in tags

    # -- the example goes back on; the next tick would fire it --------------------------
    user.run("schedules", "enable", "nightly")
    assert "enabled:   yes" in user.run("schedules", "show", "nightly").stdout
