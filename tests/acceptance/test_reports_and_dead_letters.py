"""Tracks reported by hand, the dead letter queue (list, show, requeue, discard), and
the other ways in: ``schema`` and ``demo``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acceptance.cliuser import User

RUN = "gate--20261201T0900Z"
FEED = "feed--20261201T0900Z"


def write_schedule(user: User, sid: str, spec: dict[str, object]) -> None:
    """Edited by hand, as the README invites."""
    path = user.cwd / "schedules" / f"{sid}.json"
    path.write_text(json.dumps({"$schema": "./schedule.schema.json", **spec}, indent=2) + "\n")


@pytest.mark.slow
def test_hand_reports_and_the_dead_letter_queue(tmp_path: Path,
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    go = tmp_path / "go"
    # A sign-off step: its process waits for a file; a person reports the verdict.
    wait_for_go = f"for i in $(seq 600); do [ -e '{go}' ] && exit 0; sleep 0.1; done; exit 1"
    write_schedule(user, "gate", {
        "description": "Release gate: two sign-offs",
        "cron": "0 9 * * *",
        "tracks": [{"name": "approve", "run": wait_for_go},
                   {"name": "review", "run": wait_for_go}],
    })
    # Tracks with only inputs are for a track workflow on GitHub; the local executor
    # has nothing to run, so their dispatch fails and they are parked.
    write_schedule(user, "feed", {
        "cron": "0 9 * * *",
        "tracks": [{"name": "pull", "inputs": {"source": "s3://bucket/feed"}}],
    })
    user.run("cron-sync")  # tick.yml's cron for the new schedules (validate checks it)
    assert user.run("validate").stdout.rstrip().endswith("2 schedules valid, 0 invalid")

    fired = user.json("tick", "--now", "2026-12-01T09:01:00Z", "--json")
    assert sorted(fired["dispatched"]) == [f"{RUN}--approve--1", f"{RUN}--review--1"]
    assert any("has no 'run' command" in e for e in fired["dispatch_errors"])

    # -- reports by hand -------------------------------------------------------------------
    out = user.run("report", "--run", RUN, "--track", "approve", "--phase", "running",
                   "--attempt", "1", "--now", "2026-12-01T09:02:00Z").stdout
    assert out.strip() == f"{RUN}/approve: running (attempt 1)"
    verdict = tmp_path / "verdict.json"
    verdict.write_text('{"summary": "approved by the release manager"}\n')
    user.run("report", "--run", RUN, "--track", "approve", "--phase", "complete",
             "--result", str(verdict), "--now", "2026-12-01T09:03:00Z")
    user.run("report", "--run", RUN, "--track", "review", "--phase", "failed",
             "--message", "changes requested", "--now", "2026-12-01T09:03:00Z")
    again = user.run("report", "--run", RUN, "--track", "approve", "--phase", "complete",
                     "--now", "2026-12-01T09:04:00Z").stdout
    assert "already complete" in again
    bad = user.run("report", "--run", RUN, "--track", "nope", "--phase", "complete",
                   expect=1)
    assert bad.stderr == f"orchestrator: run {RUN} has no track 'nope'\n"
    go.touch()  # the waiting processes may end now

    user.tick("2026-12-01T09:05:00Z")
    shown = user.run("runs", "show", RUN).stdout
    assert shown.startswith(f"{RUN}  failed")
    assert "approved by the release manager" in shown

    # -- the dead letter queue -------------------------------------------------------------
    letters = user.json("dlq", "list", "--json")
    assert sorted(d["key"] for d in letters) == [f"{FEED}--pull", f"{RUN}--review"]
    detail = user.run("dlq", "show", f"{RUN}--review").stdout
    assert "changes requested" in detail
    assert "has no 'run' command" in user.run("dlq", "show", f"{FEED}--pull").stdout
    user.run("dlq", "requeue", f"{RUN}--review", "--reason", "changes made", "--by", "ana")
    user.run("dlq", "discard", f"{FEED}--pull", "--reason", "runs on GitHub only",
             "--by", "ana")
    assert user.run("dlq", "list").stdout.strip() == "dead letter queue is empty"
    kept = user.json("dlq", "list", "--all", "--json")
    assert [(d["key"], d["discarded_by"]) for d in kept] == [(f"{FEED}--pull", "ana")]

    # the requeued track runs again (attempt 2) and the run completes after all
    retried = user.tick("2026-12-01T09:06:00Z")
    assert retried["dispatched"] == [f"{RUN}--review--2"]
    user.tick("2026-12-01T09:07:00Z")
    runs = {r["run_id"]: r["status"] for r in user.json("runs", "list", "--json")}
    assert runs == {RUN: "completed", FEED: "failed"}
    brief = user.run("render", RUN).stdout
    assert "approved by the release manager" in brief and "changes requested" in brief


def test_schema_matches_the_scaffolded_copy(scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    printed = user.run("schema").stdout
    assert printed == (user.cwd / "schedules" / "schedule.schema.json").read_text()
    assert json.loads(printed)["type"] == "object"


@pytest.mark.slow
def test_demo_runs_the_whole_loop_and_prints_the_brief(tmp_path: Path) -> None:
    user = User(tmp_path)
    out = user.run("demo", "--dir", str(tmp_path / "demo"), "--keep", timeout=240).stdout
    lines = out.splitlines()
    assert lines[0] == f"workspace: {tmp_path / 'demo'}"
    assert lines[-1] == f"brief: {tmp_path / 'demo' / 'brief.html'}"
    brief = (tmp_path / "demo" / "brief.html").read_text()
    assert "3 anomalies found on the retry" in brief
    assert "analyze complete (attempt 2)" in out and "crawl tapped_out (attempt 1)" in out
    # the command the demo suggests works as printed
    suggested = lines[-2].split()
    assert suggested[:2] == ["orchestrator", "--repo"]
    letters = user.run(*suggested[1:]).stdout
    assert "--crawl" in letters


@pytest.mark.slow
def test_demo_removes_its_workspace_unless_keep(tmp_path: Path) -> None:
    user = User(tmp_path)
    # given up after 5 s or finished: either way nothing of it is left
    done = user.run("demo", "--max-seconds", "5", "--interval", "0.5", expect=None)
    first = done.stdout.splitlines()[0]
    assert first.startswith("workspace: ")
    assert not Path(first.removeprefix("workspace: ")).exists()
