"""A drain's fan-in job run again, and raced, on GitHub (the fake API, ``track.yml``'s
jobs played as a runner plays them): a worker's account is applied once, so reading it
again changes neither the items nor the drain's roll-up.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from orchestrator.state.phases import TrackPhase
from tests import queues
from tests.drive import cli, github_tick, read_state
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, make_origin
from tests.workflow_player import Player

ITEMS = 16


def _schedule(run: str) -> dict[str, Any]:
    return {"cron": "*/10 * * * *", "tracks": [{
        "name": "pages", "run": run, "max_attempts": 2, "retry_backoff_seconds": 0,
        "timeout_minutes": 5,
        "drain": {"queue": queues.QUEUE, "task_cap": ITEMS // 4, "max_workers": 4}}]}


def _next_slot() -> datetime:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return now + timedelta(minutes=20 - now.minute % 10)


def test_a_fan_in_run_again_and_raced_keeps_the_drain_s_roll_up(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    log = tmp_path / "worked.log"
    origin = make_origin(tmp_path, {"crawl": _schedule(queues.worker_command(log))})
    repo = clone(origin, tmp_path / "repo")
    for n in range(ITEMS):
        cli(repo, "queue", "add", queues.QUEUE, "--payload", f'{{"n": {n}}}', "--key",
            f"k{n}", check=True)
    player = Player(fake_github, origin, tmp_path / "play", shared_checkout=False)
    slot = _next_slot()
    github_tick(repo, fake_github, slot)
    fake_github.now = None  # the legs and the fan-in jobs keep the real clock
    [call] = fake_github.dispatches
    ci_run = max(fake_github.runs)
    inputs = call.body["inputs"]
    legs = player.legs(inputs)
    assert len(legs) == 4
    [run_id] = read_state(repo)[0].tracks
    for leg in legs[:3]:
        assert player.play_leg(ci_run, inputs, leg).conclusion == "success"
    # the fourth leg's runner died before it uploaded its outcome: the run waits for
    # that worker's lease
    fake_github.set_job(ci_run, legs[3]["key"], "completed", "failure")

    # the fan-in settles three workers and holds the fourth; it is re-run twice, and
    # raced by a second one
    for _ in range(2):
        assert player.play_fan_in(ci_run, inputs).conclusion == "success"
    with ThreadPoolExecutor(2) as pool:
        raced = [pool.submit(player.play_fan_in, ci_run, inputs) for _ in range(2)]
        assert [r.result().conclusion for r in raced] == ["success", "success"]
    state, files = read_state(repo)
    [tracks] = state.tracks.values()
    settled = [t for t in tracks.values() if t.work is not None and t.result is not None]
    assert len(settled) == 3
    assert all(t.result is not None and t.result["done"] == ITEMS // 4
               and t.result["refused"] == 0 for t in settled)

    # past the fourth worker's lease, a tick releases its items and the drain finishes
    github_tick(repo, fake_github, slot + timedelta(minutes=20))
    state, files = read_state(repo)
    drain = state.tracks[run_id]["pages"]
    assert drain.phase is TrackPhase.COMPLETE and drain.result is not None
    done = queues.book_of(files).counts["done"]
    assert done == 3 * ITEMS // 4
    assert drain.result["drained"] == done and drain.result["refused"] == 0
    assert drain.result["summary"].startswith(f"{done} drained, {ITEMS // 4} released by 4 "
                                              "worker(s)")
