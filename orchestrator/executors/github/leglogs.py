"""A leg's job log for ``orchestrator logs``: the executor's log reader.

- The leg's job is found by its id when the track's record links the job's page, else
  among the jobs of its workflow run by the hash in its job name (:mod:`.jobnames`).
- The job, its wait until completed and its log's end are read through
  :mod:`orchestrator.github.joblogs`; the repository is ``GITHUB_REPOSITORY``, else the
  one the record's link names.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ...errors import NotFound, UserError
from ...github import joblogs
from ...github.client import GitHubClient, GitHubError
from ...github.connect import connect, valid_repository
from ...state.records import Track
from ..base import LogReader, TrackLog
from .jobnames import match
from .listing import Listing


def find_job(client: GitHubClient, repository: str, key: str, ci_run: int | None,
             job_id: int | None) -> Mapping[str, Any]:
    """The job of the leg with dispatch ``key``: job ``job_id``, else the one of workflow
    run ``ci_run`` whose name carries the key's hash."""
    if job_id is not None:
        return joblogs.read_job(client, repository, job_id)
    if ci_run is None:
        raise NotFound(f"{key}: no workflow run is known yet (not dispatched, or its "
                       "dispatch not yet seen by a tick)")
    try:
        jobs = Listing(client, repository).jobs(ci_run)
    except GitHubError as exc:
        if exc.status in (403, 404):
            raise NotFound(f"GitHub answered {exc.status} for the jobs of workflow run "
                           f"{ci_run}: it is gone, or {joblogs.NEEDS}") from None
        raise
    found = match(jobs, [key]).get(key)
    if found is None:
        raise NotFound(f"workflow run {ci_run} has no job for {key} (yet)")
    return found


def reader(environ: Mapping[str, str], now: datetime,
           sleep: Callable[[float], None] = time.sleep) -> LogReader:
    """Reads the job log of a track's current attempt, with one client for every
    track (the token is needed before any track is looked at)."""
    client = connect(joblogs.token(environ), environ, now=now)

    def read(record: Track, follow: bool, say: Callable[[str], None]) -> TrackLog:
        named, ci_run, job_id = joblogs.from_url(record.url)
        repository = environ.get("GITHUB_REPOSITORY") or named or ""
        if not valid_repository(repository):
            raise UserError("GITHUB_REPOSITORY is not set: set it to the owner/name whose "
                            "Actions ran the track")
        handle_run = (record.handle or {}).get("ci_run_id")
        job = find_job(client, repository, record.key,
                       handle_run if isinstance(handle_run, int) else ci_run, job_id)
        status = job.get("status")
        if status != "completed":
            if not follow:
                raise UserError(f"job {job.get('id')} of {record.key} is {status}: GitHub "
                                "serves a job's log once the job has completed (--follow "
                                "waits for it)")
            say(f"job {job.get('id')} is {status}: waiting for it to complete")
            job = joblogs.wait_completed(client, repository, job, sleep)
        log = joblogs.download(client, repository, job)
        return TrackLog(log.text, log.size, f"job {job.get('id')}",
                        f"{job.get('html_url')}")

    return read
