"""Legs that never push and the fan-in job that records their batch, end to end.

A real bare origin, the fake GitHub server, and ``track.yml``'s jobs played on this
machine (:mod:`tests.workflow_player`): the legs run their commands under ``timeout``
and upload their outcome files as artifacts; the ``fan-in`` job downloads them and runs
``orchestrator tick --run RUN --outcomes DIR``. Everything runs on the real clock (a
one-shot ``at`` schedule a minute ago), since the legs measure their own times.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.executors import outcomes
from orchestrator.notify import record as notify_record
from orchestrator.state import layout
from orchestrator.state import model as state_model
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.drive import STATE_BRANCH as BRANCH
from tests.drive import github_tick, read_state, run_ticks, start_github_tick
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, git, make_origin
from tests.workflow_player import Player

RESULT = ('python3 -c "import json,os; json.dump({\'summary\': \'built \' + '
          'json.loads(os.environ[\'ORCHESTRATOR_INPUTS\'])[\'target\']}, '
          'open(os.environ[\'ORCHESTRATOR_RESULT\'], \'w\'))"')
TRACKS = [
    {"name": "build", "inputs": {"target": "docs"}, "run": RESULT},
    {"name": "broken", "run": "echo starting; echo 'ValueError: no such table' >&2; exit 3"},
    # 0.02 minutes: `timeout` stops it after 1.2 s, long before its job's timeout
    {"name": "stuck", "run": "sleep 30", "timeout_minutes": 0.02},
]


Started = tuple[Path, Path, str, int, dict[str, str]]


def _start(tmp_path: Path, fake: FakeGitHub,
           tracks: list[dict[str, Any]] | None = None) -> Started:
    """An origin with a one-shot schedule due a minute ago, and the tick that fired it
    and dispatched its tracks: (origin, clone, run id, workflow run id, inputs)."""
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    origin = make_origin(tmp_path, {"nightly": {"at": f"{slot:%Y-%m-%dT%H:%M}Z",
                                                "tracks": tracks or TRACKS}})
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake, datetime.now(UTC))
    fake.now = None  # the fake's jobs keep the real clock, as the legs do
    [call] = fake.dispatches
    [ci_run] = fake.runs
    return origin, repo, call.body["inputs"]["run_id"], ci_run, call.body["inputs"]


def _play_legs(player: Player, ci_run: int, inputs: dict[str, str]) -> None:
    for leg in player.legs(inputs):
        player.play_leg(ci_run, inputs, leg)


def _commits(repo: Path) -> int:
    git("fetch", "--quiet", "origin", BRANCH, cwd=repo)
    return int(git("rev-list", "--count", "FETCH_HEAD", cwd=repo))


def _history(state: state_model.State, run_id: str) -> dict[str, list[str]]:
    return {name: [str(h.to) for h in t.state_history]
            for name, t in state.tracks[run_id].items()}


@pytest.mark.slow
def test_the_fan_in_job_records_the_batch_in_one_push_and_lands_the_brief(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin, repo, run_id, ci_run, inputs = _start(tmp_path, fake_github)
    summary = tmp_path / "summary.md"
    player = Player(fake_github, origin, tmp_path / "play",
                    env={"GITHUB_STEP_SUMMARY": str(summary)})
    before = _commits(repo)
    _play_legs(player, ci_run, inputs)
    assert _commits(repo) == before  # legs never push

    # every leg uploaded its outcome, named after its dispatch key
    assert sorted(a.name for a in fake_github.artifacts.values()) == sorted(
        leg["key"] for leg in player.legs(inputs))
    played = player.play_fan_in(ci_run, inputs)
    assert played.conclusion == "success", [p.stderr for p in played.output]
    assert _commits(repo) == before + 1  # the whole batch and the brief: one push

    state, files = read_state(repo)
    tracks = state.tracks[run_id]
    assert tracks["build"].phase is TrackPhase.COMPLETE
    assert tracks["build"].result == {"summary": "built docs"}
    assert tracks["broken"].phase is TrackPhase.FAILED
    assert "exit code 3" in tracks["broken"].error_log[-1]
    assert "ValueError: no such table" in tracks["broken"].error_log[-1]
    # `timeout` stopped it at the track's own limit: the outcome says tapped out
    assert tracks["stuck"].phase is TrackPhase.TAPPED_OUT
    stuck = tracks["stuck"]
    assert stuck.started_at is not None and stuck.finished_at is not None
    assert timedelta(seconds=1) <= stuck.finished_at - stuck.started_at < timedelta(seconds=10)
    outcome = json.loads(next(p for p in (tmp_path / "play").rglob(
        f"{run_id}--stuck--1.json")).read_text())
    assert outcome["exit_code"] == 124
    # the times are the legs' own, not those of a tick that noticed
    assert tracks["build"].finished_at == datetime.fromisoformat(json.loads(next(
        p for p in (tmp_path / "play").rglob(f"{run_id}--build--1.json")).read_text())[
        "finished_at"].replace("Z", "+00:00"))

    assert state.runs[run_id].status is RunStatus.FAILED
    assert layout.brief_path(run_id) in files
    assert run_id in summary.read_text()
    # the fan-in job asked GitHub nothing about the legs it had outcomes for
    assert fake_github.calls("jobs") == [] and fake_github.calls("artifacts") == []


@pytest.mark.slow
def test_a_fan_in_job_that_never_ran_is_recovered_by_the_cron_tick_from_artifacts(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin, repo, run_id, ci_run, inputs = _start(tmp_path, fake_github)
    player = Player(fake_github, origin, tmp_path / "play")
    _play_legs(player, ci_run, inputs)
    fake_github.set_job(ci_run, "fan-in", "completed", "cancelled")  # its runner was lost

    result = github_tick(repo, fake_github, datetime.now(UTC))
    assert result.rendered == (run_id,)
    state, files = read_state(repo)
    tracks = state.tracks[run_id]
    assert tracks["build"].result == {"summary": "built docs"}  # only the artifact has it
    assert tracks["stuck"].phase is TrackPhase.TAPPED_OUT
    assert "ValueError: no such table" in tracks["broken"].error_log[-1]
    assert state.runs[run_id].status is RunStatus.FAILED
    assert layout.brief_path(run_id) in files
    # one listing for the run, one archive per leg, fetched without the token
    assert len(fake_github.calls("artifacts")) == 1
    assert len(fake_github.calls("artifact-zip")) == 3
    assert [r.authorized for r in fake_github.calls("blob")] == [False] * 3


@pytest.mark.slow
def test_fan_in_next_tick_skips_the_job_and_the_next_tick_records_the_batch(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    origin = make_origin(tmp_path, {"nightly": {"at": f"{slot:%Y-%m-%dT%H:%M}Z",
                                                "fan_in": "next_tick", "tracks": TRACKS}})
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake_github, datetime.now(UTC))
    fake_github.now = None
    [call] = fake_github.dispatches
    [ci_run] = fake_github.runs
    inputs = call.body["inputs"]
    assert inputs["fan_in"] == "next_tick"  # declared by track.yml, so GitHub takes it
    run_id = inputs["run_id"]
    before = _commits(repo)
    _play_legs(Player(fake_github, origin, tmp_path / "play"), ci_run, inputs)

    # GitHub evaluates the fan-in job's `if` once the legs have ended: skipped, not run
    [fan_in] = [j for j in fake_github.runs[ci_run].jobs if j.name == "fan-in"]
    assert (fan_in.status, fan_in.conclusion) == ("completed", "skipped")
    assert _commits(repo) == before  # nobody recorded the batch yet

    result = github_tick(repo, fake_github, datetime.now(UTC))
    assert result.rendered == (run_id,)
    state, files = read_state(repo)
    tracks = state.tracks[run_id]
    assert tracks["build"].result == {"summary": "built docs"}  # from the artifact
    assert tracks["stuck"].phase is TrackPhase.TAPPED_OUT
    assert state.runs[run_id].status is RunStatus.FAILED
    assert layout.brief_path(run_id) in files


def test_a_schedule_with_a_fan_in_job_sends_no_fan_in_input(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    """An older track.yml without the input keeps taking the default schedules' batches."""
    _start(tmp_path, fake_github)
    [call] = fake_github.dispatches
    assert "fan_in" not in call.body["inputs"]


