"""Finding a batch's workflow run and reading its jobs.

GitHub lists at most 1,000 workflow runs for a listing filtered by ``created`` or
``event``, newest first, 100 a page. A batch is therefore looked for only among the
runs created around its own dispatch (:class:`Window`): the few minutes around the
moment it was sent, or, for a dispatch whose sending was never recorded, the span
of the tick that marked it. A window from the run's slot until now, as long as a run
stays open, would miss batches in a busy repository and cost up to 10 requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ...github.client import GitHubClient
from ...state.layout import parse_run_id
from ...support.times import iso
from .batching import run_id_of

CLOCK_SKEW = timedelta(minutes=5)
"""Margin around every window: runner and GitHub clocks differ slightly."""
LOST_AFTER = timedelta(minutes=10)
"""A dispatch whose answer was lost and whose run-name no run carries after this long
created nothing (GitHub lists a new run within seconds): its attempt is failed, and
the tick's retry policy takes over, under a new dispatch key."""
DISPATCH_SPAN = timedelta(minutes=30)
"""A tick dispatches what it marked in the same pass, seconds after the mark landed (a
lingering tick.yml job makes several passes, each marking and dispatching its own)."""
RUN_PAGES = 10
"""Pages of 100 workflow runs: GitHub lists no more than 1,000 for a filtered listing."""
JOB_PAGES = 30


def _stamp(moment: datetime) -> str:
    return iso(moment)


@dataclass(frozen=True)
class Window:
    """Creation times a batch's workflow run can have."""

    start: datetime
    end: datetime

    @property
    def created(self) -> str:
        """The ``created`` filter: GitHub's search range ``A..B``."""
        return f"{_stamp(self.start)}..{_stamp(self.end)}"

    @classmethod
    def sent_at(cls, sent: datetime) -> Window:
        """Around a dispatch sent at ``sent`` (its answer may have been lost)."""
        return cls(sent - CLOCK_SKEW, sent + LOST_AFTER + CLOCK_SKEW)

    @classmethod
    def marked_at(cls, marked: datetime) -> Window:
        """A dispatch marked at ``marked`` and sent, if at all, by the same tick."""
        return cls(marked - CLOCK_SKEW, marked + DISPATCH_SPAN + CLOCK_SKEW)

    @classmethod
    def since_slot(cls, run_name: str, now: datetime) -> Window:
        """From the run's slot until ``now``: only for a handle that names no time
        (written before handles carried ``dispatched_at``)."""
        return cls(parse_run_id(run_id_of(run_name))[1] - CLOCK_SKEW, now + CLOCK_SKEW)


class Listing:
    """The workflow runs and jobs of one repository."""

    def __init__(self, client: GitHubClient, repository: str) -> None:
        self.client = client
        self.repo_path = f"repos/{repository}"

    def runs(self, workflow: str, window: Window) -> list[dict[str, Any]]:
        params = {
            "event": "workflow_dispatch",
            "created": window.created,
            "per_page": "100",
            "exclude_pull_requests": "true",
        }
        return self.client.paged(f"{self.repo_path}/actions/workflows/{workflow}/runs", params,
                                 "workflow_runs", RUN_PAGES)

    def find(self, workflow: str, run_name: str, window: Window) -> dict[str, Any] | None:
        """The first run titled ``run_name`` created in ``window``."""
        matches = [r for r in self.runs(workflow, window) if r.get("display_title") == run_name]
        return min(matches, key=lambda r: int(r["id"])) if matches else None

    def jobs(self, ci_run: int) -> list[dict[str, Any]]:
        """The jobs of the run's latest attempt (a re-run replaces them)."""
        return self.client.paged(f"{self.repo_path}/actions/runs/{ci_run}/jobs",
                                 {"filter": "latest", "per_page": "100"}, "jobs", JOB_PAGES)
