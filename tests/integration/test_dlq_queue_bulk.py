"""``dlq requeue --queue`` and ``dlq discard --queue``, through the real CLI on a real
git origin: one queue's dead items, after a bad deploy, changed in one commit while
another queue's dead item and a run's dead letter stay as they were."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.drive import STATE_BRANCH, cli, tick
from tests.gitrepo import clone, make_origin
from tests.integration.test_queue_local import open_state, settle

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "crawl--20261201T0700Z"
PAGES = [f"page-{n}" for n in range(4)]


def _drain(queue: str) -> dict[str, Any]:
    """A drain track whose every item fails its one attempt."""
    return {"name": queue, "max_attempts": 1, "retry_backoff_seconds": 0,
            "timeout_minutes": 5, "run": "echo 'bad deploy' >&2; exit 3",
            "drain": {"queue": queue, "task_cap": 25, "max_workers": 1}}


def crawl() -> dict[str, Any]:
    return {"cron": "0 7 * * *", "tracks": [
        _drain("pages"), _drain("links"),
        {"name": "report", "max_attempts": 1, "retry_backoff_seconds": 0, "run": "exit 1"}]}


@pytest.fixture(scope="module")
def dead_origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An origin whose queue ``pages`` holds 4 dead items, queue ``links`` 1, and
    whose run has the dead letter of its track ``report``; built once, copied per test."""
    tmp = tmp_path_factory.mktemp("dead")
    origin = make_origin(tmp, {"crawl": crawl()})
    repo = clone(origin, tmp / "repo")
    items = tmp / "items.jsonl"
    items.write_text("".join(json.dumps({"payload": {"n": k}, "key": k}) + "\n"
                             for k in PAGES))
    cli(repo, "queue", "add", "pages", "--file", str(items), "--now",
        "2026-12-01T06:00:00Z", check=True)
    cli(repo, "queue", "add", "links", "--payload", '{"n": 1}', "--key", "link-1",
        "--now", "2026-12-01T06:00:00Z", check=True)
    work = tmp / "work"
    settle(work, tick(repo, T0, work).dispatched)
    tick(repo, T0 + timedelta(minutes=1), work)
    return origin


@pytest.fixture
def repo(dead_origin: Path, tmp_path: Path) -> Path:
    origin = tmp_path / "origin.git"
    shutil.copytree(dead_origin, origin)
    return clone(origin, tmp_path / "repo")


def _waiting(repo: Path) -> list[str]:
    return sorted(d["key"] for d in json.loads(cli(repo, "dlq", "list", "--json",
                                                   check=True).stdout))


