"""Integration tier: real git in temporary folders, real processes, fake GitHub on loopback.

Shared builders: a bare ``origin``, a checkout of an origin holding schedule files, and
the schedule/track builders of :mod:`tests.builders`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import builders
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


@pytest.fixture
def spec_data() -> Callable[..., dict[str, Any]]:
    """:func:`tests.builders.spec_data`: the JSON of a schedule file."""
    return builders.spec_data
