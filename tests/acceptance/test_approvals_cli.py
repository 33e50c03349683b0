"""Approval gates as a person on call meets them: a deploy waits for them, they approve
it and it runs; a second run they reject, and its smoke test is skipped."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acceptance.cliuser import User

FIRST = "deploy--20261201T1400Z-manual-1"
SECOND = "deploy--20261201T1410Z-manual-1"


def test_approve_lets_a_held_track_run_and_reject_ends_it(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    (user.cwd / "schedules" / "deploy.json").write_text(json.dumps({
        "cron": "0 9 * * *", "tracks": [
            {"name": "build", "run": "true"},
            {"name": "ship", "run": "true", "needs": ["build"],
             "approval": {"by": ["alice", "team-ops"]}},
            {"name": "smoke", "run": "true", "needs": ["ship"]}]}))
    user.run("trigger", "deploy", "--reason", "release 1.4", "--now", "2026-12-01T14:00:00Z")
    user.tick("2026-12-01T14:01:00Z")
    user.tick("2026-12-01T14:02:00Z")
    shown = user.run("runs", "show", FIRST).stdout
    assert "  track ship: pending (attempt 1/1)" in shown
    assert ("    waiting for approval by alice, team-ops since 2026-12-01T14:01:00Z: "
            f"orchestrator approve {FIRST} ship --reason ...") in shown
    assert f"{FIRST}/ship waits for approval by alice, team-ops" in user.run(
        "status", "--now", "2026-12-01T14:02:30Z", expect=None).stdout
    out = user.run("approve", FIRST, "ship", "--by", "carol", "--reason", "reviewed",
                   "--now", "2026-12-01T14:03:00Z").stdout
    # a team in `by` cannot be checked here: anyone may decide, and is recorded
    assert out.splitlines()[-1] == f"{FIRST}/ship: approved by carol: reviewed"
    user.tick("2026-12-01T14:04:00Z")
    user.tick("2026-12-01T14:05:00Z")
    shown = user.run("runs", "show", FIRST).stdout
    assert f"{FIRST}  completed" in shown
    assert "    approved by carol: reviewed at 2026-12-01T14:03:00Z" in shown

    user.run("trigger", "deploy", "--reason", "release 1.5", "--now", "2026-12-01T14:10:00Z")
    user.tick("2026-12-01T14:11:00Z")
    user.tick("2026-12-01T14:12:00Z")
    out = user.run("reject", SECOND, "ship", "--reason", "freeze", "--now",
                   "2026-12-01T14:13:00Z").stdout
    assert f"{SECOND}/ship: rejected by " in out.splitlines()[-1]
    shown = user.run("runs", "show", SECOND).stdout
    assert f"{SECOND}  failed" in shown and "rejected" in shown and "skipped" in shown
    again = user.run("reject", SECOND, "ship", "--reason", "freeze", expect=1)
    assert "only an open run's track can be rejected" in again.stderr
