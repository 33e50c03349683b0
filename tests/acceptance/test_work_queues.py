"""A user with a backlog: ``queue add | list | show | stats | purge | work``, a drain
track working it, its dead items in ``dlq`` (show, requeue, discard) and in
``status``, as someone at a terminal would run them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.acceptance.cliuser import User


@pytest.mark.slow
def test_a_backlog_drained_with_its_dead_letters_handled_by_hand(
        tmp_path: Path, scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    log = tmp_path / "worked.log"
    run = (f'echo "$ORCHESTRATOR_ITEM_ID" >> {log}; '
           'grep -q broken "$ORCHESTRATOR_ITEM" && { echo "404 for it" >&2; exit 4; }; '
           'printf \'{"summary": "fetched"}\' > "$ORCHESTRATOR_RESULT"')
    (user.cwd / "schedules" / "crawl.json").write_text(json.dumps({
        "cron": "*/10 * * * *", "tracks": [{
            "name": "pages", "run": run, "max_attempts": 1,
            "drain": {"queue": "pages", "task_cap": 2, "max_workers": 2}}]}))
    user.run("cron-sync")
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"payload": {"url": u}, "key": u}) + "\n"
                             for u in ("a", "b", "broken-1", "broken-2")))
    added = user.run("queue", "add", "pages", "--file", str(items),
                     "--now", "2026-12-01T06:00:00Z").stdout
    assert added.strip() == "pages: 4 added, 0 already there"
    again = user.run("queue", "add", "pages", "--payload", '{"url": "a"}', "--key", "a",
                     "--now", "2026-12-01T06:01:00Z").stdout
    assert again.strip() == "pages: 0 added, 1 already there"
    stats = user.json("queue", "stats", "pages", "--json", "--now", "2026-12-01T07:00:00Z")
    assert stats["counts"] == {"ready": 4} and stats["oldest_ready_age_seconds"] == 3600

    fired = user.tick("2026-12-01T07:00:00Z")
    assert len(fired["dispatched"]) == 2  # 4 items, 2 a worker
    user.tick("2026-12-01T07:01:00Z")
    shown = user.json("queue", "show", "pages", "a", "--json")  # by its key
    assert shown["status"] == "done" and shown["result"] == {"summary": "fetched"}
    status = user.run("status", "--now", "2026-12-01T07:02:00Z", "--max-staleness", "60",
                      "--fail-on-dead-letters", expect=6).stdout
    assert "pages  backlog 0, 2 done, 2 dead" in status
    assert "dead letters  2 (2 of them items)" in status

    lines = user.run("dlq", "list").stdout.splitlines()
    assert len(lines) == 2 and all("max_retries_exceeded" in line for line in lines)
    back, gone = (line.split()[0] for line in lines)
    assert back.startswith("pages/")
    detail = user.run("dlq", "show", back).stdout
    assert "404 for it" in detail and "exit code 4" in detail
    user.run("dlq", "requeue", back, "--reason", "the site is back", "--by", "ops",
             "--now", "2026-12-01T07:05:00Z")
    user.run("dlq", "discard", gone, "--reason", "the page is gone", "--by", "ops")
    assert user.run("dlq", "list").stdout.strip() == "dead letter queue is empty"
    history = user.json("dlq", "show", gone, "--json")["state_history"]
    assert [h["reason"] for h in history if h["by"] == "ops"] == [
        "discarded by ops: the page is gone"]
    assert log.read_text().count("\n") == 4  # each item once
    counted = user.json("queue", "stats", "pages", "--json")
    assert counted["counts"].get("dead") is None and counted["counts"]["discarded"] == 1
    assert "1 discarded" in user.run("queue", "stats", "pages").stdout

    # Done 20 minutes before: --older-than-days 0 purges it; --dry-run only lists.
    listed = user.run("queue", "purge", "pages", "--status", "done", "--older-than-days",
                      "0", "--now", "2026-12-01T07:21:00Z", "--dry-run").stdout
    assert listed.splitlines()[-1] == "pages: 2 done item(s) would be purged (dry run)"
    assert len(listed.splitlines()) == 3 and listed.startswith("pages/")
    assert len(user.json("queue", "list", "pages", "--json")) == 4
    purged = user.run("queue", "purge", "pages", "--status", "done", "--older-than-days",
                      "0", "--now", "2026-12-01T07:21:00Z").stdout
    assert purged.strip() == "pages: 2 done item(s) purged"
    left = user.json("queue", "list", "pages", "--json")
    assert sorted(row["status"] for row in left) == ["dead", "ready"]  # requeued, discarded


def test_a_worker_leg_never_works_an_item_it_does_not_hold(
        tmp_path: Path, scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("queue", "add", "pages", "--payload", '"p"', "--key", "x")
    item = user.json("queue", "show", "pages", "x", "--json")["id"]
    out = tmp_path / "outcomes"
    proc = user.run("queue", "work", "--run", "crawl--20261201T0700Z", "--track", "pages-w1",
                    "--attempt", "1", "--queue", "pages", "--items", json.dumps([[item, 1]]),
                    "--wall-minutes", "1", "--command", f"touch {tmp_path / 'ran'}",
                    "--output", str(out))
    assert "not held by crawl--20261201T0700Z--pages-w1--1; left alone" in proc.stderr
    assert not (tmp_path / "ran").exists()
    outcome = json.loads((out / "crawl--20261201T0700Z--pages-w1--1.json").read_text())
    assert outcome["phase"] == "complete" and outcome["items"] == []
    assert user.json("queue", "show", "pages", "x", "--json")["status"] == "ready"
