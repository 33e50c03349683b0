"""A fake GitHub REST API for tests, served on 127.0.0.1 from a thread.

It speaks the part of the API the GitHub executor uses, with GitHub's validation
rules, so a test fails where GitHub would; the fixtures check every exchange against
GitHub's API description (:mod:`tests.fakes.openapi`):

- ``POST /repos/{o}/{r}/actions/workflows/{wf}/dispatches``: rejects a ``ref`` that is
  neither a branch nor a tag, unknown body keys, more than 25 inputs (10 on GHES),
  non-string input values, inputs the workflow does not declare or a missing required
  one, and more than 65,535 characters of inputs (``422``). Answers ``200`` with
  ``workflow_run_id``, ``run_url`` and ``html_url`` when ``return_run_details`` is
  true, or always with API version 2026-03-10 (which no longer knows the field); else
  ``204``.
- ``POST /repos/{o}/{r}/dispatches`` (a ``repository_dispatch``): ``event_type`` of 1
  to 100 characters, ``client_payload`` an object of at most 10 properties and under
  64 KB of JSON (else ``422``); answers ``204`` and starts a run (event
  ``repository_dispatch``, on the default branch, the payload kept for its jobs) of
  every workflow whose ``on.repository_dispatch`` takes that type (no ``types``: every
  type), as GitHub's docs say ("Create a repository dispatch event"; "Events that
  trigger workflows": the workflow file must be on the default branch). A workflow
  without ``workflow_dispatch`` refuses the workflow dispatch (``422``).
- ``GET .../actions/workflows/{wf}/runs`` and ``GET .../actions/runs`` (filters
  ``event``, ``status``, ``created``, which cap the listing at 1,000 runs; paginated
  with ``Link`` headers, newest first);
- ``GET .../actions/runs/{id}``, ``GET .../actions/runs/{id}/jobs`` (``filter=latest``,
  the default, or ``all``; paginated), ``POST .../actions/runs/{id}/cancel`` (``202``
  and carried out :attr:`~FakeGitHub.cancel_delay` later, :data:`CANCEL_DELAY` unless
  a test sets it, or ``409`` once completed); a deleted run answers ``404``. A run
  GitHub's cron started and its concurrency group holds (:meth:`FakeGitHub.waiting_run`)
  lists with status ``pending`` and no jobs, and a cancel ends it ``cancelled``.
- ``GET .../actions/runs/{id}/artifacts`` (``name`` filter; paginated) and
  ``GET .../actions/artifacts/{id}/zip``, which answers ``302`` to a signed URL on this
  server (served without a token, as GitHub's blob storage is) or ``410`` once the
  artifact expired. Legs played by the tests upload with :meth:`FakeGitHub.upload`,
  which refuses a second artifact of a name in one run (409) unless ``overwrite``, and
  fails as :meth:`FakeGitHub.fail_uploads` scripts (a FinalizeArtifact error, a full
  artifact storage).

- ``GET .../actions/jobs/{id}`` and ``GET .../actions/jobs/{id}/logs``: the log answers
  ``302`` to a URL on another host name of this server (``localhost`` where the API is
  ``127.0.0.1``), as GitHub sends it to its log storage ("Download job logs for a
  workflow run": "This link expires after 1 minute"). That URL serves the job's log as
  plain text without a token (one sent is recorded) and ``403`` once a minute passed
  by :attr:`FakeGitHub.now`. A job whose log expired (:meth:`FakeGitHub.expire_log`)
  answers ``410``; a job not yet completed ``404`` (undocumented: GitHub's own ``gh``
  never asks, "job is still in progress; logs will be available when it is complete",
  cli/cli ``pkg/cmd/run/view``, and neither does the orchestrator).
- ``GET .../actions/workflows/{wf}`` (its ``state``: :meth:`FakeGitHub.disable` sets
  ``disabled_inactivity`` or ``disabled_manually``) and ``PUT .../workflows/{wf}/enable``
  (``204``, active again);
- ``GET .../check-runs/{id}/annotations``: a job's id is its check run's; a person's
  cancel (:meth:`FakeGitHub.cancel_by`) annotates every job it cancelled "The run was
  canceled by @octocat." as GitHub does, and an ``always()`` job of the run still runs;
- ``no_access = True``: a token that cannot see the repository, answered ``404``;
- ``ignore_status_filter = True``: runs listings ignore ``status`` (a caller must not
  trust the filter: GitHub applies it today, but its search behind it may change).

Runs and jobs carry every field GitHub's description requires, and a job name over 100
characters is listed cut to 97 and ``...``, as GitHub does; a job a runner took
lists its ``steps`` (``Set up job``, then its work: ``Run the track`` for a matrix
leg), and its ``labels`` are its leg's ``runs_on``. Jobs may be
``queued``, ``waiting``, ``pending``, ``requested``, ``in_progress`` or ``completed``;
a job running past its leg's ``timeout-minutes`` is cancelled (conclusion
``cancelled``, as on GitHub) when :attr:`FakeGitHub.now` passes it; a run that cannot
start (a matrix of more than 256 legs) concludes ``startup_failure``; ``rerun`` makes
a new attempt (``run_attempt``) whose jobs replace the old ones in ``filter=latest``.
``FakeGitHub(ghes="3.17.4")`` (fixture ``fake_ghes``) is GitHub Enterprise Server: the
API under ``/api/v3``, ``X-GitHub-Enterprise-Version`` on every answer, no
``return_run_details``, at most 10 inputs, API version 2022-11-28 only.

Workflows are read from this project's ``.github/workflows``: a dispatched run gets
its ``display_title`` from the workflow's ``run-name`` and one job per matrix leg,
named from the job's ``name`` (``${{ inputs.X }}`` and ``${{ matrix.axis.field }}``
are substituted). Every answer carries ``x-ratelimit-*`` headers.

Use the ``fake_github`` fixture (registered in ``tests/conftest.py``)::

    def test_it(fake_github):
        executor = GitHubExecutor(fake_github.repository, fake_github.token,
                                  api_url=fake_github.url, now=T0)
        fake_github.now = T0                    # created_at of new runs (default: clock)
        [result] = executor.dispatch([request])
        run_id = result.handle["ci_run_id"]
        fake_github.set_job(run_id, "a", "in_progress")
        fake_github.complete_all(run_id)        # or conclusion="failure", ...
        fake_github.dispatches                   # recorded dispatch requests
        fake_github.requests                     # every request, in order

Issues, their comments and labels are served too (:mod:`tests.fakes.github_issues`,
:attr:`FakeGitHub.issues`), for the notifications' issue channel.

Faults are scripted per endpoint (``"dispatch"``, ``"repository-dispatch"``, ``"runs"``,
``"run"``, ``"jobs"``, ``"job"``, ``"job-logs"``, ``"cancel"``, ``"artifacts"``,
``"artifact-zip"``, ``"issues"``,
``"issue"``, ``"comments"`` or ``"any"``) and consumed in order, each for ``times``
requests:

- ``fail(endpoint, status=500)``: an error answer;
- ``rate_limit(endpoint, retry_after=1)``: ``429`` with ``Retry-After``;
- ``secondary_limit(endpoint, retry_after=None)``: ``403`` secondary rate limit;
- ``exhaust(reset_in=60)``: the primary limit is spent (``403``, remaining ``0``);
- ``slow(endpoint, delay)``: the request takes effect, the answer comes ``delay``
  seconds later;
- ``lose_response(endpoint="dispatch")``: the request takes effect (the run is
  created), then the connection is closed without an answer;
- ``no_details()``: a dispatch answers ``204`` although details were asked for;
- ``supports_run_details = False``: refuse ``return_run_details`` (``422``) without
  saying it is GitHub Enterprise Server (``ghes=`` does);
- ``jobs_appear = False``: new runs have no jobs until ``materialize(run_id)``.
- ``runner_pools[label] = n``: ``n`` runners serve the label; a free one takes the
  oldest queued leg there, which completes ``success`` :attr:`~FakeGitHub.leg_duration`
  after its start; the others stay ``queued`` until a runner frees (``0``: never).
- ``broken_labels[label] = "no-runner"`` (or ``"lost"``): the queued legs routed to
  that runner label (their matrix leg's ``runs_on``) fail to start: they complete with
  conclusion ``failure`` and no ``runner_name`` and no steps (no runner took them), or
  with a runner whose ``Run the track`` step stayed ``queued`` (it was lost setting
  up). Remove the label to let its runners work again.

The fake also runs as a process for manual tries: ``python -m tests.fakes.github``
prints its URL and serves until interrupted.
"""

from __future__ import annotations

import io
import json
import operator
import re
import secrets
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import yaml

from tests.fakes import github_issues, openapi
from tests.fakes import github_payloads as payloads

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO_ROOT / ".github" / "workflows"
API_VERSIONS = frozenset({"2022-11-28", "2026-03-10"})
GHES_API_VERSIONS = frozenset({"2022-11-28"})
DETAILS_ALWAYS = "2026-03-10"
"""From this API version on, a dispatch always answers 200 with the run's details and
``return_run_details`` is no longer a permitted key."""
MAX_INPUTS = 25
MAX_INPUTS_GHES = 10
MAX_RESULTS = 1000
"""Listing workflow runs filtered by actor, branch, check_suite_id, created, event,
head_sha or status returns at most this many runs."""
_CAPPED_FILTERS = frozenset({"actor", "branch", "check_suite_id", "created", "event",
                             "head_sha", "status"})
