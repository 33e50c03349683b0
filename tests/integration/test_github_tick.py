"""The tick with the GitHub executor, end to end: a real bare origin, real ``orchestrator
tick`` processes racing each other, and the fake GitHub server on 127.0.0.1."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.executors.github.jobnames import job_name
from orchestrator.state import layout
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.drive import github_tick, read_state, run_ticks, start_github_tick
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, make_origin

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"
BRANCH = "orchestrator-state"


def tracks_spec(*names: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"name": n, "run": f"make {n}", **extra} for n in names]


@pytest.mark.slow
def test_racing_ticks_dispatch_once_and_the_run_completes(tmp_path: Path,
                                                         fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": {
        "cron": "0 7 * * *", "tracks": tracks_spec("a", "b", "c")}})
    clones = [clone(origin, tmp_path / f"c{i}") for i in range(4)]
    fake_github.now = T0 + timedelta(minutes=1)

    # Four ticks at once (a late scheduled one and manual ones): one wins the mark.
    run_ticks([start_github_tick(c, T0 + timedelta(minutes=1), fake_github) for c in clones])

    [call] = fake_github.dispatches
    assert call.status == 200 and call.authorized
    assert call.body["inputs"]["run_id"] == RUN
    legs = json.loads(call.body["inputs"]["tracks"])
    assert sorted(leg["key"] for leg in legs) == [f"{RUN}--{t}--1" for t in "abc"]
    assert sorted(leg["run"] for leg in legs) == ["make a", "make b", "make c"]
    [ci_run] = fake_github.runs
    state, _ = read_state(clones[0])
    for name in "abc":
        track = state.tracks[RUN][name]
        assert track.phase is TrackPhase.DISPATCHED
        assert track.executor == "github"
        assert track.handle is not None and track.handle["ci_run_id"] == ci_run
        assert track.handle["job_name"] == job_name(f"{RUN}--{name}--1")

    # Legs start: the next tick reads `running` from the jobs API.
    fake_github.now = T0 + timedelta(minutes=3)
    fake_github.start_all(ci_run)
    run_ticks([start_github_tick(clones[1], T0 + timedelta(minutes=3), fake_github)])
    state, _ = read_state(clones[1])
    assert {t.phase for t in state.tracks[RUN].values()} == {TrackPhase.RUNNING}
    assert state.tracks[RUN]["a"].started_at == T0 + timedelta(minutes=3)

    # One finishes, then the others; each tick folds in what it sees.
    fake_github.now = T0 + timedelta(minutes=6)
    fake_github.set_job(ci_run, "a", "completed", "success")
    run_ticks([start_github_tick(clones[2], T0 + timedelta(minutes=7), fake_github)])
    state, _ = read_state(clones[2])
    phases = {n: t.phase for n, t in state.tracks[RUN].items()}
    assert phases == {"a": TrackPhase.COMPLETE, "b": TrackPhase.RUNNING,
                      "c": TrackPhase.RUNNING}

    fake_github.now = T0 + timedelta(minutes=9)
    fake_github.complete_all(ci_run)
    summary = tmp_path / "summary.md"
    run_ticks([start_github_tick(clones[3], T0 + timedelta(minutes=10), fake_github,
                                 GITHUB_STEP_SUMMARY=str(summary))])
    state, files = read_state(clones[3])
    assert {t.phase for t in state.tracks[RUN].values()} == {TrackPhase.COMPLETE}
    assert state.runs[RUN].status is RunStatus.COMPLETED
    brief = files[layout.brief_path(RUN)].decode()
    assert RUN in brief and f"/actions/runs/{ci_run}/job/" in brief
    assert RUN in summary.read_text()

    assert len(fake_github.dispatches) == 1  # never dispatched twice
    assert all(r.authorized for r in fake_github.requests)
    assert not any(fake_github.token in p.read_text(errors="ignore")
                   for p in (origin / "refs").rglob("*") if p.is_file())


@pytest.mark.slow
def test_an_open_breaker_is_persisted_and_respected_by_the_next_tick(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": {
        "cron": "0 7 * * *",
        "tracks": tracks_spec("a", max_attempts=5, retry_backoff_seconds=60)}})
    repo = clone(origin, tmp_path / "repo")
    # The dispatch is answered 500, and then GitHub answers 500 to everything. A 500
    # to the dispatch may still have created the run, so it is never sent again;
    # looking the run up by its run-name keeps failing, and the fifth consecutive
    # failure opens the breaker.
    fake_github.fail("dispatch", status=500, times=1)
    now = T0 + timedelta(minutes=1)
    github_tick(repo, fake_github, now)
    assert [r.status for r in fake_github.requests][:2] == [200, 500]  # look-up, send
    before = len(fake_github.requests)
    fake_github.fail("any", status=500, times=1000)
    for _ in range(6):
        now += timedelta(minutes=2)
        github_tick(repo, fake_github, now)
        state, files = read_state(repo)
        if "github" in state.health and state.health["github"].state == "open":
            break
    breaker = state.health["github"]
    assert breaker.state == "open" and breaker.failures == 5
    assert breaker.opened_at is not None
    assert json.loads(files[layout.HEALTH])["github"]["state"] == "open"
    assert [r.status for r in fake_github.requests[before:]] == [500] * 5  # then no more
    assert len(fake_github.dispatches) == 1
    assert state.tracks[RUN]["a"].phase is TrackPhase.DISPATCHED

    # GitHub recovers, but the cooldown has not passed: the next ticks make no call.
    fake_github.faults.clear()
    for minutes in (2, 4, 14):
        github_tick(repo, fake_github, breaker.opened_at + timedelta(minutes=minutes))
    assert len(fake_github.requests) == before + 5
    state, _ = read_state(repo)
    assert state.health["github"] == breaker

    # After the cooldown a probe goes through and closes the breaker. No run carries
    # the dispatch's run-name, long after it was sent: it created nothing, so the
    # attempt fails and is retried, once, under a new dispatch key.
    github_tick(repo, fake_github, breaker.opened_at + timedelta(minutes=16))
    state, _ = read_state(repo)
    assert state.health["github"].state == "closed"
    track = state.tracks[RUN]["a"]
    assert track.phase is TrackPhase.PENDING and track.attempt == 2
    assert any("created nothing" in line for line in track.error_log)
    later = github_tick(repo, fake_github, breaker.opened_at + timedelta(minutes=18))
    assert later.dispatched == (f"{RUN}--a--2",)
    assert len(fake_github.dispatches) == 2
    assert [c.status for c in fake_github.dispatches][-1] in (200, 204)


def test_a_rate_limited_dispatch_spends_no_attempt_and_goes_once_the_limit_lifts(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    # One attempt only: before, the refusal spent it and the run failed.
    origin = make_origin(tmp_path, {"nightly": {"cron": "0 7 * * *",
                                                "tracks": tracks_spec("a")}})
    repo = clone(origin, tmp_path / "repo")
    # a secondary rate limit for two hours, longer than a tick waits
    fake_github.rate_limit("dispatch", retry_after=7200, times=1)
    now = T0 + timedelta(minutes=1)
    first = github_tick(repo, fake_github, now)
    assert first.dispatched == ()
    assert [c.status for c in fake_github.dispatches] == [429]  # GitHub created nothing
    state, _ = read_state(repo)
    track = state.tracks[RUN]["a"]
    assert track.phase is TrackPhase.PENDING and track.attempt == 1
    assert state.runs[RUN].status is RunStatus.RUNNING

    later = github_tick(repo, fake_github, now + timedelta(hours=2, minutes=1))
    assert later.dispatched == (f"{RUN}--a--1",)
    assert [c.status for c in fake_github.dispatches] == [429, 200]
