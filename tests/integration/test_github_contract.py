"""The contract with GitHub: every request the executor and the issue channel send and
every answer the fake gives, checked against GitHub's published API description (an
extract of
``@octokit/openapi`` in ``tests/data/github-openapi``), for api.github.com (API
versions 2022-11-28 and 2026-03-10) and GitHub Enterprise Server 3.17.

The ``fake_github`` and ``fake_ghes`` fixtures run the same check after every test
that uses them; here a whole dispatch / observe / lookup / cancel cycle, and a whole
open / comment / find / close cycle of issues, runs in each kind of GitHub, so do an
external clock's two calls, and the checker itself is shown to catch drift.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any

import pytest

from orchestrator.cadence import clock
from orchestrator.executors import outcomes
from orchestrator.executors.base import Handle
from orchestrator.github import GitHubClient, WorkflowAdmin
from tests.fakes import openapi
from tests.fakes.github import FakeGitHub
from tests.integration.test_github_executor import RUN, T0, executor, handles, req

OPERATIONS = {
    "actions/create-workflow-dispatch",
    "actions/list-workflow-runs",
    "actions/get-workflow-run",
    "actions/list-jobs-for-workflow-run",
    "actions/cancel-workflow-run",
    "actions/list-workflow-run-artifacts",
    "actions/download-artifact",
    "actions/list-workflow-runs-for-repo",
    "actions/get-workflow",
    "actions/enable-workflow",
    "checks/list-annotations",
}
CLOCK_OPERATIONS = {"repos/create-dispatch-event"}
"""What an external clock calls besides (its workflow dispatch is the executor's)."""
LOG_OPERATIONS = {"actions/get-job-for-workflow-run",
                  "actions/download-job-logs-for-workflow-run"}
"""What ``orchestrator logs`` calls for a leg's job log."""


@pytest.mark.parametrize(("kind", "version"), [("github", "2022-11-28"),
                                               ("github", "2026-03-10"),
                                               ("ghes", "2022-11-28")])
def test_the_clocks_calls_keep_to_each_description(kind: str, version: str) -> None:
    with FakeGitHub(ghes="3.17.4" if kind == "ghes" else None) as fake:
        for event in ("workflow_dispatch", "repository_dispatch"):
            client = GitHubClient(fake.token, api_url=fake.api_url, now=T0,
                                  api_version=version)
            assert clock.dispatch(WorkflowAdmin(client, fake.repository),
                                  clock.requests(fake.repository, "main")[event])
        assert sorted(r.event for r in fake.runs_of("tick.yml")) == [
            "repository_dispatch", "workflow_dispatch"]
    assert fake.contract_violations() == []
    operations = {openapi.find_operation(fake.description_for(r), r.method,
                                         r.path.removeprefix(fake.prefix))[0]
                  for r in fake.requests}
    assert operations == {"actions/create-workflow-dispatch", *CLOCK_OPERATIONS}


ISSUE_OPERATIONS = {
    "issues/create",
    "issues/list-for-repo",
    "issues/get",
    "issues/update",
    "issues/create-comment",
    "issues/list-comments",
}


def _cycle(fake: FakeGitHub, **options: Any) -> set[str]:
    """Dispatch, look up, observe, cancel: every endpoint the executor uses. Returns
    the operations called."""
    fake.now = T0
    ex = executor(fake, **options)
    results = ex.dispatch([req("a"), req("b")])
    ci_run = results[0].handle["ci_run_id"]
    ex.lookup([req("a", marked_at=T0)])
    fake.set_job(ci_run, "a", "in_progress")
    ex.observe(handles(results))
    fake.set_job(ci_run, "b", "waiting")
    # a handle whose job never appears makes the executor read the run itself
    ghost = {"ci_run_id": ci_run, "job_name": f"{RUN}--ghost--1"}
    ex.observe([*handles(results), Handle(key=f"{RUN}--ghost--1", handle=ghost,
                                          timeout_minutes=30)])
    for h in handles(results):
        ex.cancel(h)
    fake.now = T0 + timedelta(minutes=1)
    # leg a uploaded its outcome before the cancel: the executor reads it back
    key = f"{RUN}--a--1"
    outcome = outcomes.build(run_id=RUN, track="a", attempt=1, exit_code=0,
                             started_at=T0, finished_at=T0 + timedelta(seconds=20))
    fake.upload(ci_run, key, {f"{key}.json": outcomes.dump(outcome)})
    seen = ex.observe(handles(results))
    assert seen[key].details["source"] == "outcome"
    # a person cancels a second batch: who did is read from the job's annotations
    [other] = ex.dispatch([req("c")])
    fake.cancel_delay = timedelta(0)
    fake.cancel_by(other.handle["ci_run_id"], "octocat")
    [cancelled] = ex.observe(handles([other])).values()
    assert "by @octocat" in str(cancelled.error)
    # a run that answers 404: first, can the token read the repository's runs at all?
    fake.delete_run(other.handle["ci_run_id"])
    ex.observe(handles([other]))
    # the scheduled workflows kept enabled (the 60-day rule)
    admin = WorkflowAdmin(ex.client, fake.repository)
    assert admin.workflow_state("tick.yml") == "active"
    admin.enable_workflow("tick.yml")
    called = set()
    for record in fake.requests:
        found = openapi.find_operation(fake.description_for(record), record.method,
                                       record.path.removeprefix(fake.prefix))
        if found:
            called.add(found[0])
    return called


def test_api_github_com_2022_11_28(fake_github: FakeGitHub) -> None:
    assert _cycle(fake_github) == OPERATIONS
    assert {r.api_version for r in fake_github.requests if r.endpoint != "blob"} == {"2022-11-28"}
    # the archive's signed URL is off the API: neither token nor version goes there
    assert [r.authorized for r in fake_github.calls("blob")] == [False]
    assert fake_github.contract_violations() == []


def test_api_github_com_2026_03_10(fake_github: FakeGitHub) -> None:
    assert _cycle(fake_github, api_version="2026-03-10") == OPERATIONS
    assert {r.api_version for r in fake_github.requests if r.endpoint != "blob"} == {"2026-03-10"}
    # the archive's signed URL is off the API: neither token nor version goes there
    assert [r.authorized for r in fake_github.calls("blob")] == [False]
    assert fake_github.contract_violations() == []


def test_github_enterprise_server_3_17(fake_ghes: FakeGitHub) -> None:
    assert _cycle(fake_ghes) == OPERATIONS
    assert {fake_ghes.description_for(r) for r in fake_ghes.requests
            if r.endpoint != "blob"} == {openapi.GHES}
    assert fake_ghes.contract_violations() == []


def _issue_cycle(fake: FakeGitHub, **options: Any) -> set[str]:
    """Open, find, comment (twice, the second looked for first), close: every issue
    endpoint the channel uses. Returns the operations called."""
    from orchestrator.config.channels import EventKind
    from orchestrator.github import GitHubClient
    from orchestrator.github.issues import IssuesAPI
    from orchestrator.notify.channel import Deadline, Item
    from orchestrator.notify.events import Event
    from orchestrator.notify.issues import IssueChannel
    from orchestrator.notify.record import Pending, Streak
    from orchestrator.support.credentials import Redactor

    fake.now = T0
    client = GitHubClient(fake.token, api_url=fake.api_url, now=T0, **options)
    channel = IssueChannel(IssuesAPI(client, fake.repository), Redactor())

    def item(kind: EventKind, run: str, attempt: int = 1, issue: int | None = None) -> Item:
        event = Event(id=f"{kind.value}:{run}", kind=kind, at=T0, schedule="nightly",
                      run_id=run, summary=f"{run} {kind.value}")
        streak = Streak(since=RUN, issue=issue)
        return Item(Pending(event=event, channels=["github_issues"], claimed_at=T0,
                            attempt=attempt, streak=RUN, issue=issue), streak)

    later = "nightly--20261202T0700Z"
    done = channel.deliver([item(EventKind.RUN_FAILED, RUN)], Deadline(30))
    assert [d.issue for d in done] == [1]
    # knows no number: finds it
    fresh = IssueChannel(IssuesAPI(client, fake.repository), Redactor())
    done = fresh.deliver([item(EventKind.RUN_FAILED, later, attempt=2)], Deadline(30))
    assert [d.status for d in done] == ["delivered"] and done[0].issue == 1
    done = fresh.deliver([item(EventKind.RUN_RECOVERED, "nightly--20261203T0700Z",
                               issue=1)], Deadline(30))
    assert "closed it" in done[0].line
    assert fake.issues.issues[1].state == "closed"
    called = set()
    for record in fake.requests:
        found = openapi.find_operation(fake.description_for(record), record.method,
                                       record.path.removeprefix(fake.prefix))
        if found:
            called.add(found[0])
    return called


@pytest.mark.parametrize("version", ["2022-11-28", "2026-03-10"])
def test_issues_on_api_github_com(fake_github: FakeGitHub, version: str) -> None:
    assert _issue_cycle(fake_github, api_version=version) == ISSUE_OPERATIONS
    assert fake_github.contract_violations() == []


def test_issues_on_github_enterprise_server_3_17(fake_ghes: FakeGitHub) -> None:
    assert _issue_cycle(fake_ghes) == ISSUE_OPERATIONS
    assert fake_ghes.contract_violations() == []


def test_the_fake_refuses_what_github_refuses_about_issues(fake_github: FakeGitHub) -> None:
    import httpx

    api = f"{fake_github.api_url}/repos/{fake_github.repository}/issues"
    headers = {"Authorization": f"Bearer {fake_github.token}",
               "X-GitHub-Api-Version": "2022-11-28"}
    too_long = httpx.post(api, headers=headers, json={"title": "t", "labels": ["x" * 51]})
    assert too_long.status_code == 422
    assert "maximum is 50 characters" in too_long.json()["errors"][0]["message"]
    big = httpx.post(api, headers=headers, json={"title": "t", "body": "x" * 65_537})
    assert big.status_code == 422 and "65536" in big.json()["errors"][0]["message"]
    fake_github.issues.issues_write = False
    refused = httpx.post(api, headers=headers, json={"title": "t"})
    assert refused.status_code == 403
    assert refused.json()["message"] == "Resource not accessible by integration"
    assert fake_github.contract_violations() == []


# --------------------------------------------------------------------------- the checker


def _run_answer(fake: FakeGitHub) -> dict[str, Any]:
    fake.now = T0
    results = executor(fake).dispatch([req("a")])
    run = fake.runs[results[0].handle["ci_run_id"]]
    return run.to_json(fake.api_url, fake.repository)


GET_RUN = "/repos/octo-org/widgets/actions/runs/1"
DISPATCH = "/repos/octo-org/widgets/actions/workflows/track.yml/dispatches"


def test_an_answer_missing_a_required_field_is_drift(fake_github: FakeGitHub) -> None:
    answer = _run_answer(fake_github)
    assert openapi.response_violations(openapi.GITHUB, "GET", GET_RUN, 200, answer) == []
    for field in ("head_repository", "run_number", "node_id"):
        broken = {k: v for k, v in answer.items() if k != field}
        [problem] = openapi.response_violations(openapi.GITHUB, "GET", GET_RUN, 200, broken)
        assert f"'{field}' is a required property" in problem
    wrong = {**answer, "run_number": "one"}
    assert openapi.response_violations(openapi.GITHUB, "GET", GET_RUN, 200, wrong)
    # `startup_failure` is a run conclusion; no job may have it
    fake_github.set_job(answer["id"], "a", "completed", "success")
    job = fake_github.runs[answer["id"]].jobs[0].to_json(fake_github.api_url,
                                                          fake_github.repository)
    jobs = {"total_count": 1, "jobs": [job]}
    assert openapi.response_violations(openapi.GITHUB, "GET", GET_RUN + "/jobs", 200,
                                       jobs) == []
    odd = copy.deepcopy(jobs)
    odd["jobs"][0]["conclusion"] = "startup_failure"
    [problem] = openapi.response_violations(openapi.GITHUB, "GET", GET_RUN + "/jobs", 200, odd)
    assert "'startup_failure' is not valid" in problem and "jobs/0/conclusion" in problem


@pytest.mark.parametrize(("name", "allowed"), [(openapi.GITHUB, True),
                                               (openapi.GITHUB_2026, False),
                                               (openapi.GHES, False)])
def test_return_run_details_exists_only_before_2026_03_10_on_github_com(
        name: str, allowed: bool) -> None:
    body = {"ref": "main", "inputs": {"run_id": RUN}, "return_run_details": True}
    problems = openapi.request_violations(name, "POST", DISPATCH, {}, body)
    assert (problems == []) is allowed
    plain = {"ref": "main", "inputs": {"run_id": RUN}}
    assert openapi.request_violations(name, "POST", DISPATCH, {}, plain) == []


def test_the_descriptions_differ_where_github_does() -> None:
    def dispatch(name: str) -> dict[str, Any]:
        op: dict[str, Any] = openapi.description(name)["operations"][
            "actions/create-workflow-dispatch"]
        return op

    assert set(dispatch(openapi.GITHUB)["responses"]) == {"200", "204"}
    assert set(dispatch(openapi.GITHUB_2026)["responses"]) == {"200"}
    assert set(dispatch(openapi.GHES)["responses"]) == {"204"}
    assert dispatch(openapi.GHES)["request"]["properties"]["inputs"]["maxProperties"] == 10
    assert dispatch(openapi.GITHUB)["request"]["properties"]["inputs"]["maxProperties"] == 25
    for name in (openapi.GITHUB, openapi.GITHUB_2026, openapi.GHES):
        assert openapi.description(name)["package"] == "@octokit/openapi@23.0.2"
        assert set(openapi.description(name)["operations"]) == (
            OPERATIONS | CLOCK_OPERATIONS | ISSUE_OPERATIONS | LOG_OPERATIONS)


def test_queries_and_statuses_outside_the_description_are_drift() -> None:
    runs = "/repos/octo-org/widgets/actions/workflows/track.yml/runs"
    ok = {"event": "workflow_dispatch", "created": "2026-12-01T06:55:30Z..2026-12-01T07:35:30Z",
          "per_page": "100"}
    assert openapi.request_violations(openapi.GITHUB, "GET", runs, ok, None) == []
    [unknown] = openapi.request_violations(openapi.GITHUB, "GET", runs,
                                           {**ok, "title": "x"}, None)
    assert "'title' is not in" in unknown
    assert openapi.request_violations(openapi.GITHUB, "GET", runs,
                                      {**ok, "per_page": "many"}, None)
    assert openapi.request_violations(openapi.GITHUB, "GET", runs,
                                      {**ok, "created": ">=yesterday"}, None)
    [status] = openapi.response_violations(openapi.GITHUB, "POST", DISPATCH, 201, None)
    assert "status 201 is not documented" in status
    # GitHub's error body for an error status it does not list per operation
    assert openapi.response_violations(openapi.GITHUB, "GET", GET_RUN, 404,
                                       {"message": "Not Found"}) == []
    assert openapi.response_violations(openapi.GITHUB, "GET", GET_RUN, 404, ["x"])


def test_the_extract_is_small_and_names_its_source() -> None:
    for path in openapi.DATA.glob("*.json"):
        assert path.stat().st_size < 300_000, path  # 18 operations; the issue answers trimmed
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["source"].startswith("generated/") and data["package"].endswith("23.0.2")
