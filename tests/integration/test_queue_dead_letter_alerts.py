"""Queue items that die are told to a webhook, end to end: real git (a bare origin),
real ticks in this process, a real worker process of the local executor whose items
all fail, and a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.notify.events import GROUP_ABOVE
from tests.drive import cli, tick
from tests.gitrepo import clone, make_origin
from tests.integration.test_queue_local import open_state, settle
from tests.receiver import Receiver

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "crawl--20261201T0700Z"


def crawl() -> dict[str, Any]:
    """A drain track whose every item fails its one attempt, with a Python-like error."""
    return {"cron": "*/10 * * * *", "tracks": [{
        "name": "pages", "max_attempts": 1, "retry_backoff_seconds": 0,
        "timeout_minutes": 5,
        "run": "echo 'Traceback (most recent call last):' >&2; echo \"KeyError: 'url'\" >&2;"
               " exit 3",
        "drain": {"queue": "pages", "task_cap": 25, "max_workers": 1}}]}


@pytest.mark.parametrize("count", [3, 8])
def test_items_dead_in_a_drain_reach_a_webhook_once(
        tmp_path: Path, receiver: Callable[[str], Receiver], count: int) -> None:
    hook = receiver("ok")
    repo = clone(make_origin(tmp_path, {"crawl": crawl()}), tmp_path / "repo")
    (repo / "orchestrator.json").write_text(json.dumps({"notify": {"webhooks": [
        {"url_secret": "QUEUE_WEBHOOK", "events": ["queue_dead_letter"]}]}}))
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"payload": {"n": n}, "key": f"page-{n}"}) + "\n"
                             for n in range(count)))
    cli(repo, "queue", "add", "pages", "--file", str(items), "--now",
        "2026-12-01T06:00:00Z", check=True)
    work = tmp_path / "work"
    environ = {**os.environ, "QUEUE_WEBHOOK": hook.url}

    fired = tick(repo, T0, work, environ=environ)
    assert hook.requests == []  # claimed, not dead yet
    settle(work, fired.dispatched)
    recorded = tick(repo, T0 + timedelta(minutes=1), work, environ=environ)
    assert sum("delivered (200)" in line for line in recorded.log) == len(hook.requests)

    state, _ = open_state(repo)
    dead = sorted(state.queues["pages"].dead)
    assert len(dead) == count
    events = hook.events()
    assert {e["kind"] for e in events} == {"queue_dead_letter"}
    assert {r.headers["idempotency-key"] for r in hook.requests} == {e["id"] for e in events}
    if count <= GROUP_ABOVE:  # one event per item
        assert sorted(e["details"]["item"] for e in events) == dead
        for event in events:
            key = f"pages/{event['details']['item']}"
            assert event["details"]["requeue"] == f"orchestrator dlq requeue {key} --reason REASON"
            assert event["details"]["attempts"] == "1"
            assert event["details"]["error"].endswith("KeyError: 'url'")
            assert (event["schedule"], event["run_id"]) == ("crawl", RUN)
        # the key the commands name is one the dlq commands take
        shown = cli(repo, "dlq", "show", events[0]["details"]["key"], check=True).stdout
        assert "KeyError" in shown
    else:  # one event for the queue
        [event] = events
        assert event["details"]["count"] == str(count)
        assert set(event["details"]["items"].split(",")) <= set(dead)
        assert f"{count} items dead" in event["summary"]
        requeue = event["details"]["requeue"]
        assert requeue == "orchestrator dlq requeue --queue pages --reason REASON"

    told = len(hook.requests)
    for minute in (2, 10, 11):  # later ticks, the drain firing again on an empty backlog
        tick(repo, T0 + timedelta(minutes=minute), work, environ=environ)
    assert len(hook.requests) == told
    assert told == (count if count <= GROUP_ABOVE else 1)
    if count > GROUP_ABOVE:  # the command the event names requeues them all
        command = events[0]["details"]["requeue"].split()[1:-1]
        done = cli(repo, *command, "disk fixed", "--yes", check=True)
        assert done.stdout.count("requeued pages/") == count
        assert cli(repo, "dlq", "list", "--json", check=True).stdout.strip() == "[]"


# a tick of the CLI that says, as it exits, which notification modules it imported
_IMPORTS = """
import atexit, sys
from orchestrator.cli import main
atexit.register(lambda: print("imported:", sorted(
    m for m in sys.modules if m.startswith("orchestrator.notify")), file=sys.stderr))
sys.exit(main(sys.argv[1:]))
"""


def test_a_tick_whose_items_die_without_a_channel_imports_no_notification_code(
        tmp_path: Path) -> None:
    """Notifications cost nothing until configured: the tick that makes items dead
    derives no event and imports none of ``orchestrator.notify``."""
    repo = clone(make_origin(tmp_path, {"crawl": crawl()}), tmp_path / "repo")
    cli(repo, "queue", "add", "pages", "--payload", '{"n": 1}', "--now",
        "2026-12-01T06:00:00Z", check=True)
    work = tmp_path / "work"
    settle(work, tick(repo, T0, work).dispatched)
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORTS, "--repo", str(repo), "tick", "--now",
         "2026-12-01T07:01:00Z"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "ORCHESTRATOR_WORK_DIR": str(work)})
    assert proc.returncode == 0, proc.stderr
    assert "imported: []" in proc.stderr
    state, _ = open_state(repo)
    assert len(state.queues["pages"].dead) == 1  # the tick did make it dead
