"""One workflow run's legs observed: its jobs, the outcomes they uploaded, who cancelled.

- One jobs listing per workflow run, whatever its number of tracks.
- A 404 fails tracks only once the token has shown it can read the repository's runs
  (:meth:`RunWatch.confirm_access`, once per executor, that is per tick).
- Who cancelled is one annotations request per run, and never fails an observation.
"""

from __future__ import annotations

import dataclasses
import logging

from ...errors import CircuitOpen, ExecutorError
from ...github.client import GitHubClient, GitHubError
from ...state.phases import TrackPhase
from ..base import Handle, Observation
from .artifacts import Artifacts, read_outcomes
from .jobnames import match
from .listing import Listing
from .observation import cancelled_by, canceller, job_observation, missing_job

log = logging.getLogger(__name__)


class RunWatch:
    """Observes the legs of workflow runs of ``repository``."""

    def __init__(self, client: GitHubClient, listing: Listing, artifacts: Artifacts,
                 repository: str) -> None:
        self.client = client
        self.listing = listing
        self.artifacts = artifacts
        self.repository = repository
        self._access_confirmed = False

    @property
    def _repo_path(self) -> str:
        return f"repos/{self.repository}"

    def group(self, ci_run: int, group: list[Handle], url: str | None
              ) -> dict[str, Observation]:
        """What workflow run ``ci_run`` shows of ``group``; nothing when asking failed."""
        try:
            seen = self._run(ci_run, group, url)
        except CircuitOpen:
            raise
        except ExecutorError as exc:
            log.warning("observing workflow run %s failed: %s", ci_run, exc.message)
            return {}
        for h in group:  # correlated by title: hand the run id back
            if h.key in seen and h.handle.get("ci_run_id") != ci_run:
                seen[h.key] = dataclasses.replace(
                    seen[h.key], handle={**h.handle, "ci_run_id": ci_run})
        return seen

    def _run(self, ci_run: int, handles: list[Handle],
             run_url: str | None) -> dict[str, Observation]:
        try:
            jobs = self.listing.jobs(ci_run)
        except GitHubError as exc:
            if exc.status != 404:
                raise
            # The run was deleted: GitHub answers 404 for its jobs as for itself. So it
            # does for a token that cannot read the repository: ask before failing.
            self.confirm_access(ci_run)
            return {h.key: missing_job(h, ci_run, 404, None, run_url) for h in handles}
        legs = match(jobs, [h.key for h in handles])
        out = {h.key: job_observation(h, ci_run, legs[h.key]) for h in handles
               if h.key in legs}
        missing = [h for h in handles if h.key not in legs]
        if missing:
            out.update(self._missing(ci_run, missing, run_url))
        return self._with_canceller(ci_run, read_outcomes(self.artifacts, ci_run, out))

    def _missing(self, ci_run: int, missing: list[Handle],
                 run_url: str | None) -> dict[str, Observation]:
        """The handles whose leg has no job, judged by what the run itself says."""
        response = self.client.request("GET", f"{self._repo_path}/actions/runs/{ci_run}")
        if response.status_code == 404:
            self.confirm_access(ci_run)
        try:
            run = response.json() if response.status_code == 200 else None
        except ValueError:
            run = None
        return {h.key: missing_job(h, ci_run, response.status_code, run, run_url)
                for h in missing}

    def confirm_access(self, ci_run: int) -> None:
        """Before a 404 fails tracks as deleted: can this token list the repository's
        runs at all? GitHub answers 404, not 403, for a repository a token may not see
        (docs, "Troubleshooting the REST API"), so a wrong or narrowed token would
        otherwise fail every open track. One listing of one run, once per tick."""
        if self._access_confirmed:
            return
        response = self.client.request("GET", f"{self._repo_path}/actions/runs",
                                       params={"per_page": "1"})
        if response.status_code != 200:
            raise GitHubError(
                f"workflow run {ci_run} answers 404 and so does the list of {self.repository}'s "
                f"runs ({response.status_code}): the token cannot read this repository's "
                "Actions (check GITHUB_TOKEN or ORCHESTRATOR_TOKEN, and `actions: read`); "
                "no track is failed for it", status=response.status_code)
        self._access_confirmed = True

    def _with_canceller(self, ci_run: int, seen: dict[str, Observation]
                        ) -> dict[str, Observation]:
        """Legs a person cancelled, with who did: one annotations request per run."""
        cancelled = [k for k, o in seen.items() if _cancelled_job(o)]
        if not cancelled:
            return seen
        job_id = seen[cancelled[0]].details["job_id"]
        actor, readable = None, False
        try:
            response = self.client.request(
                "GET", f"{self._repo_path}/check-runs/{job_id}/annotations",
                params={"per_page": "100"})
            data = response.json() if response.status_code == 200 else None
            readable = isinstance(data, list)
            actor = canceller(data) if isinstance(data, list) else None
            if response.status_code != 200:
                log.info("who cancelled workflow run %s is not known: annotations answered "
                         "%s", ci_run, response.status_code)
        except (GitHubError, ValueError) as exc:
            log.info("who cancelled workflow run %s is not known: %s", ci_run, exc)
        return {k: cancelled_by(o, ci_run, actor, readable) if k in cancelled else o
                for k, o in seen.items()}


def _cancelled_job(seen: Observation) -> bool:
    """Whether ``seen`` is a cancelled leg whose job can carry an annotation."""
    return seen.phase is TrackPhase.CANCELLED and isinstance(seen.details.get("job_id"), int)