DEFAULT_TIMEOUT = 360
"""A job's ``timeout-minutes`` when its workflow sets none."""
CANCEL_DELAY = timedelta(seconds=10)
"""A cancel is answered 202 at once and carried out this much later (by :attr:`now`)."""
MAX_INPUTS_CHARS = 65_535
MAX_MATRIX = 256
QUEUE_LIMIT = timedelta(hours=24)
"""A self-hosted job queued this long is cancelled."""
MAX_JOB_NAME = 100
"""Longer job names are listed cut (see :meth:`FakeJob.to_json`)."""
RATE_LIMIT = 1000
"""Requests per hour of a GITHUB_TOKEN, per repository."""
LOG_URL_LIFETIME = timedelta(minutes=1)
"""A job log's download URL "expires after 1 minute" (GitHub's description of the
operation)."""

_INPUT_EXPR = re.compile(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}")
_MATRIX_EXPR = re.compile(r"\$\{\{\s*matrix\.([A-Za-z0-9_-]+)(?:\.([A-Za-z0-9_-]+))?\s*\}\}")
_FROM_JSON = re.compile(r"\$\{\{\s*fromJSON\(\s*inputs\.([A-Za-z0-9_-]+)\s*\)\s*\}\}")
_SKIP_IF = re.compile(r"(?:\$\{\{\s*)?(always\(\)|!cancelled\(\))\s*&&\s*"
                      r"inputs\.([A-Za-z0-9_-]+)\s*!=\s*'([^']*)'(?:\s*\}\})?")
_PATH = re.compile(r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/(?P<area>actions|check-runs)/"
                   r"(?P<rest>.*)")
