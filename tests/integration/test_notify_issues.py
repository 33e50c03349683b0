"""GitHub issues, the Upptime way, against the fake GitHub: real ticks with the local
executor (in this process, or as ``orchestrator`` processes where they race or crash)
and with the GitHub executor, a real bare origin, and every exchange with the issues
API checked against GitHub's description after each test."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.notify import record as notify_record
from orchestrator.state.phases import RunStatus
from tests.builders import spec_data
from tests.drive import (
    cli,
    finished,
    github_tick,
    launches,
    read_state,
    run_ticks,
    start_cli,
    wait_until,
)
from tests.drive import tick as tick_here
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, make_origin

TITLE = "orchestrator: nightly is failing"
TOKEN = "ghp_" + "Sh4pedLikeAT0ken" * 3
DAY = "2026-12-0{}T07:{:02d}:00Z"


class Repo:
    """A checkout whose `nightly` runs one track, `check`, that fails while a flag file
    is missing; its ticks talk to the fake GitHub (the environment a tick on Actions
    has: ``GITHUB_REPOSITORY``, ``GITHUB_TOKEN``, ``GITHUB_API_URL``)."""

    def __init__(self, tmp: Path, fake: FakeGitHub, config: dict[str, Any] | None = None,
                 **track: Any) -> None:
        self.flag = tmp / "healthy"
        self.work = tmp / "work"
        run = track.pop("run", f"test -e {self.flag}")
        about = {"description": track.pop("description")} if "description" in track else {}
        origin = make_origin(tmp, {"nightly": spec_data(
            tracks=[{"name": "check", "run": run, **track}], **about)})
        self.path = clone(origin, tmp / "repo")
        (self.path / "orchestrator.json").write_text(json.dumps(
            config or {"notify": {"github_issues": True}}))
        self.env = {"ORCHESTRATOR_WORK_DIR": str(self.work), **fake.env()}

    def tick(self, day: int, minute: int) -> str:
        """A tick in this process; its log, one line each."""
        now = datetime.fromisoformat(DAY.format(day, minute))
        return "\n".join(tick_here(self.path, now, self.work,
                                    environ={**os.environ, **self.env}).log)

    def cli_tick(self, day: int, minute: int, crash_at: str | None = None) -> str:
        proc = cli(self.path, "tick", "--now", DAY.format(day, minute), env=self.env,
                   crash_at=crash_at)
        assert crash_at is not None or proc.returncode == 0, proc.stderr
        return proc.stdout

    def run_day(self, day: int, *, healthy: bool) -> str:
        """Fire day ``day``'s slot, wait for its track, and return the output of the tick
        that sees it finish (and fails or completes the run)."""
        if healthy:
            self.flag.touch()
        else:
            self.flag.unlink(missing_ok=True)
        self.start(day)
        return self.tick(day, 2)

    def start(self, day: int) -> None:
        """Fire day ``day``'s slot and wait for its track to end."""
        self.tick(day, 1)
        key = f"nightly--2026120{day}T0700Z--check--1"
        wait_until(lambda: finished(self.work, key))

    def record(self) -> notify_record.NotifyRecord:
        _, files = read_state(self.path)
        found, problem = notify_record.read(files)
        assert found is not None, problem
        return found


def creates(fake: FakeGitHub) -> list[Any]:
    return [r for r in fake.requests if r.endpoint == "issues" and r.method == "POST"]


