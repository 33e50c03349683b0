"""Work queues drained on GitHub: the fake GitHub API, ``track.yml``'s jobs played as a
runner plays them (:mod:`tests.workflow_player`), a real bare origin.

Each fire is one cron tick (sizing, claims, one ``workflow_dispatch`` batch of worker
legs), the legs (``orchestrator queue work`` reading their payloads from the state
branch, uploading their outcome artifacts) and the batch's fan-in job, which records
every item of every leg in one push.

The cron ticks decide as of slots a little ahead of the clock (``--now``), the legs and
the fan-in job run on the real clock, as on GitHub; slots lie 10 minutes apart, ahead
of everything the legs and fan-in jobs write.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.state.items import key_id
from tests import queues
from tests.drive import STATE_BRANCH, cli, github_tick, read_state
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, git, make_origin
from tests.workflow_player import Player


def _commits(repo: Path) -> int:
    git("fetch", "--quiet", "origin", STATE_BRANCH, cwd=repo)
    return int(git("rev-list", "--count", "FETCH_HEAD", cwd=repo))


def _next_slot() -> datetime:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return now + timedelta(minutes=20 - now.minute % 10)


TASK_CAP = 60
"""Items per leg: 4 legs of 60 drain the 480 items in two full batches, then the failing
items' second attempts go in a third."""


def schedule(run: str) -> dict[str, Any]:
    return {"cron": "*/10 * * * *", "tracks": [{
        "name": "pages", "run": run, "max_attempts": 2, "retry_backoff_seconds": 0,
        "timeout_minutes": 5,
        "drain": {"queue": queues.QUEUE, "task_cap": TASK_CAP, "max_workers": 4}}]}


@pytest.mark.slow
def test_a_backlog_of_500_is_drained_on_github_one_push_per_batch(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    log = tmp_path / "worked.log"
    origin = make_origin(tmp_path, {"crawl": schedule(queues.worker_command(log))})
    repo = clone(origin, tmp_path / "repo")
    cli(repo, "queue", "add", queues.QUEUE, "--file",
        str(queues.write_backlog(tmp_path / "items.jsonl")), check=True)
    cli(repo, "queue", "add", queues.QUEUE, "--payload", '{"url": "vip"}', "--key",
        queues.PRIORITY_KEY, "--priority", "10", check=True)
    # the legs of a batch run at once, as runners run them, each in its own checkout
    player = Player(fake_github, origin, tmp_path / "play", shared_checkout=False)

    slot = _next_slot()
    fires: list[list[dict[str, Any]]] = []
    for _ in range(10):
        github_tick(repo, fake_github, slot)
        fake_github.now = None  # the legs and the fan-in job keep the real clock
        [call] = fake_github.dispatches[len(fires):]
        ci_run = max(fake_github.runs)
        inputs = call.body["inputs"]
        legs = player.legs(inputs)
        fires.append(legs)
        with ThreadPoolExecutor(len(legs)) as pool:
            runs = [pool.submit(player.play_leg, ci_run, inputs, leg) for leg in legs]
            for played in (r.result() for r in runs):
                assert played.conclusion == "success", [p.stderr for p in played.output]
        before = _commits(repo)
        played = player.play_fan_in(ci_run, inputs)
        assert played.conclusion == "success", [p.stderr for p in played.output]
        assert _commits(repo) == before + 1  # the whole batch, every item: one push
        _, files = read_state(repo)
        book = queues.book_of(files)
        if not book.backlog and not book.claims:
            break
        slot += timedelta(minutes=10)

    assert all(len(legs) <= 4 for legs in fires)
    # the caps bit: the first batch was full, and the backlog took more than one
    assert [len(leg["items"]) for leg in fires[0]] == [TASK_CAP] * 4 and len(fires) >= 3
    assert all(len(leg["items"]) <= TASK_CAP for legs in fires for leg in legs)
    assert fires[0][0]["items"][0][0] == key_id(queues.QUEUE, queues.PRIORITY_KEY)
    counts = queues.worked(log)
    failing = set(queues.ids(queues.failing_keys()))
    good = set(queues.ids(queues.unique_keys())) - failing
    assert {i for i, n in counts.items() if n == 1} == good
    assert {i: counts[i] for i in failing} == dict.fromkeys(failing, 2)
    _, files = read_state(repo)
    assert queues.book_of(files).counts == {"done": len(good), "dead": len(failing)}
    # the legs asked GitHub nothing; the fan-in jobs read no job or artifact listing
    assert fake_github.calls("jobs") == [] and fake_github.calls("artifacts") == []
    assert fake_github.contract_violations() == []
