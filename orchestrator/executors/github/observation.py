"""What a workflow run's jobs say about the tracks they carry.

Every matrix leg's job is named by a hash of its dispatch key
(``<run_id>--<track>--<attempt>``, :mod:`.jobnames`), and the jobs listed are those of
the run's latest attempt. A job's ``status`` is ``queued``, ``waiting`` (for an environment's
approval), ``pending``, ``requested``, ``in_progress`` or ``completed``; a completed
job's ``conclusion`` is one of ``success``, ``neutral``, ``failure``, ``cancelled``,
``skipped``, ``timed_out`` or ``action_required``. ``startup_failure`` and ``stale``
are conclusions of a whole run, never of a job: they are read where a run ended
without the leg's job (:func:`missing_job`).

A job that reaches its ``timeout-minutes`` is cancelled: GitHub reports
``cancelled``, not ``timed_out``. A cancelled job that ran for its whole timeout is
therefore a track that ran out of time, ``tapped_out``, and never ``cancelled``
(which the tick neither retries nor parks in the dead letter queue).

A job that **failed to start** is its runner's fault, not the track's
(:func:`failed_to_start`). GitHub gives every job a ``started_at`` (a queued job's is
its creation time), so the start is read from the runner and the steps instead. The
job ``completed`` with conclusion ``failure`` (a cancel is someone's decision: ours, or
a person's on GitHub) and either

* its ``runner_name`` is empty: no runner ever took it; or
* its ``steps`` show that the step running the track (:data:`TRACK_STEP`, track.yml's,
  or :data:`DRAIN_STEP` for a drain worker's leg) never began: the list is empty (the
  runner was lost before it reported a step), or neither step began (no
  ``started_at``, still ``queued`` or ``skipped``), while no
  step of the workflow's own set-up concluded ``failure``: checkout or the install
  failing is the same on every runner (a broken ``.github/orchestrator``), and GitHub's
  ``Set up job`` step failing is the runner's. A workflow with no step of that name
  (a schedule's own ``workflow``) is judged by its runner alone.

A run-level ``startup_failure`` (:func:`missing_job`) is no runner's fault: the
workflow file is invalid, and every label would fail the same.

A job **a person cancelled** (*Cancel workflow*) is ``cancelled``, and the track too:
it is not retried, and the tracks that need it are skipped unless ``when: always``.
GitHub names who cancelled in an annotation on the job's check run, "The run was
canceled by @octocat." (undocumented; seen on every such run): :func:`canceller` reads
it, so the track's record says who.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from ...state.phases import TrackPhase
from ...support.times import parse_utc
from ..base import Handle, Observation
from .batching import leg_timeout_minutes

_CONCLUSION: Mapping[str, TrackPhase] = {
    "success": TrackPhase.COMPLETE,
    "neutral": TrackPhase.COMPLETE,
    "failure": TrackPhase.FAILED,
    "cancelled": TrackPhase.CANCELLED,
    "skipped": TrackPhase.CANCELLED,
    "timed_out": TrackPhase.TAPPED_OUT,
}
"""Job conclusions but ``action_required``, which is no verdict: see :func:`job_observation`.
An unknown conclusion fails the attempt."""
TRACK_STEP = "Run the track"
"""The name of track.yml's step that runs the track's command."""
DRAIN_STEP = "Work the items"
"""The step that runs a drain worker's items instead (``Run the track`` is skipped)."""
SETUP_STEP = "Set up job"
"""GitHub's own first step of every job: the runner preparing itself."""
TIMEOUT_SLACK = timedelta(seconds=30)
"""GitHub's timestamps are whole seconds and its timeout fires a little late or early
against ``started_at``; a cancel this close to the timeout is the timeout."""


def ran_out_of_time(job: Mapping[str, Any], timeout_minutes: float) -> bool:
    """Whether a cancelled ``job`` ran until its leg's ``timeout-minutes``. A job no
    runner took never ran: its ``started_at`` is only its creation time."""
    started, ended = parse_utc(job.get("started_at")), parse_utc(job.get("completed_at"))
    if started is None or ended is None or not job.get("runner_name"):
        return False
    return ended - started >= timedelta(minutes=leg_timeout_minutes(timeout_minutes)) - \
        TIMEOUT_SLACK


