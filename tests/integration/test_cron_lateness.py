"""GitHub's cron lateness, measured by the ticks it starts: real ``orchestrator tick``
runs given ``schedule`` event payloads and the fake GitHub's runs (their ``created_at``
hours after the slot), then ``lateness`` and ``status`` read the ledger back."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.state import layout
from tests.drive import cli, read_state
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, git, make_origin
from tests.receiver import Receiver

DAILY = "0 6 * * *"
SAFETY = "9 0,12 * * *"
DAY = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
LATE_HOURS = [1, 2, 3, 4, 5, 6]
"""How late GitHub created each day's run; the fourth day's slot never fired."""


def checkout(tmp_path: Path, cron: str = "0 3 1 1 *", **policies: Any) -> Path:
    """A clone with one schedule (``yearly`` on ``cron``) and tick.yml's two lines."""
    origin = make_origin(tmp_path, {"yearly": {"cron": cron, "tracks": [
        {"name": "a", "run": "true"}], **policies}})
    repo = clone(origin, tmp_path / "work")
    workflows = repo / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "tick.yml").write_text(
        f'name: tick\non:\n  schedule:\n    - cron: "{DAILY}"\n    - cron: "{SAFETY}"\n'
        "  workflow_dispatch:\n")
    return repo


def scheduled_tick(repo: Path, fake: FakeGitHub, cron: str, created: datetime,
                   started: datetime, **env: str) -> None:
    """A tick GitHub's cron started for ``cron``, its run created at ``created``."""
    run = fake.waiting_run(created_at=created, held=False)
    event = repo.parent / f"event-{run.id}.json"
    event.write_text(json.dumps({"schedule": cron}))
    fake.now = started
    proc = cli(repo, "tick", "--executor", "github", "--now", f"{started:%Y-%m-%dT%H:%M:%SZ}",
               env={**fake.env(), "GITHUB_EVENT_NAME": "schedule",
                    "GITHUB_EVENT_PATH": str(event), "GITHUB_RUN_ID": str(run.id), **env})
    assert proc.returncode == 0, proc.stderr


def commits(repo: Path, *paths: str) -> list[str]:
    """The subjects of the state branch's commits (that touched ``paths``), newest first."""
    return git("log", "--format=%s", "origin/orchestrator-state", "--", *paths,
               cwd=repo).splitlines()


