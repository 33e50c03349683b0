"""What every command is handed: the options of ``orchestrator`` itself.

Kept apart from :mod:`orchestrator.cli` so that commands never import the group that
loads them (no package-level import circle).
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from pathlib import Path

import click


@dataclass(frozen=True)
class Config:
    """Options common to every command."""

    repo: Path
    remote: str
    state_branch: str

    @property
    def schedules_dir(self) -> Path:
        return self.repo / "schedules"


pass_config = click.make_pass_decorator(Config)


def who(by: str | None = None) -> str:
    """Who acts: ``--by`` when given, else the GitHub actor in Actions, else the login."""
    if by:
        return by
    try:
        return os.environ.get("GITHUB_ACTOR") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
