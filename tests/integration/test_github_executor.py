"""The GitHub executor against the fake GitHub server on 127.0.0.1 (tests/fakes/github.py).

Real HTTP over loopback, real httpx; only ``sleep`` is replaced where a test would
otherwise wait a minute, and then the fake's clock moves with it.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from orchestrator.config.models import TrackSpec
from orchestrator.errors import UserError
from orchestrator.executors.base import DispatchRequest, Handle
from orchestrator.executors.github import (
    MAX_INPUTS_CHARS,
    GitHubExecutor,
    plan_batches,
)
from orchestrator.executors.github.jobnames import job_name
from orchestrator.state import layout
from orchestrator.state import model as state_model
from orchestrator.state.breaker import Breaker, BreakerPolicy
from orchestrator.state.phases import TrackPhase
from tests.fakes.github import CANCEL_DELAY, FakeGitHub

T0 = datetime(2026, 12, 1, 7, 0, 30, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"


def req(track: str, attempt: int = 1, run_id: str = RUN, *, marked_at: datetime | None = None,
        **spec: Any) -> DispatchRequest:
    spec.setdefault("run", f"echo {track}")
    return DispatchRequest(run_id=run_id, track=track, attempt=attempt,
                           spec=TrackSpec(name=track, **spec), marked_at=marked_at)


class Sleeper:
    """Records sleeps and moves the fake's clock instead of waiting."""

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake
        self.slept: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.fake.now = (self.fake.now or T0) + timedelta(seconds=seconds)


def executor(fake: FakeGitHub, *, now: datetime = T0, breaker: Breaker | None = None,
             sleep: Any = None, **options: Any) -> GitHubExecutor:
    fake.now = fake.now or now
    return GitHubExecutor(fake.repository, fake.token, api_url=fake.api_url, now=now,
                          breaker=breaker, sleep=sleep or Sleeper(fake), **options)


def handles(results: list[Any]) -> list[Handle]:
    return [Handle(key=r.key, handle=r.handle, timeout_minutes=30) for r in results]


# --------------------------------------------------------------------------- dispatch


def test_dispatch_one_run_per_run_id_with_run_details(fake_github: FakeGitHub) -> None:
    ex = executor(fake_github)
    results = ex.dispatch([req("b"), req("a", inputs={"region": "eu"})])

    assert [r.key for r in results] == [f"{RUN}--b--1", f"{RUN}--a--1"]
    assert all(r.error is None for r in results)
    [call] = fake_github.dispatches
    assert call.status == 200
    assert call.authorized and call.api_version == "2022-11-28"
    assert call.path == f"/repos/{fake_github.repository}/actions/workflows/track.yml/dispatches"
    assert call.body["ref"] == "main" and call.body["return_run_details"] is True
    inputs = call.body["inputs"]
    assert inputs["run_id"] == RUN
    legs = json.loads(inputs["tracks"])
    assert [leg["key"] for leg in legs] == [f"{RUN}--a--1", f"{RUN}--b--1"]
    assert legs[0]["inputs"] == {"region": "eu"} and legs[0]["run"] == "echo a"
    [run] = fake_github.runs.values()
    # run-name from track.yml: "<run_id> <batch>"; jobs named after the dispatch keys
    assert run.display_title == f"{RUN} {inputs['batch']}"
    assert sorted(j.name for j in run.jobs) == [job_name(f"{RUN}--a--1"), job_name(f"{RUN}--b--1")]
    assert {r.handle["ci_run_id"] for r in results} == {run.id}
    assert results[0].handle["job_name"] == job_name(f"{RUN}--b--1")
    assert results[0].url == run.to_json(fake_github.url, fake_github.repository)["html_url"]
    assert ex.health() == Breaker()


