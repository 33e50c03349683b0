"""Webhooks, end to end: real ticks (in this process, or as ``orchestrator`` processes
where they die on purpose) and real HTTP receivers on 127.0.0.1 that answer 200, answer
500, or hang."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from orchestrator.notify import record as notify_record
from tests.builders import spec_data
from tests.drive import cli, finished, launches, read_state, wait_until
from tests.drive import tick as tick_here
from tests.gitrepo import clone, make_origin
from tests.receiver import Receiver

RUN = "nightly--20261201T0700Z"
LETTER = f"{RUN}--bad"
EVENTS = [f"dead_letter:{LETTER}:20261201T070200Z", f"run_failed:{RUN}:1"]
TOKEN = "ghp_" + "T0kenShaped" * 4


def at(minute: int, second: int = 0) -> str:
    return f"2026-12-01T07:{minute:02d}:{second:02d}Z"


class Repo:
    """`nightly` at 07:00 runs `good` and `bad` (which prints a token-shaped string and
    fails); `other` at 07:02 runs one track that succeeds. Webhooks as ``hooks`` say."""

    def __init__(self, tmp: Path, hooks: list[dict[str, Any]], env: dict[str, str],
                 **notify: Any) -> None:
        self.work = tmp / "work"
        self.path = clone(make_origin(tmp, {
            "nightly": spec_data(tracks=[{"name": "good", "run": "true"}, {
                "name": "bad", "run": f"echo 'leaked {TOKEN}' >&2; exit 1"}]),
            "other": spec_data("2 7 * * *", tracks=["t"])}), tmp / "repo")
        (self.path / "orchestrator.json").write_text(json.dumps(
            {"notify": {"webhooks": hooks, **notify}}))
        self.env = {"ORCHESTRATOR_WORK_DIR": str(self.work), **env}

    def tick(self, now: str) -> list[str]:
        return tick_here(self.path, datetime.fromisoformat(now), self.work,
                         environ={**os.environ, **self.env}).log

    def cli_tick(self, now: str, crash_at: str | None = None) -> str:
        proc = cli(self.path, "tick", "--now", now, env=self.env, crash_at=crash_at)
        assert crash_at is not None or proc.returncode == 0, proc.stderr
        return proc.stdout

    def fire(self) -> None:
        """07:01: both tracks of `nightly` run, and end."""
        self.tick(at(1))
        for track in ("good", "bad"):
            wait_until(lambda track=track: finished(self.work, f"{RUN}--{track}--1"))

    def outbox(self) -> list[Any]:
        _, files = read_state(self.path)
        record, problem = notify_record.read(files)
        assert record is not None, problem
        return record.outbox


@pytest.fixture
def hook(receiver: Callable[[str], Receiver]) -> Receiver:
    return receiver("ok")


@pytest.mark.parametrize("shape", ["json", "slack"])
def test_a_webhook_gets_each_event_once_across_a_retried_tick(
        tmp_path: Path, hook: Receiver, shape: str) -> None:
    repo = Repo(tmp_path, [{"url_secret": "SLACK_WEBHOOK", "format": shape}],
                {"SLACK_WEBHOOK": hook.url})
    repo.fire()
    # The tick that sees the run fail dies after its commit, before it delivers.
    repo.cli_tick(at(2), crash_at="after-dispatch")
    assert hook.requests == [] and len(repo.outbox()) == 2
    assert not any("notify" in line for line in repo.tick(at(3)))  # its claim still holds
    lines = repo.tick(at(8))  # after the claim's grace: claimed again, delivered
    assert sum("delivered (200)" in line for line in lines) == 2
    repo.cli_tick(at(9))
    repo.cli_tick(at(9))  # the same tick run again
    assert [r.headers["idempotency-key"] for r in hook.requests] == EVENTS
    assert {r.headers["content-type"] for r in hook.requests} == {"application/json"}
    letter, failed = hook.events()
    if shape == "json":
        assert [letter["id"], failed["id"]] == EVENTS
        assert (failed["kind"], failed["schedule"], failed["run_id"]) == (
            "run_failed", "nightly", RUN)
        assert set(failed) >= {"version", "at", "summary", "brief_url", "link", "details"}
    else:
        assert set(failed) == {"text", "blocks"}  # what Slack's incoming webhooks take
        assert EVENTS[1] in failed["blocks"][2]["elements"][0]["text"]
        assert "orchestrator dlq requeue" in letter["blocks"][1]["text"]["text"]
    assert repo.outbox() == []


def test_a_tick_that_dies_after_delivering_sends_again_under_the_same_key(
        tmp_path: Path, hook: Receiver) -> None:
    """The one window left: delivered, not yet recorded. The copy carries the same
    event id and Idempotency-Key, so a receiver that keeps keys drops it."""
    repo = Repo(tmp_path, [{"url_secret": "SLACK_WEBHOOK", "events": ["run_failed"]}],
                {"SLACK_WEBHOOK": hook.url})
    repo.fire()
    repo.cli_tick(at(2), crash_at="after-notify")
    repo.tick(at(8))
    keys = [r.headers["idempotency-key"] for r in hook.requests]
    assert keys == [f"run_failed:{RUN}:1"] * 2


def test_a_slack_webhook_that_rate_limits_gets_the_same_message_again(
        tmp_path: Path, receiver: Callable[[str], Receiver]) -> None:
    slack = receiver("slack-429")  # rate limited once (Retry-After: 0), then 200
    repo = Repo(tmp_path, [{"url_secret": "SLACK_WEBHOOK", "format": "slack",
                            "events": ["run_failed"]}], {"SLACK_WEBHOOK": slack.url})
    repo.fire()
    lines = repo.tick(at(2))
    assert any(f"run_failed:{RUN}:1: delivered (200)" in line for line in lines)
    first, second = slack.events()
    assert first == second  # the retry after the 429 is the same message
    assert set(first) == {"text", "blocks"}
    assert first["text"].startswith("Run failed: nightly: ")
    assert [b["type"] for b in first["blocks"]] == ["header", "section", "context"]
    assert first["blocks"][0]["text"] == {"type": "plain_text", "text": "Run failed: nightly"}
    assert f"run_failed:{RUN}:1" in first["blocks"][2]["elements"][0]["text"]
    assert all(r.headers["idempotency-key"] == f"run_failed:{RUN}:1" for r in slack.requests)
    assert slack.url not in "\n".join(lines)  # the URL is the secret: never logged


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hang", "fail"])
def test_a_receiver_that_hangs_or_fails_costs_at_most_the_budget_and_everything_fires(
        tmp_path: Path, receiver: Callable[[str], Receiver], mode: str) -> None:
    bad, good = receiver(mode), receiver("ok")
    repo = Repo(tmp_path, [{"url_secret": "SLACK_WEBHOOK"}, {"url_secret": "TEAM_WEBHOOK"}],
                {"SLACK_WEBHOOK": bad.url, "TEAM_WEBHOOK": good.url}, budget_seconds=2)
    repo.fire()
    started = time.monotonic()
    lines = repo.tick(at(2, 30))  # nightly fails; `other`'s slot falls due
    took = time.monotonic() - started
    wait_until(lambda: finished(repo.work, "other--20261201T0702Z--t--1"))
    assert "other--20261201T0702Z--t--1" in launches(repo.work)  # it fired all the same
    assert len(good.events()) == 2  # the other receiver was not held up
    gave_up = [line for line in lines if "SLACK_WEBHOOK" in line and "not sent" in line]
    assert len(gave_up) == 2 and all("within the 2s budget" in line for line in gave_up)
    # a receiver that would hang for a minute holds the tick up for its budget, no longer:
    # timed where the receiver sees it, as the tick's own git work takes what the
    # machine's load makes it take (the whole tick is only bounded by that minute)
    assert took < 60, took
    if mode == "hang":
        wait_until(lambda: len(bad.held) == len(bad.requests))
        assert len(bad.requests) == 1 and bad.held[0] <= 2 + 1, bad.held
    if mode == "fail":
        assert len(bad.requests) >= 3  # tried again with back-off inside the budget
        assert bad.requests[-1].at - bad.requests[0].at <= 2 + 1, bad.requests
        assert all("answered 500" in line for line in gave_up)
    assert repo.outbox() == []  # dropped, not left for every tick to try again


def test_an_unset_variable_costs_one_line_per_event(tmp_path: Path) -> None:
    repo = Repo(tmp_path, [{"url_secret": "SLACK_WEBHOOK"}], {"SLACK_WEBHOOK": ""})
    repo.fire()
    lines = [line for line in repo.tick(at(2)) if "notify" in line]
    assert len(lines) == 2 and all("SLACK_WEBHOOK is not set" in line for line in lines)
    state, _ = read_state(repo.path)
    assert state.runs[RUN].status.value == "failed"


def test_a_webhook_over_plain_http_to_another_host_is_refused(tmp_path: Path) -> None:
    repo = Repo(tmp_path, [{"url_secret": "SLACK_WEBHOOK"}],
                {"SLACK_WEBHOOK": "http://hooks.example.com/x"})
    repo.fire()
    lines = [line for line in repo.tick(at(2)) if "notify" in line]
    assert lines and all("must be an https:// URL" in line for line in lines)
    assert "hooks.example.com" not in "\n".join(lines)


def test_an_unreadable_notify_record_holds_notifications_and_costs_nothing_else(
        tmp_path: Path, hook: Receiver) -> None:
    from tests.gitrepo import git

    repo = Repo(tmp_path, [{"url_secret": "SLACK_WEBHOOK"}], {"SLACK_WEBHOOK": hook.url})
    repo.fire()
    repo.tick(at(2))
    # someone breaks the record on the state branch
    git("fetch", "-q", "origin", "orchestrator-state", cwd=repo.path)
    git("checkout", "-q", "-b", "edit", "FETCH_HEAD", cwd=repo.path)
    (repo.path / "state" / "notify.json").write_text("[" * 5000)
    git("commit", "-qam", "break it", cwd=repo.path)
    git("push", "-q", "origin", "edit:orchestrator-state", cwd=repo.path)
    git("checkout", "-q", "main", cwd=repo.path)
    lines = repo.tick(at(3))
    [said] = [line for line in lines if "notify.json" in line]
    assert said.startswith("quarantined state/notify.json") and "notifications wait" in said
    before = len(hook.requests)
    repo.tick(at(3, 30))  # `other` fires, notifications stay held
    wait_until(lambda: finished(repo.work, "other--20261201T0702Z--t--1"))
    assert len(hook.requests) == before
    _, files = read_state(repo.path)
    assert files["state/notify.json"] == b"[" * 5000  # never rewritten


@pytest.mark.parametrize("status", [200, 400])
def test_an_answer_without_end_is_not_read_to_its_end(
        tmp_path: Path, receiver: Callable[[str], Receiver], status: int) -> None:
    """The status is the answer: a 2xx delivers at once, a refusal's first bytes are
    quoted, and a body trickling for a minute holds nothing up."""
    endless = receiver(f"endless-{status}")
    repo = Repo(tmp_path, [{"url_secret": "TEAM_WEBHOOK", "events": ["run_failed"]}],
                {"TEAM_WEBHOOK": endless.url}, budget_seconds=20)
    repo.fire()
    lines = repo.tick(at(2))
    [said] = [line for line in lines if "TEAM_WEBHOOK" in line]
    if status == 200:
        assert said.endswith(f"run_failed:{RUN}:1: delivered (200)"), said
    else:
        assert f"run_failed:{RUN}:1: answered 400 {'x' * 5}" in said, said
    assert len(endless.requests) == 1
    # the sender hung up once it had the status: not at the budget's end, nor after
    # the minute the body would take (timed by the receiver, from the status it sent)
    wait_until(lambda: len(endless.held) == 1)
    assert endless.held[0] < 10, endless.held  # half the budget
