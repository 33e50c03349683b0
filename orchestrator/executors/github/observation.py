"""What a workflow run's jobs say about the tracks they carry.

Every matrix leg's job is named after its dispatch key
(``<run_id>--<track>--<attempt>``). Queued and in-progress jobs are ``running``;
``success`` is ``complete``, ``failure`` ``failed``, ``cancelled`` ``cancelled`` and
``timed_out`` ``tapped_out``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...models import TrackPhase
from ...times import parse_utc
from ..base import Handle, Observation

_RUNNING = frozenset({"queued", "in_progress", "waiting", "pending", "requested"})
_CONCLUSION: Mapping[str, TrackPhase] = {
    "success": TrackPhase.COMPLETE,
    "neutral": TrackPhase.COMPLETE,
    "failure": TrackPhase.FAILED,
    "cancelled": TrackPhase.CANCELLED,
    "skipped": TrackPhase.CANCELLED,
    "timed_out": TrackPhase.TAPPED_OUT,
}
"""Job conclusions; anything else (``action_required``, ``startup_failure``, ...) fails."""


def job_observation(key: str, ci_run: int, job: Mapping[str, Any]) -> Observation:
    """The attempt ``key`` as its job ``job`` of workflow run ``ci_run`` shows it."""
    status = str(job.get("status"))
    conclusion = job.get("conclusion")
    details = {"ci_run_id": ci_run, "job_id": job.get("id"), "status": status,
               "conclusion": conclusion, "runner_name": job.get("runner_name")}
    url = job.get("html_url") if isinstance(job.get("html_url"), str) else None
    if status in _RUNNING:
        started = parse_utc(job.get("started_at")) if status == "in_progress" else None
        return Observation(key=key, phase=TrackPhase.RUNNING, started_at=started, url=url,
                           details=details)
    if status != "completed":
        return Observation(key=key, phase=None, url=url, details=details)
    phase = _CONCLUSION.get(str(conclusion), TrackPhase.FAILED)
    error = None if phase is TrackPhase.COMPLETE else f"job {key} concluded {conclusion}"
    return Observation(key=key, phase=phase, started_at=parse_utc(job.get("started_at")),
                       finished_at=parse_utc(job.get("completed_at")), error=error,
                       url=url, details=details)


def missing_job(handle: Handle, ci_run: int, status: int, run: Any,
                run_url: str | None) -> Observation:
    """A dispatched leg with no job: still starting, or the run ended without it.
    ``status`` and ``run`` are the answer to ``GET /actions/runs/{ci_run}``."""
    if status == 404:
        return Observation(key=handle.key, phase=TrackPhase.FAILED,
                           error=f"workflow run {ci_run} no longer exists")
    if not isinstance(run, dict):
        return Observation(key=handle.key, phase=None, url=run_url)
    url = run.get("html_url") if isinstance(run.get("html_url"), str) else run_url
    if run.get("status") != "completed":
        return Observation(key=handle.key, phase=None, url=url,
                           details={"ci_run_id": ci_run, "status": run.get("status")})
    conclusion = run.get("conclusion")
    phase = TrackPhase.CANCELLED if conclusion == "cancelled" else TrackPhase.FAILED
    return Observation(
        key=handle.key, phase=phase, url=url,
        finished_at=parse_utc(run.get("updated_at")),
        error=f"workflow run {ci_run} ended ({conclusion}) without a job named {handle.key}",
        details={"ci_run_id": ci_run, "conclusion": conclusion})
