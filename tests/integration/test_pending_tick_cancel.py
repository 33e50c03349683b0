"""A lingering tick cancels the scheduled tick GitHub holds pending behind it, when that
tick would find nothing (:mod:`orchestrator.cadence.pending`): real ``orchestrator tick
--linger`` processes on the real clock, a real bare origin, the fake GitHub on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.state.phases import TrackPhase
from tests.drive import github_cli_tick, read_state, start_github_tick
from tests.fakes.github import FakeGitHub, FakeRun
from tests.gitrepo import clone, make_origin

OWN_RUN_ENV = "GITHUB_RUN_ID"


def checkout(tmp_path: Path, schedule_cron: str, tick_cron: str, **track: object) -> Path:
    """A clone whose one schedule fires on ``schedule_cron`` and whose tick.yml runs on
    ``tick_cron`` (the next scheduled tick the cancel weighs)."""
    origin = make_origin(tmp_path, {"nightly": {"cron": schedule_cron, "tracks": [
        {"name": "a", "run": "make a", **track}]}})
    repo = clone(origin, tmp_path / "work")
    workflows = repo / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "tick.yml").write_text(
        f'name: tick\non:\n  schedule:\n    - cron: "{tick_cron}"\n  workflow_dispatch:\n')
    return repo


def yearly(at: datetime) -> str:
    return f"{at.minute} {at.hour} {at.day} {at.month} *"


def linger(repo: Path, fake: FakeGitHub, own: FakeRun,
           event: str = "schedule") -> subprocess.CompletedProcess[str]:
    """``tick --linger 20`` on the real clock, as tick.yml runs it on a schedule."""
    fake.now = None  # the fake's clock is the real one, as the tick's is
    proc = start_github_tick(repo, None, fake, "--linger", "20", "--max-linger", "45",
                             GITHUB_EVENT_NAME=event, **{OWN_RUN_ENV: str(own.id)})
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def own_run(fake: FakeGitHub) -> FakeRun:
    """This job's own run. It has no jobs in the fake, so it lists as ``queued``: only
    its id (GITHUB_RUN_ID) keeps the tick from cancelling itself."""
    return fake.waiting_run(created_at=datetime.now(UTC) - timedelta(minutes=1), held=False)


def cancelled(fake: FakeGitHub) -> set[int]:
    return {int(c.path.split("/")[-2]) for c in fake.calls("cancel")}


def test_a_held_scheduled_tick_created_before_the_last_tick_is_cancelled(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    now = datetime.now(UTC)
    # the schedule's next slot is a year away; tick.yml runs every 5 minutes
    repo = checkout(tmp_path, yearly(now - timedelta(days=2)), "*/5 * * * *")
    own = own_run(fake_github)
    held = fake_github.waiting_run(created_at=now - timedelta(minutes=2))
    newer = fake_github.waiting_run(created_at=now + timedelta(minutes=10), held=False)

    done = linger(repo, fake_github, own)

    assert done.returncode == 0, done.stderr
    assert cancelled(fake_github) == {held.id}, done.stderr
    assert f"linger: cancelled the pending scheduled tick {held.id}: it would find " \
           "nothing to do before the next scheduled tick" in done.stderr
    # the held run ends cancelled once GitHub carries the cancel out; it never started
    fake_github.now = datetime.now(UTC) + timedelta(minutes=1)
    fake_github.settle()
    assert (held.status, held.conclusion) == ("completed", "cancelled")
    assert newer.status == "queued" and own.status == "queued"
    listing = [c for c in fake_github.calls("runs") if c.query.get("event") == "schedule"]
    assert sorted(c.query["status"] for c in listing) == ["pending", "queued"]


@pytest.mark.slow
def test_a_held_dispatch_is_never_cancelled_nor_is_anything_with_the_setting_off(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    now = datetime.now(UTC)
    repo = checkout(tmp_path, yearly(now - timedelta(days=2)), "*/5 * * * *")
    own = own_run(fake_github)
    # an operator's "Run workflow" and the external clock's call wait in their groups
    manual = fake_github.waiting_run(created_at=now - timedelta(minutes=3),
                                     event="workflow_dispatch")
    called = fake_github.waiting_run(created_at=now - timedelta(minutes=3),
                                     event="repository_dispatch")
    held = fake_github.waiting_run(created_at=now - timedelta(minutes=2))

    done = linger(repo, fake_github, own)
    assert done.returncode == 0, done.stderr
    assert cancelled(fake_github) == {held.id}
    assert manual.status == called.status == "pending"

    # off in orchestrator.json: the next held scheduled tick is left to run
    (repo / "orchestrator.json").write_text(json.dumps(
        {"cadence": {"cancel_idle_pending": False}}))
    again = fake_github.waiting_run(created_at=datetime.now(UTC) - timedelta(minutes=1))
    done = linger(repo, fake_github, own)
    assert done.returncode == 0, done.stderr
    assert cancelled(fake_github) == {held.id} and again.status == "pending"
    # a tick that was not started by GitHub's cron waits in another group: it leaves it too
    (repo / "orchestrator.json").unlink()
    done = linger(repo, fake_github, own, event="workflow_dispatch")
    assert done.returncode == 0, done.stderr
    assert cancelled(fake_github) == {held.id} and again.status == "pending"


@pytest.mark.slow
def test_a_running_scheduled_tick_is_left_alone_when_the_listing_ignores_its_status_filter(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    now = datetime.now(UTC)
    repo = checkout(tmp_path, yearly(now - timedelta(days=2)), "*/5 * * * *")
    own = own_run(fake_github)
    fake_github.ignore_status_filter = True
    # another scheduled tick, created before the read and running: listed all the same
    running = fake_github.waiting_run(created_at=now - timedelta(minutes=3), running=True)
    held = fake_github.waiting_run(created_at=now - timedelta(minutes=2))

    done = linger(repo, fake_github, own)

    assert done.returncode == 0, done.stderr
    assert cancelled(fake_github) == {held.id}, done.stderr
    assert running.status == "in_progress"


@pytest.mark.slow
def test_a_held_scheduled_tick_stays_when_a_retry_s_back_off_ends_before_the_next_tick(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    real = datetime.now(UTC).replace(second=0, microsecond=0)
    slot = real - timedelta(minutes=10)
    # tick.yml's next tick is an hour away; the retry's back-off ends
    # 42 minutes from now: beyond the 20-minute linger, before that tick
    repo = checkout(tmp_path, yearly(slot), yearly(real + timedelta(hours=1)),
                    max_attempts=2, retry_backoff_seconds=50 * 60)
    github_cli_tick(repo, slot + timedelta(minutes=1), fake_github)
    [ci_run] = fake_github.runs
    fake_github.complete_all(ci_run, conclusion="failure")
    github_cli_tick(repo, slot + timedelta(minutes=2), fake_github)
    state, _ = read_state(repo)
    [track] = state.tracks.values()
    assert track["a"].attempt == 2 and track["a"].phase is TrackPhase.PENDING
    assert track["a"].not_before == slot + timedelta(minutes=52)
    own = own_run(fake_github)
    held = fake_github.waiting_run(created_at=datetime.now(UTC) - timedelta(minutes=1))

    done = linger(repo, fake_github, own)

    assert done.returncode == 0, done.stderr
    assert cancelled(fake_github) == set() and held.status == "pending"
    assert "linger: pending scheduled tick (if any) left to run: it would wait for " \
           f"{(slot + timedelta(minutes=52)):%Y-%m-%dT%H:%M:%SZ}" in done.stderr
    assert not any(c.query.get("event") == "schedule" for c in fake_github.calls("runs"))


def test_a_cancel_github_refuses_with_409_is_one_line_and_the_tick_exits_0(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    now = datetime.now(UTC)
    repo = checkout(tmp_path, yearly(now - timedelta(days=2)), "*/5 * * * *")
    own = own_run(fake_github)
    held = fake_github.waiting_run(created_at=now - timedelta(minutes=2))
    # GitHub's description of "Cancel a workflow run": 202, or 409 when it cannot be
    fake_github.fail("cancel", status=409,
                     message="Cannot cancel a workflow run that is completed.")

    done = linger(repo, fake_github, own)

    assert done.returncode == 0, done.stderr
    assert f"linger: cancelling the pending scheduled tick {held.id} failed: " \
           "cancelling workflow run" in done.stderr
    assert "409 Cannot cancel a workflow run that is completed." in done.stderr
    assert "Traceback" not in done.stderr


def test_a_token_without_actions_write_is_one_line_and_the_tick_exits_0(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    now = datetime.now(UTC)
    repo = checkout(tmp_path, yearly(now - timedelta(days=2)), "*/5 * * * *")
    own = own_run(fake_github)
    held = fake_github.waiting_run(created_at=now - timedelta(minutes=2))
    # GitHub answers a token without `actions: write` so ("Resource not accessible by
    # integration", the REST API's docs on GITHUB_TOKEN permissions)
    fake_github.fail("cancel", status=403, message="Resource not accessible by integration")

    done = linger(repo, fake_github, own)

    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "pending scheduled tick" in line]
    assert lines == [f"linger: cancelling the pending scheduled tick {held.id} failed: "
                     f"cancelling workflow run {held.id} failed: 403 Resource not "
                     "accessible by integration"]
    assert held.status == "pending"

    # nor can it list the runs: one line again, nothing cancelled
    fake_github.fail("runs", status=403, message="Resource not accessible by integration")
    done = linger(repo, fake_github, own)
    assert done.returncode == 0, done.stderr
    assert "linger: listing the pending scheduled ticks failed (nothing cancelled): " \
           "GET repos/octo-org/widgets/actions/workflows/tick.yml/runs: 403" in done.stderr


def test_a_hostile_tick_yml_names_no_next_tick_and_so_cancels_nothing(tmp_path: Path) -> None:
    from orchestrator.cadence.pending import MAX_WORKFLOW_BYTES, next_scheduled_tick

    now = datetime(2026, 12, 1, 7, 0, 10, tzinfo=UTC)
    root = tmp_path / "repo"
    tick = root / ".github" / "workflows" / "tick.yml"
    tick.parent.mkdir(parents=True)
    assert next_scheduled_tick(root, now) is None  # absent
    tick.write_text('on:\n  schedule:\n    - cron: "9 0,6,12,18 * * *"\n')
    assert next_scheduled_tick(root, now) == datetime(2026, 12, 1, 12, 9, tzinfo=UTC)
    outside = tmp_path / "elsewhere.yml"
    outside.write_text('on:\n  schedule:\n    - cron: "* * * * *"\n')
    hostile = {
        "a FIFO": lambda: os.mkfifo(tick),
        "a symlink out of the repository": lambda: tick.symlink_to(outside),
        "too large": lambda: tick.write_bytes(b"#" * (MAX_WORKFLOW_BYTES + 1)),
        "not UTF-8": lambda: tick.write_bytes(b'on:\n  schedule:\n    - cron: "\xff"\n'),
        "no cron": lambda: tick.write_text("on:\n  workflow_dispatch:\n"),
        "a cron nobody can evaluate": lambda: tick.write_text(
            'on:\n  schedule:\n    - cron: "0 0 31 2 *"\n'),
    }
    for what, make in hostile.items():
        tick.unlink()
        make()
        assert next_scheduled_tick(root, now) is None, what
