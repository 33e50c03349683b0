"""The GitHub executor when the state branch forgets a dispatch it made: a rewind a
person accepted, and a full mirror restored (the state branch and its high-water ref
together, which no rewind check can catch). GitHub is the witness: the run-name is
looked up before every dispatch, and the run found is adopted.

Real ``orchestrator`` processes, a real bare origin, the fake GitHub on 127.0.0.1.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.state.phases import TrackPhase
from tests.drive import cli, github_cli_tick, read_state, start_github_tick
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, git, make_origin

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"
BRANCH = "refs/heads/orchestrator-state"
HIGH_WATER = "refs/orchestrator/high-water/orchestrator-state"
NIGHTLY = {"cron": "0 7 * * *", "tracks": [{"name": n, "run": f"make {n}"} for n in "ab"]}


def refs(origin: Path) -> dict[str, str]:
    """The state branch and its high-water mark, as a mirror backup would hold them."""
    return {ref: git("rev-parse", ref, cwd=origin) for ref in (BRANCH, HIGH_WATER)}


def restore(origin: Path, backup: dict[str, str]) -> None:
    for ref, sha in backup.items():
        git("update-ref", ref, sha, cwd=origin)


def adopted_once(repo: Path, fake: FakeGitHub) -> None:
    """One workflow run was ever dispatched, and both tracks are recorded on it."""
    assert len(fake.dispatches) == 1, [d.body for d in fake.dispatches]
    [ci_run] = fake.runs
    state, _ = read_state(repo)
    for track in state.tracks[RUN].values():
        assert track.phase is TrackPhase.DISPATCHED
        assert track.handle is not None and track.handle["ci_run_id"] == ci_run


@pytest.mark.slow
def test_after_an_accepted_rewind_a_dispatch_on_time_is_adopted_not_sent_again(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": NIGHTLY})
    repo = clone(origin, tmp_path / "repo")
    github_cli_tick(repo, T0 - timedelta(minutes=30), fake_github)  # first sight: a cursor
    backup = git("rev-parse", BRANCH, cwd=origin)
    github_cli_tick(repo, T0 + timedelta(minutes=1), fake_github)
    assert len(fake_github.dispatches) == 1
    git("update-ref", BRANCH, backup, cwd=origin)  # restored from an older backup

    fake_github.now = T0 + timedelta(minutes=2)
    refused = start_github_tick(repo, T0 + timedelta(minutes=2), fake_github)
    _, err = refused.communicate(timeout=120)
    assert refused.returncode == 3 and "behind its high-water mark" in err
    accepted = cli(repo, "status", "--accept-rewind", "--now", "2026-12-01T07:02:00Z")
    assert accepted.stdout.startswith("accepted: "), accepted.stderr
    # Three minutes after the slot: well within the 10 minutes that used to skip the
    # look-up. The slot fires again from the older state, under the same keys.
    out = github_cli_tick(repo, T0 + timedelta(minutes=3), fake_github)
    assert RUN in out
    adopted_once(repo, fake_github)


@pytest.mark.slow
def test_a_restored_mirror_with_its_high_water_ref_does_not_send_a_run_twice(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": NIGHTLY})
    repo = clone(origin, tmp_path / "repo")
    github_cli_tick(repo, T0 - timedelta(minutes=30), fake_github)
    mirror = refs(origin)  # the backup: state branch and high-water ref together
    github_cli_tick(repo, T0 + timedelta(seconds=30), fake_github)
    assert len(fake_github.dispatches) == 1
    restore(origin, mirror)
    subprocess.run(["git", "fetch", "-q", "origin"], cwd=repo, check=True)

    # Nothing on the branch says it was restored: the tick fires the slot again.
    out = github_cli_tick(repo, T0 + timedelta(minutes=1), fake_github)
    assert RUN in out and "high-water" not in out
    adopted_once(repo, fake_github)
    # and a later tick goes on from the adopted run, still without a second dispatch
    github_cli_tick(repo, T0 + timedelta(minutes=2), fake_github)
    assert len(fake_github.dispatches) == 1
