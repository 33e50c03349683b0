"""Notifications as a user sets them up: ``notify test`` against two receivers, ``serve``
posting a failed run's webhook on the real clock, and the watchdog's ``status --notify``
telling a webhook that the clock went quiet. Receivers are real HTTP servers on
127.0.0.1; the webhooks' URLs travel in the environment, as secrets do."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest

from tests.acceptance.cliuser import User, reaped, terminate, wait
from tests.receiver import Receiver


def configure(user: User, **notify: object) -> None:
    (user.cwd / "orchestrator.json").write_text(json.dumps({"notify": notify}))


@pytest.mark.slow
def test_notify_test_says_what_each_channel_answered(
        scaffolded: tuple[User, Path], receiver: Callable[[str], Receiver],
        monkeypatch: pytest.MonkeyPatch) -> None:
    user, _ = scaffolded
    slack, broken = receiver("ok"), receiver("fail")
    monkeypatch.setenv("SLACK_WEBHOOK", slack.url)
    monkeypatch.setenv("ORCHESTRATOR_WEBHOOK", broken.url)
    configure(user, budget_seconds=2, webhooks=[
        {"url_secret": "SLACK_WEBHOOK", "format": "slack"},
        {"url_secret": "ORCHESTRATOR_WEBHOOK"}])
    user.run("validate")  # the settings are valid
    proc = user.run("notify", "test", "--event", "dead_letter", expect=1)
    first, second = proc.stdout.splitlines()
    assert first.startswith("webhook:slack:SLACK_WEBHOOK: test:dead_letter:")
    assert first.endswith("delivered (200)")
    assert second.startswith("webhook:json:ORCHESTRATOR_WEBHOOK: test:dead_letter:")
    assert "not sent: answered 500" in second
    assert "1 of 2 channel(s) did not accept the test event" in proc.stderr
    assert slack.events()[0]["blocks"][0]["text"]["text"] == "Dead letter: nightly"
    assert broken.events()[0]["kind"] == "dead_letter"
    # what a json webhook gets is what `schema --event` describes
    jsonschema.validate(broken.events()[0], json.loads(user.run("schema", "--event").stdout))
    assert slack.url not in proc.stdout + proc.stderr
    broken.mode = "ok"
    user.run("notify", "test")  # every channel accepts: exit 0


def test_notify_test_without_a_channel_says_how_to_add_one(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    proc = user.run("notify", "test", expect=1)
    assert "no channel configured: add \"notify\" to orchestrator.json" in proc.stderr


def test_serve_posts_the_webhook_of_a_failed_run(
        scaffolded: tuple[User, Path], receiver: Callable[[str], Receiver],
        monkeypatch: pytest.MonkeyPatch) -> None:
    user, _ = scaffolded
    hook = receiver("ok")
    monkeypatch.setenv("ORCHESTRATOR_WEBHOOK", hook.url)
    configure(user, webhooks=[{"url_secret": "ORCHESTRATOR_WEBHOOK", "events": ["run_failed"]}])
    user.run("schedules", "remove", "nightly")
    soon = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    user.run("schedules", "add", "once", "--at", soon, "--track", "t=false")
    with reaped(user.start("serve", "--interval", "1")) as proc:
        wait(lambda: bool(hook.requests), "serve posted no webhook", timeout=90)
        err = terminate(proc)
    [event] = hook.events()
    assert event["kind"] == "run_failed" and event["schedule"] == "once"
    assert "delivered (200)" in err


def test_the_watchdog_tells_a_webhook_the_clock_went_quiet(
        scaffolded: tuple[User, Path], receiver: Callable[[str], Receiver],
        monkeypatch: pytest.MonkeyPatch) -> None:
    user, _ = scaffolded
    hook = receiver("ok")
    monkeypatch.setenv("SLACK_WEBHOOK", hook.url)
    configure(user, webhooks=[{"url_secret": "SLACK_WEBHOOK", "format": "slack"}])
    user.run("tick", "--now", "2026-12-01T07:30:00Z")
    later = ("--now", "2026-12-01T12:00:00Z", "--max-staleness", "90")
    for _ in range(2):  # every watchdog run while the silence lasts, under one id
        proc = user.run("status", "--notify", *later, expect=5)
        assert "delivered (200)" in proc.stderr
    first, second = hook.events()
    assert first == second
    assert first["blocks"][0]["text"]["text"] == "No tick"
    assert "no tick since 2026-12-01T07:30:00Z" in first["text"]
    assert {r.headers["idempotency-key"] for r in hook.requests} == \
        {"tick_stale:20261201T073000Z"}
    fresh = user.run("status", "--notify", "--now", "2026-12-01T07:40:00Z")
    assert len(hook.requests) == 2 and fresh.stderr == ""  # a fresh clock says nothing
