"""Acceptance tier: the installed ``orchestrator`` command, run as a user would.

Shared fixture: a scaffolded repository with a bare ``origin`` (``orchestrator init``
and a first push). Users here write schedules through the CLI or by hand, as JSON.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acceptance.cliuser import User, new_repository


@pytest.fixture
def scaffolded(tmp_path: Path) -> tuple[User, Path]:
    """A user in ``tmp_path/repo`` after ``orchestrator init`` and a first push to the
    bare origin ``tmp_path/origin.git``; returns the user and the origin."""
    return new_repository(tmp_path)

