"""GitHub's limits that a schedule can run into: checked by ``validate``, obeyed by the
GitHub executor.

- Each constant names where GitHub states it (or that it does not), so a change on
  GitHub's side is a change of one line here.
- Nothing here talks to GitHub: the previews use these without the HTTP client.
"""

from __future__ import annotations

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
before the command, whose own limit ``timeout`` enforces inside the leg."""
MAX_DOWNLOADS = 64
"""Outcome archives a tick fetches through the artifacts API at most (the safety net)."""


def hosted_runner_warnings(tracks: Iterable[TrackSpec]) -> list[str]:
    """What GitHub-hosted runners would cut short: tracks whose timeout passes 6 hours."""
    return [f"track {t.name!r} has timeout_minutes {t.timeout_minutes:g}: GitHub stops a job "
            f"on a GitHub-hosted runner after {HOSTED_MAX_MINUTES} minutes (6 hours); run "
            "it on a self-hosted runner (ORCHESTRATOR_RUNNER) or split it"
            for t in tracks if t.timeout_minutes > HOSTED_MAX_MINUTES]