def test_300_tracks_are_two_runs_covering_each_track_once(fake_github: FakeGitHub) -> None:
    requests = [req(f"t{i:03d}") for i in range(300)]
    ex = executor(fake_github)
    results = ex.dispatch(requests)

    assert all(r.error is None for r in results)
    assert len(fake_github.dispatches) == 2
    assert all(c.status == 200 for c in fake_github.dispatches)
    legs = [json.loads(c.body["inputs"]["tracks"]) for c in fake_github.dispatches]
    assert sorted(len(x) for x in legs) == [44, 256]
    keys = [leg["key"] for batch in legs for leg in batch]
    assert sorted(keys) == sorted(r.key for r in requests)  # each track exactly once
    assert len({r.handle["ci_run_id"] for r in results}) == 2

    # One paginated jobs listing per workflow run (3 + 1 pages), not one per track.
    before = len(fake_github.requests)
    seen = ex.observe(handles(results))
    jobs_calls = fake_github.requests[before:]
    assert {c.endpoint for c in jobs_calls} == {"jobs"}
    assert len(jobs_calls) == 4
    # every job queued: no runner took them yet, so every track is still dispatched
    assert len(seen) == 300 and {o.phase for o in seen.values()} == {None}


def test_large_inputs_are_split_below_githubs_limit(fake_github: FakeGitHub) -> None:
    command = "echo " + "x" * 3000 + ' "quoted"'
    requests = [req(f"t{i:02d}", run=command) for i in range(50)]
    results = executor(fake_github).dispatch(requests)

    assert all(r.error is None for r in results)
    sizes = [len(json.dumps(c.body["inputs"])) for c in fake_github.dispatches]
    assert len(sizes) >= 3 and max(sizes) <= MAX_INPUTS_CHARS
    covered = [leg["track"] for c in fake_github.dispatches
               for leg in json.loads(c.body["inputs"]["tracks"])]
    assert sorted(covered) == sorted(r.track for r in requests)


def test_a_leg_too_large_alone_is_an_error_and_the_rest_goes(fake_github: FakeGitHub) -> None:
    # a command is capped at 64 KiB; with its inputs a leg can still outgrow the 65,535
    huge = req("huge", run="echo " + "y" * 60_000, inputs={"more": "z" * 10_000})
    results = executor(fake_github).dispatch([huge, req("small")])

    assert results[0].error and "65535" in results[0].error
    assert results[1].error is None
    assert len(fake_github.dispatches) == 1


def test_batches_are_deterministic() -> None:
    requests = [req(f"t{i:03d}") for i in range(300)]
    first, _ = plan_batches(requests)
    again, _ = plan_batches(list(reversed(requests)))
    assert [b.run_name for b in first] == [b.run_name for b in again]
    assert len({b.run_name for b in first}) == 2


# --------------------------------------------------------------------------- correlation


def test_204_without_details_is_correlated_by_run_name(fake_github: FakeGitHub) -> None:
    fake_github.no_details()
    results = executor(fake_github).dispatch([req("a"), req("b")])

    [call] = fake_github.dispatches
    assert call.status == 204
    [run] = fake_github.runs.values()
    assert {r.handle["ci_run_id"] for r in results} == {run.id}
    before, listing = fake_github.calls("runs")
    # first: was it sent before? Runs since the slot (a rewind may have forgotten it)
    assert before.query["created"] == "2026-12-01T06:55:00Z..2026-12-01T07:05:30Z"
    assert listing.query["event"] == "workflow_dispatch"
    # only runs created around this dispatch: GitHub lists at most 1,000 per filter
    assert listing.query["created"] == "2026-12-01T06:55:30Z..2026-12-01T07:15:30Z"


def test_ghes_is_never_sent_return_run_details(fake_ghes: FakeGitHub) -> None:
    ex = GitHubExecutor(fake_ghes.repository, fake_ghes.token, api_url=fake_ghes.api_url,
                        now=T0, sleep=Sleeper(fake_ghes))
    fake_ghes.now = T0
    results = ex.dispatch([req("a")])

    [call] = fake_ghes.dispatches
    assert call.status == 204 and "return_run_details" not in call.body
    [run] = fake_ghes.runs.values()
    assert results[0].handle["ci_run_id"] == run.id
    assert all(c.path.startswith("/api/v3/repos/") for c in fake_ghes.requests)


