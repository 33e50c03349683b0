"""Integration tier: real git in temporary folders, real processes, fake GitHub on loopback.

Shared fixtures: a bare ``origin``, and a checkout of an origin holding schedule files.
The schedule, spec and track builders are plain functions in :mod:`tests.builders` (so
module-level helpers and ``parametrize`` lists can use them too); the git helpers are
in :mod:`tests.gitrepo`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import bare_origin, clone, make_origin


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """An empty bare repository ``tmp_path/origin.git`` whose default branch is main."""
    return bare_origin(tmp_path)


@pytest.fixture
def repo_with_origin(tmp_path: Path) -> Callable[..., Path]:
    """Makes a checkout ``tmp_path/repo`` of a new bare origin whose main holds
    ``schedules/<id>.json`` for each ``{id: spec_data}`` given."""
    def make(schedules: dict[str, dict[str, Any]], name: str = "repo") -> Path:
        return clone(make_origin(tmp_path, schedules), tmp_path / name)
    return make

