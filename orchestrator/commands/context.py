"""What every command is handed: the options of ``orchestrator`` itself.

- Kept apart from :mod:`orchestrator.cli` so that commands never import the group that
  loads them (no package-level import circle).
- The one place a command gets its store (:meth:`Config.store`): a config holding an
  in-memory store runs every command on it, the tick too
  (:func:`orchestrator.commands.tick.build`).
- Who acts and why, checked by one rule for every verb (:func:`acting`).
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..errors import UserError

if TYPE_CHECKING:
    from ..store import GitStateStore, InMemoryStateStore, StateStore


@dataclass(frozen=True)
class Config:
    """Options common to every command."""

    repo: Path
    remote: str
    state_branch: str
    memory: InMemoryStateStore | None = field(default=None, compare=False)
    """A store in memory instead of the remote's state branch (the commands' tests)."""

    @property
    def schedules_dir(self) -> Path:
        return self.repo / "schedules"

    def store(self) -> StateStore:
        """The state store: the state branch on the remote, or :attr:`memory`."""
        return self.memory if self.memory is not None else self.git()

    def git(self) -> GitStateStore:
        """The state branch on the remote, for what only git does: archive history
        (``compact``), accept a rewound branch (``status --accept-rewind``)."""
        from ..store import GitStateStore

        return GitStateStore(self.repo, self.remote, self.state_branch)


pass_config = click.make_pass_decorator(Config)


MAX_REASON = 2000
"""Longest ``--reason`` and ``--by`` of every verb, in characters: both are committed,
in a record that must stay small enough to be read (a huge one would be quarantined)."""


def said(name: str, value: str) -> str:
    """``value`` of the option ``name`` (a reason, who acts), or one line refusing it:
    at most :data:`MAX_REASON` characters, newlines but no other control character
    (a reason is shown by ``status`` and the tick, where an escape would reach a
    terminal)."""
    if len(value) > MAX_REASON or not value.replace("\n", " ").isprintable():
        raise UserError(f"{name}: give at most {MAX_REASON} printable characters")
    return value


def acting(by: str | None, reason: str) -> tuple[str, str]:
    """Who acts (:func:`who`) and why, each checked (:func:`said`)."""
    return said("--by", who(by)), said("--reason", reason)


def who(by: str | None = None) -> str:
    """Who acts: ``--by`` when given, else the GitHub actor in Actions, else the login.
    On a re-run, GitHub keeps ``GITHUB_ACTOR`` (who started the first run) and names
    who re-ran it in ``GITHUB_TRIGGERING_ACTOR``: that person acts now."""
    if by:
        return by
    try:
        return (os.environ.get("GITHUB_TRIGGERING_ACTOR") or os.environ.get("GITHUB_ACTOR")
                or getpass.getuser())
    except (KeyError, OSError):
        return "unknown"