def test_ghes_is_recognised_by_its_header_where_its_url_does_not_say(
        fake_ghes: FakeGitHub) -> None:
    # e.g. a proxy in front of GHES: the API is not under /api/v3 in the URL we were given
    ex = GitHubExecutor(fake_ghes.repository, fake_ghes.token, api_url=fake_ghes.api_url,
                        now=T0, sleep=Sleeper(fake_ghes))
    ex.client.enterprise = False
    fake_ghes.now = T0
    ex.observe([Handle(key=f"{RUN}--x--1", handle={"ci_run_id": 1}, timeout_minutes=5)])
    assert ex.client.enterprise  # the answer's X-GitHub-Enterprise-Version said so
    ex.dispatch([req("a")])
    assert "return_run_details" not in fake_ghes.dispatches[0].body


def test_a_github_refusing_the_field_gets_a_plain_dispatch(fake_github: FakeGitHub) -> None:
    # Neither the URL nor a header gave GHES away yet: the refusal names the field.
    fake_github.supports_run_details = False
    fake_github.now = T0
    results = executor(fake_github).dispatch([req("a")])

    assert [c.status for c in fake_github.dispatches] == [422, 204]
    assert "return_run_details" not in fake_github.dispatches[1].body
    [run] = fake_github.runs.values()
    assert results[0].handle["ci_run_id"] == run.id


def test_api_version_2026_03_10_always_answers_with_the_run(fake_github: FakeGitHub) -> None:
    fake_github.now = T0
    results = executor(fake_github, api_version="2026-03-10").dispatch([req("a")])

    [call] = fake_github.dispatches
    assert call.api_version == "2026-03-10"
    assert call.status == 200 and "return_run_details" not in call.body
    [run] = fake_github.runs.values()
    assert results[0].handle["ci_run_id"] == run.id
    # the look-up before sending, and no correlation: the answer named the run
    assert len(fake_github.calls("runs")) == 1


def test_lost_response_is_adopted_not_repeated(fake_github: FakeGitHub) -> None:
    fake_github.lose_response("dispatch")
    results = executor(fake_github).dispatch([req("a"), req("b")])

    assert len(fake_github.dispatches) == 1
    assert fake_github.dispatches[0].status == 0  # the run was created, no answer came
    [run] = fake_github.runs.values()
    assert [r.handle["ci_run_id"] for r in results] == [run.id, run.id]
    assert all(r.error is None for r in results)


def test_a_502_dispatch_is_never_resent_and_is_failed_once_it_surely_created_nothing(
        fake_github: FakeGitHub) -> None:
    fake_github.fail("dispatch", status=502, times=1)  # refused: no run is created
    [pending] = executor(fake_github).dispatch([req("a")])
    assert len(fake_github.dispatches) == 1 and not fake_github.runs
    assert pending.error is None and pending.handle is not None
    assert "ci_run_id" not in pending.handle
    handle = Handle(pending.key, pending.handle, 30)
    soon = executor(fake_github, now=T0 + timedelta(minutes=5)).observe([handle])
    assert soon == {}  # GitHub may still be listing it: nothing to say yet
    late = executor(fake_github, now=T0 + timedelta(minutes=11)).observe([handle])
    assert late[pending.key].phase is TrackPhase.FAILED
    assert "created nothing" in (late[pending.key].error or "")
    assert len(fake_github.dispatches) == 1


def test_slow_answer_past_the_timeout_is_adopted_not_repeated(fake_github: FakeGitHub) -> None:
    fake_github.slow("dispatch", delay=0.6)
    results = executor(fake_github, timeout=0.2).dispatch([req("a")])

    assert len(fake_github.dispatches) == 1
    [run] = fake_github.runs.values()
    assert results[0].handle["ci_run_id"] == run.id


