"""Where a command runs and which clock it trusts: a subfolder of the repository is the
repository, a folder outside one fails, and a simulated tick never fakes the heartbeat.

The installed CLI, real git and a bare origin; the tests read the real clock only to
start from it, never to time anything.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.acceptance.cliuser import User


def _stamp(moment: datetime) -> str:
    return moment.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_tick_and_validate_from_a_subfolder_work_as_from_the_root(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    # the example fires too within an hour after its 02:15 New York slot: not this test's
    user.run("schedules", "remove", "nightly")
    user.run("schedules", "add", "minutely", "--every", "minute", "--track", "t=true")
    inside = user.cwd / "schedules"
    user.run("cron-sync", cwd=inside)  # writes the root's .github/workflows/tick.yml
    assert "1 schedule valid, 0 invalid" in user.run("validate", cwd=inside).stdout
    ticked = json.loads(user.run("tick", "--json", cwd=inside).stdout)
    assert [key.split("--")[0] for key in ticked["dispatched"]] == ["minutely"], ticked
    assert "minutely" in user.run("runs", "list", cwd=inside).stdout


def test_outside_a_repository_validate_and_tick_fail_with_one_line(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    user = User(elsewhere)
    for words in (("validate",), ("tick",)):
        failed = user.run(*words, expect=None)
        assert failed.returncode != 0, (words, failed)
        lines = failed.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("orchestrator: "), failed.stderr


def test_a_tick_in_the_past_moves_the_heartbeat_neither_back_nor_forth(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("tick")  # a real tick: the branch has a heartbeat on the machine's clock
    before = user.json("status", "--json")
    assert not before["stale"]
    past = _stamp(datetime.now(UTC) - timedelta(days=2))
    user.run("tick", "--now", past, "--force")
    after = user.json("status", "--json")
    assert not after["stale"] and after["last_tick"] == before["last_tick"], after
    assert user.run("status").returncode == 0


def test_a_branch_of_simulated_past_ticks_says_when_they_ran_not_what_they_played(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    started = datetime.now(UTC).replace(microsecond=0)
    user.run("tick", "--now", _stamp(started - timedelta(days=2)))
    report = user.json("status", "--json")
    assert not report["stale"], report
    ran = datetime.fromisoformat(report["last_tick"].replace("Z", "+00:00"))
    assert ran >= started - timedelta(seconds=1)