_REPOSITORY_DISPATCH = re.compile(r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/dispatches")
MAX_EVENT_TYPE = 100
MAX_CLIENT_PAYLOAD = 10
MAX_CLIENT_PAYLOAD_BYTES = 64 * 1024
"""``event_type`` is at most 100 characters; ``client_payload`` has at most 10
top-level properties (the operation's request schema in GitHub's description), and
its JSON must be under 64 KB (the parameter's description, "Create a repository
dispatch event")."""


_iso = payloads.iso


# --------------------------------------------------------------------------- workflows


@dataclass(frozen=True)
class Workflow:
    """What the fake needs of a ``workflow_dispatch`` workflow file."""

    file: str
    name: str
    run_name: str | None
    inputs: dict[str, bool]
    """Declared inputs and whether each is required."""
    jobs: list[tuple[str, str, str | None, str | None]]
    """(job id, name template, matrix axis, input holding the matrix JSON) of the jobs
    that start at once."""
    after: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    """(job id, name, the job ids it ``needs``) of jobs that wait for others: GitHub
    creates such a job once every job it needs has completed. The fake waits for every
    job of the run's attempt (track.yml's ``fan-in`` needs all there is: the legs)."""
    skip_when: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Waiting job name -> (input, value): the job's ``if: always() && inputs.X != 'V'``
    (or ``!cancelled() && ...``) is false when input X is V, and GitHub then shows the
    job ``skipped``."""
    on_cancel: frozenset[str] = frozenset()
    """Waiting jobs whose ``if`` holds ``always()``: GitHub re-evaluates ``if`` when a
    run is cancelled, and such a job still runs (docs, "Workflow cancellation
    reference": "the condition if: always() would evaluate to true and the job
    continues to run"). A ``!cancelled()`` job does not."""
    defaults: dict[str, str] = field(default_factory=dict)
    """Declared inputs' defaults."""
    manual: bool = True
    """Whether it has ``on: workflow_dispatch`` (the workflow dispatch endpoint)."""
    dispatch_types: tuple[str, ...] | None = None
    """Its ``on.repository_dispatch.types`` (``()``: every type), ``None`` without one."""
    environment: str = ""
    """The matrix job's ``environment`` (its name, or ``name`` of the mapping), as
    written: an expression over the leg, filled by :meth:`environment_of`."""

    @classmethod
    def load(cls, path: Path) -> Workflow | None:
        doc = yaml.safe_load(path.read_text())
        if not isinstance(doc, dict):
            return None
        on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true
        if not isinstance(on, dict) or not {"workflow_dispatch", "repository_dispatch"} & set(on):
            return None
        types: tuple[str, ...] | None = None
        if "repository_dispatch" in on:
            types = tuple((on.get("repository_dispatch") or {}).get("types") or ())
        declared = (on.get("workflow_dispatch") or {}).get("inputs") or {}
        inputs = {name: bool((spec or {}).get("required")) for name, spec in declared.items()}
        defaults = {name: str(spec["default"]) for name, spec in declared.items()
                    if isinstance(spec, dict) and "default" in spec}
        jobs = []
        after = []
        skip_when = {}
        on_cancel = set()
        environment: Any = ""
        for job_id, job in (doc.get("jobs") or {}).items():
            needs = (job or {}).get("needs") or ()
            if needs:
                name = str(job.get("name") or job_id)
                after.append((job_id, name,
                              (needs,) if isinstance(needs, str) else tuple(needs)))
                condition = _SKIP_IF.fullmatch(str(job.get("if", "")).strip())
                if condition:
                    skip_when[name] = (condition.group(2), condition.group(3))
                if "always()" in str(job.get("if", "")):
                    on_cancel.add(name)
                continue
            matrix = ((job or {}).get("strategy") or {}).get("matrix")
            axis = source = None
            if isinstance(matrix, dict) and len(matrix) == 1:
                [(axis, value)] = matrix.items()
                found = _FROM_JSON.fullmatch(str(value).strip())
                source = found.group(1) if found else None
            jobs.append((job_id, str(job.get("name") or job_id), axis, source))
            if axis is not None:
                environment = (job or {}).get("environment") or ""
                if isinstance(environment, dict):
                    environment = environment.get("name") or ""
        return cls(path.name, str(doc.get("name") or path.name), doc.get("run-name"), inputs,
                   jobs, after, skip_when, on_cancel=frozenset(on_cancel), defaults=defaults,
                   manual="workflow_dispatch" in on, dispatch_types=types,
                   environment=str(environment))

    def title(self, inputs: dict[str, str]) -> str:
        if not self.run_name:
            return self.name
        return _INPUT_EXPR.sub(lambda m: inputs.get(m.group(1), ""), self.run_name)

    def expand(self, inputs: dict[str, str]) -> list[tuple[str, dict[str, Any]]] | None:
        """Job names and matrix legs; ``None`` when the matrix cannot start."""
        out: list[tuple[str, dict[str, Any]]] = []
        for _job_id, template, axis, source in self.jobs:
            if axis is None or source is None:
                out.append((template, {}))
                continue
            try:
                legs = json.loads(inputs.get(source, ""))
            except ValueError:
                return None
            if not isinstance(legs, list) or not legs or len(legs) > MAX_MATRIX:
                return None
            out += [(_fill(template, axis, leg), leg) for leg in legs]
        return out

    def environment_of(self, leg: dict[str, Any]) -> str:
        """The environment of the matrix job's ``leg``: its expression filled in. An
        absent property of the leg is an empty string, and so is a job with no
        environment."""
        axis = next((axis for _, _, axis, _ in self.jobs if axis is not None), None)
        if not self.environment or axis is None:
            return ""
        return _fill(self.environment, axis, leg, absent="")


def _fill(template: str, axis: str, leg: Any, absent: str | None = None) -> str:
    """``template`` with each ``${{ matrix.<axis>.<key> }}`` replaced by ``leg``'s value
    (JSON for a non-string; ``absent``, when given, for a key the leg lacks)."""
    def sub(m: re.Match[str]) -> str:
        if m.group(1) != axis:
            return m.group(0)
        value = leg.get(m.group(2)) if m.group(2) and isinstance(leg, dict) else leg
        if value is None and absent is not None:
            return absent
        return value if isinstance(value, str) else json.dumps(value)
    return _MATRIX_EXPR.sub(sub, template)


def load_workflows(folder: Path = WORKFLOWS) -> dict[str, Workflow]:
    found = {}
    for path in sorted(folder.glob("*.y*ml")):
        workflow = Workflow.load(path)
        if workflow is not None:
            found[path.name] = workflow
    return found


# --------------------------------------------------------------------------- state


@dataclass
class FakeJob:
    id: int
    run_id: int
    name: str
    leg: dict[str, Any]
    created_at: datetime
    status: str = "queued"
    conclusion: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    run_attempt: int = 1
    workflow_name: str = "track"
    head_branch: str = "main"
    no_start: str | None = None
    """``no-runner`` or ``lost``: how the job failed to start (see ``broken_labels``)."""
    annotations: list[dict[str, Any]] = field(default_factory=list)
    """Its check run's annotations (``GET .../check-runs/{id}/annotations``)."""
    log: bytes | None = None
    """Its log as GitHub serves it (default: a few timestamped lines naming the job)."""
    log_expired: bool = False
    environment: str = ""
    """The environment its job references (``jobs.<id>.environment``); empty: none."""

    def log_text(self) -> bytes:
        if self.log is not None:
            return self.log
        at = _iso(self.completed_at or self.created_at)
        return (f"{at} ##[group]Run the track\n{at} job {self.name}\n{at} ##[endgroup]\n"
                f"{at} Cleaning up orphan processes\n").encode()

    @property
    def is_leg(self) -> bool:
        """A matrix leg of track.yml (named after a dispatch key), not ``fan-in``."""
        return isinstance(self.leg, dict) and bool(self.leg.get("key"))

    @property
    def self_hosted(self) -> bool:
        """Its label names no GitHub-hosted runner image."""
        return not self.label.startswith(("ubuntu-", "windows-", "macos-"))

    default_label: str = "ubuntu-latest"
    """``runs-on`` of a leg without its own (track.yml's ``vars.ORCHESTRATOR_RUNNER``)."""

    @property
    def label(self) -> str:
        runs_on = self.leg.get("runs_on") if isinstance(self.leg, dict) else None
        return runs_on if isinstance(runs_on, str) else self.default_label

    def steps(self) -> list[dict[str, Any]]:
        """The steps GitHub lists: none before a runner took the job."""
        if self.no_start == "no-runner" or self.status not in ("in_progress", "completed"):
            return []
        begun = _iso(self.started_at or self.created_at)
        ended = _iso(self.completed_at)
        done = self.status == "completed"
        work = "Run the track" if self.is_leg else "Run"
        out = [{"name": "Set up job", "number": 1, "status": "completed",
                "conclusion": "success", "started_at": begun, "completed_at": begun}]
        if self.is_leg and self.leg.get("items"):
            # A drain worker's leg: track.yml's `if:` skips "Run the track" and runs
            # "Work the items". The runner completes a step whose condition is false
            # as Skipped (actions/runner, src/Runner.Worker/StepsRunner.cs).
            out.append({"name": work, "number": 2, "status": "completed",
                        "conclusion": "skipped", "started_at": None, "completed_at": None})
            work = "Work the items"
        number = len(out) + 1
        if self.no_start == "lost":
            out.append({"name": work, "number": number, "status": "queued",
                        "conclusion": None, "started_at": None, "completed_at": None})
            return out
        out.append({"name": work, "number": number, "status": self.status,
                    "conclusion": self.conclusion if done else None, "started_at": begun,
                    "completed_at": ended if done else None})
        if done:
            out.append({"name": "Complete job", "number": number + 1, "status": "completed",
                        "conclusion": "success", "started_at": ended, "completed_at": ended})
        return out

    @property
    def timeout(self) -> timedelta:
        """The job's ``timeout-minutes`` (the leg's, as track.yml sets it; else 360)."""
        minutes = self.leg.get("timeout_minutes") if isinstance(self.leg, dict) else None
        return timedelta(minutes=minutes if isinstance(minutes, int) else DEFAULT_TIMEOUT)

    def to_json(self, base: str, repository: str) -> dict[str, Any]:
        api = f"{base}/repos/{repository}"
        started = self.status not in ("queued", "waiting", "pending", "requested") \
            and self.no_start != "no-runner"
        return {
            "id": self.id,
            "node_id": f"CR_kwDO{self.id}",
            "run_id": self.run_id,
            "run_url": f"{api}/actions/runs/{self.run_id}",
            "run_attempt": self.run_attempt,
            "head_sha": payloads.SHA,
            "head_branch": self.head_branch,
            "workflow_name": self.workflow_name,
            # GitHub lists a name over 100 characters cut to 97 and "..." (undocumented;
            # kata-containers/kata-containers #11176, OP5dev/TF-via-PR #482)
            "name": self.name if len(self.name) <= MAX_JOB_NAME else
            self.name[:MAX_JOB_NAME - 3] + "...",
            "url": f"{api}/actions/jobs/{self.id}",
            "html_url": f"{base}/html/{repository}/actions/runs/{self.run_id}/job/{self.id}",
            "check_run_url": f"{api}/check-runs/{self.id}",
            "status": self.status,
            "conclusion": self.conclusion,
            "created_at": _iso(self.created_at),
            # GitHub reports a queued job's started_at as its creation time
            "started_at": _iso(self.started_at or self.created_at),
            "completed_at": _iso(self.completed_at),
            "labels": [self.label],
            "runner_id": 7 if started else None,
            "runner_name": "fake-runner" if started else None,
            "runner_group_id": 1 if started else None,
            "runner_group_name": "GitHub Actions" if started else None,
            "steps": self.steps(),
        }


@dataclass
class FakeRun:
    id: int
    workflow: str
    workflow_name: str
    display_title: str
    ref: str
    inputs: dict[str, str]
    created_at: datetime
    jobs: list[FakeJob] = field(default_factory=list)
    startup_failure: bool = False
    cancelled: bool = False
    pending_jobs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    updated_at: datetime | None = None
    run_attempt: int = 1
    run_number: int = 1
    cancel_at: datetime | None = None
    """A cancel was accepted (``202``); GitHub carries it out a little later."""
    stale: bool = False
    waiting_jobs: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    """Jobs that ``need`` others (the workflow's ``after``), not created yet."""
    event: str = "workflow_dispatch"
    """What started it: ``workflow_dispatch``, ``repository_dispatch`` or ``schedule``."""
    held: bool = False
    """Waiting for its concurrency group (:meth:`FakeGitHub.waiting_run`): status
    ``pending``, no jobs yet, until cancelled."""
    cancelled_by: str | None = None
    """Who pressed *Cancel workflow* (:meth:`FakeGitHub.cancel_by`)."""
    payload: dict[str, Any] = field(default_factory=dict)
    """A ``repository_dispatch``'s webhook payload as ``github.event`` holds it: its
    ``event_type`` as ``action``, and its ``client_payload``."""

    @property
    def latest_jobs(self) -> list[FakeJob]:
        return [j for j in self.jobs if j.run_attempt == self.run_attempt]

    @property
    def status(self) -> str:
        jobs = self.latest_jobs
        if self.startup_failure or self.stale:
            return "completed"
        if self.held and not self.cancelled:
            # GitHub's docs, "Control the concurrency of workflows and jobs": a run queued
            # while another of its group is in progress "will be pending"
            return "pending"
        if self.cancelled:
            # an `always()` job may still run after a cancel: the run ends with it
            busy = self.waiting_jobs or any(j.status != "completed" for j in jobs)
            return "in_progress" if busy else "completed"
        if not jobs:
            return "queued"
        if all(j.status == "completed" for j in jobs):
            return "completed"
        if any(j.status in ("in_progress", "completed") for j in jobs):
            return "in_progress"
        for waiting in ("waiting", "pending", "requested"):
            if any(j.status == waiting for j in jobs):
                return waiting
        return "queued"

    @property
    def conclusion(self) -> str | None:
        # startup_failure and stale are run conclusions only: no job ever has them
        if self.startup_failure:
            return "startup_failure"
        if self.stale:
            return "stale"
        if self.status != "completed":
            return None
        if self.cancelled:
            return "cancelled"
        conclusions = {j.conclusion for j in self.latest_jobs}
        for worst in ("failure", "timed_out", "cancelled", "action_required"):
            if worst in conclusions:
                return worst
        return "success"

    def to_json(self, base: str, repository: str) -> dict[str, Any]:
        api = f"{base}/repos/{repository}/actions/runs/{self.id}"
        repo = payloads.repository(base, repository)
        actor = payloads.user(base, "github-actions[bot]")
        return {
            "id": self.id,
            "node_id": f"WFR_kwLO{self.id}",
            "name": self.workflow_name,
            "display_title": self.display_title,
            "event": self.event,
            "status": self.status,
            "conclusion": self.conclusion,
            "head_branch": self.ref.removeprefix("refs/heads/").removeprefix("refs/tags/"),
            "head_sha": payloads.SHA,
            "path": f".github/workflows/{self.workflow}",
            "run_number": self.run_number,
            "run_attempt": self.run_attempt,
            "workflow_id": 161335,
            "check_suite_id": self.id + 1,
            "check_suite_node_id": f"CS_kwDO{self.id + 1}",
            "actor": actor,
            "triggering_actor": actor,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at or self.created_at),
            "run_started_at": _iso(self.created_at),
            "url": api,
            "html_url": f"{base}/html/{repository}/actions/runs/{self.id}",
            "jobs_url": f"{api}/jobs",
            "logs_url": f"{api}/logs",
            "check_suite_url": f"{base}/repos/{repository}/check-suites/{self.id + 1}",
            "artifacts_url": f"{api}/artifacts",
            "cancel_url": f"{api}/cancel",
            "rerun_url": f"{api}/rerun",
            "previous_attempt_url": (f"{api}/attempts/{self.run_attempt - 1}"
                                     if self.run_attempt > 1 else None),
            "workflow_url": f"{base}/repos/{repository}/actions/workflows/161335",
            "pull_requests": [],
            "referenced_workflows": [],
            "head_commit": payloads.head_commit(self.created_at),
            "repository": repo,
            "head_repository": repo,
        }


@dataclass
class FakeArtifact:
    id: int
    run_id: int
    name: str
    data: bytes
    """The zip archive GitHub serves for it."""
    created_at: datetime
    expired: bool = False
    signature: str = field(default_factory=lambda: secrets.token_hex(8))

    def to_json(self, base: str, repository: str) -> dict[str, Any]:
        api = f"{base}/repos/{repository}/actions/artifacts/{self.id}"
        return {
            "id": self.id,
            "node_id": f"MDg6QXJ0aWZhY3Q{self.id}",
            "name": self.name,
            "size_in_bytes": len(self.data),
            "url": api,
            "archive_download_url": f"{api}/zip",
            "expired": self.expired,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.created_at),
            "expires_at": _iso(self.created_at + timedelta(days=90)),
            "digest": None,
            "workflow_run": {"id": self.run_id, "repository_id": 1296269,
                             "head_repository_id": 1296269, "head_branch": "main",
                             "head_sha": payloads.SHA},
        }


def zip_files(files: dict[str, bytes]) -> bytes:
    """A zip archive of ``files``, as ``upload-artifact`` makes one."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(files.items()):
            archive.writestr(name, data)
    return buffer.getvalue()


@dataclass
class Recorded:
    """One request as the fake saw it, and its answer."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    endpoint: str
    status: int = 0
    """The status answered; 0 when the connection was dropped without an answer."""
    response: Any = None
    """The JSON body answered (``None``: no body)."""
    api_version: str | None = None
    authorized: bool = False
    at: float = 0.0
    """``time.monotonic()`` when the request arrived."""
    host: str = ""
    """The ``Host`` it was sent to (the log storage's requests only)."""