def test_ticks_record_their_lateness_in_commits_they_make_anyway(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo = checkout(tmp_path)
    days = [DAY + timedelta(days=n) for n in range(7) if n != 3]
    for slot, hours in zip(days, LATE_HOURS, strict=True):
        created = slot + timedelta(hours=hours)
        scheduled_tick(repo, fake_github, DAILY, created, created + timedelta(minutes=1))
        git("fetch", "--quiet", "origin", cwd=repo)
    # each tick made the heartbeat commit it makes anyway, and the ledger rode it
    decided = [s for s in commits(repo) if s.endswith(": decide")]
    assert len(decided) == len(days)
    assert commits(repo, layout.LATENESS) == decided
    before = commits(repo)
    # a tick a minute later has nothing to commit: its sample makes no commit of its own
    last = days[-1] + timedelta(hours=LATE_HOURS[-1])
    scheduled_tick(repo, fake_github, SAFETY, last + timedelta(minutes=2),
                   last + timedelta(minutes=3))
    git("fetch", "--quiet", "origin", cwd=repo)
    assert commits(repo) == before

    now = "2026-12-07T18:00:00Z"
    out = cli(repo, "lateness", "--json", "--now", now, "--days", "30", check=True).stdout
    found = json.loads(out)
    daily = found["by_cron"][DAILY]
    assert (daily["p50_seconds"], daily["p95_seconds"], daily["max_seconds"]) == (
        3 * 3600, 6 * 3600, 6 * 3600)
    assert (daily["samples"], daily["dropped"]) == (6, 1)
    status = json.loads(cli(repo, "status", "--json", "--now", now).stdout)
    assert {k: status["cron_lateness"][k] for k in (
        "p50_seconds", "p95_seconds", "max_seconds", "samples")} == {
        "p50_seconds": 3 * 3600, "p95_seconds": 6 * 3600, "max_seconds": 6 * 3600,
        "samples": 6}
    assert status["cron_lateness"]["by_cron"][DAILY]["dropped"] == 1
    _, files = read_state(repo)
    assert len(files[layout.LATENESS].splitlines()) == 6
    text = cli(repo, "lateness", "--now", now, check=True).stdout
    assert f"{DAILY}: p50 180 min, p95 360 min, max 360 min, 6 sample(s), 1 dropped" in text
    # the dashboard's week says what status does, drops of both tick.yml lines counted
    page = tmp_path / "site" / "index.html"
    cli(repo, "render", "--index", "--out", str(page), "--now", now, check=True)
    dropped = status["cron_lateness"]["dropped"]
    assert dropped > 1
    assert (f"week from Nov 30: p50 3h 00m, p95 6h 00m, max 6h 00m, 6 sample(s), {dropped} "
            "dropped") in page.read_text(encoding="utf-8")


def late_repo(tmp_path: Path, hook: Receiver, tolerance: float) -> Path:
    """:func:`checkout` whose schedule fires at 06:00 daily and tolerates ``tolerance``
    minutes, with a webhook. A tick reads a schedule when it is due (the memo leaves a
    quiet one unread), so each late tick weighs its tolerance."""
    repo = checkout(tmp_path, DAILY, max_lateness_minutes=tolerance)
    (repo / "orchestrator.json").write_text(json.dumps(
        {"notify": {"webhooks": [{"url_secret": "LATE_WEBHOOK"}]}}))
    return repo


def cron_late_events(hook: Receiver) -> list[dict[str, Any]]:
    return [e for e in (r.json for r in hook.requests) if e.get("kind") == "cron_late"]


@pytest.mark.parametrize("hours", [3, 0.25])
def test_cron_late_is_told_once_per_episode_and_never_when_punctual(
        tmp_path: Path, fake_github: FakeGitHub, receiver: Callable[[str], Receiver],
        hours: float) -> None:
    hook = receiver("ok")
    repo = late_repo(tmp_path, hook, 30)
    for n in range(8):
        created = DAY + timedelta(days=n, hours=hours)
        scheduled_tick(repo, fake_github, DAILY, created, created + timedelta(minutes=1),
                       LATE_WEBHOOK=hook.url)
    told = cron_late_events(hook)
    if hours < 0.5:
        assert told == []
        return
    # told by the tick after the fifth sample landed, and only once
    assert len(told) == 1, told
    event = told[0]
    assert event["details"]["schedules"] == "yearly"
    assert event["details"]["p95_seconds"] == str(3 * 3600)
    assert event["details"]["samples"] == "5"
    assert "orchestrator serve --executor github --clock-only" in event["details"]["fix"]
    assert "cron-sync --external" in event["summary"]

    # a punctual week ends the episode; the next late tick starts another, told again
    for n in range(8, 18):
        created = DAY + timedelta(days=n, minutes=0 if n < 16 else 180)
        scheduled_tick(repo, fake_github, DAILY, created, created + timedelta(minutes=1),
                       LATE_WEBHOOK=hook.url)
    assert len(cron_late_events(hook)) == 2


def test_estimate_and_cron_sync_take_the_ledger_as_the_profile(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo = checkout(tmp_path, cron="0 6 * * *")
    now = "2026-12-07T18:00:00Z"
    # no sample yet: one line says so, and the assumed profile stands in
    empty = cli(repo, "estimate", "--json", "--from", now, "--profile", "ledger")
    assert empty.returncode == 0, empty.stderr
    assert json.loads(empty.stdout)["profile"] == "assumed"
    assert empty.stderr.strip().splitlines() == [
        "orchestrator: the ledger has 0 sample(s) of the last 30 days, fewer than 5: the "
        "'assumed' profile instead"]
    for n, hours in enumerate(LATE_HOURS):
        created = DAY + timedelta(days=n, hours=hours)
        scheduled_tick(repo, fake_github, DAILY, created, created + timedelta(minutes=1))
        git("fetch", "--quiet", "origin", cwd=repo)
    found = json.loads(cli(repo, "estimate", "--json", "--from", now, "--profile", "ledger",
                           check=True).stdout)
    assert found["profile"] == "ledger"
    # GitHub's own schedule: every run as late as a measured one, 1 to 6 hours
    late = found["github_schedule"]["lateness_seconds"]
    assert 3600 <= late["median"] <= late["max"] <= 6 * 3600
    synced = cli(repo, "cron-sync", "--check", "--from", now, "--profile", "ledger")
    assert "under the 'ledger' cron profile: slots fire" in synced.stdout
    assert "too late to keep the slots: an external clock does" in synced.stdout