def failed_to_start(job: Mapping[str, Any]) -> bool:
    """Whether the completed ``job`` never ran the track because of its runner (see the
    module's docstring for the rule)."""
    if job.get("status") != "completed" or job.get("conclusion") != "failure":
        return False
    if not job.get("runner_name"):
        return True
    steps = job.get("steps")
    if not isinstance(steps, list):
        return False  # not reported: nothing says it did not run
    steps = [s for s in steps if isinstance(s, Mapping)]
    return not steps or _track_never_began(steps)


def _track_never_began(steps: list[Mapping[str, Any]]) -> bool:
    """Whether the step running the track never began while no set-up step before it
    failed; ``False`` for a workflow with no such step."""
    track = [s for s in steps if s.get("name") in (TRACK_STEP, DRAIN_STEP)]
    if not track or any(_began(s) for s in track):
        return False
    return not any(_failed_before(s, track[0]) for s in steps)


def _failed_before(step: Mapping[str, Any], track: Mapping[str, Any]) -> bool:
    """Whether ``step``, one of the workflow's own before the track's, failed."""
    return (_number(step) < _number(track) and step.get("name") != SETUP_STEP
            and step.get("conclusion") == "failure")


def _began(step: Mapping[str, Any]) -> bool:
    return (step.get("started_at") is not None and step.get("status") != "queued"
            and step.get("conclusion") != "skipped")


QUEUE_LIMIT = timedelta(hours=24)
"""GitHub cancels a job for a self-hosted runner that has been queued this long (docs,
"Usage limits for self-hosted runners": after 24 to 48 hours)."""


def queued_out(job: Mapping[str, Any]) -> bool:
    """Whether GitHub cancelled the job because no runner took it within a day: it was
    cancelled, never had a runner, and ended a day or more after it was created. Not
    the track's doing: it is routed to its next label or retried, never left
    ``cancelled``."""
    if job.get("status") != "completed" or job.get("conclusion") != "cancelled" \
            or job.get("runner_name"):
        return False
    created, ended = parse_utc(job.get("created_at")), parse_utc(job.get("completed_at"))
    return created is not None and ended is not None and ended - created >= QUEUE_LIMIT


def _number(step: Mapping[str, Any]) -> int:
    number = step.get("number")
    return number if isinstance(number, int) else 0


def job_observation(handle: Handle, ci_run: int, job: Mapping[str, Any]) -> Observation:
    """The attempt ``handle`` as its job ``job`` of workflow run ``ci_run`` shows it."""
    key = handle.key
    status = str(job.get("status"))
    conclusion = job.get("conclusion")
    details = {"ci_run_id": ci_run, "job_id": job.get("id"), "status": status,
               "conclusion": conclusion, "runner_name": job.get("runner_name"),
               "run_attempt": job.get("run_attempt")}
    url = job.get("html_url") if isinstance(job.get("html_url"), str) else None
    if status == "in_progress":
        return Observation(key=key, phase=TrackPhase.RUNNING,
                           started_at=parse_utc(job.get("started_at")), url=url,
                           details=details)
    if status != "completed":
        # queued, waiting (an approval), pending, requested: no runner has taken the job
        # yet, so the track is still `dispatched`, as a local attempt waiting for a task
        # slot is, and its timeout has not begun. A job awaiting its environment's
        # reviewers "has a status of Waiting" (docs, "Reviewing deployments").
        return Observation(key=key, phase=None, url=url, details=details,
                           held=status == "waiting")
    if conclusion == "action_required":
        # Waiting for someone to approve the run: no verdict yet. Once approved, GitHub
        # runs it again (a new attempt, whose jobs replace these); left alone, the
        # track's timeout and its run's deadline tap it out.
        return Observation(key=key, phase=None, url=url, details=details)
    if queued_out(job):
        return Observation(key=key, phase=TrackPhase.FAILED, failed_to_start=True,
                           finished_at=parse_utc(job.get("completed_at")), url=url,
                           error=f"job {key} waited a day in the queue without a runner and "
                                 "GitHub cancelled it (a self-hosted runner's queue limit)",
                           details=details)
    if failed_to_start(job):
        runner = job.get("runner_name")
        where = f"its runner {runner} was lost setting up" if runner else "no runner took it"
        labels = job.get("labels")
        on = f" on {', '.join(map(str, labels))}" if isinstance(labels, list) and labels else ""
        return Observation(key=key, phase=TrackPhase.FAILED, failed_to_start=True,
                           finished_at=parse_utc(job.get("completed_at")), url=url,
                           error=f"job {key} failed to start{on} ({where})",
                           details=details)
    phase = _CONCLUSION.get(str(conclusion), TrackPhase.FAILED)
    error = None if phase is TrackPhase.COMPLETE else f"job {key} concluded {conclusion}"
    if conclusion == "cancelled" and ran_out_of_time(job, handle.timeout_minutes):
        phase = TrackPhase.TAPPED_OUT
        error = (f"job {key} ran into its timeout of "
                 f"{leg_timeout_minutes(handle.timeout_minutes)} minutes; GitHub cancelled it")
    return Observation(key=key, phase=phase, started_at=parse_utc(job.get("started_at")),
                       finished_at=parse_utc(job.get("completed_at")), error=error,
                       url=url, details=details)