@dataclass
class Fault:
    endpoint: str
    kind: str
    times: int
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    message: str = ""
    delay: float = 0.0
    skip: int = 0
    """Matching requests answered normally before the fault begins."""


class _Drop(Exception):
    """Close the connection without an answer."""


class UploadFailed(Exception):
    """``actions/upload-artifact`` failed: its step fails, nothing is stored."""


UPLOAD_FAULTS = {
    "conflict": "Failed to CreateArtifact: Received non-retryable error: Failed request: "
                "(409) Conflict: an artifact with this name already exists on the workflow run",
    "finalize": "Failed to FinalizeArtifact: Unable to make request: ECONNRESET",
    "quota": "Artifact storage quota has been hit. Unable to upload any new artifacts. "
             "Usage is recalculated every 6-12 hours.",
}
"""How an upload fails, in the words users report from upload-artifact v4 and later."""


class FakeGitHub:
    """The fake's state and controls; the HTTP server calls :meth:`handle`."""

    def __init__(self, repository: str = "octo-org/widgets",
                 token: str = "ghs_fake-token-0123456789", branches: tuple[str, ...] = ("main",),
                 workflows: dict[str, Workflow] | None = None, *, tags: tuple[str, ...] = (),
                 ghes: str | None = None) -> None:
        self.repository = repository
        self.token = token
        self.branches = set(branches)
        self.tags = set(tags)
        self.ghes = ghes
        """GitHub Enterprise Server version (e.g. ``3.17.4``): the API lives under
        ``/api/v3``, answers carry ``X-GitHub-Enterprise-Version``, a dispatch knows no
        ``return_run_details`` and takes at most 10 inputs."""
        self.workflows = load_workflows() if workflows is None else workflows
        self.now: datetime | None = None
        """The fake's clock for ``created_at`` and rate-limit resets (default: real time)."""
        self.supports_run_details = ghes is None
        self.cancel_delay = CANCEL_DELAY
        """How long after an accepted cancel GitHub carries it out (by :attr:`now`)."""
        self.jobs_appear = True
        self.broken_labels: dict[str, str] = {}
        """Runner labels whose queued legs fail to start: ``no-runner`` or ``lost``."""
        self.runner_pools: dict[str, int] = {}
        """Runner label -> how many runners serve it (:meth:`_run_pools`); labels not
        listed are played by the tests."""
        self.leg_duration = timedelta(minutes=30)
        """How long a leg a pool's runner took runs before it completes ``success``."""
        self.runner = "ubuntu-latest"
        """The repository variable ``ORCHESTRATOR_RUNNER``: legs without ``runs_on`` run
        there (a self-hosted label's queued legs are cancelled after a day)."""
        self.reviewed: dict[str, list[str]] = {}
        """Environment name -> its required reviewers: a job referencing it waits, as
        ``waiting``, until :meth:`review` (docs, "Reviewing deployments"). GitHub
        compares environment names without case; the fake's tests use one spelling."""
        self._environment_ids: dict[str, int] = {}
        self.workflow_states: dict[str, str] = {}
        """A workflow file's ``state`` when not ``active``: ``disabled_inactivity`` (the
        60-day rule of public repositories), ``disabled_manually``, ... (:meth:`disable`)."""
        self.no_access = False
        """The token cannot see the repository: every call about it answers 404."""
        self.ignore_status_filter = False
        """Runs listings ignore their ``status`` filter, as a GitHub that changed its
        search might: the caller must check each run's ``status`` itself."""
        self.upload_faults: list[str] = []
        """Kinds of :data:`UPLOAD_FAULTS` the next uploads fail with (:meth:`fail_uploads`)."""
        self.rate_remaining = RATE_LIMIT
        self.rate_reset_at: datetime | None = None
        """When the spent rate limit window resets (by :attr:`now`); then it refills."""
        self.prefix = "/api/v3" if ghes else ""
        """Path prefix of the API, e.g. ``/api/v3`` like GitHub Enterprise Server."""
        self.requests: list[Recorded] = []
        self.runs: dict[int, FakeRun] = {}
        self.artifacts: dict[int, FakeArtifact] = {}
        self.issues = github_issues.Issues()
        """The repository's issues (see :mod:`tests.fakes.github_issues`)."""
        self.faults: list[Fault] = []
        self.url = ""
        self._lock = threading.RLock()
        self._ids = iter(range(7_000_000_001, 8_000_000_000))
        self._job_ids = iter(range(40_000_000_001, 50_000_000_000))
        self._artifact_ids = iter(range(2_000_000_001, 3_000_000_000))
        self.log_links: dict[str, tuple[int, datetime]] = {}
        """Signature of each log download URL handed out -> (job id, when)."""
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeGitHub:
        fake = self

        class Handler(_Handler):
            github = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def api_url(self) -> str:
        """Where the API is served: the server's root, or ``/api/v3`` under it (GHES)."""
        return self.url + self.prefix

    def env(self) -> dict[str, str]:
        """Environment for a process that should talk to this fake (``from_env``)."""
        return {"GITHUB_REPOSITORY": self.repository, "GITHUB_TOKEN": self.token,
                "GITHUB_API_URL": self.api_url, "GITHUB_REF_NAME": "main"}

    # ------------------------------------------------------------------ contract

    def description_for(self, record: Recorded) -> str:
        return openapi.description_for(record.api_version, ghes=self.ghes is not None)

    def contract_violations(self) -> list[str]:
        """Every request received and every answer given that GitHub's description of
        the API (for this fake's kind of GitHub and the request's API version) does not
        allow. Requests the fake refused as GitHub would (401, unsupported version,
        unknown path) are the tests' own doing and not checked."""
        problems = []
        for record in self.requests:
            if record.endpoint in ("other", "blob") or record.status in (0, 401) or (
                    record.status == 400 and record.api_version not in API_VERSIONS):
                continue
            path = record.path.removeprefix(self.prefix)
            name = self.description_for(record)
            if record.status < 400:
                # a refused request (4xx) is allowed to be wrong: GitHub said so
                problems += openapi.request_violations(name, record.method, path,
                                                       record.query, record.body)
            problems += openapi.response_violations(name, record.method, path,
                                                    record.status, record.response)
        return problems

    # ------------------------------------------------------------------ faults

    def _add(self, fault: Fault) -> None:
        with self._lock:
            self.faults.append(fault)

    def fail(self, endpoint: str = "any", *, status: int = 500, times: int = 1,
             message: str = "Server Error", headers: dict[str, str] | None = None,
             skip: int = 0) -> None:
        """The next ``times`` requests to ``endpoint`` (after ``skip`` answered normally)
        are answered ``status``."""
        self._add(Fault(endpoint, "status", times, status, dict(headers or {}), message,
                        skip=skip))

    def rate_limit(self, endpoint: str = "any", *, retry_after: float = 1,
                   times: int = 1) -> None:
        self._add(Fault(endpoint, "status", times, 429, {"retry-after": f"{retry_after:g}"},
                        "You have exceeded a secondary rate limit."))

    def secondary_limit(self, endpoint: str = "any", *, retry_after: float | None = None,
                        times: int = 1) -> None:
        headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
        self._add(Fault(endpoint, "status", times, 403, headers,
                        "You have exceeded a secondary rate limit. Please wait a few minutes "
                        "before you try again."))

    def exhaust(self, *, reset_in: float = 60, remaining: int = 0) -> None:
        """Leave ``remaining`` requests of the primary rate limit; the window resets
        ``reset_in`` seconds after :attr:`now` (advance :attr:`now` to get there)."""
        with self._lock:
            self.rate_remaining = remaining
            self.rate_reset_at = self._clock() + timedelta(seconds=reset_in)

    def slow(self, endpoint: str = "any", *, delay: float, times: int = 1) -> None:
        self._add(Fault(endpoint, "slow", times, delay=delay))

    def lose_response(self, endpoint: str = "dispatch", *, times: int = 1) -> None:
        self._add(Fault(endpoint, "lost", times))

    def no_details(self, *, times: int = 1) -> None:
        self._add(Fault("dispatch", "no-details", times))

    def _take_fault(self, endpoint: str) -> Fault | None:
        for fault in self.faults:
            if fault.endpoint in (endpoint, "any") and fault.times > 0:
                if fault.kind == "no-details" and endpoint != "dispatch":
                    continue
                if fault.skip:
                    fault.skip -= 1
                    return None
                fault.times -= 1
                if fault.times == 0:
                    self.faults.remove(fault)
                return fault
        return None

    # ------------------------------------------------------------------ progress

    def _clock(self) -> datetime:
        return self.now if self.now is not None else datetime.now(UTC)

    def _job(self, run_id: int, track: str) -> FakeJob:
        for job in self.runs[run_id].latest_jobs:
            if track in (job.leg.get("track"), job.leg.get("key"), job.name):
                return job
        raise KeyError(f"run {run_id} has no job for track {track!r}")

    def set_job(self, run_id: int, track: str, status: str,
                conclusion: str | None = None) -> None:
        """Move the job of ``track`` (its matrix leg's ``track``, or the job name) of the
        run's latest attempt to ``status``: ``queued``, ``waiting``, ``pending``,
        ``requested``, ``in_progress`` or ``completed`` (with ``conclusion``)."""
        with self._lock:
            job = self._job(run_id, track)
            now = self._clock()
            job.status = status
            if status in ("in_progress", "completed") and job.started_at is None:
                job.started_at = now
            if status == "completed":
                job.conclusion = conclusion or "success"
                job.completed_at = now
            self.runs[run_id].updated_at = now
            self._release(self.runs[run_id])

    def job_status(self, run_id: int, track: str) -> tuple[str, str | None]:
        """The status and conclusion of the job of ``track`` (as :meth:`set_job` finds
        it), after carrying out what is due (:meth:`settle`): what a runner asks GitHub
        while it plays the job."""
        with self._lock:
            self.settle()
            job = self._job(run_id, track)
            return job.status, job.conclusion

    def set_log(self, run_id: int, track: str, data: bytes) -> None:
        """What the job of ``track`` (as :meth:`set_job` finds it) logged."""
        with self._lock:
            self._job(run_id, track).log = data

    def expire_log(self, run_id: int, track: str) -> None:
        """The job's log is past the repository's log retention: ``410``."""
        with self._lock:
            self._job(run_id, track).log_expired = True

    def job_by_id(self, job_id: int) -> FakeJob | None:
        with self._lock:
            return next((j for r in self.runs.values() for j in r.jobs if j.id == job_id),
                        None)

    def _release(self, run: FakeRun) -> None:
        """Create the jobs that waited for the others, once those have all completed
        (``if: always()``: whatever their conclusions)."""
        jobs = run.latest_jobs
        if run.waiting_jobs and jobs and all(j.status == "completed" for j in jobs):
            ready, run.waiting_jobs = run.waiting_jobs, []
            self._make_jobs(run, [(name, {}) for _, name, _ in ready])
            workflow = self.workflows.get(run.workflow)
            for _, name, _ in ready if workflow is not None else ():
                skip = workflow.skip_when.get(name)
                if skip is not None and run.inputs.get(
                        skip[0], workflow.defaults.get(skip[0], "")) == skip[1]:
                    [job] = [j for j in run.latest_jobs if j.name == name]
                    job.status, job.conclusion = "completed", "skipped"
                    job.started_at = job.completed_at = self._clock()

    def start_all(self, run_id: int | None = None) -> None:
        with self._lock:
            for run in self._selected(run_id):
                for job in run.jobs:
                    if job.status == "queued":
                        self.set_job(run.id, job.name, "in_progress")

    def complete_all(self, run_id: int | None = None, conclusion: str = "success") -> None:
        """Complete every job, and those that waited for them (``fan-in``) after them."""
        with self._lock:
            for run in self._selected(run_id):
                while any(j.status != "completed" for j in run.jobs):
                    for job in list(run.jobs):
                        if job.status != "completed":
                            self.set_job(run.id, job.name, "completed", conclusion)

    def materialize(self, run_id: int) -> None:
        """Create the jobs of a run made while :attr:`jobs_appear` was false."""
        with self._lock:
            run = self.runs[run_id]
            self._make_jobs(run, run.pending_jobs)
            run.pending_jobs = []

    def settle(self) -> None:
        """Carry out what GitHub does on its own as :attr:`now` passes: accepted cancels
        take effect, a job running past its ``timeout-minutes`` is cancelled (its
        conclusion is ``cancelled``, as GitHub documents for a timeout), and a queued
        leg on one of :attr:`broken_labels` fails to start."""
        with self._lock:
            now = self._clock()
            for run in self.runs.values():
                if run.cancel_at is not None and now >= run.cancel_at:
                    self._cancel_now(run, run.cancel_at)
                for job in run.latest_jobs:
                    if (job.status == "in_progress" and job.started_at is not None
                            and now >= job.started_at + job.timeout):
                        job.status, job.conclusion = "completed", "cancelled"
                        job.completed_at = job.started_at + job.timeout
                        run.updated_at = job.completed_at
                        self._release(run)
                    if (job.status == "queued" and job.is_leg and job.self_hosted
                            and now >= job.created_at + QUEUE_LIMIT):
                        # GitHub cancels a self-hosted job queued a day (docs, "Usage
                        # limits for self-hosted runners"), without a runner
                        job.status, job.conclusion = "completed", "cancelled"
                        job.no_start = "no-runner"
                        job.completed_at = run.updated_at = job.created_at + QUEUE_LIMIT
                        self._release(run)
                    how = self.broken_labels.get(job.label)
                    if how is not None and job.status == "queued" and job.is_leg:
                        job.status, job.conclusion, job.no_start = "completed", "failure", how
                        job.started_at = now if how == "lost" else None
                        job.completed_at = run.updated_at = now
                        self._release(run)
            for label, size in self.runner_pools.items():
                self._run_pool(label, size, now)

    def _run_pool(self, label: str, size: int, now: datetime) -> None:
        """Play ``label``'s ``size`` runners until ``now``: a free runner takes the oldest
        queued leg, and a leg it took completes :attr:`leg_duration` after its start.
        What exceeds the pool stays ``queued`` until a runner frees, as on GitHub, where
        a plan's concurrent-jobs limit queues jobs alike (docs, "Actions limits"). With
        ``size`` 0 no leg on the label ever starts."""
        while True:
            legs = [j for r in self.runs.values() for j in r.latest_jobs
                    if j.is_leg and j.label == label]
            running = [j for j in legs if j.status == "in_progress"]
            queued = sorted((j for j in legs if j.status == "queued"),
                            key=lambda j: (j.created_at, j.id))
            if queued and len(running) < size:
                # it starts when it was created, or when the last runner freed
                freed = [j.completed_at for j in legs if j.started_at and j.completed_at]
                job = queued[0]
                job.status, job.started_at = "in_progress", max([job.created_at, *freed])
                self.runs[job.run_id].updated_at = job.started_at
                continue
            ending = [j for j in running
                      if j.started_at is not None and j.started_at + self.leg_duration <= now]
            if not ending:
                return
            job = min(ending, key=lambda j: (j.started_at, j.id))
            assert job.started_at is not None
            job.status, job.conclusion = "completed", "success"
            job.completed_at = self.runs[job.run_id].updated_at = job.started_at + self.leg_duration
            self._release(self.runs[job.run_id])

    def _cancel_now(self, run: FakeRun, at: datetime) -> None:
        """Carry out a cancel: GitHub re-evaluates every job's ``if``. Running and queued
        jobs without ``always()`` are cancelled (annotated with who cancelled, as GitHub
        annotates their check runs: "The run was canceled by @octocat."); waiting jobs
        whose ``if`` holds ``always()`` still start once the jobs they need have ended,
        the others never do."""
        workflow = self.workflows.get(run.workflow)
        keep = workflow.on_cancel if workflow is not None else frozenset()
        run.cancelled, run.cancel_at, run.pending_jobs = True, None, []
        run.waiting_jobs = [w for w in run.waiting_jobs if w[1] in keep]
        for job in run.latest_jobs:
            if job.status != "completed" and job.name not in keep:
                job.status, job.conclusion, job.completed_at = "completed", "cancelled", at
                if run.cancelled_by:
                    job.annotations.append(payloads.annotation(
                        self.api_url, self.repository,
                        f"The run was canceled by @{run.cancelled_by}."))
        run.updated_at = at
        self._release(run)

    def cancel_by(self, run_id: int, actor: str) -> None:
        """A person presses *Cancel workflow* on the run (GitHub carries it out after
        :attr:`cancel_delay`, as for a cancel through the API)."""
        with self._lock:
            run = self.runs[run_id]
            run.cancelled_by = actor
            run.cancel_at = run.cancel_at or self._clock() + self.cancel_delay
            self.settle()

    def waiting_run(self, workflow: str = "tick.yml", *, created_at: datetime,
                    held: bool = True, event: str = "schedule",
                    running: bool = False) -> FakeRun:
        """A run of ``workflow`` that has not started, by ``event`` (``schedule``: GitHub's
        cron started it); ``held``: it waits behind a run of its concurrency group (status
        ``pending``), as the next scheduled tick waits behind a lingering one; else it is
        ``queued``. It has no jobs, unless ``running``: then its one job ``tick`` is
        ``in_progress`` (and so is the run)."""
        with self._lock:
            known = self.workflows.get(workflow)
            run = FakeRun(id=next(self._ids), workflow=workflow,
                          workflow_name=known.name if known else workflow,
                          display_title=known.name if known else workflow, ref="main",
                          inputs={}, created_at=created_at, run_number=len(self.runs) + 1,
                          event=event, held=held and not running)
            self.runs[run.id] = run
            if running:
                self._make_jobs(run, [("tick", {})])
                self.set_job(run.id, "tick", "in_progress")
            return run

    def delete_run(self, run_id: int) -> None:
        """Delete a run, as someone may on GitHub: it and its jobs answer 404."""
        with self._lock:
            del self.runs[run_id]

    def add_runs(self, count: int, *, start: datetime, every: timedelta,
                 workflow: str = "track.yml") -> None:
        """``count`` finished runs of other dispatches, the first created at ``start``:
        a busy repository."""
        with self._lock:
            for n in range(count):
                run = FakeRun(id=next(self._ids), workflow=workflow, workflow_name="track",
                              display_title=f"busy--20261201T0000Z {n:012x}", ref="main",
                              inputs={}, created_at=start + n * every, cancelled=True,
                              run_number=len(self.runs) + 1)
                self.runs[run.id] = run

    def upload(self, run_id: int, name: str, files: dict[str, bytes], *,
               overwrite: bool = False) -> FakeArtifact:
        """What ``actions/upload-artifact`` does: an artifact ``name`` of the run holding
        ``files``. Artifacts belong to the workflow run, not to one attempt: a second
        one of the same name is refused with GitHub's 409 (a re-run leg meets its
        earlier attempt's) unless ``overwrite`` deletes the old one first
        (upload-artifact's README, "overwrite"). A scripted :meth:`fail_uploads`
        fault makes the upload fail instead, storing nothing (:class:`UploadFailed`)."""
        with self._lock:
            if self.upload_faults:
                raise UploadFailed(UPLOAD_FAULTS[self.upload_faults.pop(0)])
            same = [a for a in self.artifacts.values() if a.run_id == run_id and a.name == name]
            if same and not overwrite:
                raise UploadFailed(UPLOAD_FAULTS["conflict"])
            for old in same:
                del self.artifacts[old.id]
            artifact = FakeArtifact(id=next(self._artifact_ids), run_id=run_id, name=name,
                                    data=zip_files(files), created_at=self._clock())
            self.artifacts[artifact.id] = artifact
            return artifact

    def disable(self, file: str, state: str = "disabled_inactivity") -> None:
        """GitHub disables the workflow ``file`` (in a public repository, after 60 days
        without activity), or a person does (``disabled_manually``)."""
        with self._lock:
            self.workflow_states[file] = state

    def fail_uploads(self, *kinds: str) -> None:
        """The next uploads fail, one per kind, in order: ``finalize`` (the transient
        error users report in actions/upload-artifact #560 and #531) or ``quota`` (the
        account's artifact storage is full)."""
        with self._lock:
            self.upload_faults.extend(kinds)

    def download_all(self, run_id: int) -> dict[str, dict[str, bytes]]:
        """What ``actions/download-artifact`` gives a job of the run: each unexpired
        artifact's files, by artifact name."""
        with self._lock:
            out = {}
            for artifact in self.artifacts.values():
                if artifact.run_id == run_id and not artifact.expired:
                    with zipfile.ZipFile(io.BytesIO(artifact.data)) as archive:
                        out[artifact.name] = {n: archive.read(n) for n in archive.namelist()}
            return out

    def rerun(self, run_id: int) -> None:
        """Re-run all jobs of a run: a new attempt with new jobs; ``filter=latest``
        shows only those, ``filter=all`` the earlier attempts' too."""
        with self._lock:
            run = self.runs[run_id]
            waited = {name for _, name, _ in self.workflows[run.workflow].after} \
                if run.workflow in self.workflows else set()
            legs = [(j.name, j.leg) for j in run.latest_jobs if j.name not in waited]
            run.waiting_jobs = list(self.workflows[run.workflow].after) if waited else []
            run.run_attempt += 1
            run.cancelled, run.cancel_at = False, None
            run.updated_at = self._clock()
            self._make_jobs(run, legs)

    def _selected(self, run_id: int | None) -> list[FakeRun]:
        return [self.runs[run_id]] if run_id is not None else list(self.runs.values())

    # ------------------------------------------------------------------ views

    @property
    def dispatches(self) -> list[Recorded]:
        """Every dispatch request received, accepted or not."""
        return [r for r in self.requests if r.endpoint == "dispatch"]

    def runs_of(self, workflow: str, event: str | None = None) -> list[FakeRun]:
        """The runs of one workflow file (started by ``event``), oldest first. Under the
        lock: a test polls this while the server's thread adds the run a dispatch made."""
        with self._lock:
            runs = list(self.runs.values())
        return sorted((r for r in runs if r.workflow == workflow
                       and (event is None or r.event == event)), key=lambda r: r.id)

    def calls(self, endpoint: str | None = None) -> list[Recorded]:
        return [r for r in self.requests if endpoint is None or r.endpoint == endpoint]

    def run_titled(self, title: str) -> FakeRun:
        with self._lock:
            [run] = [r for r in self.runs.values() if r.display_title == title]
        return run

    # ------------------------------------------------------------------ HTTP

    def handle(self, method: str, target: str, headers: dict[str, str],
               raw: bytes) -> tuple[int, dict[str, str], Any, float]:
        """Answer one request: (status, headers, JSON body or None, delay seconds)."""
        parts = urlsplit(target)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        path = parts.path
        if self.prefix:
            path = path.removeprefix(self.prefix) if path.startswith(self.prefix + "/") else ""
        endpoint, match = _route(method, path)
        if endpoint == "other":
            found, names = github_issues.route(method, path)
            if found != "other":
                endpoint, match = found, names
        if method == "GET" and parts.path.startswith("/_blob/"):
            return self._blob(parts.path, query, headers)
        if method == "GET" and parts.path.startswith("/_log/"):
            return self._log(parts.path, query, headers)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = ValueError
        auth = headers.get("authorization", "")
        record = Recorded(method=method, path=parts.path, query=query,
                          body=None if body is ValueError else body, endpoint=endpoint,
                          api_version=headers.get("x-github-api-version"),
                          authorized=auth in (f"Bearer {self.token}", f"token {self.token}"),
                          at=time.monotonic())
        with self._lock:
            self.requests.append(record)
            self.settle()
            try:
                status, out_headers, payload, delay = self._answer(
                    record, match, body, endpoint)
            except _Drop:
                record.status = 0
                raise
            record.status = status
            record.response = None if status == 204 else payload
            if self.ghes:
                out_headers = {**out_headers, "x-github-enterprise-version": self.ghes}
            return status, out_headers, payload, delay

    def _blob(self, path: str, query: dict[str, str],
              headers: dict[str, str]) -> tuple[int, dict[str, str], Any, float]:
        """The signed archive URL a download redirects to: no token needed (nor wanted:
        one sent here is recorded, and a test can fail on it)."""
        record = Recorded(method="GET", path=path, query=query, body=None, endpoint="blob",
                          authorized="authorization" in headers, at=time.monotonic())
        with self._lock:
            self.requests.append(record)
            name = path.removeprefix("/_blob/")
            artifact = self.artifacts.get(int(name)) if name.isdigit() else None
            if artifact is None or query.get("sig") != artifact.signature:
                record.status = 403
                return 403, {}, {"message": "signature mismatch"}, 0.0
            record.status = 200
            return 200, {"content-type": "application/zip"}, artifact.data, 0.0

    def _log(self, path: str, query: dict[str, str],
             headers: dict[str, str]) -> tuple[int, dict[str, str], Any, float]:
        """The log storage a job log's download redirects to: plain text, no token,
        and a signature that lasts :data:`LOG_URL_LIFETIME`."""
        record = Recorded(method="GET", path=path, query=query, body=None, endpoint="blob",
                          authorized="authorization" in headers, at=time.monotonic(),
                          host=headers.get("host", ""))
        with self._lock:
            self.requests.append(record)
            issued = self.log_links.get(query.get("sig", ""))
            job = self.job_by_id(issued[0]) if issued else None
            if issued is None or job is None or path != f"/_log/{issued[0]}":
                record.status = 403
                return 403, {}, {"message": "signature mismatch"}, 0.0
            if self._clock() > issued[1] + LOG_URL_LIFETIME:
                record.status = 403
                return 403, {}, {"message": "the signed URL has expired"}, 0.0
            record.status = 200
            return 200, {"content-type": "text/plain"}, job.log_text(), 0.0

    def _job_call(self, endpoint: str, job_id: int) -> tuple[int, Any, str | None]:
        job = self.job_by_id(job_id)
        if job is None:
            return 404, {"message": "Not Found"}, None
        if endpoint == "job":
            return 200, job.to_json(self.api_url, self.repository), None
        if job.log_expired:
            return 410, {"message": "Gone"}, None
        if job.status != "completed":
            return 404, {"message": "Not Found"}, None
        sig = secrets.token_hex(8)
        self.log_links[sig] = (job.id, self._clock())
        # another host name of this server: the token must not follow the redirect
        other = self.url.replace("127.0.0.1", "localhost")
        return 302, None, f"{other}/_log/{job.id}?sig={sig}"

    def _limits(self) -> dict[str, str]:
        reset = self.rate_reset_at or self._clock() + timedelta(hours=1)
        return {
            "x-ratelimit-limit": str(RATE_LIMIT),
            "x-ratelimit-remaining": str(max(0, self.rate_remaining)),
            "x-ratelimit-reset": str(int(reset.timestamp())),
            "x-ratelimit-used": str(RATE_LIMIT - max(0, self.rate_remaining)),
            "x-ratelimit-resource": "core",
        }

    def _answer(self, record: Recorded, match: Any, body: Any,
                endpoint: str) -> tuple[int, dict[str, str], Any, float]:
        if not record.authorized:
            return 401, {}, {"message": "Bad credentials"}, 0.0
        if self.no_access and match is not None:
            # a token that cannot see the repository: GitHub answers 404, not 403, so
            # as not to tell that it exists (docs, "Troubleshooting the REST API")
            return 404, self._limits(), {
                "message": "Not Found",
                "documentation_url": "https://docs.github.com/rest"}, 0.0
        versions = GHES_API_VERSIONS if self.ghes else API_VERSIONS
        if record.api_version is not None and record.api_version not in versions:
            return 400, {}, {"message": f"API version {record.api_version} is not supported"}, 0.0
        if self.rate_reset_at is not None and self._clock() >= self.rate_reset_at:
            self.rate_remaining, self.rate_reset_at = RATE_LIMIT, None
        if self.rate_remaining <= 0:
            return 403, self._limits(), {
                "message": "API rate limit exceeded for installation.",
                "documentation_url": "https://docs.github.com/rest/rate-limit"}, 0.0
        fault = self._take_fault(endpoint)
        if fault is not None and fault.kind == "status":
            headers = {**self._limits(), **fault.headers}
            return fault.status, headers, {"message": fault.message}, 0.0
        self.rate_remaining -= 1
        if match is None or f"{match['owner']}/{match['repo']}" != self.repository:
            return 404, self._limits(), {"message": "Not Found"}, 0.0
        status, payload, link = self._route_call(endpoint, match, record, body, fault)
        delay = fault.delay if fault is not None and fault.kind == "slow" else 0.0
        if fault is not None and fault.kind == "lost":
            raise _Drop
        headers = self._limits()
        if link:
            # a redirect's target travels as Location, a page's neighbours as Link
            headers["location" if status == 302 else "link"] = link
        return status, headers, payload, delay

    def _route_call(self, endpoint: str, match: Any, record: Recorded, body: Any,
                    fault: Fault | None) -> tuple[int, Any, str | None]:
        if endpoint == "repository-dispatch":
            return (*self._repository_dispatch(body), None)
        if endpoint in ("issues", "issue", "comments"):
            return self.issues.answer(endpoint, record.method, match, record.query, body,
                                      self.api_url, self.repository, self._clock(),
                                      lambda items, _query: self._page(items, record))
        rest = match["rest"]
        if endpoint == "dispatch":
            workflow = rest.split("/")[1]
            status, payload = self._dispatch(workflow, body, record.api_version, no_details=bool(
                fault is not None and fault.kind == "no-details"))
            return status, payload, None
        if endpoint == "runs":
            parts = rest.split("/")
            workflow = parts[1] if parts[0] == "workflows" else None
            return self._list_runs(workflow, record)
        if endpoint == "other":
            return 404, {"message": "Not Found"}, None
        if endpoint in ("workflow", "enable"):
            return self._workflow_call(endpoint, rest.split("/")[1])
        if endpoint == "annotations":
            return self._annotations(int(rest.split("/")[0]), record)
        if endpoint in ("job", "job-logs"):
            return self._job_call(endpoint, int(rest.split("/")[1]))
        if endpoint == "artifact-zip":
            artifact = self.artifacts.get(int(rest.split("/")[1]))
            if artifact is None or artifact.run_id not in self.runs:
                return 404, {"message": "Not Found"}, None
            if artifact.expired:
                return 410, {"message": "Artifact has expired",
                             "documentation_url": "https://docs.github.com/rest/actions/"
                                                  "artifacts#download-an-artifact"}, None
            return 302, None, f"{self.url}/_blob/{artifact.id}?sig={artifact.signature}"
        run_id = int(rest.split("/")[1])
        run = self.runs.get(run_id)
        if run is None:
            return 404, {"message": "Not Found"}, None
        if endpoint == "run":
            return 200, run.to_json(self.api_url, self.repository), None
        if endpoint == "jobs":
            return self._list_jobs(run, record)
        if endpoint == "artifacts":
            listed = sorted((a for a in self.artifacts.values() if a.run_id == run_id
                             and record.query.get("name", a.name) == a.name),
                            key=lambda a: a.id, reverse=True)
            chunk, link = self._page(listed, record)
            return 200, {"total_count": len(listed), "artifacts": [
                a.to_json(self.api_url, self.repository) for a in chunk]}, link
        if endpoint == "cancel":
            if run.status == "completed":
                return 409, {"message": "Cannot cancel a workflow run that is completed."}, None
            # GitHub accepts the cancel and carries it out later: the run still reads
            # in progress for a while
            run.cancel_at = run.cancel_at or self._clock() + self.cancel_delay
            return 202, {}, None
        return 404, {"message": "Not Found"}, None

    def _repository_dispatch(self, body: Any) -> tuple[int, Any]:
        """``POST /repos/{o}/{r}/dispatches``: a run of each workflow that takes the type."""
        if body is ValueError or not isinstance(body, dict):
            return 400, {"message": "Problems parsing JSON"}
        kind = body.get("event_type")
        if not isinstance(kind, str) or not 1 <= len(kind) <= MAX_EVENT_TYPE:
            return 422, {"message": "Invalid request.\n\n\"event_type\" wasn't supplied or "
                                    f"is not 1 to {MAX_EVENT_TYPE} characters.",
                         "documentation_url": "https://docs.github.com/rest/repos/repos"
                                              "#create-a-repository-dispatch-event"}
        payload = body.get("client_payload", {})
        if not isinstance(payload, dict) or len(payload) > MAX_CLIENT_PAYLOAD \
                or len(json.dumps(payload)) >= MAX_CLIENT_PAYLOAD_BYTES:
            return 422, {"message": "Invalid request.\n\n\"client_payload\" is not an "
                                    f"object of at most {MAX_CLIENT_PAYLOAD} properties.",
                         "documentation_url": "https://docs.github.com/rest/repos/repos"
                                              "#create-a-repository-dispatch-event"}
        default = "main" if "main" in self.branches else sorted(self.branches)[0]
        for name, workflow in sorted(self.workflows.items()):
            types = workflow.dispatch_types
            if types is None or (types and kind not in types):
                continue
            run = self._start_run(name, workflow, default, {}, event="repository_dispatch")
            run.payload = {"action": kind, "client_payload": payload}
        return 204, None

    def _start_run(self, workflow_file: str, workflow: Workflow, ref: str,
                   inputs: dict[str, str], *, event: str = "workflow_dispatch") -> FakeRun:
        run = FakeRun(id=next(self._ids), workflow=workflow_file, workflow_name=workflow.name,
                      display_title=workflow.title(inputs), ref=ref, inputs=dict(inputs),
                      created_at=self._clock(), run_number=len(self.runs) + 1, event=event)
        legs = workflow.expand(inputs)
        run.waiting_jobs = list(workflow.after)
        if legs is None:
            run.startup_failure = True
        elif self.jobs_appear:
            self._make_jobs(run, legs)
        else:
            run.pending_jobs = legs
        self.runs[run.id] = run
        return run

    def _workflow_call(self, endpoint: str, file: str) -> tuple[int, Any, str | None]:
        """``GET .../workflows/{file}`` (its ``state``) or ``PUT .../enable`` (``204``; a
        workflow disabled for inactivity, or by hand, is active again)."""
        if file not in self.workflows and file not in self.workflow_states:
            return 404, {"message": "Not Found"}, None
        if endpoint == "enable":
            self.workflow_states[file] = "active"
            return 204, None, None
        names = sorted(set(self.workflows) | set(self.workflow_states))
        workflow = self.workflows.get(file)
        return 200, payloads.workflow(self.api_url, self.repository, 161335 + names.index(file),
                                      file, workflow.name if workflow else file,
                                      self.workflow_states.get(file, "active")), None

    def _annotations(self, check_run: int, record: Recorded) -> tuple[int, Any, str | None]:
        """A job's check run annotations (a job's id is its check run's)."""
        for run in self.runs.values():
            for job in run.jobs:
                if job.id == check_run:
                    chunk, link = self._page(job.annotations, record)
                    return 200, chunk, link
        return 404, {"message": "Not Found"}, None

    def _dispatch(self, workflow_file: str, body: Any, api_version: str | None, *,
                  no_details: bool) -> tuple[int, Any]:
        workflow = self.workflows.get(workflow_file)
        if workflow is None:
            return 404, {"message": "Not Found"}
        if not workflow.manual:
            return 422, {"message": "Workflow does not have 'workflow_dispatch' trigger"}
        if body is ValueError or not isinstance(body, dict):
            return 400, {"message": "Problems parsing JSON"}
        always = api_version == DETAILS_ALWAYS and not self.ghes
        allowed = {"ref", "inputs"} | ({"return_run_details"}
                                       if self.supports_run_details and not always else set())
        for key in body:
            if key not in allowed:
                return 422, {"message": f'Invalid request.\n\n"{key}" is not a permitted key.'}
        ref = body.get("ref")
        if not isinstance(ref, str) or not ref:
            return 422, {"message": "Invalid request.\n\n\"ref\" wasn't supplied."}
        if not self._known_ref(ref):
            return 422, {"message": f"No ref found for: {ref}"}
        details = body.get("return_run_details", False)
        if not isinstance(details, bool):
            return 422, {"message": 'For "properties/return_run_details", it is not a boolean.'}
        inputs = body.get("inputs", {})
        if not isinstance(inputs, dict):
            return 422, {"message": 'For "properties/inputs", it is not an object.'}
        most = MAX_INPUTS_GHES if self.ghes else MAX_INPUTS
        if len(inputs) > most:
            return 422, {"message": f"you may only define up to {most} `inputs` for a "
                                    "`workflow_dispatch` event"}
        for key, value in inputs.items():
            if not isinstance(value, str):
                return 422, {"message": f'For "properties/{key}", {json.dumps(value)} is not '
                                        "a string."}
        if len(json.dumps(inputs)) > MAX_INPUTS_CHARS:
            return 422, {"message": f"inputs are too large: at most {MAX_INPUTS_CHARS} "
                                    "characters"}
        unexpected = sorted(set(inputs) - set(workflow.inputs))
        if unexpected:
            return 422, {"message": f"Unexpected inputs provided: {json.dumps(unexpected)}"}
        for name, required in workflow.inputs.items():
            if required and not inputs.get(name):
                return 422, {"message": f'Required input "{name}" not provided'}
        run = self._start_run(workflow_file, workflow, ref, inputs)
        if (details or always) and not no_details:
            return 200, {
                "workflow_run_id": run.id,
                "run_url": f"{self.api_url}/repos/{self.repository}/actions/runs/{run.id}",
                "html_url": run.to_json(self.api_url, self.repository)["html_url"],
            }
        return 204, None

    def _known_ref(self, ref: str) -> bool:
        """A branch or a tag, by short name or full ``refs/...`` name, as GitHub takes it."""
        if ref.startswith("refs/heads/"):
            return ref.removeprefix("refs/heads/") in self.branches
        if ref.startswith("refs/tags/"):
            return ref.removeprefix("refs/tags/") in self.tags
        return ref in self.branches or ref in self.tags

    def _make_jobs(self, run: FakeRun, legs: list[tuple[str, dict[str, Any]]]) -> None:
        workflow = self.workflows.get(run.workflow)
        for name, leg in legs:
            environment = workflow.environment_of(leg) if workflow is not None and leg else ""
            run.jobs.append(FakeJob(
                id=next(self._job_ids), run_id=run.id, name=name, leg=leg,
                created_at=self._clock(), run_attempt=run.run_attempt,
                workflow_name=run.workflow_name, default_label=self.runner,
                head_branch=run.ref.removeprefix("refs/heads/").removeprefix("refs/tags/"),
                environment=environment,
                # "Jobs that reference an environment configured with required reviewers
                # will wait for an approval before starting" (docs, "Reviewing deployments")
                status="waiting" if environment in self.reviewed else "queued"))

    # ------------------------------------------------------------------ deployments

    def _environment(self, name: str) -> dict[str, Any]:
        env_id = self._environment_ids.setdefault(name, 161_088_000 + len(self._environment_ids))
        api = f"{self.api_url}/repos/{self.repository}"
        return {"id": env_id, "node_id": f"EN_kwDO{env_id}", "name": name,
                "url": f"{api}/environments/{name}",
                "html_url": f"{self.api_url}/html/{self.repository}/deployments/{name}"}

    def pending_deployments(self, run_id: int) -> list[dict[str, Any]]:
        """What ``GET .../actions/runs/{run_id}/pending_deployments`` answers: one entry
        per environment a waiting job of the run references, with its reviewers."""
        with self._lock:
            names = sorted({j.environment for j in self.runs[run_id].latest_jobs
                            if j.status == "waiting" and j.environment in self.reviewed})
            return [{"environment": self._environment(name), "wait_timer": 0,
                     "wait_timer_started_at": None, "current_user_can_approve": True,
                     "reviewers": [{"type": "User", "reviewer": payloads.user(self.api_url, r)}
                                   for r in self.reviewed[name]]} for name in names]

    def review(self, run_id: int, environment: str, state: str) -> None:
        """A reviewer's answer (``POST .../pending_deployments`` with ``state``): an
        approved job "will proceed" (queued for a runner); a rejected one ends, and "If
        a job is rejected, the workflow will fail" (docs, "Reviewing deployments"). A
        rejected job never had a runner nor a step."""
        assert state in ("approved", "rejected"), state
        with self._lock:
            run, now = self.runs[run_id], self._clock()
            for job in run.latest_jobs:
                if job.status != "waiting" or job.environment != environment:
                    continue
                if state == "approved":
                    job.status = "queued"
                else:
                    job.status, job.conclusion, job.no_start = "completed", "failure", "no-runner"
                    job.completed_at = now
            run.updated_at = now
            self._release(run)

    def _page(self, items: list[Any], record: Recorded) -> tuple[list[Any], str | None]:
        try:
            per_page = min(100, max(1, int(record.query.get("per_page", "30"))))
            page = max(1, int(record.query.get("page", "1")))
        except ValueError:
            return [], None
        chunk = items[(page - 1) * per_page: page * per_page]
        links = []
        query = dict(record.query)
        if page * per_page < len(items):
            query["page"] = str(page + 1)
            following = "&".join(f"{k}={v}" for k, v in query.items())
            links.append(f'<{self.url}{record.path}?{following}>; rel="next"')
        return chunk, ", ".join(links) or None

    def _list_runs(self, workflow: str | None,
                   record: Recorded) -> tuple[int, Any, str | None]:
        runs = [r for r in self.runs.values() if workflow is None or r.workflow == workflow]
        event = record.query.get("event")
        if event:
            runs = [r for r in runs if r.event == event]
        status = record.query.get("status")
        if status and not self.ignore_status_filter:
            runs = [r for r in runs if status in (r.status, r.conclusion)]
        created = record.query.get("created")
        if created:
            test = _created_filter(created)
            if test is None:
                return 422, {"message": f"Invalid created filter: {created}"}, None
            runs = [r for r in runs if test(r.created_at)]
        runs.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        if _CAPPED_FILTERS & set(record.query):
            runs = runs[:MAX_RESULTS]  # GitHub's search behind these filters stops here
        chunk, link = self._page(runs, record)
        listed = [r.to_json(self.api_url, self.repository) for r in chunk]
        return 200, {"total_count": len(runs), "workflow_runs": listed}, link

    def _list_jobs(self, run: FakeRun, record: Recorded) -> tuple[int, Any, str | None]:
        which = record.query.get("filter", "latest")
        if which not in ("latest", "all"):
            return 422, {"message": f"Invalid filter: {which}"}, None
        jobs = run.latest_jobs if which == "latest" else run.jobs
        chunk, link = self._page(jobs, record)
        return 200, {"total_count": len(jobs),
                     "jobs": [j.to_json(self.api_url, self.repository) for j in chunk]}, link


