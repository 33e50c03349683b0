"""Failure policies with the GitHub executor against the fake GitHub: legs left queued
on one label, or failing to start there, move to the next, after the cooldown one leg
probes the degraded label again, and a compensation runs as a leg of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.drive import github_cli_tick, read_state
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, make_origin

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"
LATER = "nightly--20261201T0740Z"
PROBED = "nightly--20261201T0745Z"


def legs(call_index: int, fake: FakeGitHub) -> dict[str, str | None]:
    body = fake.dispatches[call_index].body
    return {leg["key"]: leg.get("runs_on") for leg in json.loads(body["inputs"]["tracks"])}


def routed(tmp_path: Path, cron: str) -> Path:
    """A clone of an origin with one schedule of two tracks that prefers the label
    gpu-self-hosted to ubuntu-latest (queue timeout 10 min, cooldown 30)."""
    origin = make_origin(tmp_path, {"nightly": {
        "cron": cron, "overlap": "allow",
        "runs_on": ["gpu-self-hosted", "ubuntu-latest"],
        "queue_timeout_minutes": 10, "runner_cooldown_minutes": 30,
        "tracks": [{"name": n, "run": f"make {n}"} for n in ("a", "b")]}})
    return clone(origin, tmp_path / "repo")


def probe_brings_gpu_back(repo: Path, fake: FakeGitHub, call_index: int) -> State:
    """07:45, after the cooldown: one leg of the slot probes the degraded gpu label
    (half-open), the other goes where it works; the probe starts, and the label is
    healthy again. The state after that."""
    out = github_cli_tick(repo, T0 + timedelta(minutes=45), fake)
    assert legs(call_index, fake) == {f"{PROBED}--a--1": "gpu-self-hosted",
                                      f"{PROBED}--b--1": "ubuntu-latest"}
    assert "runner gpu-self-hosted: a probes it (degraded)" in out
    state, _ = read_state(repo)
    assert state.runners["gpu-self-hosted"].probe == f"{PROBED}--a--1"
    fake.now = T0 + timedelta(minutes=46)
    fake.set_job(max(fake.runs), "a", "in_progress")
    out = github_cli_tick(repo, T0 + timedelta(minutes=47), fake)
    assert "runner gpu-self-hosted: healthy again (a started on it)" in out
    state, _ = read_state(repo)
    gpu = state.runners["gpu-self-hosted"]
    assert (gpu.status, gpu.consecutive_failures, gpu.probe) == ("healthy", 0, None)
    return state


@pytest.mark.slow
def test_queued_legs_move_to_the_next_label_and_a_probe_follows_the_cooldown(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo = routed(tmp_path, "0,40 7 * * *")

    github_cli_tick(repo, T0 + timedelta(minutes=1), fake_github)
    assert legs(0, fake_github) == {f"{RUN}--a--1": "gpu-self-hosted",
                                    f"{RUN}--b--1": "gpu-self-hosted"}
    [first_ci] = fake_github.runs
    # no runner with that label takes the jobs: they stay queued
    github_cli_tick(repo, T0 + timedelta(minutes=6), fake_github)
    state, _ = read_state(repo)
    assert all(t.started_at is None for t in state.tracks[RUN].values())
    assert state.runners == {}

    out = github_cli_tick(repo, T0 + timedelta(minutes=11), fake_github)
    assert "no runner took it on gpu-self-hosted within 10 min" in out
    assert any(c.path.endswith(f"/actions/runs/{first_ci}/cancel")
               for c in fake_github.calls("cancel"))
    assert len(fake_github.dispatches) == 1  # not before the run is seen cancelled
    out = github_cli_tick(repo, T0 + timedelta(minutes=12), fake_github)
    assert "its run was cancelled, no runner having taken it on gpu-self-hosted" in out
    assert legs(1, fake_github) == {f"{RUN}--a--2": "ubuntu-latest",
                                    f"{RUN}--b--2": "ubuntu-latest"}
    state, files = read_state(repo)
    gpu = state.runners["gpu-self-hosted"]
    assert (gpu.status, gpu.consecutive_failures) == ("degraded", 1)
    assert gpu.last_checked_at == T0 + timedelta(minutes=11)
    health = json.loads(files["state/health.json"])
    assert health["runners"]["gpu-self-hosted"]["status"] == "degraded"
    a = state.tracks[RUN]["a"]
    assert (a.attempt, a.max_attempts, a.runner) == (2, 2, "ubuntu-latest")
    status = subprocess.run([sys.executable, "-m", "orchestrator", "--repo", str(repo),
                             "status", "--now", "2026-12-01T07:12:00Z"],
                            capture_output=True, text=True).stdout
    assert ("  gpu-self-hosted degraded since 2026-12-01T07:11Z (1 failure(s)): "
            f"{RUN}--a--1 waited 10 min for a runner") in status

    second_ci = max(fake_github.runs)
    fake_github.now = T0 + timedelta(minutes=12)
    fake_github.complete_all(second_ci)
    github_cli_tick(repo, T0 + timedelta(minutes=13), fake_github)
    state, files = read_state(repo)
    assert state.runs[RUN].status is RunStatus.COMPLETED
    brief = files[f"state/runs/{RUN}/brief.html"].decode()
    assert "<dt>Runners</dt>" in brief
    assert "gpu-self-hosted degraded since 2026-12-01T07:11Z" in brief
    assert "ubuntu-latest healthy" in brief

    # 07:40: the cooldown (30 min from 07:11) has not passed: both legs skip gpu
    github_cli_tick(repo, T0 + timedelta(minutes=40, seconds=30), fake_github)
    assert legs(2, fake_github) == {f"{LATER}--a--1": "ubuntu-latest",
                                    f"{LATER}--b--1": "ubuntu-latest"}


@pytest.mark.slow
def test_a_probe_after_the_cooldown_brings_a_label_back(tmp_path: Path,
                                                       fake_github: FakeGitHub) -> None:
    repo = routed(tmp_path, "0,45 7 * * *")
    github_cli_tick(repo, T0 + timedelta(minutes=1), fake_github)
    github_cli_tick(repo, T0 + timedelta(minutes=11), fake_github)  # gpu degraded at 07:11
    github_cli_tick(repo, T0 + timedelta(minutes=12), fake_github)  # seen cancelled: moved
    fake_github.now = T0 + timedelta(minutes=12)
    fake_github.complete_all(max(fake_github.runs))
    github_cli_tick(repo, T0 + timedelta(minutes=13), fake_github)

    state = probe_brings_gpu_back(repo, fake_github, call_index=2)
    assert state.tracks[PROBED]["a"].phase is TrackPhase.RUNNING


@pytest.mark.slow
@pytest.mark.parametrize("how", ["no-runner", "lost"])
def test_legs_failing_to_start_move_to_the_next_label_and_a_probe_brings_it_back(
        tmp_path: Path, fake_github: FakeGitHub, how: str) -> None:
    repo = routed(tmp_path, "0,45 7 * * *")
    fake_github.broken_labels["gpu-self-hosted"] = how

    github_cli_tick(repo, T0 + timedelta(minutes=1), fake_github)
    assert legs(0, fake_github) == {f"{RUN}--a--1": "gpu-self-hosted",
                                    f"{RUN}--b--1": "gpu-self-hosted"}
    [first_ci] = fake_github.runs
    fake_github.now = T0 + timedelta(minutes=2)
    fake_github.settle()
    assert {j.conclusion for j in fake_github.runs[first_ci].jobs if j.is_leg} == {"failure"}

    # well before the queue timeout: the failed start alone moves them
    out = github_cli_tick(repo, T0 + timedelta(minutes=3), fake_github)
    assert "failed to start on gpu-self-hosted, not the track's fault" in out
    assert legs(1, fake_github) == {f"{RUN}--a--2": "ubuntu-latest",
                                    f"{RUN}--b--2": "ubuntu-latest"}
    state, _ = read_state(repo)
    gpu = state.runners["gpu-self-hosted"]
    assert (gpu.status, gpu.consecutive_failures) == ("degraded", 1)
    assert gpu.last_checked_at == T0 + timedelta(minutes=3)
    for name in ("a", "b"):  # the budget is untouched: nothing was spent, nothing parked
        track = state.tracks[RUN][name]
        assert (track.attempt, track.max_attempts, track.runner) == (2, 2, "ubuntu-latest")
        assert "failed to start on gpu-self-hosted" in track.error_log[-1]
    assert state.dlq == {}

    fake_github.now = T0 + timedelta(minutes=4)
    fake_github.complete_all(max(fake_github.runs))
    github_cli_tick(repo, T0 + timedelta(minutes=5), fake_github)
    state, _ = read_state(repo)
    assert state.runs[RUN].status is RunStatus.COMPLETED

    # the label's runners work again; after the cooldown one leg probes it
    del fake_github.broken_labels["gpu-self-hosted"]
    probe_brings_gpu_back(repo, fake_github, call_index=2)


@pytest.mark.slow
def test_a_compensation_runs_as_its_own_leg_on_github(tmp_path: Path,
                                                     fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": {
        "cron": "0 7 * * *", "on_failure": "compensate",
        "tracks": [{"name": "a", "run": "make a", "compensate": {"run": "unmake a"}},
                   {"name": "b", "run": "make b"}]}})
    repo = clone(origin, tmp_path / "repo")
    github_cli_tick(repo, T0 + timedelta(minutes=1), fake_github)
    [first_ci] = fake_github.runs
    fake_github.now = T0 + timedelta(minutes=2)
    fake_github.set_job(first_ci, "a", "completed", "success")
    fake_github.set_job(first_ci, "b", "completed", "failure")
    github_cli_tick(repo, T0 + timedelta(minutes=3), fake_github)
    body = fake_github.dispatches[1].body
    [leg] = json.loads(body["inputs"]["tracks"])
    assert leg["key"] == f"{RUN}--a--undo--1" and leg["run"] == "unmake a"
    # the job succeeded without an outcome artifact: its result says so
    assert leg["env"] == {"ORCHESTRATOR_COMPENSATING": "1", "ORCHESTRATOR_ORIGINAL_RESULT":
                          json.dumps({"summary": "outcome artifact missing"}),
                          # a compensation knows its run as the track did
                          "ORCHESTRATOR_SCHEDULE": "nightly",
                          "ORCHESTRATOR_SLOT": "2026-12-01T07:00:00Z",
                          "ORCHESTRATOR_SLOT_LOCAL": "2026-12-01T07:00:00+00:00",
                          "ORCHESTRATOR_PREVIOUS_SLOT": "2026-11-30T07:00:00Z"}
    undo_ci = max(fake_github.runs)
    fake_github.now = T0 + timedelta(minutes=4)
    fake_github.set_job(undo_ci, f"{RUN}--a--undo--1", "completed", "success")
    github_cli_tick(repo, T0 + timedelta(minutes=5), fake_github)
    state, _ = read_state(repo)
    assert state.undos[RUN]["a"].phase is TrackPhase.COMPLETE
    assert state.tracks[RUN]["a"].phase is TrackPhase.COMPLETE  # the action stays done
    assert state.runs[RUN].status is RunStatus.FAILED


def batch(tmp_path: Path, tracks: list[dict[str, object]]) -> Path:
    """A clone of an origin with one schedule at 07:00 whose ``tracks`` prefer the label
    gpu-self-hosted to ubuntu-latest (queue timeout 10 min)."""
    origin = make_origin(tmp_path, {"nightly": {
        "cron": "0 7 * * *", "runs_on": ["gpu-self-hosted", "ubuntu-latest"],
        "queue_timeout_minutes": 10, "tracks": tracks}})
    return clone(origin, tmp_path / "repo")


def runs_per_track(fake: FakeGitHub) -> dict[str, int]:
    """How many times a runner took each track's leg, over every workflow run."""
    taken: dict[str, int] = {}
    for run in fake.runs.values():
        for job in run.jobs:
            if job.is_leg and job.started_at is not None:
                taken[job.leg["track"]] = taken.get(job.leg["track"], 0) + 1
    return taken


