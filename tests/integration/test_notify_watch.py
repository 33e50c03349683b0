"""The watchdog reaches someone: ``status --notify`` opens the issue "orchestrator: no
tick since ..." and posts ``tick_stale`` when ticks stop, opens no second issue while
the silence lasts, and closes the issue once ticks resume. A rewound state branch is
``rewind_refused``. Real processes, the fake GitHub, a receiver on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.commands.context import Config
from orchestrator.commands.serve import heartbeat_work
from orchestrator.config.channels import NotifySpec
from orchestrator.notify.events import Links
from orchestrator.notify.watch import Watcher, rewind_event
from orchestrator.state.codec import heartbeat_at
from orchestrator.support.times import iso
from tests.builders import spec_data
from tests.drive import STATE_BRANCH, cli
from tests.fakes.github import WORKFLOWS, FakeGitHub
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


def test_a_clock_warns_by_the_repositorys_limit_not_by_serves_own_minute_ticks(
        tmp_path: Path) -> None:
    """``serve --clock-only`` watches ticks that come at its calls: a daily schedule's are
    a day apart. Its heartbeat check takes watchdog.yml's limit, as ``status`` does; a
    fixed 90 minutes would tell the channels of a stale clock every day."""
    repo = clone(make_origin(tmp_path, {"nightly": spec_data()}), tmp_path / "repo")
    (repo / "orchestrator.json").write_text(json.dumps(
        {"cadence": {"mode": "external", "clock_confirms": True}}))
    (repo / ".github/workflows").mkdir(parents=True)
    for name in ("tick.yml", "watchdog.yml"):
        (repo / ".github/workflows" / name).write_text((WORKFLOWS / name).read_text())
    cli(repo, "cron-sync", check=True)
    assert "2895" in (repo / ".github/workflows/watchdog.yml").read_text()
    cli(repo, "tick", env={"ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}, check=True)
    cfg = Config(repo=repo, remote="origin", state_branch=STATE_BRANCH)
    last = heartbeat_at(cfg.store().read().files)
    assert last is not None
    later = last + timedelta(hours=23, minutes=30)  # before the next daily call
    assert heartbeat_work(cfg, None)(later) == []
    assert "more than 90 minutes ago" in heartbeat_work(cfg, 90.0)(later)[0]
    stale = heartbeat_work(cfg, None)(last + timedelta(minutes=2896))
    assert stale == [f"warning: the last tick on the state branch is from {iso(last)}, "
                     "more than 2895 minutes ago"]
