"""Enqueueing from outside: ``enqueue.yml`` played as a runner plays it, for a
``repository_dispatch`` (type ``enqueue``, the items in ``client_payload``) and for a
``workflow_dispatch`` by hand; and ``queue add`` as a user runs it, with a bad line."""

from __future__ import annotations

from pathlib import Path

import yaml

from orchestrator.state.items import key_id
from tests import queues
from tests.drive import cli, read_state
from tests.fakes.github import WORKFLOWS, FakeGitHub
from tests.gitrepo import clone, make_origin
from tests.workflow_player import Player

ENQUEUE = WORKFLOWS / "enqueue.yml"


def _origin(tmp_path: Path) -> Path:
    """A queue whose drain only an event fires: the enqueue runs inside a tick, and a
    cron's slot of the last hour would fire it (and claim items) at some hours only."""
    return make_origin(tmp_path, {"crawl": {"on_event": {}, "tracks": [
        {"name": "pages", "run": "true", "drain": {"queue": queues.QUEUE}}]}})


def test_every_input_reaches_the_script_through_env_only() -> None:
    doc = yaml.safe_load(ENQUEUE.read_text())
    for job in doc["jobs"].values():
        # the enqueue is a tick: it asks for what tick.yml's tick does, no more
        assert job["permissions"] == {"contents": "write", "actions": "write",
                                      "checks": "read", "issues": "write"}
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), step


def test_a_repository_dispatch_enqueues_its_items_once_however_often_it_is_sent(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = _origin(tmp_path)
    player = Player(fake_github, origin, tmp_path / "play", workflow=ENQUEUE)
    items = [{"payload": {"url": f"https://example.org/{n}"}, "key": f"page-{n}"}
             for n in range(30)] + [{"payload": "urgent", "priority": 5}]
    event = {"action": "enqueue", "client_payload": {"queue": queues.QUEUE, "items": items}}
    played = player.play_event("enqueue", "repository_dispatch", event)
    assert played.conclusion == "success", [p.stderr for p in played.output]
    assert "pages: 31 added, 0 already there" in played.output[-1].stdout

    # the caller retried (its answer was lost): the keyed items are not added again
    played = player.play_event("enqueue", "repository_dispatch", event)
    assert "pages: 1 added, 30 already there" in played.output[-1].stdout
    repo = clone(origin, tmp_path / "check")
    book = queues.book_of(read_state(repo)[1])
    assert book.counts == {"ready": 32}
    assert book.item(key_id(queues.QUEUE, "page-7")).payload == {
        "url": "https://example.org/7"}


def test_a_bad_item_in_the_event_fails_the_job_and_adds_nothing(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = _origin(tmp_path)
    player = Player(fake_github, origin, tmp_path / "play", workflow=ENQUEUE)
    items = [{"payload": 1}, {"payload": 2, "priority": "high"}]
    played = player.play_event("enqueue", "repository_dispatch",
                               {"client_payload": {"queue": queues.QUEUE, "items": items}})
    assert played.conclusion == "failure"
    assert "client_payload.items: item 2: priority" in played.output[-1].stderr
    repo = clone(origin, tmp_path / "check")
    assert "state/queues/pages.json" not in read_state(repo)[1]


def test_a_workflow_dispatch_by_hand_enqueues_one_item(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = _origin(tmp_path)
    player = Player(fake_github, origin, tmp_path / "play", workflow=ENQUEUE)
    inputs = {"queue": queues.QUEUE, "payload": '{"url": "https://example.org/x"}',
              "key": "x; rm -rf /", "priority": "3", "not_before": ""}
    played = player.play_event("enqueue", "workflow_dispatch", {"inputs": inputs}, inputs)
    assert played.conclusion == "success", [p.stderr for p in played.output]
    repo = clone(origin, tmp_path / "check")
    item = queues.book_of(read_state(repo)[1]).item(key_id(queues.QUEUE, "x; rm -rf /"))
    assert item is not None and item.priority == 3
    assert item.state_history[0].by == "octocat"


def test_queue_add_names_the_bad_line_and_adds_nothing_of_the_file(tmp_path: Path) -> None:
    repo = clone(_origin(tmp_path), tmp_path / "repo")
    lines = tmp_path / "items.jsonl"
    lines.write_text('{"payload": 1, "key": "a"}\n{"payload": 2}\n{"payload": 3,\n')
    bad = cli(repo, "queue", "add", queues.QUEUE, "--file", str(lines))
    assert bad.returncode == 1
    assert "line 3 column 15: invalid JSON" in bad.stderr
    assert "nothing was added" in bad.stderr
    big = tmp_path / "big.jsonl"
    big.write_text('{"payload": 1}\n{"payload": "' + "x" * (64 * 1024) + '"}\n')
    bad = cli(repo, "queue", "add", queues.QUEUE, "--file", str(big))
    assert bad.returncode == 1 and "line 2: payload: 65538 bytes" in bad.stderr
    cli(repo, "queue", "add", queues.QUEUE, "--payload", "1", check=True)
    book = queues.book_of(read_state(repo)[1])
    assert book.counts == {"ready": 1}


def test_the_items_that_reach_on_queue_s_min_ready_fire_the_drain_in_their_own_run(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    """No tick in between: the enqueue's own commit fires the drain and dispatches it."""
    origin = make_origin(tmp_path, {"crawl": {
        "on_queue": {"queue": queues.QUEUE, "min_ready": 3},
        "tracks": [{"name": "pages", "run": "true", "drain": {"queue": queues.QUEUE}}]}})
    player = Player(fake_github, origin, tmp_path / "play", workflow=ENQUEUE)

    def enqueue(*keys: str) -> None:
        items = [{"payload": k, "key": k} for k in keys]
        played = player.play_event("enqueue", "repository_dispatch", {
            "action": "enqueue", "client_payload": {"queue": queues.QUEUE, "items": items}})
        assert played.conclusion == "success", [p.stderr for p in played.output]

    enqueue("a", "b")
    assert fake_github.dispatches == []
    enqueue("c")
    [sent] = fake_github.dispatches
    state, _ = read_state(clone(origin, tmp_path / "check"))
    [run] = state.runs.values()
    assert (run.schedule_id, run.origin) == ("crawl", "queue")
    assert sent.body["inputs"]["run_id"] == run.run_id