def test_unanswered_dispatch_that_cannot_be_checked_is_never_repeated(
        fake_github: FakeGitHub) -> None:
    fake_github.lose_response("dispatch")
    fake_github.fail("runs", status=502, times=3, skip=1)  # after the look-up first
    ex = executor(fake_github)
    [result] = ex.dispatch([req("a")])

    assert len(fake_github.dispatches) == 1
    assert result.error is None
    assert "ci_run_id" not in result.handle  # resolved by run-name later
    [run] = fake_github.runs.values()
    assert result.handle["run_name"] == run.display_title

    later = executor(fake_github, now=T0 + timedelta(minutes=5))
    seen = later.observe(handles([result]))
    assert seen[result.key].phase is None  # found by run-name; its job is still queued
    assert seen[result.key].handle is not None
    assert seen[result.key].details["ci_run_id"] == run.id


def test_lookup_finds_an_unrecorded_dispatch(fake_github: FakeGitHub) -> None:
    requests = [req("a"), req("b"), req("c")]
    dispatched = executor(fake_github).dispatch(requests)
    posts = len(fake_github.dispatches)

    # The next tick: same batch (run-name match) and a subset (jobs listing).
    later = executor(fake_github, now=T0 + timedelta(minutes=12))
    found = later.lookup(requests)
    assert {k: r.handle["ci_run_id"] for k, r in found.items() if r} == {
        r.key: r.handle["ci_run_id"] for r in dispatched}
    subset = later.lookup([requests[1], req("a", attempt=2)])
    # found, and asked-but-absent (None): only the latter may be dispatched again
    assert {k: v is not None for k, v in subset.items()} == {
        requests[1].key: True, req("a", attempt=2).key: False}
    assert len(fake_github.dispatches) == posts


# --------------------------------------------------------------------------- observe


def test_jobs_progress_maps_to_phases(fake_github: FakeGitHub) -> None:
    tracks = ["ok", "bad", "stopped", "slow", "queued"]
    results = executor(fake_github).dispatch([req(t) for t in tracks])
    run_id = results[0].handle["ci_run_id"]
    fake_github.now = T0 + timedelta(minutes=1)
    fake_github.set_job(run_id, "ok", "completed", "success")
    fake_github.set_job(run_id, "bad", "completed", "failure")
    fake_github.set_job(run_id, "stopped", "completed", "cancelled")
    fake_github.set_job(run_id, "slow", "completed", "timed_out")

    before = len(fake_github.requests)
    seen = executor(fake_github, now=T0 + timedelta(minutes=2)).observe(handles(results))
    # one jobs call for five tracks, one artifacts listing for those that ended, and
    # one look at the cancelled job's annotations (who cancelled it)
    assert [r.endpoint for r in fake_github.requests[before:]] == ["jobs", "artifacts",
                                                                   "annotations"]
    phase = {k.split("--")[2]: o.phase for k, o in seen.items()}
    assert phase == {"ok": TrackPhase.COMPLETE, "bad": TrackPhase.FAILED,
                     "stopped": TrackPhase.CANCELLED, "slow": TrackPhase.TAPPED_OUT,
                     "queued": None}  # no runner took it yet: still dispatched
    ok = seen[f"{RUN}--ok--1"]
    assert ok.finished_at == T0 + timedelta(minutes=1) and ok.error is None
    assert "concluded failure" in (seen[f"{RUN}--bad--1"].error or "")
    assert ok.url and f"/job/{ok.details['job_id']}" in ok.url


def test_run_without_jobs_yet_and_run_that_never_started(fake_github: FakeGitHub) -> None:
    fake_github.jobs_appear = False
    [waiting] = executor(fake_github).dispatch([req("a")])
    seen = executor(fake_github).observe(handles([waiting]))
    assert seen[waiting.key].phase is None

    # A matrix GitHub refuses to start (more than 256 legs) ends without jobs.
    legs = [{"key": f"{RUN}--t{i}--1", "track": f"t{i}"} for i in range(257)]
    response = httpx.post(
        f"{fake_github.url}/repos/{fake_github.repository}/actions/workflows/track.yml/"
        "dispatches", headers={"Authorization": f"Bearer {fake_github.token}"},
        json={"ref": "main", "return_run_details": True,
              "inputs": {"run_id": RUN, "batch": "x", "tracks": json.dumps(legs)}})
    broken = response.json()["workflow_run_id"]
    handle = Handle(key=f"{RUN}--t0--1", handle={"ci_run_id": broken, "job_name": legs[0]["key"]},
                    timeout_minutes=30)
    seen = executor(fake_github).observe([handle])
    assert seen[handle.key].phase is TrackPhase.FAILED
    assert "without a job" in (seen[handle.key].error or "")


