"""Acceptance tier: the installed ``orchestrator`` command, run as a user would.

Shared builders: a scaffolded repository with a bare ``origin`` (``orchestrator init``
and a first push) and the JSON of a schedule file (:func:`tests.builders.spec_data`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import builders
from tests.acceptance.cliuser import User, new_repository


@pytest.fixture
def scaffolded(tmp_path: Path) -> tuple[User, Path]:
    """A user in ``tmp_path/repo`` after ``orchestrator init`` and a first push to the
    bare origin ``tmp_path/origin.git``; returns the user and the origin."""
    return new_repository(tmp_path)


@pytest.fixture
def spec_data() -> Callable[..., dict[str, Any]]:
    """:func:`tests.builders.spec_data`: the JSON of a schedule file."""
    return builders.spec_data
