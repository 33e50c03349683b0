"""The watchdog reaches someone: ``status --notify`` opens the issue "orchestrator: no
tick since ..." and posts ``tick_stale`` when ticks stop, opens no second issue while
the silence lasts, and closes the issue once ticks resume. A rewound state branch is
``rewind_refused``. Real processes, the fake GitHub, a receiver on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.config.channels import NotifySpec
from orchestrator.notify.events import Links
from orchestrator.notify.watch import Watcher, rewind_event
from tests.builders import spec_data
from tests.drive import cli
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, make_origin
from tests.receiver import Receiver

TITLE = "orchestrator: no tick since 2026-12-01T07:30:00Z"


def test_the_watchdog_opens_one_issue_while_ticks_stop_and_closes_it_when_they_resume(
        tmp_path: Path, fake_github: FakeGitHub, receiver: Callable[[str], Receiver]) -> None:
    hook = receiver("ok")
    repo = clone(make_origin(tmp_path, {"nightly": spec_data()}), tmp_path / "repo")
    (repo / "orchestrator.json").write_text(json.dumps({"notify": {
        "github_issues": True, "webhooks": [{"url_secret": "SLACK_WEBHOOK"}]}}))
    env = {**fake_github.env(), "SLACK_WEBHOOK": hook.url,
           "ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}
    cli(repo, "tick", "--now", "2026-12-01T07:30:00Z", env=env, check=True)

    def watchdog(now: str) -> tuple[int, str]:
        proc = cli(repo, "status", "--notify", "--max-staleness", "90", "--now", now,
                   env=env)
        return proc.returncode, proc.stderr

    code, said = watchdog("2026-12-01T12:00:00Z")
    assert code == 5 and "opened #1" in said
    [issue] = fake_github.issues.issues.values()
    assert (issue.title, issue.labels) == (TITLE, ["orchestrator", "orchestrator-watchdog"])
    assert hook.events()[0]["kind"] == "tick_stale"
    code, said = watchdog("2026-12-01T13:00:00Z")  # still quiet: the issue says it already
    assert code == 5 and "#1 is open already" in said
    assert len(fake_github.issues.issues) == 1

    cli(repo, "tick", "--now", "2026-12-01T13:05:00Z", env=env, check=True)
    code, said = watchdog("2026-12-01T13:10:00Z")
    assert code == 0 and "closed #1" in said
    assert issue.state == "closed"
    assert issue.comments[-1].body == "Ticks resumed: the last tick was at 2026-12-01T13:05:00Z."
    code, said = watchdog("2026-12-01T13:20:00Z")
    assert code == 0 and said == ""  # nothing open, nothing to say
    assert len(hook.requests) == 2
    assert fake_github.contract_violations() == []


def test_a_rewound_branch_is_told_to_the_webhooks(receiver: Callable[[str], Receiver]) -> None:
    hook = receiver("ok")
    spec = NotifySpec.model_validate_json(json.dumps(
        {"webhooks": [{"url_secret": "SLACK_WEBHOOK"}]}))
    watcher = Watcher(spec, {"SLACK_WEBHOOK": hook.url})
    now = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    event = rewind_event("the state branch is behind its high-water mark", now, Links())
    assert "delivered (200)" in watcher.send(event, now, once=True)[0]
    assert watcher.send(event, now, once=True) == []  # serve tells each outage once
    [sent] = hook.events()
    assert sent["kind"] == "rewind_refused"
    assert sent["details"]["accept"] == "orchestrator status --accept-rewind"
