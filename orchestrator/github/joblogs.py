"""A job's log, read through the API for ``orchestrator logs``.

- The job is read by its id (:func:`read_job`); finding a leg's job among the jobs of its
  workflow run by its name is the executor's (:mod:`orchestrator.executors.github.leglogs`).
- GitHub serves a job's log only once the job has completed: its own ``gh`` refuses
  before that ("job is still in progress; logs will be available when it is
  complete", cli/cli ``pkg/cmd/run/view``). :func:`wait_completed` polls the job.
- ``GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs`` answers ``302`` with a
  ``Location`` that "expires after 1 minute" (GitHub's description of the operation).
  That URL is off the API: it is read at once, and never with the token.
- Only the end of a log is kept (:data:`MAX_BYTES`): a log of any size costs a bounded
  amount of memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import NotFound, UserError
from .client import GitHubClient, GitHubError, message

MAX_BYTES = 1 << 20
"""The end of a log that is printed; the rest is on the job's page."""
POLL_SECONDS = 10.0
"""How often ``--follow`` asks whether the job has completed."""
_JOB_URL = re.compile(r"/(?P<repo>[^/]+/[^/]+)/actions/runs/(?P<run>\d+)(?:/job/(?P<job>\d+))?")
NEEDS = "the token needs actions: read"


@dataclass(frozen=True)
class JobLog:
    job: Mapping[str, Any]
    text: bytes
    """The last :data:`MAX_BYTES` of the log (or all of it)."""
    size: int
    """The whole log's size in bytes."""

    @property
    def cut(self) -> int:
        """Bytes of the beginning not kept."""
        return self.size - len(self.text)


def from_url(url: str | None) -> tuple[str | None, int | None, int | None]:
    """(owner/name, workflow run id, job id) a track's ``url`` names, each ``None``
    where it does not (a run's page names no job)."""
    found = _JOB_URL.search(url or "")
    if found is None:
        return None, None, None
    job = found["job"]
    return found["repo"], int(found["run"]), int(job) if job else None


def _json(client: GitHubClient, path: str, what: str) -> Any:
    response = client.request("GET", path)
    if response.status_code in (403, 404):
        raise NotFound(f"GitHub answered {response.status_code} for {what} "
                       f"({message(response)}): it is gone, or {NEEDS}")
    if response.status_code != 200:
        raise GitHubError(f"GET {path}: {response.status_code} {message(response)}",
                          status=response.status_code)
    try:
        return response.json()
    except ValueError:
        raise GitHubError(f"GET {path}: the answer is not JSON") from None


def read_job(client: GitHubClient, repository: str, job_id: int) -> Mapping[str, Any]:
    """Job ``job_id`` of ``repository``, as GitHub describes it now."""
    found = _json(client, f"repos/{repository}/actions/jobs/{job_id}", f"job {job_id}")
    if isinstance(found, dict) and isinstance(found.get("id"), int):
        return found
    raise GitHubError(f"job {job_id}: unexpected answer (no id)")


def wait_completed(client: GitHubClient, repository: str, job: Mapping[str, Any],
                   sleep: Callable[[float], None], every: float = POLL_SECONDS
                   ) -> Mapping[str, Any]:
    """``job`` once it has completed, asking GitHub every ``every`` seconds."""
    while job.get("status") != "completed":
        sleep(every)
        job = read_job(client, repository, int(job["id"]))
    return job


def download(client: GitHubClient, repository: str, job: Mapping[str, Any],
             keep: int = MAX_BYTES) -> JobLog:
    """The (end of the) log of the completed ``job``."""
    job_id = int(job["id"])
    path = f"repos/{repository}/actions/jobs/{job_id}/logs"
    response = client.request("GET", path)
    status = response.status_code
    if status == 410:
        raise NotFound(f"the log of job {job_id} has expired (GitHub keeps logs for the "
                       "repository's retention period, 90 days unless changed)")
    if status in (403, 404):
        raise NotFound(f"GitHub answered {status} for the log of job {job_id} "
                       f"({message(response)}): it expired, or {NEEDS}")
    location = response.headers.get("location", "")
    if status not in (301, 302, 303, 307) or not location:
        raise GitHubError(f"GET {path}: {status} without a download location", status=status)
    got = client.fetch_signed_tail(location, keep)
    if got is None:
        raise GitHubError(f"the log of job {job_id} could not be downloaded from where "
                          "GitHub sent it (its link lasts a minute: try again)")
    return JobLog(job=job, text=got[0], size=got[1])


def token(environ: Mapping[str, str]) -> str:
    """The token, from where the GitHub executor reads it."""
    found = environ.get("GITHUB_TOKEN") or environ.get("GH_TOKEN") or ""
    if not found:
        raise UserError("GITHUB_TOKEN is not set: reading a job's log takes a token with "
                        "actions: read (GH_TOKEN is read too)")
    return found
