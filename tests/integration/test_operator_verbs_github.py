"""The operator's verbs on GitHub: ``tick.yml``'s "Run workflow" inputs played as a
runner plays them, and ``runs cancel`` of a run whose batch runs on the fake GitHub."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.state.phases import RunStatus, TrackPhase
from tests.builders import spec_data
from tests.drive import cli, read_state, state_of
from tests.fakes.github import WORKFLOWS, FakeGitHub
from tests.gitrepo import clone, make_origin
from tests.workflow_player import Player

HOSTILE = 'hotfix $(touch pwned) `touch pwned2` "; exit 7'
AWAY = f"0 {(datetime.now(UTC).hour + 12) % 24} * * *"
"""A daily slot 12 hours from the real clock these tests tick on: the trigger's tick
never also fires a scheduled slot (which overlap=skip would then weigh against it)."""


@pytest.mark.parametrize(("actors", "acted"), [
    ({"GITHUB_ACTOR": "erin"}, "erin"),
    # a re-run: GitHub keeps the first run's actor and names who re-ran it beside
    ({"GITHUB_ACTOR": "dave", "GITHUB_TRIGGERING_ACTOR": "erin"}, "erin")])
def test_run_workflow_with_action_trigger_starts_one_manual_run_as_the_actor(
        tmp_path: Path, fake_github: FakeGitHub, actors: dict[str, str], acted: str) -> None:
    origin = make_origin(tmp_path, {"nightly": spec_data(AWAY, tracks=["a", "b"])})
    summary = tmp_path / "summary.md"
    player = Player(fake_github, origin, tmp_path / "play", workflow=WORKFLOWS / "tick.yml",
                    env={"GITHUB_STEP_SUMMARY": str(summary), **actors})
    inputs = {"action": "trigger", "schedule": "nightly", "run": "", "from": "", "to": "",
              "reason": HOSTILE, "dry_run": False}
    played = player.play_job("tick", inputs)  # type: ignore[arg-type]
    assert played.conclusion == "success", [p.stderr for p in played.output]
    repo = clone(origin, tmp_path / "repo")
    state, _ = read_state(repo)
    [run] = [r for r in state.runs.values() if r.origin == "manual"]
    assert "-manual-1" in run.run_id
    assert run.requested is not None
    assert (run.requested.by, run.requested.reason) == (acted, HOSTILE)  # as typed
    assert not list((tmp_path / "play").rglob("pwned*"))  # an input is never run
    [call] = fake_github.dispatches
    assert call.body["inputs"]["run_id"] == run.run_id
    assert sorted(leg["track"] for leg in json.loads(call.body["inputs"]["tracks"])) == [
        "a", "b"]
    text = summary.read_text()
    assert "### Orchestrator trigger" in text and f"{run.run_id}: started by request" in text


def test_run_workflow_rejects_an_unknown_schedule_in_one_line(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": spec_data()})
    player = Player(fake_github, origin, tmp_path / "play", workflow=WORKFLOWS / "tick.yml")
    played = player.play_job("tick", {"action": "trigger", "schedule": "nighty",
                                      "reason": ""})
    assert played.conclusion == "failure"
    [proc] = played.output
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("orchestrator: unknown schedule 'nighty' "
                                   "(no schedules/nighty.json)")
    assert not fake_github.dispatches


def test_cancel_on_github_cancels_the_batch_and_a_late_fan_in_changes_nothing(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": spec_data(AWAY, tracks=["a", "b"], run="true")})
    repo = clone(origin, tmp_path / "repo")
    env = fake_github.env()
    fake_github.now = None  # the real clock, as the legs keep it
    started = cli(repo, "trigger", "nightly", "--executor", "github", env=env)
    assert started.returncode == 0, started.stderr
    [call] = fake_github.dispatches
    inputs = call.body["inputs"]
    run_id = inputs["run_id"]
    [ci_run] = fake_github.runs
    cancelled = cli(repo, "runs", "cancel", run_id, "--executor", "github", "--reason",
                    "wrong branch", "--by", "frank", env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    assert [c.path for c in fake_github.calls("cancel")] == [
        f"/repos/{fake_github.repository}/actions/runs/{ci_run}/cancel"]
    before, _ = state_of(repo)
    assert {t.phase for t in before.tracks[run_id].values()} == {TrackPhase.CANCELLED}
    assert before.runs[run_id].cancelled is not None
    assert before.runs[run_id].cancelled.by == "frank"
    assert before.runs[run_id].status is RunStatus.CANCELLED  # it used to end failed

    # the legs ran anyway (the cancel lands late) and uploaded "complete"; then the
    # batch's fan-in records their outcomes, as the fan-in job runs it
    player = Player(fake_github, origin, tmp_path / "play")
    for leg in player.legs(inputs):
        player.play_leg(ci_run, inputs, leg)
    outcomes = tmp_path / "outcomes"
    outcomes.mkdir()
    for files in fake_github.download_all(ci_run).values():
        for name, data in files.items():
            (outcomes / name).write_bytes(data)
    assert len(list(outcomes.iterdir())) == 2
    fan_in = cli(repo, "tick", "--executor", "github", "--run", run_id, "--outcomes",
                 str(outcomes), env=env)
    assert fan_in.returncode == 0, fan_in.stderr
    after, _ = state_of(repo)
    assert after.tracks[run_id] == before.tracks[run_id]  # refused: a stale attempt
    assert after.runs[run_id].cancelled == before.runs[run_id].cancelled
    assert after.runs[run_id].status is RunStatus.CANCELLED