def _state_log(repo: Path) -> list[str]:
    subprocess.run(["git", "fetch", "--quiet", "origin", STATE_BRANCH], cwd=repo, check=True)
    return subprocess.run(["git", "log", "--format=%s", "FETCH_HEAD"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.splitlines()


def _orchestrator(repo: Path, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """The CLI with ``stdin`` as its input (a confirmation's answer, or none at all)."""
    return subprocess.run([sys.executable, "-m", "orchestrator", "--repo", str(repo), *args],
                          input=stdin, capture_output=True, text=True, timeout=120,
                          check=False)


def test_requeue_queue_requeues_that_queues_dead_items_alone_in_one_commit(
        repo: Path) -> None:
    dead = _waiting(repo)
    links = [k for k in dead if k.startswith("links/")]
    assert f"{RUN}--report" in dead and len(links) == 1
    assert sum(k.startswith("pages/") for k in dead) == len(PAGES)
    before = _state_log(repo)
    done = cli(repo, "dlq", "requeue", "--queue", "pages", "--reason", "deploy rolled back",
               "--yes", "--now", "2026-12-01T08:00:00Z", check=True)
    assert done.stdout.count("requeued pages/") == len(PAGES)
    assert "the next tick dispatches them" in done.stdout
    assert _waiting(repo) == sorted([f"{RUN}--report", *links])  # untouched
    after = _state_log(repo)
    assert len(after) == len(before) + 1
    assert after[0] == f"dlq: requeue {len(PAGES)} dead letters of queue pages"
    state, _ = open_state(repo)
    book = state.queues["pages"]
    assert book.dead == {} and book.counts == {"ready": len(PAGES)}
    item = json.loads(cli(repo, "queue", "show", "pages", PAGES[0], "--json",
                          check=True).stdout)
    assert item["status"] == "ready" and item["attempt"] == 0
    assert "deploy rolled back" in item["state_history"][-1]["reason"]
    # nothing left of that queue: nothing to do, the way --schedule says it
    again = cli(repo, "dlq", "requeue", "--queue", "pages", "--yes", check=True)
    assert again.stdout.strip() == "no dead letters of queue pages: nothing to requeue"
    assert len(_state_log(repo)) == len(after)


def test_discard_queue_marks_that_queues_dead_items_in_one_commit(repo: Path) -> None:
    before = _state_log(repo)
    done = cli(repo, "dlq", "discard", "--queue", "pages", "--reason", "obsolete", "--yes",
               check=True)
    assert done.stdout.count("discarded pages/") == len(PAGES)
    assert _state_log(repo)[0] == f"dlq: discard {len(PAGES)} dead letters of queue pages"
    assert len(_state_log(repo)) == len(before) + 1
    waiting = _waiting(repo)
    assert f"{RUN}--report" in waiting and not any(k.startswith("pages/") for k in waiting)
    kept = json.loads(cli(repo, "dlq", "list", "--all", "--json", check=True).stdout)
    pages = [d for d in kept if d["key"].startswith("pages/")]
    assert len(pages) == len(PAGES)
    assert all(d["discarded"] and d["discarded_reason"] == "obsolete" for d in pages)
    again = cli(repo, "dlq", "discard", "--queue", "pages", "--reason", "obsolete",
                "--yes", check=True)
    assert again.stdout.strip() == "no dead letters of queue pages: nothing to discard"


@pytest.mark.slow
def test_queue_asks_first_with_the_count_as_schedule_does(repo: Path) -> None:
    before = _waiting(repo)
    no = _orchestrator(repo, "dlq", "requeue", "--queue", "pages", stdin="n\n")
    assert no.returncode == 1
    assert f"requeue {len(PAGES)} dead letter(s) of queue pages?" in no.stderr
    assert "not confirmed: no dead letter was requeued" in no.stderr
    silent = _orchestrator(repo, "dlq", "discard", "--queue", "pages", "--reason", "x",
                           stdin="")  # non-interactive, no --yes: the same as --schedule
    schedule = _orchestrator(repo, "dlq", "discard", "--schedule", "crawl", "--reason", "x",
                             stdin="")
    assert silent.returncode == schedule.returncode != 0
    assert _waiting(repo) == before
    yes = _orchestrator(repo, "dlq", "requeue", "--queue", "pages", stdin="y\n")
    assert yes.returncode == 0 and yes.stdout.count("requeued pages/") == len(PAGES)


@pytest.mark.parametrize(("args", "code", "says"), [
    (["links/x", "--queue", "pages"], 2, "choose one selector"),
    (["--schedule", "crawl", "--queue", "pages"], 2, "choose one selector"),
    (["--all", "--queue", "pages"], 2, "choose one selector"),
    (["--queue", "../pages"], 1, "invalid queue '../pages'"),
    (["--queue", "nope"], 0, "no queue 'nope': nothing to requeue"),
])
def test_queue_refusals_change_nothing(repo: Path, args: list[str], code: int,
                                       says: str) -> None:
    before = _state_log(repo)
    refused = _orchestrator(repo, "dlq", "requeue", *args, "--yes", stdin="")
    assert refused.returncode == code, refused.stderr
    assert says in refused.stdout + refused.stderr
    # one line says why (a usage error's is click's "Error:" line, under the usage)
    told = [line for line in (refused.stdout + refused.stderr).splitlines()
            if line and not line.startswith(("Usage:", "Try "))]
    assert len(told) == 1 and says in told[0]
    assert _state_log(repo) == before