def test_cancel_stops_the_run_once_no_leg_is_wanted(fake_github: FakeGitHub) -> None:
    results = executor(fake_github).dispatch([req("a"), req("b")])
    run_id = results[0].handle["ci_run_id"]
    fake_github.start_all(run_id)

    ex = executor(fake_github)
    ex.cancel(handles(results)[0])
    assert fake_github.calls("cancel") == []  # b still runs: a is left to its timeout
    ex.cancel(handles(results)[1])
    assert [c.status for c in fake_github.calls("cancel")] == [202]
    # GitHub accepts a cancel at once and carries it out a little later
    seen = executor(fake_github).observe(handles(results))
    assert {o.phase for o in seen.values()} == {TrackPhase.RUNNING}
    fake_github.now = (fake_github.now or T0) + CANCEL_DELAY
    seen = executor(fake_github).observe(handles(results))
    assert {o.phase for o in seen.values()} == {TrackPhase.CANCELLED}
    executor(fake_github).cancel(handles(results)[0])  # already finished: left alone
    assert len(fake_github.calls("cancel")) == 1


def test_cancelling_a_batch_of_256_legs_costs_a_handful_of_requests(
        fake_github: FakeGitHub) -> None:
    results = executor(fake_github).dispatch([req(f"t{i}") for i in range(256)])
    ci_runs = {r.handle["ci_run_id"] for r in results}
    assert len(ci_runs) == 1  # one batch: one workflow run of 256 legs
    fake_github.start_all(ci_runs.pop())
    before = len(fake_github.requests)

    ex = executor(fake_github)
    for handle in handles(results):
        ex.cancel(handle)

    spent = fake_github.requests[before:]
    # the legs' jobs listed once (3 pages of 100), then one cancel of the run; each leg
    # listed on its own was 769 requests, three quarters of GITHUB_TOKEN's hour
    assert len(spent) <= 10, [r.path for r in spent]
    assert [c.status for c in fake_github.calls("cancel")] == [202]


# --------------------------------------------------------------------------- limits


def test_retry_after_is_honoured(fake_github: FakeGitHub) -> None:
    fake_github.rate_limit("dispatch", retry_after=1)
    import time

    ex = executor(fake_github, sleep=time.sleep)
    [result] = ex.dispatch([req("a")])

    first, second = fake_github.dispatches
    assert first.status == 429 and second.status == 200
    assert second.at - first.at >= 1.0
    assert result.error is None and len(fake_github.runs) == 1


def test_secondary_limit_without_retry_after_waits_a_minute(fake_github: FakeGitHub) -> None:
    fake_github.secondary_limit("dispatch")
    sleeper = Sleeper(fake_github)
    [result] = executor(fake_github, sleep=sleeper).dispatch([req("a")])

    assert [c.status for c in fake_github.dispatches] == [403, 200]
    assert sleeper.slept == [60.0]
    assert result.error is None


def test_primary_limit_waits_for_the_reset(fake_github: FakeGitHub) -> None:
    fake_github.now = T0
    fake_github.exhaust(reset_in=30, remaining=1)
    sleeper = Sleeper(fake_github)
    ex = executor(fake_github, sleep=sleeper)
    first = ex.dispatch([req("a")])
    # The answer said "0 remaining": the next call waits for the reset instead of
    # spending a request on a certain 403.
    second = ex.dispatch([req("b", run_id="nightly--20261201T0715Z")])

    assert [c.status for c in fake_github.dispatches] == [200, 200]
    assert sleeper.slept == [pytest.approx(30, abs=1)]
    assert first[0].error is None and second[0].error is None