_RUN_ENDED = {
    "startup_failure": "failed to start (check the workflow file: GitHub shows why on the "
                       "run's page)",
    "stale": "was left stale by GitHub",
}


def missing_job(handle: Handle, ci_run: int, status: int, run: Any,
                run_url: str | None) -> Observation:
    """A dispatched leg with no job: still starting, or the run ended without it.
    ``status`` and ``run`` are the answer to ``GET /actions/runs/{ci_run}``."""
    if status == 404:
        return Observation(key=handle.key, phase=TrackPhase.FAILED,
                           error=f"workflow run {ci_run} no longer exists (deleted)")
    if not isinstance(run, dict):
        return Observation(key=handle.key, phase=None, url=run_url)
    url = run.get("html_url") if isinstance(run.get("html_url"), str) else run_url
    conclusion = run.get("conclusion")
    if run.get("status") != "completed" or conclusion == "action_required":
        return Observation(key=handle.key, phase=None, url=url,
                           details={"ci_run_id": ci_run, "status": run.get("status"),
                                    "conclusion": conclusion})
    # startup_failure fails the track, never its runner label: the workflow file is
    # invalid, and the next label would fail alike (failed_to_start stays False)
    phase = TrackPhase.CANCELLED if conclusion == "cancelled" else TrackPhase.FAILED
    ended = _RUN_ENDED.get(str(conclusion), f"ended ({conclusion})")
    return Observation(
        key=handle.key, phase=phase, url=url,
        finished_at=parse_utc(run.get("updated_at")),
        error=f"workflow run {ci_run} {ended} without a job named {handle.key}",
        details={"ci_run_id": ci_run, "conclusion": conclusion})


_CANCELED_BY = re.compile(r"The run was canceled by @?([A-Za-z0-9][A-Za-z0-9-]*(?:\[bot\])?)\.?")


def canceller(annotations: Iterable[object]) -> str | None:
    """Who cancelled the run, from its cancelled job's check run annotations."""
    for item in annotations:
        text = item.get("message") if isinstance(item, Mapping) else None
        found = _CANCELED_BY.search(text) if isinstance(text, str) else None
        if found:
            return found.group(1)
    return None


def cancelled_by(seen: Observation, ci_run: int, actor: str | None,
                 readable: bool = True) -> Observation:
    """``seen`` (a leg cancelled on GitHub) with who cancelled it in its error.
    ``readable``: whether the job's annotations could be read at all."""
    if actor:
        who = f"by @{actor}"
    elif readable:
        who = "(its annotations name nobody)"
    else:
        who = ("by someone GitHub names in the job's annotations, which this token could "
               "not read (it needs checks: read)")
    return dataclasses.replace(seen, error=f"job {seen.key} was cancelled on GitHub {who} "
                                           f"(workflow run {ci_run})")
