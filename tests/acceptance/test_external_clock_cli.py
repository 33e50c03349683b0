"""An external clock as a user sets one up: ``"mode": "external"``, ``cron-sync
--external`` (its UTC calls checked against the cron evaluator in New York, London and
UTC across both daylight-saving changes), ``validate`` on the clock's file, and ``serve
--executor github --clock-only`` dispatching tick.yml at a slot through the fake GitHub."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.cadence.tickfile import read_crons
from orchestrator.config.files import load_all
from orchestrator.config.triggers import for_spec
from tests.acceptance.cliuser import User, git, reaped, terminate, wait
from tests.fakes.github import FakeGitHub

FROM = "2026-01-01T00:00:00Z"
START = datetime(2026, 1, 1, tzinfo=UTC)


def external(user: User) -> None:
    (user.cwd / "orchestrator.json").write_text(json.dumps({"cadence": {"mode": "external"}}))


def test_cron_sync_external_prints_the_evaluators_calls_across_both_changes(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    for args in (("ny", "--every", "day", "--time", "07:00", "--timezone", "America/New_York"),
                 ("ny-night", "--every", "day", "--time", "02:30", "--timezone",
                  "America/New_York"),
                 ("london", "--cron", "30 1 * * 1-5", "--timezone", "Europe/London"),
                 ("utc", "--weekly", "--on-day", "1", "--time", "09:00")):
        user.run("schedules", "add", args[0], *args[1:], "--track", "t=true")
    refused = user.run("cron-sync", "--external", expect=1)
    assert "cadence.mode is 'derived'; set \"mode\": \"external\" first" in refused.stderr
    external(user)

    report = user.json("cron-sync", "--external", "--json", "--from", FROM)
    outside = report["external"]
    schedules = load_all(user.cwd / "schedules").schedules
    until = datetime.fromisoformat(outside["until"].replace("Z", "+00:00"))
    slots = sorted({slot for s in schedules for slot in for_spec(s.spec).slots(START, until)})
    assert outside["calls"] == [f"{s:%Y-%m-%dT%H:%M:%SZ}" for s in slots]
    calls = set(outside["calls"])
    # New York 07:00 either side of 8 March and 1 November; 02:30 skipped on 8 March
    # runs at 03:00 EDT; London 01:30 either side of 29 March and 25 October
    assert {"2026-03-07T12:00:00Z", "2026-03-08T11:00:00Z", "2026-10-31T11:00:00Z",
            "2026-11-01T12:00:00Z", "2026-03-08T07:00:00Z", "2026-03-27T01:30:00Z",
            "2026-03-30T00:30:00Z", "2026-10-23T00:30:00Z", "2026-10-26T01:30:00Z",
            "2026-01-05T09:00:00Z"} <= calls
    assert not {"2026-03-08T12:00:00Z", "2026-03-30T01:30:00Z"} & calls
    assert report["mode"] == "external" and report["tick_cron"]
    workflow = outside["requests"]["workflow_dispatch"]
    assert workflow["url"].endswith("/actions/workflows/tick.yml/dispatches")
    assert workflow["permission"] == "Actions: write"
    assert outside["requests"]["repository_dispatch"]["permission"] == "Contents: write"

    text = user.run("cron-sync", "--external", "--from", FROM).stdout
    assert ("0 7 * * * (America/New_York; daylight saving: gap shift, fold first): ny; "
            "366 call(s)") in text
    assert ("across the change at 2026-03-08T07:00:00Z: 2026-03-07T12:00:00Z then "
            "2026-03-08T11:00:00Z") in text
    assert ("across the change at 2026-10-25T01:00:00Z: 2026-10-23T00:30:00Z then "
            "2026-10-26T01:30:00Z") in text
    assert '-H "Authorization: Bearer $ORCHESTRATOR_CLOCK_TOKEN"' in text
    assert "repository permission Actions: Read and write" in text
    clock_file = user.cwd / ".github" / "orchestrator-clock.json"
    assert sorted(e["schedules"] for e in json.loads(clock_file.read_text())["entries"]) == [
        ["london"], ["ny"], ["ny-night"], ["utc"]]
    tick = (user.cwd / ".github" / "workflows" / "tick.yml").read_text()
    assert "External clock" in tick and "repository_dispatch:" in tick
    assert all(line.split()[0] != "*" for line in read_crons(tick))

    user.run("validate")
    user.run("cron-sync")  # the year from now (the lines above were from --from's)
    user.run("cron-sync", "--check")
    user.run("schedules", "add", "lunch", "--every", "day", "--time", "12:30", "--timezone",
             "Europe/London", "--track", "t=true")
    failed = user.run("validate", expect=1)
    assert (".github/orchestrator-clock.json: no call at 366 slot(s) of 'lunch'"
            in failed.stderr), failed.stderr
    user.run("cron-sync", "--check", expect=1)
    assert "wrote .github/orchestrator-clock.json" in user.run("cron-sync").stdout
    ok = user.run("validate", "--format", "markdown")
    assert "✅ the external clock calls at every slot of the next year" in ok.stdout
    assert "with an external clock calling at each slot (a tick 20 to 60 s later" in ok.stdout
    assert "### Estimate: a month on GitHub Actions" in ok.stdout
    assert "?? .github/orchestrator-clock.json" in git("status", "--porcelain", cwd=user.cwd)


@pytest.mark.slow
@pytest.mark.parametrize("via", ["workflow_dispatch", "repository_dispatch"])
def test_serve_clock_only_dispatches_tick_yml_at_the_slot_and_ticks_nothing(
        scaffolded: tuple[User, Path], fake_github: FakeGitHub,
        monkeypatch: pytest.MonkeyPatch, via: str) -> None:
    user, origin = scaffolded
    user.run("schedules", "remove", "nightly")
    later = datetime.now(UTC) + timedelta(days=1)  # for now: the slot is set once serve runs
    user.run("schedules", "add", "once", "--at", f"{later:%Y-%m-%dT%H:%M:%SZ}", "--track",
             "t=true")
    for name, value in fake_github.env().items():
        if name != "GITHUB_TOKEN":  # the clock has a token of its own
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("ORCHESTRATOR_CLOCK_TOKEN", fake_github.token)

    proc = user.start("serve", "--executor", "github", "--clock-only", "--clock-via", via,
                      "--interval", "1")
    with reaped(proc):
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert f"clock for tick.yml via {via}" in first and "clock, heartbeat" in first
        # The clock calls for moments after serve started (and for a slot of the last
        # hour the state branch shows unfired: none here), and reads the schedules
        # at every look: the slot moves to a few seconds from now, once serve runs, so
        # however slow its start the slot comes after it. The file is replaced whole.
        slot = (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0)
        path, new = user.cwd / "schedules" / "once.json", user.cwd.parent / "once.json"
        spec = json.loads(path.read_text())
        spec["at"] = f"{slot:%Y-%m-%dT%H:%M:%SZ}"
        new.write_text(json.dumps(spec))
        os.replace(new, path)
        wait(lambda: bool(fake_github.runs_of("tick.yml")), "no dispatch", timeout=60)
        called = datetime.now(UTC)
        time.sleep(2.5)  # the wake-ups after it call nothing more
        err = terminate(proc)
    assert proc.returncode == 0, err
    [run] = fake_github.runs_of("tick.yml")
    assert run.event == via and run.ref == "main"
    assert timedelta(0) <= called - slot < timedelta(seconds=5), (called, slot)
    assert f"clock: dispatched tick.yml ({via}) for once: one-shot at" in err
    assert "SIGTERM: stopping" in err
    # it ticks nothing itself: no state branch on the origin, no work folder
    assert git("ls-remote", str(origin), "orchestrator-state", cwd=user.cwd) == ""
    assert not (user.cwd / ".orchestrator" / "work").exists()
    refused = user.run("serve", "--clock-only", expect=2)
    assert "--clock-only starts tick.yml on GitHub: it needs --executor github" in (
        refused.stderr)
