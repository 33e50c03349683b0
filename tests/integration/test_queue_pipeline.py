"""A pipeline in one run: a track enqueues 100 items (``ORCHESTRATOR_ENQUEUE``) and a
drain track that ``needs`` it works them, locally and on GitHub (where the fan-in job
of the first batch records the enqueue, sizes the drain and dispatches its workers)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.state import model as state_model
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.store import GitStateStore
from tests import queues
from tests.drive import STATE_BRANCH, github_tick, read_state, tick
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, make_origin
from tests.integration.test_queue_local import settle
from tests.workflow_player import Player

FIND = ("python3 -c 'import json, os; f = open(os.environ[\"ORCHESTRATOR_ENQUEUE\"], \"w\"); "
        "[f.write(json.dumps({\"queue\": \"pages\", \"payload\": {\"n\": n}, "
        "\"key\": \"found-%d\" % n}) + \"\\n\") for n in range(100)]'")


def pipeline(log: Path) -> dict[str, Any]:
    return {"cron": "0 * * * *", "tracks": [
        {"name": "find", "run": FIND},
        {"name": "pages", "run": queues.worker_command(log), "needs": ["find"],
         "drain": {"queue": queues.QUEUE, "task_cap": 25, "max_workers": 4}}]}


def _found() -> list[str]:
    return queues.ids([f"found-{n}" for n in range(100)])


@pytest.mark.slow
def test_a_track_enqueues_100_items_and_the_next_stage_drains_them_in_the_same_run(
        tmp_path: Path) -> None:
    log = tmp_path / "worked.log"
    repo = clone(make_origin(tmp_path, {"crawl": pipeline(log)}), tmp_path / "repo")
    work = tmp_path / "work"
    t0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
    first = tick(repo, t0, work)
    settle(work, first.dispatched)
    second = tick(repo, t0 + timedelta(minutes=1), work)  # find complete: enqueue, size
    assert len(second.dispatched) == 4
    settle(work, second.dispatched)
    third = tick(repo, t0 + timedelta(minutes=2), work)
    run_id = "crawl--20261201T0700Z"
    assert third.rendered == (run_id,)
    assert queues.worked(log) == dict.fromkeys(_found(), 1)
    snap = GitStateStore(repo, "origin", STATE_BRANCH).read()
    state = state_model.load(snap.files, all_tracks=True)
    assert state.runs[run_id].status is RunStatus.COMPLETED
    pages = state.tracks[run_id]["pages"]
    assert pages.result is not None and pages.result["drained"] == 100
    assert pages.result["remaining"] == 0
    assert "find: enqueued 100 item(s) to pages" in snap.files[
        f"state/runs/{run_id}/polls.jsonl"].decode()


@pytest.mark.slow
def test_on_github_the_fan_in_job_enqueues_sizes_and_dispatches_the_next_stage(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    log = tmp_path / "worked.log"
    origin = make_origin(tmp_path, {"crawl": pipeline(log)})
    repo = clone(origin, tmp_path / "repo")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    slot = now.replace(minute=0) + timedelta(hours=1)
    github_tick(repo, fake_github, slot)
    fake_github.now = None
    player = Player(fake_github, origin, tmp_path / "play", shared_checkout=False)
    [find_call] = fake_github.dispatches
    [find_leg] = player.legs(find_call.body["inputs"])
    first = max(fake_github.runs)
    played = player.play_leg(first, find_call.body["inputs"], find_leg)
    assert played.conclusion == "success", [p.stderr for p in played.output]
    outcome = json.loads(next((tmp_path / "play").rglob(f"{find_leg['key']}.json"))
                         .read_text())
    assert len(outcome["enqueue"]) == 100  # the items travel in the leg's outcome
    played = player.play_fan_in(first, find_call.body["inputs"])
    assert played.conclusion == "success", [p.stderr for p in played.output]

    [_, drain_call] = fake_github.dispatches  # dispatched by the fan-in job
    inputs = drain_call.body["inputs"]
    legs = player.legs(inputs)
    assert [len(leg["items"]) for leg in legs] == [25, 25, 25, 25]
    second = max(fake_github.runs)
    with ThreadPoolExecutor(len(legs)) as pool:
        for run in [pool.submit(player.play_leg, second, inputs, leg) for leg in legs]:
            assert run.result().conclusion == "success"
    played = player.play_fan_in(second, inputs)
    assert played.conclusion == "success", [p.stderr for p in played.output]
    assert queues.worked(log) == dict.fromkeys(_found(), 1)
    state, _ = read_state(repo)
    run_id = inputs["run_id"]
    assert state.runs[run_id].status is RunStatus.COMPLETED
    assert state.tracks[run_id]["pages"].phase is TrackPhase.COMPLETE
