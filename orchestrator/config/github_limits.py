"""GitHub's limits that a schedule can run into: checked by ``validate``, obeyed by the
GitHub executor.

- Each constant names where GitHub states it (or that it does not), so a change on
  GitHub's side is a change of one line here.
- Nothing here talks to GitHub: the previews use these without the HTTP client.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .models import TrackSpec

MAX_LEGS = 256
"""GitHub runs at most 256 jobs from one matrix."""
MAX_INPUTS_CHARS = 65_535
"""GitHub rejects ``workflow_dispatch`` inputs longer than this, all inputs together."""
HOSTED_MAX_MINUTES = 360
"""A job on a GitHub-hosted runner is stopped after 6 hours, whatever its
``timeout-minutes`` says (self-hosted runners allow more)."""
SETUP_MINUTES = 10
"""What a leg's job gets beyond its track's limit: checkout, Python and the install run
before the command, whose own limit the orchestrator enforces inside the leg."""
MAX_DOWNLOADS = 64
"""Outcome archives a tick fetches through the artifacts API at most (the safety net)."""
MAX_JOB_NAME = 100
"""GitHub lists job names longer than this cut to 97 characters and ``...`` in its REST
API (undocumented: kata-containers/kata-containers #11176, OP5dev/TF-via-PR #482)."""
SLOT_CHARS = len("--20261201T0700Z")
"""What a run id adds to its schedule id."""
POLL_SUFFIX = len(".99")
"""Room for a poll's number in a dispatch key: a warning does not need the exact count."""


SELF_HOSTED_MAX_MINUTES = 5 * 24 * 60
"""GitHub stops any job after 5 days, on a self-hosted runner too (docs, "Usage limits for
self-hosted runners"); a self-hosted job queued 24 hours is cancelled."""


def hosted_runner_warnings(tracks: Iterable[TrackSpec]) -> list[str]:
    """What GitHub would cut short: a track whose job, with its set-up, reaches the 6
    hours of a GitHub-hosted runner (a limit from 350 minutes: the track's own timeout
    would come after the cap), or the 5 days of any runner."""
    out = []
    for t in tracks:
        job = math.ceil(t.timeout_minutes) + SETUP_MINUTES
        if job > SELF_HOSTED_MAX_MINUTES:
            out.append(f"track {t.name!r} has timeout_minutes {t.timeout_minutes:g}: GitHub "
                       f"stops any job after {SELF_HOSTED_MAX_MINUTES} minutes (5 days), on "
                       "a self-hosted runner too; split it")
        elif t.timeout_minutes > HOSTED_MAX_MINUTES:
            out.append(f"track {t.name!r} has timeout_minutes {t.timeout_minutes:g}: GitHub "
                       f"stops a job on a GitHub-hosted runner after {HOSTED_MAX_MINUTES} "
                       "minutes (6 hours); run it on a self-hosted runner "
                       "(ORCHESTRATOR_RUNNER) or split it")
        elif job >= HOSTED_MAX_MINUTES:
            out.append(f"track {t.name!r} has timeout_minutes {t.timeout_minutes:g}: with "
                       f"{SETUP_MINUTES} minutes of set-up its job needs {job}, and GitHub "
                       f"stops a job on a GitHub-hosted runner after {HOSTED_MAX_MINUTES}, "
                       "before the track's own timeout; keep it under "
                       f"{HOSTED_MAX_MINUTES - SETUP_MINUTES} or run it on a self-hosted runner")
    return out


def longest_key(schedule_id: str, track: TrackSpec) -> int:
    """The longest dispatch key a track's legs may have: its last attempt, a poll, and
    ``undo--`` for a track with a compensation."""
    undo = len("--undo") if track.compensate is not None else 0
    attempts = max(track.max_attempts, track.compensate.max_attempts
                   if track.compensate is not None else 1)
    return (len(schedule_id) + SLOT_CHARS + 2 + len(track.name) + undo + 2
            + len(str(attempts)) + POLL_SUFFIX)


def job_name_warnings(schedule_id: str, tracks: Iterable[TrackSpec], workflow: str) -> list[str]:
    """Tracks whose leg jobs ``workflow`` names after the whole dispatch key
    (``${{ matrix.leg.key }}``) while a key may pass GitHub's 100 characters."""
    long = [(t.name, longest_key(schedule_id, t)) for t in tracks]
    return [f"track {name!r}: {workflow} names its jobs after the dispatch key, which "
            f"reaches {chars} characters; GitHub lists job names over {MAX_JOB_NAME} cut, "
            "and the tick then finds the job only while no other key starts the same: name "
            "the job ${{ matrix.leg.job }} as the shipped track.yml does"
            for name, chars in long if chars > MAX_JOB_NAME]