@pytest.mark.slow
def test_a_batch_larger_than_its_label_s_runners_runs_each_track_once_there(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    # two GPU runners, four 30-minute tracks: two wait in GitHub's queue for half an hour
    fake_github.runner_pools = {"gpu-self-hosted": 2, "ubuntu-latest": 20}
    repo = batch(tmp_path, [{"name": n, "run": f"make {n}"} for n in "abcd"])

    outs = {m: github_cli_tick(repo, T0 + timedelta(minutes=m), fake_github)
            for m in (1, 6, 12, 20, 32, 45, 62, 63)}

    assert runs_per_track(fake_github) == dict.fromkeys("abcd", 1)
    assert len(fake_github.dispatches) == 1
    # past the queue timeout the label is busy, not sick
    assert f"{RUN}: c: queued on gpu-self-hosted for over 10 min; 2 leg(s) started " \
           "there since: busy, not sick; it waits" in outs[12]
    assert fake_github.calls("cancel") == []
    state, _ = read_state(repo)
    assert "gpu-self-hosted" not in state.runners
    assert state.runs[RUN].status is RunStatus.COMPLETED
    assert {t.attempt for t in state.tracks[RUN].values()} == {1}


@pytest.mark.slow
def test_legs_no_runner_takes_move_on_only_once_their_run_is_seen_cancelled(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    # no GPU runner at all; c runs on ubuntu-latest in the same workflow run, so the run
    # cannot be cancelled before c has ended; a cancel takes effect 3 minutes after it
    fake_github.runner_pools = {"gpu-self-hosted": 0, "ubuntu-latest": 20}
    fake_github.cancel_delay = timedelta(minutes=3)
    repo = batch(tmp_path, [{"name": "a", "run": "make a"}, {"name": "b", "run": "make b"},
                            {"name": "c", "run": "make c", "runs_on": ["ubuntu-latest"]}])
    github_cli_tick(repo, T0 + timedelta(minutes=1), fake_github)
    [first_ci] = fake_github.runs

    out = github_cli_tick(repo, T0 + timedelta(minutes=11), fake_github)
    assert len(fake_github.dispatches) == 1  # nothing goes on before its run is cancelled
    assert "a: no runner took it on gpu-self-hosted within 10 min; cancelling its run" in out
    state, _ = read_state(repo)
    gpu = state.runners["gpu-self-hosted"]
    assert (gpu.status, gpu.consecutive_failures) == ("degraded", 1)
    # c still runs: the run is not cancelled, and a and b wait where they are
    for minutes in (15, 21, 25):
        github_cli_tick(repo, T0 + timedelta(minutes=minutes), fake_github)
        assert len(fake_github.dispatches) == 1 and fake_github.calls("cancel") == []
    state, _ = read_state(repo)
    assert [(t.attempt, t.runner) for t in state.tracks[RUN].values()] == [
        (1, "gpu-self-hosted"), (1, "gpu-self-hosted"), (1, "ubuntu-latest")]

    # 07:32: c has ended, so the run's cancel goes; a poll later the jobs still read
    # queued, and nothing moves until GitHub has carried the cancel out
    github_cli_tick(repo, T0 + timedelta(minutes=32), fake_github)
    assert [c.path.split("/")[-2] for c in fake_github.calls("cancel")][-1] == str(first_ci)
    github_cli_tick(repo, T0 + timedelta(minutes=33), fake_github)
    assert len(fake_github.dispatches) == 1
    assert fake_github.runs[first_ci].conclusion is None
    out = github_cli_tick(repo, T0 + timedelta(minutes=36), fake_github)
    assert fake_github.runs[first_ci].conclusion == "cancelled"
    assert legs(1, fake_github) == {f"{RUN}--a--2": "ubuntu-latest",
                                    f"{RUN}--b--2": "ubuntu-latest"}

    github_cli_tick(repo, T0 + timedelta(minutes=67), fake_github)
    github_cli_tick(repo, T0 + timedelta(minutes=68), fake_github)
    assert runs_per_track(fake_github) == {"a": 1, "b": 1, "c": 1}
    state, _ = read_state(repo)
    assert state.runs[RUN].status is RunStatus.COMPLETED
    assert state.runners["gpu-self-hosted"].consecutive_failures == 1
    a = state.tracks[RUN]["a"]
    assert (a.attempt, a.max_attempts, a.runner) == (2, 2, "ubuntu-latest")
