"""Leg outcomes read back through the artifacts API: the cron tick's safety net.

Each leg uploads its outcome file (:mod:`orchestrator.executors.outcomes`) as an artifact named
after its dispatch key, and the batch's ``fan-in`` job records them all. When that job
never ran (cancelled, its runner lost), the cron tick finds the legs completed and
reads the same files here:

- ``GET /repos/{o}/{r}/actions/runs/{id}/artifacts`` (paginated, 100 a page): one
  listing per workflow run, whatever its number of legs;
- ``GET /repos/{o}/{r}/actions/artifacts/{id}/zip`` answers ``302`` with a short-lived
  signed URL off the API (``410`` once the artifact expired); the archive is fetched
  from there without the token, which must never leave the API's host.

An archive is read with care: at most :data:`MAX_ZIP_BYTES`, only its member
``<key>.json``, at most :data:`~orchestrator.executors.outcomes.MAX_BYTES` uncompressed. An
expired or unreadable artifact is no outcome, and the tick falls back to the job's
conclusion. A leg whose run lists no artifact of its key at all (its upload failed:
the step has ``continue-on-error``, so the job still mirrors the track's exit) is read
from its conclusion too, and a successful one is complete with the result
:data:`MISSING_OUTCOME`. At most :data:`MAX_DOWNLOADS` archives are fetched per tick: a
256-leg batch whose fan-in job died would otherwise cost 512 of the token's 1,000
requests an hour; the legs beyond are read from their jobs' conclusions.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import zipfile
from typing import Any

from ...config.github_limits import MAX_DOWNLOADS
from ...github.client import GitHubClient, GitHubError, message
from ...state.phases import TrackPhase
from .. import outcomes
from ..base import Observation

log = logging.getLogger(__name__)

ARTIFACT_PAGES = 10
MAX_ZIP_BYTES = 8 << 20
"""As large as an outcome file may be (a drain worker's reports, a track's enqueue)."""
MISSING_OUTCOME = "outcome artifact missing"
"""The result of a leg whose job succeeded without leaving its outcome artifact."""


class Artifacts:
    """The artifacts of one repository's workflow runs."""

    def __init__(self, client: GitHubClient, repository: str) -> None:
        self.client = client
        self.repo_path = f"repos/{repository}"
        self.downloads_left = MAX_DOWNLOADS

    def of_run(self, ci_run: int) -> dict[str, dict[str, Any]]:
        """The run's unexpired artifacts by name (the newest of a name, after a re-run)."""
        items = self.client.paged(f"{self.repo_path}/actions/runs/{ci_run}/artifacts",
                                  {"per_page": "100"}, "artifacts", ARTIFACT_PAGES)
        found: dict[str, dict[str, Any]] = {}
        for item in sorted(items, key=lambda a: int(a["id"])):
            if item.get("expired") is not True and isinstance(item.get("name"), str):
                found[item["name"]] = item
        return found

    def outcome(self, artifact: dict[str, Any], key: str) -> outcomes.Outcome | None:
        """The outcome in ``artifact`` (named ``key``), or ``None`` when it cannot be read."""
        size = artifact.get("size_in_bytes")
        if isinstance(size, int) and size > MAX_ZIP_BYTES:
            log.warning("artifact %s is %s bytes: not an outcome file", key, size)
            return None
        if self.downloads_left <= 0:
            return None
        self.downloads_left -= 1
        data = self._download(int(artifact["id"]), key)
        if data is None:
            return None
        try:
            return _unzip(data, key)
        except (outcomes.BadOutcome, zipfile.BadZipFile, OSError) as exc:
            log.warning("artifact %s: %s", key, exc)
            return None

    def _download(self, artifact_id: int, key: str) -> bytes | None:
        try:
            response = self.client.request(
                "GET", f"{self.repo_path}/actions/artifacts/{artifact_id}/zip")
        except GitHubError as exc:
            log.warning("artifact %s: %s", key, exc.message)
            return None
        location = response.headers.get("location")
        if response.status_code != 302 or not location:
            log.warning("artifact %s: %s %s", key, response.status_code, message(response))
            return None
        return self.client.fetch_signed(location, MAX_ZIP_BYTES)


def _unzip(data: bytes, key: str) -> outcomes.Outcome:
    name = f"{key}.json"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        try:
            info = archive.getinfo(name)
        except KeyError:
            raise outcomes.BadOutcome(f"{name}: not in the archive") from None
        if info.file_size > outcomes.MAX_BYTES:
            raise outcomes.BadOutcome(f"{name}: larger than {outcomes.MAX_BYTES} bytes")
        with archive.open(info) as member:
            return outcomes.parse(name, member.read(outcomes.MAX_BYTES + 1))


def read_outcomes(artifacts: Artifacts, ci_run: int,
                  seen: dict[str, Observation]) -> dict[str, Observation]:
    """``seen`` (the run's legs as their jobs show them) with every leg whose job has
    completed replaced by its uploaded outcome, where there is one: it carries the
    command's own times, result and stderr tail, which a job's conclusion does not."""
    done = [key for key, obs in seen.items() if obs.details.get("status") == "completed"]
    if not done:
        return seen
    try:
        listed = artifacts.of_run(ci_run)
    except GitHubError as exc:
        log.warning("listing the artifacts of workflow run %s failed: %s", ci_run,
                    exc.message)
        return seen
    out = dict(seen)
    for key in done:
        artifact = listed.get(key)
        if artifact is None:
            out[key] = _without_outcome(seen[key])
            continue
        found = artifacts.outcome(artifact, key)
        if found is not None:
            job = seen[key]
            out[key] = _as_cancelled(job, dataclasses.replace(
                outcomes.observation(found, url=job.url, details=job.details),
                handle=job.handle))
    return out


CANCEL_SIGNALS = (128 + 2, 128 + 15)
"""A command's code once the leg passed a cancel's SIGINT or SIGTERM on to it."""


def _as_cancelled(job: Observation, seen: Observation) -> Observation:
    """A leg whose job was cancelled and whose command therefore ended on the signal
    the leg passed on: its outcome says ``failed`` (it wrote it on the way out), but
    the track was cancelled, as the job's conclusion says."""
    if job.phase is not TrackPhase.CANCELLED or seen.phase is not TrackPhase.FAILED:
        return seen
    if seen.details.get("exit_code") not in CANCEL_SIGNALS:
        return seen
    return dataclasses.replace(seen, phase=TrackPhase.CANCELLED, error=job.error)


def _without_outcome(job: Observation) -> Observation:
    """A leg whose job completed but whose run has no outcome artifact of its key.

    The upload step never fails the job (``continue-on-error``), so a job that
    concluded ``success`` ran its track to exit 0: it is complete, and its result says
    the outcome (times, result, stderr tail) is missing. Retrying it would run a
    track that already succeeded a second time."""
    if job.phase is not TrackPhase.COMPLETE or job.result is not None:
        return job
    return dataclasses.replace(job, result={"summary": MISSING_OUTCOME})
