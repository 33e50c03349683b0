"""GitHub as it really behaves, through the fake: timeouts, deleted runs, approvals,
start failures, re-runs, busy repositories, Enterprise Server's limits.

Each test states the GitHub behaviour it relies on; the fake models it, and the
``fake_github`` fixture checks every exchange against GitHub's API description.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.cli import main
from orchestrator.executors.base import Handle
from orchestrator.executors.github.jobnames import job_name
from orchestrator.state.phases import TrackPhase
from tests.fakes.github import MAX_RESULTS, FakeGitHub
from tests.integration.test_github_executor import RUN, T0, executor, handles, req


def _dispatched(fake: FakeGitHub, *names: str, **spec: Any) -> tuple[int, list[Handle]]:
    fake.now = T0
    results = executor(fake).dispatch([req(n, **spec) for n in names])
    return results[0].handle["ci_run_id"], handles(results)


def _with_timeout(found: list[Handle], minutes: float) -> list[Handle]:
    return [Handle(key=h.key, handle=h.handle, timeout_minutes=minutes) for h in found]


# --------------------------------------------------------------------------- timeouts


def test_a_job_github_cancels_at_its_timeout_is_tapped_out(fake_github: FakeGitHub) -> None:
    # GitHub documents that reaching timeout-minutes cancels the job: its conclusion is
    # `cancelled`, never `timed_out`. A leg's timeout-minutes is the track's limit plus
    # 10 minutes of set-up (the limit itself is enforced inside the leg).
    ci_run, found = _dispatched(fake_github, "slow", timeout_minutes=5)
    fake_github.start_all(ci_run)
    fake_github.now = T0 + timedelta(minutes=15, seconds=1)
    [seen] = executor(fake_github, now=fake_github.now).observe(
        _with_timeout(found, 5)).values()

    [job] = [j for j in fake_github.runs[ci_run].jobs if j.name == job_name(found[0].key)]
    assert (job.status, job.conclusion) == ("completed", "cancelled")
    assert seen.phase is TrackPhase.TAPPED_OUT
    assert "timeout of 15 minutes" in (seen.error or "")


def test_a_job_cancelled_before_its_timeout_stays_cancelled(fake_github: FakeGitHub) -> None:
    ci_run, found = _dispatched(fake_github, "a", timeout_minutes=30)
    fake_github.start_all(ci_run)
    fake_github.now = T0 + timedelta(minutes=2)
    fake_github.set_job(ci_run, "a", "completed", "cancelled")  # someone pressed Cancel
    [seen] = executor(fake_github).observe(_with_timeout(found, 30)).values()
    assert seen.phase is TrackPhase.CANCELLED


def test_a_fractional_timeout_is_the_leg_s_whole_minutes(fake_github: FakeGitHub) -> None:
    # track.yml's timeout-minutes is the track's timeout rounded up to whole minutes,
    # plus the set-up margin
    ci_run, found = _dispatched(fake_github, "quick", timeout_minutes=0.5)
    fake_github.start_all(ci_run)
    fake_github.now = T0 + timedelta(minutes=10, seconds=59)
    [early] = executor(fake_github).observe(_with_timeout(found, 0.5)).values()
    assert early.phase is TrackPhase.RUNNING
    fake_github.now = T0 + timedelta(minutes=11)
    [seen] = executor(fake_github).observe(_with_timeout(found, 0.5)).values()
    assert seen.phase is TrackPhase.TAPPED_OUT


# --------------------------------------------------------------------------- runs that end oddly


def test_a_deleted_run_fails_its_tracks_at_once(fake_github: FakeGitHub) -> None:
    ci_run, found = _dispatched(fake_github, "a", "b")
    fake_github.delete_run(ci_run)
    seen = executor(fake_github).observe(found)
    assert {o.phase for o in seen.values()} == {TrackPhase.FAILED}
    assert all("no longer exists" in (o.error or "") for o in seen.values())
    assert [c.status for c in fake_github.calls("jobs")] == [404]


def test_a_run_that_fails_to_start_reads_startup_failure(fake_github: FakeGitHub) -> None:
    # GitHub refuses a matrix of more than 256 legs when the run starts: the run
    # concludes `startup_failure` (a run conclusion; no job ever has it).
    legs = [f'{{"key":"{RUN}--t{i}--1","track":"t{i}"}}' for i in range(257)]
    fake_github.now = T0
    answer = httpx.post(
        f"{fake_github.api_url}/repos/{fake_github.repository}/actions/workflows/track.yml/"
        "dispatches", headers={"Authorization": f"Bearer {fake_github.token}"},
        json={"ref": "main", "return_run_details": True,
              "inputs": {"run_id": RUN, "batch": "x", "tracks": f"[{','.join(legs)}]"}})
    ci_run = answer.json()["workflow_run_id"]
    assert fake_github.runs[ci_run].conclusion == "startup_failure"
    handle = Handle(key=f"{RUN}--t0--1", handle={"ci_run_id": ci_run,
                                                   "job_name": f"{RUN}--t0--1"},
                    timeout_minutes=30)
    [seen] = executor(fake_github).observe([handle]).values()
    assert seen.phase is TrackPhase.FAILED
    assert "failed to start" in (seen.error or "")


def test_a_run_waiting_for_approval_is_no_verdict(fake_github: FakeGitHub) -> None:
    ci_run, found = _dispatched(fake_github, "deploy", "approve")
    fake_github.set_job(ci_run, "deploy", "waiting")  # an environment's reviewers
    fake_github.set_job(ci_run, "approve", "completed", "action_required")
    seen = executor(fake_github).observe(found)
    waiting, approval = seen[found[0].key], seen[found[1].key]
    assert waiting.phase is None and waiting.started_at is None  # still dispatched
    assert approval.phase is None and approval.details["conclusion"] == "action_required"


def test_a_re_run_replaces_the_jobs_the_executor_reads(fake_github: FakeGitHub) -> None:
    ci_run, found = _dispatched(fake_github, "a")
    fake_github.complete_all(ci_run, "failure")
    fake_github.rerun(ci_run)  # someone re-ran it on GitHub
    fake_github.start_all(ci_run)
    [seen] = executor(fake_github).observe(found).values()
    assert seen.phase is TrackPhase.RUNNING and seen.details["run_attempt"] == 2
    # filter=all still shows the first attempt's job
    every = httpx.get(f"{fake_github.api_url}/repos/{fake_github.repository}/actions/runs/"
                      f"{ci_run}/jobs", params={"filter": "all"},
                      headers={"Authorization": f"Bearer {fake_github.token}"}).json()
    assert sorted(j["run_attempt"] for j in every["jobs"]
                  if j["name"] == job_name(found[0].key)) == [1, 2]
    # the fan-in job of the first attempt ran; the new attempt's waits for its leg
    assert [j["run_attempt"] for j in every["jobs"] if j["name"] == "fan-in"] == [1]


# --------------------------------------------------------------------------- busy repository


@pytest.mark.slow
def test_lookup_searches_only_around_the_mark_in_a_busy_repository(
        fake_github: FakeGitHub) -> None:
    # The dispatch was sent, then the tick died before recording it. Since then the
    # repository ran 1,200 other dispatches: newer than ours, they fill GitHub's
    # 1,000-result cap of a listing from the slot until now.
    fake_github.lose_response()
    _dispatched(fake_github, "a")
    fake_github.add_runs(1200, start=T0 + timedelta(hours=1), every=timedelta(seconds=5))
    later = T0 + timedelta(hours=3)

    marked = req("a", marked_at=T0)
    fake_github.requests.clear()
    found = executor(fake_github, now=later).lookup([marked])
    assert found[marked.key] is not None
    [listing] = fake_github.calls("runs")  # one page: only runs around the mark
    assert listing.query["created"] == "2026-12-01T06:55:30Z..2026-12-01T07:35:30Z"

    # A request that names no mark time falls back to the slot; the cap hides the run.
    unmarked = req("a")
    fake_github.requests.clear()
    assert executor(fake_github, now=later).lookup([unmarked]) == {unmarked.key: None}
    assert len(fake_github.calls("runs")) == MAX_RESULTS // 100


# --------------------------------------------------------------------------- refs and Enterprise


def test_a_tag_is_a_ref_a_run_can_be_dispatched_on(fake_github: FakeGitHub) -> None:
    fake_github.tags.add("v1.4.0")
    fake_github.now = T0
    results = executor(fake_github, ref="v1.4.0").dispatch([req("a")])
    assert results[0].error is None
    [run] = fake_github.runs.values()
    assert run.ref == "v1.4.0"


def test_ghes_takes_at_most_ten_inputs(fake_ghes: FakeGitHub) -> None:
    url = (f"{fake_ghes.api_url}/repos/{fake_ghes.repository}/actions/workflows/track.yml/"
           "dispatches")
    inputs = {f"x{i}": "1" for i in range(11)}
    answer = httpx.post(url, headers={"Authorization": f"Bearer {fake_ghes.token}"},
                        json={"ref": "main", "inputs": inputs})
    assert answer.status_code == 422 and "up to 10" in answer.json()["message"]
    assert answer.headers["x-github-enterprise-version"] == "3.17.4"


# --------------------------------------------------------------------------- validate


def test_validate_warns_of_tracks_longer_than_a_hosted_runner_allows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GitHub stops a job on a GitHub-hosted runner after 6 hours, whatever its
    # timeout-minutes says.
    (tmp_path / "schedules").mkdir()
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "track.yml").write_text("name: track\n")
    tracks = [{"name": "long", "run": "true", "timeout_minutes": 480},
              {"name": "six", "run": "true", "timeout_minutes": 360}]
    (tmp_path / "schedules" / "nightly.json").write_text(
        json.dumps({"cron": "7 1 * * *", "tracks": tracks}) + "\n")
    assert main(["--repo", str(tmp_path), "validate", "--format", "json",
                 "--from", "2026-11-01T00:00:00Z"]) == 0
    [schedule] = json.loads(capsys.readouterr().out)["schedules"]
    [warning, six] = schedule["warnings"]
    assert warning.startswith("track 'long' has timeout_minutes 480: GitHub stops a job on "
                              "a GitHub-hosted runner after 360 minutes")
    # 360 minutes and the job's 10 of set-up: the cap comes before the track's timeout
    assert six.startswith("track 'six' has timeout_minutes 360: with 10 minutes of set-up")