@pytest.mark.slow
def test_two_failures_then_a_success_give_one_issue_one_comment_then_closed(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo = Repo(tmp_path, fake_github)
    out = repo.run_day(1, healthy=False)
    assert "notify: github_issues: run_failed:nightly--20261201T0700Z:1: opened #1" in out
    [issue] = fake_github.issues.issues.values()
    assert (issue.title, issue.state, issue.labels) == (TITLE, "open", ["orchestrator",
                                                                        "nightly"])
    assert "<!-- orchestrator:streak nightly--20261201T0700Z -->" in issue.body
    assert "## Brief: nightly--20261201T0700Z (failed)" in issue.body
    assert "`orchestrator dlq requeue nightly--20261201T0700Z--check --reason REASON`" \
        in issue.body
    assert repo.record().streaks["nightly"].issue == 1

    repo.run_day(2, healthy=False)
    assert len(fake_github.issues.issues) == 1 and len(issue.comments) == 1
    assert "nightly--20261202T0700Z failed" in issue.comments[0].body

    out = repo.run_day(3, healthy=True)
    assert "commented on #1 and closed it" in out
    assert (issue.state, issue.state_reason, len(issue.comments)) == ("closed", "completed", 2)
    assert "recovered after 2 failed run(s)" in issue.comments[1].body.replace("\\", "")
    assert len(creates(fake_github)) == 1
    assert repo.record().streaks == {} and repo.record().outbox == []

    # the next failure is a new streak: a new issue
    repo.run_day(4, healthy=False)
    assert [i.state for i in fake_github.issues.issues.values()] == ["closed", "open"]


@pytest.mark.slow
def test_racing_ticks_on_the_failing_run_open_one_issue(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo = Repo(tmp_path, fake_github)
    others = [clone(tmp_path / "origin.git", tmp_path / f"c{i}") for i in range(2)]
    for other in others:
        (other / "orchestrator.json").write_text((repo.path / "orchestrator.json").read_text())
    repo.start(1)
    # Three ticks at once see the track fail and the run end: one commit lands, the
    # others plan again on it, where the run has failed already.
    outs = run_ticks([start_cli(c, "tick", "--now", DAY.format(1, 2), env=repo.env)
                      for c in (repo.path, *others)])
    assert sum("opened #1" in out for out in outs) == 1
    assert len(creates(fake_github)) == 1 and len(fake_github.issues.issues) == 1
    state, _ = read_state(repo.path)
    assert state.runs["nightly--20261201T0700Z"].status is RunStatus.FAILED
    assert repo.record().streaks["nightly"].issue == 1


@pytest.mark.slow
def test_an_issue_closed_by_hand_stays_closed_for_the_streak(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo = Repo(tmp_path, fake_github)
    repo.run_day(1, healthy=False)
    fake_github.issues.close(1, datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
    out = repo.run_day(2, healthy=False)
    assert "#1 was closed by hand: left closed for this streak" in out
    assert repo.record().streaks["nightly"].closed_by_hand
    out = repo.run_day(3, healthy=False)  # known now: not even asked about
    assert "left closed" in out
    issue = fake_github.issues.issues[1]
    assert (issue.state, len(issue.comments), len(fake_github.issues.issues)) == \
        ("closed", 0, 1)
    assert [r.method for r in fake_github.requests if r.endpoint == "issue"] == ["GET"]
    out = repo.run_day(4, healthy=True)
    assert "#1 is closed already" in out
    assert len(issue.comments) == 0
    repo.run_day(5, healthy=False)
    assert len(fake_github.issues.issues) == 2


def test_a_token_without_issues_write_costs_one_line(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    fake_github.issues.issues_write = False
    repo = Repo(tmp_path, fake_github)
    out = repo.run_day(1, healthy=False)
    [said] = [line for line in out.splitlines() if "issues" in line and "not sent" in line]
    assert "the token cannot write issues: give the job `issues: write`" in said
    state, _ = read_state(repo.path)
    assert state.runs["nightly--20261201T0700Z"].status is RunStatus.FAILED
    assert len(creates(fake_github)) == 1  # tried once, refused, not tried again
    assert repo.record().outbox == []  # given up, not retried by every tick
    repo.flag.touch()
    repo.tick(2, 1)  # the next slot fires as ever
    wait_until(lambda: len(launches(repo.work)) == 2)


def test_a_claim_taken_again_finds_the_issue_an_earlier_attempt_opened(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo = Repo(tmp_path, fake_github)
    repo.start(1)
    # The tick opens the issue and dies before recording its number.
    repo.cli_tick(1, 2, crash_at="after-notify")
    assert len(fake_github.issues.issues) == 1
    assert repo.record().streaks["nightly"].issue is None
    assert "notify" not in repo.tick(1, 4)  # within the claim's grace: left alone
    out = repo.tick(1, 8)  # after it: claimed again, found by its marker
    assert "#1 was opened by an earlier attempt" in out
    assert len(creates(fake_github)) == 1
    assert repo.record().streaks["nightly"].issue == 1 and repo.record().outbox == []


@pytest.mark.slow
def test_a_claim_taken_again_comments_once(tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo = Repo(tmp_path, fake_github)
    repo.run_day(1, healthy=False)
    repo.start(2)
    repo.cli_tick(2, 2, crash_at="after-notify")
    assert len(fake_github.issues.issues[1].comments) == 1
    assert "already" not in repo.tick(2, 8)
    assert len(fake_github.issues.issues[1].comments) == 1  # found by its event marker
    assert repo.record().outbox == []


def test_the_github_executor_opens_the_issue_too(tmp_path: Path,
                                                 fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": spec_data(tracks=["a", "b"])})
    repo = clone(origin, tmp_path / "repo")
    (repo / "orchestrator.json").write_text(json.dumps({"notify": {"github_issues": True}}))
    t0 = datetime(2026, 12, 1, 7, 1, tzinfo=UTC)
    env = {**os.environ, **fake_github.env()}
    github_tick(repo, fake_github, t0, env)
    [ci_run] = fake_github.runs
    fake_github.now = t0 + timedelta(minutes=2)
    fake_github.set_job(ci_run, "a", "completed", "success")
    fake_github.set_job(ci_run, "b", "completed", "failure")
    out = github_tick(repo, fake_github, t0 + timedelta(minutes=3), env).log
    assert any("opened #1 for nightly" in line for line in out)
    [issue] = fake_github.issues.issues.values()
    assert issue.title == TITLE and f"/actions/runs/{ci_run}/job/" in issue.body


def test_a_schedule_may_turn_issues_off(tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo = Repo(tmp_path, fake_github)
    path = repo.path / "schedules" / "nightly.json"
    path.write_text(json.dumps({**json.loads(path.read_text()),
                                "notify": {"github_issues": False}}))
    repo.run_day(1, healthy=False)
    assert fake_github.issues.issues == {} and fake_github.requests == []


def test_a_token_a_track_prints_is_in_no_issue_comment_or_payload(
        tmp_path: Path, fake_github: FakeGitHub, receiver: Any) -> None:
    hooks = [receiver("ok"), receiver("ok")]
    config = {"notify": {"github_issues": True, "webhooks": [
        {"url_secret": "SLACK_WEBHOOK", "format": "slack"},
        {"url_secret": "TEAM_WEBHOOK", "format": "json"}]}}
    # one token printed by the track, another where only the notification's own
    # redaction stands between it and the issue: the schedule's description
    other = "github_pat_" + "D3scr1pt10n" * 3
    repo = Repo(tmp_path, fake_github, config, description=f"owner key {other}",
                run=f"echo 'using {TOKEN}' >&2; test -e {tmp_path / 'healthy'}")
    repo.env.update(SLACK_WEBHOOK=hooks[0].url, TEAM_WEBHOOK=hooks[1].url)
    repo.run_day(1, healthy=False)
    repo.run_day(2, healthy=False)
    [issue] = fake_github.issues.issues.values()
    texts = [issue.body or "", *(c.body for c in issue.comments)]
    texts += [r.body.decode() for h in hooks for r in h.requests]
    assert len(texts) == 2 + 2 * 4  # a body, a comment; 4 events for each webhook
    for text in texts:  # not even Markdown-escaped (github\\_pat\\_...)
        assert "Sh4pedLikeAT0ken" not in text and "D3scr1pt10n" not in text
    assert "using \\*\\*\\*" in issue.body or "using ***" in issue.body


def test_notify_test_opens_a_test_issue_and_closes_it(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo = Repo(tmp_path, fake_github)
    proc = cli(repo.path, "notify", "test", "--event", "run_failed", env=repo.env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("github_issues: opened #1 (")
    assert proc.stdout.rstrip().endswith("and closed it")
    [issue] = fake_github.issues.issues.values()
    assert issue.title == "orchestrator: notification test (run_failed)"
    assert (issue.state, issue.labels) == ("closed", ["orchestrator"])
    assert "nothing happened" in (issue.body or "")

    fake_github.issues.issues_write = False
    proc = cli(repo.path, "notify", "test", env=repo.env)
    assert proc.returncode == 1
    assert "github_issues: not sent: the token cannot write issues" in proc.stdout
    assert "1 of 1 channel(s) did not accept the test event" in proc.stderr
    assert len(fake_github.issues.issues) == 1


def test_a_schedule_id_longer_than_a_label_is_cut_to_github_s_50_characters(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    sid = "nightly_report_for_the_finance_team_in_europe_and_the_americas"  # 62
    origin = make_origin(tmp_path, {sid: spec_data(tracks=[{"name": "check", "run": "false"}])})
    path = clone(origin, tmp_path / "repo")
    (path / "orchestrator.json").write_text(json.dumps({"notify": {"github_issues": True}}))
    work, env = tmp_path / "work", {**os.environ, **fake_github.env()}
    tick_here(path, datetime.fromisoformat(DAY.format(1, 1)), work, environ=env)
    wait_until(lambda: finished(work, f"{sid}--20261201T0700Z--check--1"))
    log = tick_here(path, datetime.fromisoformat(DAY.format(1, 2)), work, environ=env).log
    assert any("opened #1" in line for line in log), log
    [issue] = fake_github.issues.issues.values()
    assert issue.labels == ["orchestrator", sid[:50]]
    assert issue.title == f"orchestrator: {sid} is failing"
