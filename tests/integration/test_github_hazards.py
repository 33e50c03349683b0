"""GitHub as a first real deployment meets it, end to end: a real bare origin, the fake
GitHub server taught each behaviour first (the source named where it is modelled), and
``track.yml``'s jobs played on this machine (:mod:`tests.workflow_player`).

- an outcome upload that fails (409 on a re-run, a transient FinalizeArtifact error,
  full artifact storage) never turns a track that succeeded into a failed one;
- job names over 100 characters, which GitHub lists cut: legs are named within 100
  and matched by a hash of their key, and ``validate`` warns of a workflow that still
  names them after the whole key.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.executors.github.artifacts import MISSING_OUTCOME
from orchestrator.executors.github.jobnames import MAX_CHARS
from orchestrator.state import layout
from orchestrator.state.records import RunStatus, TrackPhase
from tests.drive import cli, github_tick, read_state
from tests.fakes.github import UPLOAD_FAULTS, FakeGitHub, UploadFailed, zip_files
from tests.gitrepo import clone, make_origin
from tests.workflow_player import Player

OK = {"name": "publish", "run": "echo published", "max_attempts": 2}


def start(tmp_path: Path, fake: FakeGitHub, tracks: list[dict[str, Any]],
          **schedule: Any) -> tuple[Path, Path, str, int, dict[str, str]]:
    """An origin with a one-shot schedule due a minute ago, and the tick that fired it:
    (origin, clone, run id, workflow run id, the dispatch's inputs)."""
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    origin = make_origin(tmp_path, {"nightly": {"at": f"{slot:%Y-%m-%dT%H:%M}Z",
                                                "tracks": tracks, **schedule}})
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake, datetime.now(UTC))
    fake.now = None  # the legs measure their own times on the real clock
    call = fake.dispatches[-1]
    return origin, repo, call.body["inputs"]["run_id"], max(fake.runs), call.body["inputs"]


# --------------------------------------------------------------------------- uploads


def test_the_fake_refuses_a_second_artifact_of_a_name_unless_overwrite(
        fake_github: FakeGitHub) -> None:
    """Artifacts belong to the workflow run: a re-run leg meets its earlier attempt's."""
    fake_github.add_runs(1, start=datetime.now(UTC), every=timedelta(minutes=1))
    [ci_run] = fake_github.runs
    fake_github.upload(ci_run, "k", {"k.json": b"1"})
    with pytest.raises(UploadFailed, match=r"\(409\) Conflict"):
        fake_github.upload(ci_run, "k", {"k.json": b"2"})
    fake_github.upload(ci_run, "k", {"k.json": b"3"}, overwrite=True)
    assert [a.data for a in fake_github.artifacts.values()] == [zip_files({"k.json": b"3"})]
    assert UPLOAD_FAULTS["quota"].startswith("Artifact storage quota has been hit")


@pytest.mark.parametrize("fault", ["finalize", "quota"])
def test_a_failed_upload_leaves_a_successful_leg_complete_and_the_brief_says_so(
        tmp_path: Path, fake_github: FakeGitHub, fault: str) -> None:
    origin, repo, run_id, ci_run, inputs = start(tmp_path, fake_github, [OK])
    player = Player(fake_github, origin, tmp_path / "play")
    [leg] = player.legs(inputs)
    fake_github.fail_uploads(fault)
    played = player.play_leg(ci_run, inputs, leg)
    assert played.outcomes["Upload the outcome"] == "failure"
    assert played.errors == [UPLOAD_FAULTS[fault]]
    assert played.conclusion == "success"  # the job mirrors the track's exit
    assert fake_github.artifacts == {}

    fan_in = player.play_fan_in(ci_run, inputs)
    assert fan_in.conclusion == "success", [p.stderr for p in fan_in.output]
    state, files = read_state(repo)
    track = state.tracks[run_id]["publish"]
    assert (track.phase, track.attempt) == (TrackPhase.COMPLETE, 1)  # not run again
    assert track.result == {"summary": MISSING_OUTCOME}
    assert state.runs[run_id].status is RunStatus.COMPLETED
    assert MISSING_OUTCOME in files[layout.brief_path(run_id)].decode()