@pytest.mark.slow
def test_a_missing_artifact_is_recovered_from_the_job_s_conclusion(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin, repo, run_id, ci_run, inputs = _start(tmp_path, fake_github, TRACKS[:2])
    player = Player(fake_github, origin, tmp_path / "play")
    _play_legs(player, ci_run, inputs)
    lost = f"{run_id}--broken--1"
    for artifact in fake_github.artifacts.values():
        if artifact.name == lost:
            artifact.expired = True  # or never uploaded: no outcome either way
    fake_github.set_job(ci_run, "fan-in", "completed", "cancelled")

    github_tick(repo, fake_github, datetime.now(UTC))
    state, _ = read_state(repo)
    tracks = state.tracks[run_id]
    assert tracks["build"].result == {"summary": "built docs"}
    assert tracks["broken"].phase is TrackPhase.FAILED
    assert f"job {lost} concluded failure" in tracks["broken"].error_log[-1]
    assert state.runs[run_id].status is RunStatus.FAILED


@pytest.mark.slow
def test_a_fan_in_job_racing_two_cron_ticks_records_each_outcome_once(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin, repo, run_id, ci_run, inputs = _start(tmp_path, fake_github)
    player = Player(fake_github, origin, tmp_path / "play")
    _play_legs(player, ci_run, inputs)
    clones = [clone(origin, tmp_path / f"cron{i}") for i in range(2)]
    fake_github.set_job(ci_run, "fan-in", "in_progress")
    outcomes = tmp_path / "outcomes"
    for archive in fake_github.download_all(ci_run).values():
        for file, data in archive.items():
            outcomes.mkdir(exist_ok=True)
            (outcomes / file).write_bytes(data)

    fan_in_repo = clone(origin, tmp_path / "fan-in")
    before = _commits(repo)
    run_ticks([start_github_tick(fan_in_repo, None, fake_github, "--run", run_id,
                                 "--outcomes", str(outcomes)),
               *(start_github_tick(c, None, fake_github) for c in clones)])

    # one won the batch, the others re-planned to nothing; one cron tick recorded the
    # weekly check of the scheduled workflows (the other found it recorded)
    assert _commits(repo) == before + 2
    state, files = read_state(repo)
    history = _history(state, run_id)
    # each outcome recorded once, whoever won
    assert history == {"build": ["dispatched", "complete"],
                       "broken": ["dispatched", "failed"],
                       "stuck": ["dispatched", "tapped_out"]}
    run = state.runs[run_id]
    assert [str(h.to) for h in run.state_history].count("consolidating") == 1
    assert run.status is RunStatus.FAILED
    polls = files[layout.polls_path(run_id)].decode()
    assert polls.count("brief rendered") == 1  # one consolidation, one brief
    assert list(files).count(layout.brief_path(run_id)) == 1


@pytest.mark.slow
def test_the_run_s_own_tick_fires_no_slot_and_advances_only_its_run(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin, repo, run_id, ci_run, inputs = _start(tmp_path, fake_github, TRACKS[:1])
    player = Player(fake_github, origin, tmp_path / "play")
    # another schedule fell due meanwhile: only a cron tick may fire it
    checkout = player._checkout("fan-in")
    due = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    (checkout / "schedules" / "later.json").write_text(json.dumps(
        {"at": f"{due:%Y-%m-%dT%H:%M}Z", "tracks": [{"name": "x", "run": "true"}]}))
    _play_legs(player, ci_run, inputs)
    played = player.play_fan_in(ci_run, inputs)
    assert played.conclusion == "success", [p.stderr for p in played.output]

    state, _ = read_state(repo)
    assert list(state.runs) == [run_id] and "later" not in state.cursors
    assert state.runs[run_id].status is RunStatus.COMPLETED
    github_tick(checkout, fake_github, datetime.now(UTC))
    state, _ = read_state(repo)
    assert sorted(state.runs) == sorted([run_id, f"later--{due:%Y%m%dT%H%MZ}"])


@pytest.mark.slow
def test_the_consolidate_step_on_github_sees_every_result_and_heads_the_run(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    """The fan-in job of the first batch dispatches the consolidate step as a batch of
    its own; its leg gets ORCHESTRATOR_RESULTS, as a local consolidate step does."""
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    merge = ('python3 -c "import json,os; r=json.load(open(os.environ[\'ORCHESTRATOR_RESULTS\']));'
             ' json.dump({\'summary\': \',\'.join(sorted(n + \'=\' + r[n][\'phase\'] for n in r))},'
             ' open(os.environ[\'ORCHESTRATOR_RESULT\'], \'w\'))"')
    origin = make_origin(tmp_path, {"nightly": {
        "at": f"{slot:%Y-%m-%dT%H:%M}Z", "tracks": TRACKS[:2],
        "consolidate": {"run": merge}}})
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake_github, datetime.now(UTC))
    fake_github.now = None
    [first] = fake_github.dispatches
    inputs = first.body["inputs"]
    assert sorted(leg["track"] for leg in json.loads(inputs["tracks"])) == ["broken", "build"]
    [ci_run] = fake_github.runs
    player = Player(fake_github, origin, tmp_path / "play")
    _play_legs(player, ci_run, inputs)
    assert player.play_fan_in(ci_run, inputs).conclusion == "success"

    # the fan-in job dispatched the next stage: the consolidate step, with the results
    second = fake_github.dispatches[-1]
    [leg] = json.loads(second.body["inputs"]["tracks"])
    assert leg["track"] == "consolidate" and set(leg["results"]) == {"build", "broken"}
    ci_run2 = max(fake_github.runs)
    _play_legs(player, ci_run2, second.body["inputs"])
    assert player.play_fan_in(ci_run2, second.body["inputs"]).conclusion == "success"

    state, _ = read_state(repo)
    run_id = inputs["run_id"]
    consolidate = state.tracks[run_id]["consolidate"]
    assert consolidate.phase is TrackPhase.COMPLETE
    assert consolidate.result == {"summary": "broken=failed,build=complete"}
    assert state.runs[run_id].status is RunStatus.FAILED  # `broken` failed


@pytest.mark.slow
def test_the_fan_in_job_opens_the_issue_of_the_run_it_finishes_failed(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    """The fan-in job is the tick that sees the run fail, so it tells the issue channel
    (track.yml gives it ``issues: write``); the cron tick after it opens nothing more."""
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    origin = make_origin(tmp_path, {"nightly": {"at": f"{slot:%Y-%m-%dT%H:%M}Z",
                                                "tracks": TRACKS[:2]}})
    seed = tmp_path / "seed"
    (seed / "orchestrator.json").write_text(json.dumps({"notify": {"github_issues": True}}))
    git("add", "orchestrator.json", cwd=seed)
    git("commit", "--quiet", "-m", "issues", cwd=seed)
    git("push", "--quiet", "origin", "HEAD:main", cwd=seed)
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake_github, datetime.now(UTC))
    fake_github.now = None
    [call] = fake_github.dispatches
    [ci_run] = fake_github.runs
    inputs, run_id = call.body["inputs"], call.body["inputs"]["run_id"]
    player = Player(fake_github, origin, tmp_path / "play")
    _play_legs(player, ci_run, inputs)
    played = player.play_fan_in(ci_run, inputs)
    assert played.conclusion == "success", [p.stderr for p in played.output]
    said = "".join(p.stdout + p.stderr for p in played.output)
    assert f"run_failed:{run_id}:1: opened #1" in said
    [issue] = fake_github.issues.issues.values()
    assert (issue.title, issue.state) == ("orchestrator: nightly is failing", "open")
    assert f"<!-- orchestrator:streak {run_id} -->" in (issue.body or "")
    github_tick(repo, fake_github, datetime.now(UTC), {**os.environ, **fake_github.env()})
    assert len(fake_github.issues.issues) == 1
    state, files = read_state(repo)
    assert state.runs[run_id].status is RunStatus.FAILED
    record, problem = notify_record.read(files)
    assert record is not None, problem
    assert record.streaks["nightly"].issue == 1 and record.outbox == []


def test_a_fan_in_tick_names_every_outcome_entry_it_skips_and_opens_no_fifo(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    tracks = [{"name": name, "run": "true"} for name in ("good", "cut", "linked", "piped")]
    _origin, repo, run_id, _ci_run, _inputs = _start(tmp_path, fake_github, tracks)
    ended = datetime.now(UTC)

    def outcome(track: str) -> bytes:
        return outcomes.dump(outcomes.build(run_id=run_id, track=track, attempt=1,
                                            exit_code=0, started_at=ended - timedelta(
                                                seconds=2), finished_at=ended))

    folder = tmp_path / "downloaded"
    folder.mkdir()
    (folder / f"{run_id}--good--1.json").write_bytes(outcome("good"))
    (folder / f"{run_id}--cut--1.json").write_bytes(outcome("cut")[:30])  # truncated
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(outcome("linked"))
    (folder / f"{run_id}--linked--1.json").symlink_to(elsewhere)
    os.mkfifo(folder / f"{run_id}--piped--1.json")  # opening it to read would block

    [out] = run_ticks([start_github_tick(repo, None, fake_github, "--run", run_id,
                                         "--outcomes", str(folder))])
    lines = out.splitlines()
    for track, why in (("cut", "Invalid JSON"), ("linked", "a symbolic link"),
                       ("piped", "not a regular file (a FIFO)")):
        named = [line for line in lines if f"{run_id}--{track}--1.json skipped" in line]
        assert len(named) == 1 and why in named[0], out
    state, _ = read_state(repo)
    phases = {name: t.phase for name, t in state.tracks[run_id].items()}
    assert phases == {"good": TrackPhase.COMPLETE, "cut": TrackPhase.DISPATCHED,
                      "linked": TrackPhase.DISPATCHED, "piped": TrackPhase.DISPATCHED}