def _route(method: str, path: str) -> tuple[str, re.Match[str] | None]:
    dispatch = _REPOSITORY_DISPATCH.fullmatch(path)
    if dispatch is not None:
        return ("repository-dispatch", dispatch) if method == "POST" else ("other", None)
    match = _PATH.fullmatch(path)
    if match is None:
        return "other", None
    rest = match["rest"].split("/")
    if match["area"] == "check-runs":
        ok = method == "GET" and len(rest) == 2 and rest[0].isdigit() and rest[1] == "annotations"
        return ("annotations" if ok else "other"), match
    if method == "POST" and len(rest) == 3 and rest[0] == "workflows" and rest[2] == "dispatches":
        return "dispatch", match
    if method == "GET" and len(rest) == 2 and rest[0] == "workflows":
        return "workflow", match
    if method == "PUT" and len(rest) == 3 and rest[0] == "workflows" and rest[2] == "enable":
        return "enable", match
    if method == "GET" and (rest == ["runs"] or (len(rest) == 3 and rest[0] == "workflows"
                                                  and rest[2] == "runs")):
        return "runs", match
    if len(rest) >= 2 and rest[0] == "runs" and rest[1].isdigit():
        if method == "GET" and len(rest) == 2:
            return "run", match
        if method == "GET" and rest[2:] == ["jobs"]:
            return "jobs", match
        if method == "GET" and rest[2:] == ["artifacts"]:
            return "artifacts", match
        if method == "POST" and rest[2:] == ["cancel"]:
            return "cancel", match
    if method == "GET" and rest[0:1] == ["jobs"] and len(rest) in (2, 3) and rest[1].isdigit():
        if len(rest) == 2:
            return "job", match
        return ("job-logs" if rest[2] == "logs" else "other"), match
    if (method == "GET" and len(rest) == 3 and rest[0] == "artifacts" and rest[1].isdigit()
            and rest[2] == "zip"):
        return "artifact-zip", match
    return "other", match


