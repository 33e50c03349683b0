"""Approval gates on GitHub (the fake): a track with ``approval.environment`` is
dispatched into that environment, its job waits for the environment's reviewers, and
the wait counts neither against its timeout nor against its run's deadline; a
rejection ends it ``rejected``, never retried, and its dependants ``skipped``."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.runs import status
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.drive import github_tick, read_state
from tests.fakes.github import WORKFLOWS, FakeGitHub, load_workflows
from tests.gitrepo import clone, make_origin

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "deploy--20261201T0700Z"
GATE = {"environment": "production", "timeout_minutes": 600}


@pytest.fixture(autouse=True)
def environment_line(fake_github: FakeGitHub, tmp_path: Path) -> None:
    """track.yml with its `environment:` line uncommented, as a repository with an
    environment gate has it (validate fails on such a gate without the line)."""
    folder = tmp_path / "workflows"
    shutil.copytree(WORKFLOWS, folder)
    track = folder / "track.yml"
    text = track.read_text(encoding="utf-8")
    on = text.replace("    # environment: ${{", "    environment: ${{")
    assert on != text
    track.write_text(on, encoding="utf-8")
    fake_github.workflows = load_workflows(folder)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def checkout(tmp: Path, *tracks: dict[str, Any]) -> Path:
    origin = make_origin(tmp, {"deploy": {"cron": "0 7 * * *", "deadline_minutes": 30,
                                          "fan_in": "next_tick", "tracks": list(tracks)}})
    return clone(origin, tmp / "repo")


def phase(repo: Path, track: str = "ship") -> TrackPhase:
    return read_state(repo)[0].tracks[RUN][track].phase


def test_a_track_with_an_environment_waits_for_its_reviewers_and_not_on_its_timeout(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    fake_github.reviewed = {"production": ["alice"]}
    repo = checkout(tmp_path, {"name": "ship", "run": "make ship", "timeout_minutes": 10,
                               "approval": GATE})
    github_tick(repo, fake_github, at(1))
    [dispatch] = fake_github.dispatches
    [leg] = json.loads(dispatch.body["inputs"]["tracks"])
    assert leg["environment"] == "production"
    [ci] = fake_github.runs
    [job] = fake_github.runs[ci].latest_jobs
    assert (job.environment, job.status) == ("production", "waiting")  # track.yml's wiring
    assert [d["environment"]["name"] for d in fake_github.pending_deployments(ci)] == [
        "production"]

    github_tick(repo, fake_github, at(2))
    state, _ = read_state(repo)
    gate = state.tracks[RUN]["ship"].gate
    assert gate is not None and gate.since == at(2) and gate.decided is None
    [waits] = status.approvals_waiting(state)
    assert (waits["track"], waits["by"], waits["command"]) == (
        "ship", "production's reviewers", "")  # reviewed on GitHub, not by a command
    # an hour: past the track's timeout (10) and the run's deadline (30)
    github_tick(repo, fake_github, at(60))
    assert phase(repo) is TrackPhase.DISPATCHED
    assert fake_github.calls("cancel") == []

    fake_github.now = at(61)
    fake_github.review(ci, "production", "approved")
    fake_github.set_job(ci, "ship", "in_progress")
    github_tick(repo, fake_github, at(62))
    state, _ = read_state(repo)
    ship = state.tracks[RUN]["ship"]
    assert ship.phase is TrackPhase.RUNNING
    assert ship.gate is not None and ship.gate.approved is not None
    assert ship.gate.approved.by == "production's reviewers"
    github_tick(repo, fake_github, at(70))
    assert phase(repo) is TrackPhase.RUNNING  # its timeout counts from its start
    github_tick(repo, fake_github, at(73))
    assert phase(repo) is TrackPhase.TAPPED_OUT


def test_a_rejection_on_github_ends_the_track_rejected_and_skips_its_dependants(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    fake_github.reviewed = {"production": ["alice"]}
    repo = checkout(tmp_path, {"name": "ship", "run": "make ship", "max_attempts": 3,
                               "approval": GATE},
                    {"name": "smoke", "run": "make smoke", "needs": ["ship"]})
    github_tick(repo, fake_github, at(1))
    github_tick(repo, fake_github, at(2))
    [ci] = fake_github.runs
    fake_github.now = at(3)
    fake_github.review(ci, "production", "rejected")
    assert fake_github.runs[ci].conclusion == "failure"  # "the workflow will fail"
    github_tick(repo, fake_github, at(4))
    github_tick(repo, fake_github, at(5))
    state, _ = read_state(repo)
    assert {n: t.phase for n, t in state.tracks[RUN].items()} == {
        "ship": TrackPhase.REJECTED, "smoke": TrackPhase.SKIPPED}
    assert state.runs[RUN].status is RunStatus.FAILED
    assert len(fake_github.dispatches) == 1  # never retried
    assert state.dlq == {}
