"""A schedule that keeps failing: its dead letter fails the watchdog's check (exit 6),
the schedule pauses after a failed run and fires again once someone resumes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acceptance.cliuser import User

STALE_OK = ("--max-staleness", "100000")


@pytest.mark.slow
def test_a_failing_schedule_alerts_pauses_and_resumes(scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    (user.cwd / "schedules" / "flaky.json").write_text(json.dumps({
        "$schema": "./schedule.schema.json", "cron": "0 9,10,11 * * *",
        "pause_after_failures": 1, "max_parallel": 1,
        "tracks": [{"name": "pull", "run": "false"}]}, indent=2) + "\n")
    shown = user.run("schedules", "show", "flaky").stdout
    assert "policies:  at most 1 track(s) of a run in flight; pause after 1 failed run(s)" \
        in shown

    user.tick("2026-12-01T09:01:00Z")
    user.tick("2026-12-01T09:02:00Z")  # the run fails; its track is parked
    user.run("status", *STALE_OK, "--now", "2026-12-01T09:03:00Z")  # no flag: 0
    alert = user.run("status", *STALE_OK, "--now", "2026-12-01T09:03:00Z",
                     "--fail-on-dead-letters", expect=6)
    assert "1 dead letter(s) wait for a decision" in alert.stderr

    paused = user.tick("2026-12-01T10:01:00Z")
    assert paused["dispatched"] == []
    assert any("flaky: paused: 1 consecutive runs failed" in line for line in paused["log"])
    status = user.run("status", *STALE_OK, "--now", "2026-12-01T10:02:00Z").stdout
    assert "PAUSED since 2026-12-01T10:01:00Z by orchestrator" in status
    assert user.run("schedules", "list").stdout.startswith("flaky  paused")

    out = user.run("schedules", "resume", "flaky", "--reason", "source fixed", "--by", "ana",
                   "--now", "2026-12-01T10:30:00Z").stdout
    assert out.strip() == "resumed flaky; the next tick fires its next slot"
    assert user.tick("2026-12-01T11:01:00Z")["dispatched"] == [
        "flaky--20261201T1100Z--pull--1"]