def test_rate_limit_beyond_the_budget_fails_fast(fake_github: FakeGitHub) -> None:
    fake_github.now = T0
    fake_github.exhaust(reset_in=3600)
    ex = executor(fake_github, max_wait_seconds=60)
    [result] = ex.dispatch([req("a")])
    assert result.error and "rate limited" in result.error
    assert len(fake_github.requests) == 1

    assert ex.observe([Handle("k", {"ci_run_id": 1, "job_name": "k"}, 30)]) == {}
    assert len(fake_github.requests) == 1  # no second request into a spent window


# --------------------------------------------------------------------------- breaker


def test_five_consecutive_500s_open_the_persisted_breaker(fake_github: FakeGitHub) -> None:
    # all but the first request: the look-up before sending (one for both batches)
    fake_github.fail("any", status=500, times=1000, skip=1)
    policy = BreakerPolicy(threshold=5, cooldown=timedelta(minutes=15))
    ex = executor(fake_github, policy=policy)
    results = ex.dispatch([req("a"), req("b", run_id="other--20261201T0700Z")])
    ex.observe([Handle("k", {"ci_run_id": 1, "job_name": "k"}, 30)])

    assert len(fake_github.requests) == 6 and len(fake_github.calls("runs")) >= 1
    # A 500 to a dispatch may still have created the run: never sent again, the
    # batches wait for their run-name to show up (or for LOST_AFTER to pass).
    assert all(r.error is None and r.handle and "ci_run_id" not in r.handle
               for r in results)
    assert len(fake_github.dispatches) == 2  # one POST per batch, none repeated
    breaker = ex.health()
    assert breaker.state == "open" and breaker.failures == 5
    assert breaker.opened_at is not None and breaker.opened_at >= T0
    assert "500" in (breaker.last_error or "")

    # Persisted in state/health.json and read back by the next tick.
    files = state_model.State(health={"github": breaker}).dump()
    assert json.loads(files[layout.HEALTH])["github"]["state"] == "open"
    loaded = state_model.load(files).health["github"]
    assert loaded == breaker

    fake_github.faults.clear()
    before = len(fake_github.requests)
    soon = executor(fake_github, now=T0 + timedelta(minutes=10), breaker=loaded, policy=policy)
    assert not soon.available
    [blocked] = soon.dispatch([req("a")])
    assert blocked.error and "circuit breaker is open" in blocked.error
    assert soon.lookup([req("a")]) == {}  # not asked: absent, never "not found"
    assert soon.observe([Handle("k", {"ci_run_id": 1, "job_name": "k"}, 30)]) == {}
    assert len(fake_github.requests) == before  # no HTTP call at all
    assert soon.health() == loaded

    later = executor(fake_github, now=T0 + timedelta(minutes=16), breaker=loaded, policy=policy)
    assert later.health().state == "half_open" and later.available
    [ok] = later.dispatch([req("a")])
    assert ok.error is None
    assert later.health().state == "closed" and later.health().failures == 0


def test_half_open_breaker_reopens_on_the_first_failure(fake_github: FakeGitHub) -> None:
    opened = Breaker(state="open", failures=5, opened_at=T0, last_error="500")
    now = T0 + timedelta(minutes=20)
    fake_github.fail("any", status=503, times=10)
    ex = executor(fake_github, now=now, breaker=opened)
    [result] = ex.dispatch([req("a", run_id="nightly--20261201T0720Z")])  # sent on time

    # the probe is the look-up before sending: it failed, so nothing was sent, and the
    # attempt is not spent (the track is dispatched again once GitHub answers)
    assert result.not_sent and "503" in (result.error or "")
    assert len(fake_github.requests) == 1 and fake_github.dispatches == []
    assert ex.health().state == "open" and ex.health().opened_at == now


def test_a_batch_sent_late_is_adopted_when_its_run_already_exists(
        fake_github: FakeGitHub) -> None:
    """A state branch rewound (and accepted) after the dispatch: the same keys are sent
    again, a minute or half an hour after the slot. The run that carries their run-name
    is adopted; nothing is posted twice."""
    [first] = executor(fake_github).dispatch([req("a"), req("b")])[:1]
    soon = executor(fake_github, now=T0 + timedelta(minutes=1))
    assert {r.handle["ci_run_id"] for r in soon.dispatch([req("a"), req("b")])} == {
        first.handle["ci_run_id"]}
    late = executor(fake_github, now=T0 + timedelta(minutes=30))
    again = late.dispatch([req("a"), req("b")])
    assert len(fake_github.dispatches) == 1
    [run] = fake_github.runs.values()
    assert {r.handle["ci_run_id"] for r in again} == {run.id}
    assert first.handle is not None and first.handle["ci_run_id"] == run.id
    # a retry is another attempt, so another run-name: it is sent
    late.dispatch([req("a", attempt=2)])
    assert len(fake_github.dispatches) == 2