def _created_filter(text: str) -> Any:
    """GitHub's date qualifiers: ``>=T``, ``>T``, ``<=T``, ``<T``, ``A..B`` or a date."""

    def parse(value: str) -> datetime | None:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

    for op, compare in ((">=", operator.ge), ("<=", operator.le), (">", operator.gt),
                        ("<", operator.lt)):
        if text.startswith(op):
            bound = parse(text[len(op):])
            if bound is None:
                return None
            return lambda m, compare=compare, bound=bound: compare(m, bound)
    if ".." in text:
        lo, hi = (parse(p) for p in text.split("..", 1))
        if lo is None or hi is None:
            return None
        return lambda m: lo <= m <= hi
    day = parse(text)
    if day is None:
        return None
    return lambda m: day <= m < day + timedelta(days=1)


_HUNG_UP = (BrokenPipeError, ConnectionResetError)
"""What reading from or writing to a client that closed its end raises."""


class _Handler(BaseHTTPRequestHandler):
    github: FakeGitHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read FakeGitHub.requests instead

    def handle(self) -> None:
        # A client that hangs up (its timeout passed, its process was killed) is no
        # error of the server's: like a real one, it drops the connection without a word.
        try:
            super().handle()
        except _HUNG_UP:
            self.close_connection = True

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            status, out_headers, payload, delay = self.github.handle(
                self.command, self.path, headers, raw)
        except _Drop:
            self.close_connection = True
            return
        except _HUNG_UP as exc:
            # raised by the fake's own code, not by the client: a bug, to be reported
            # by the server like any other (handle() would take it for a hang-up)
            raise RuntimeError(f"the fake's answer to {self.command} {self.path} failed"
                               ) from exc
        if delay:
            time.sleep(delay)
        raw_body = isinstance(payload, bytes)
        data = (payload if raw_body else b"" if payload is None or status == 204
                else json.dumps(payload).encode())
        self.send_response(status)
        for name, value in out_headers.items():
            self.send_header(name, value)
        if not raw_body:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = _serve
    do_POST = _serve
    do_PATCH = _serve
    do_PUT = _serve


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """A running :class:`FakeGitHub` on 127.0.0.1, stopped after the test; then every
    request it received and every answer it gave are checked against GitHub's API
    description, so neither the executor nor the fake can drift from GitHub."""
    with FakeGitHub() as fake:
        yield fake
    assert fake.contract_violations() == []


@pytest.fixture
def fake_ghes() -> Iterator[FakeGitHub]:
    """:func:`fake_github` as GitHub Enterprise Server 3.17."""
    with FakeGitHub(ghes="3.17.4") as fake:
        yield fake
    assert fake.contract_violations() == []


if __name__ == "__main__":  # pragma: no cover - manual use
    with FakeGitHub() as server:
        print(f"{server.url}  repository={server.repository}  token={server.token}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