def test_without_a_fan_in_job_the_cron_tick_records_it_complete_too(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin, repo, run_id, ci_run, inputs = start(tmp_path, fake_github, [OK],
                                                 fan_in="next_tick")
    player = Player(fake_github, origin, tmp_path / "play")
    [leg] = player.legs(inputs)
    fake_github.fail_uploads("finalize")
    assert player.play_leg(ci_run, inputs, leg).conclusion == "success"

    github_tick(repo, fake_github, datetime.now(UTC))
    state, _ = read_state(repo)
    track = state.tracks[run_id]["publish"]
    assert (track.phase, track.attempt, track.result) == (
        TrackPhase.COMPLETE, 1, {"summary": MISSING_OUTCOME})


def test_a_re_run_leg_replaces_its_earlier_attempt_s_artifact(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    """A person re-runs the batch on GitHub: without ``overwrite`` the upload would
    answer 409, and the job fail."""
    origin, _repo, _run_id, ci_run, inputs = start(tmp_path, fake_github, [OK])
    player = Player(fake_github, origin, tmp_path / "play")
    [leg] = player.legs(inputs)
    player.play_leg(ci_run, inputs, leg)
    fake_github.rerun(ci_run)
    again = player.play_leg(ci_run, inputs, leg)
    assert again.outcomes["Upload the outcome"] == "success", again.errors
    assert len(fake_github.artifacts) == 1


# --------------------------------------------------------------------------- job names

LONG_TRACK = "t" * 64


def test_legs_of_keys_over_100_characters_are_found_where_github_cuts_their_names(
        tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    long_id = "s" * 50
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    origin = make_origin(tmp_path, {long_id: {"at": f"{slot:%Y-%m-%dT%H:%M}Z", "tracks": [
        {"name": LONG_TRACK, "run": "echo first"},
        {"name": LONG_TRACK[:-1] + "u", "run": "echo second"}]}})
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake_github, datetime.now(UTC))
    fake_github.now = None
    [ci_run] = fake_github.runs
    inputs = fake_github.dispatches[-1].body["inputs"]
    run_id = inputs["run_id"]
    player = Player(fake_github, origin, tmp_path / "play")
    legs = player.legs(inputs)
    assert all(len(leg["key"]) > MAX_CHARS >= len(leg["job"]) for leg in legs)
    for leg in legs:
        player.play_leg(ci_run, inputs, leg)
    fake_github.set_job(ci_run, "fan-in", "completed", "cancelled")  # the cron tick's turn

    github_tick(repo, fake_github, datetime.now(UTC))
    state, _ = read_state(repo)
    assert {t.phase for t in state.tracks[run_id].values()} == {TrackPhase.COMPLETE}
    assert state.runs[run_id].status is RunStatus.COMPLETED


def test_validate_warns_where_a_workflow_names_jobs_after_a_key_github_would_cut(
        tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "schedules").mkdir(parents=True)
    (repo / ".github" / "workflows").mkdir(parents=True)
    shipped = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "track.yml"
    old = shipped.read_text().replace("${{ matrix.leg.job }}", "${{ matrix.leg.key }}")
    (repo / ".github" / "workflows" / "old.yml").write_text(old)
    (repo / ".github" / "workflows" / "track.yml").write_text(shipped.read_text())
    for sid, workflow in (("s" * 40, "old.yml"), ("t" * 40, "track.yml")):
        (repo / "schedules" / f"{sid}.json").write_text(json.dumps(
            {"cron": "7 3 * * *", "workflow": workflow,
             "tracks": [{"name": "x" * 40, "run": "true", "max_attempts": 3}]}))
    done = cli(repo, "validate")
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stdout.splitlines() if "names its jobs after" in line]
    assert len(warned) == 1 and "old.yml" in warned[0] and "reaches 104 characters" in warned[0]