def test_client_errors_do_not_trip_the_breaker(fake_github: FakeGitHub) -> None:
    ex = executor(fake_github)
    missing = DispatchRequest(run_id=RUN, track="a", attempt=1,
                              spec=TrackSpec(name="a", run="x"), workflow="missing.yml")
    [result] = ex.dispatch([missing])
    assert result.error and "404" in result.error
    assert ex.health() == Breaker()


# --------------------------------------------------------------------------- credentials


def test_token_is_never_logged_or_shown(fake_github: FakeGitHub,
                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake_github.fail("dispatch", status=500, times=1)
    ex = executor(fake_github)
    results = ex.dispatch([req("a")])
    ex.observe(handles(results))
    assert fake_github.token not in caplog.text
    assert fake_github.token not in repr(ex)
    assert all(fake_github.token not in (r.error or "") for r in results)


def test_bad_token_is_reported(fake_github: FakeGitHub) -> None:
    ex = GitHubExecutor(fake_github.repository, "wrong", api_url=fake_github.url, now=T0)
    [result] = ex.dispatch([req("a")])
    assert result.error and "bad credentials" in result.error
    assert "wrong" not in result.error
    assert len(fake_github.requests) == 1  # a refusal is not retried


def test_from_env(fake_github: FakeGitHub) -> None:
    ex = GitHubExecutor.from_env(now=T0, environ=fake_github.env())
    assert ex.repository == fake_github.repository and ex.api_url == fake_github.url
    assert ex.ref == "main"
    [result] = ex.dispatch([req("a")])
    assert result.error is None
    with pytest.raises(UserError, match="GITHUB_TOKEN"):
        GitHubExecutor.from_env(now=T0, environ={"GITHUB_REPOSITORY": "o/r"})
    with pytest.raises(UserError, match="GITHUB_REPOSITORY"):
        GitHubExecutor.from_env(now=T0, environ={"GITHUB_TOKEN": "t"})
    with pytest.raises(UserError, match="owner/name"):
        GitHubExecutor("../etc", "t", now=T0)


# --------------------------------------------------------------------------- the fake


@pytest.mark.parametrize(("body", "message"), [
    ({"inputs": {"run_id": RUN, "batch": "b", "tracks": "[]"}}, "ref"),
    ({"ref": "nope", "inputs": {}}, "No ref found"),
    ({"ref": "main", "inputs": {f"i{n}": "x" for n in range(26)}}, "up to 25"),
    ({"ref": "main", "inputs": {"run_id": RUN, "batch": 1, "tracks": "[]"}}, "not a string"),
    ({"ref": "main", "inputs": {"run_id": RUN, "batch": "b", "tracks": "x" * 70_000}},
     "too large"),
    ({"ref": "main", "inputs": {"run_id": RUN, "batch": "b", "tracks": "[]", "x": "1"}},
     "Unexpected inputs"),
    ({"ref": "main", "inputs": {"run_id": RUN, "tracks": "[]"}}, "Required input"),
    ({"ref": "main", "inputs": {}, "extra": True}, "not a permitted key"),
])
def test_fake_rejects_what_github_rejects(fake_github: FakeGitHub, body: dict[str, Any],
                                          message: str) -> None:
    response = httpx.post(
        f"{fake_github.url}/repos/{fake_github.repository}/actions/workflows/track.yml/"
        "dispatches", headers={"Authorization": f"Bearer {fake_github.token}"}, json=body)
    assert response.status_code == 422
    assert message in response.json()["message"]
    assert fake_github.runs == {}
