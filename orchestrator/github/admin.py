"""Workflow admin on one repository: the calls about its workflows, not its tracks.

- A workflow's ``state`` and its enabling (the 60-day keep-alive of
  :mod:`orchestrator.cadence.keepalive`).
- The runs of a workflow still waiting to start, and the cancel of one (the held
  scheduled tick of :mod:`orchestrator.cadence.pending`).
- Built from the same settings as the GitHub executor (:meth:`WorkflowAdmin.from_env`),
  so a tick's admin calls go to the repository its tracks run in.
- Every refusal is a :class:`~.client.GitHubError`; nothing here reads the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..config.fieldtypes import WORKFLOW_RE
from ..errors import UserError
from ..support.times import parse_utc
from .client import GitHubClient, GitHubError, message
from .connect import connect, token_of, valid_repository

WAITING = ("pending", "queued")
"""Statuses of a run that has not started: ``pending`` behind a run of its concurrency
group (GitHub's docs, "Control the concurrency of workflows and jobs"), ``queued``
before that or before a runner takes it (the listing's ``status`` filter, GitHub's
OpenAPI description of "List workflow runs for a workflow")."""


class WorkflowAdmin:
    """The workflow-admin calls on ``repository`` through ``client``."""

    def __init__(self, client: GitHubClient, repository: str) -> None:
        if not valid_repository(repository):
            raise UserError(f"invalid GitHub repository {repository!r}: expected owner/name")
        self.client = client
        self.repository = repository

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, now: datetime,
                 **options: Any) -> WorkflowAdmin:
        """The admin of ``GITHUB_REPOSITORY`` with ``GITHUB_TOKEN``, as the executor
        reads them; ``options`` go to the client (time budget, timeout, attempts)."""
        repository = environ.get("GITHUB_REPOSITORY", "")
        if not repository:
            raise UserError("GITHUB_REPOSITORY is not set: run the tick on GitHub Actions "
                            "or set it to owner/name")
        token = token_of(environ)
        if not token:
            raise UserError("GITHUB_TOKEN is not set: pass the workflow's token to the tick "
                            "step (env: GITHUB_TOKEN: ${{ github.token }})")
        return cls(connect(token, environ, now=now, **options), repository)

    def close(self) -> None:
        self.client.close()

    def dispatch(self, path: str, body: dict[str, str]) -> None:
        """A ``workflow_dispatch`` or ``repository_dispatch`` call (``path`` below the
        API's URL), or :class:`GitHubError` saying what GitHub answered. The client
        repeats it after a server error or no answer: a call GitHub took twice starts a
        second tick, which finds nothing left to do."""
        response = self.client.request("POST", path, body=body)
        if response.status_code not in (200, 204):
            raise GitHubError(f"POST {path}: {response.status_code} {message(response)}",
                              status=response.status_code)

    def __enter__(self) -> WorkflowAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def workflow_state(self, workflow: str) -> str | None:
        """The ``state`` of ``.github/workflows/<workflow>`` (``active``,
        ``disabled_inactivity``, ``disabled_manually``, ...); ``None`` when GitHub has
        no such workflow."""
        response = self.client.request("GET", self._workflow_path(workflow))
        if response.status_code == 404:
            return None
        try:
            data = response.json() if response.status_code == 200 else None
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("state"), str):
            raise GitHubError(f"reading workflow {workflow} failed: {response.status_code} "
                              f"{message(response)}", status=response.status_code)
        return str(data["state"])

    def enable_workflow(self, workflow: str) -> None:
        """``PUT .../workflows/<workflow>/enable``: GitHub answers ``204``."""
        response = self.client.request("PUT", f"{self._workflow_path(workflow)}/enable")
        if response.status_code != 204:
            raise GitHubError(f"enabling workflow {workflow} failed: {response.status_code} "
                              f"{message(response)}", status=response.status_code)

    def waiting_runs(self, workflow: str, event: str) -> list[dict[str, Any]]:
        """The runs of ``workflow`` started by ``event`` that wait to start: one page per
        status of :data:`WAITING` (a concurrency group holds at most one pending)."""
        found: list[dict[str, Any]] = []
        for status in WAITING:
            found += self.client.paged(
                f"{self._workflow_path(workflow)}/runs",
                {"event": event, "status": status, "per_page": "100",
                 "exclude_pull_requests": "true"}, "workflow_runs", 1)
        return found

    def run_created_at(self, ci_run: int) -> datetime | None:
        """``GET .../actions/runs/{id}``: when GitHub created the run (``None``: unreadable)."""
        response = self.client.request("GET", f"repos/{self.repository}/actions/runs/{ci_run}")
        if response.status_code != 200:
            raise GitHubError(f"reading workflow run {ci_run} failed: "
                              f"{response.status_code} {message(response)}",
                              status=response.status_code)
        try:
            data = response.json()
        except ValueError:
            return None
        return parse_utc(data.get("created_at")) if isinstance(data, dict) else None

    def cancel_run(self, ci_run: int) -> None:
        """``POST .../actions/runs/{id}/cancel``: GitHub answers ``202`` and cancels it a
        little later, ``409`` when the run cannot be cancelled (completed)."""
        response = self.client.request(
            "POST", f"repos/{self.repository}/actions/runs/{ci_run}/cancel")
        if response.status_code != 202:
            raise GitHubError(f"cancelling workflow run {ci_run} failed: "
                              f"{response.status_code} {message(response)}",
                              status=response.status_code)

    def _workflow_path(self, workflow: str) -> str:
        if not WORKFLOW_RE.fullmatch(workflow):
            raise UserError(f"invalid workflow file name {workflow!r}")
        return f"repos/{self.repository}/actions/workflows/{workflow}"

