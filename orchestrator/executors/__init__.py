"""Executors run the tracks of a run somewhere: local subprocesses or GitHub Actions.

:data:`REGISTRY` names every executor: how to build it for one tick, how long the
tick waits for a dispatch to show up before it looks it up again, and the settings
(environment variables) it reads. The commands ``tick``, ``serve`` and ``demo`` take
their choices from it; adding an executor is one module, one entry here, and its
tests. Each factory imports its module when called, so a local tick never loads the
HTTP client.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError

if TYPE_CHECKING:  # an idle tick builds no executor, and never imports one
    from ..state.breaker import Breaker
    from .base import Executor


@dataclass(frozen=True)
class Setup:
    """What a factory may use to build an executor for one tick."""

    repo: Path
    """The checkout holding the schedules."""
    now: datetime
    """The tick's time (an executor never reads the clock)."""
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock_offset: timedelta = timedelta(0)
    """The tick's clock minus the machine's when ``now`` was taken: zero on the real
    clock, ``T - start`` for ``tick --now T``. Processes the executor starts on this
    machine record their times on the tick's clock."""


Factory = Callable[[Setup, "Breaker | None"], "Executor"]
"""Builds an executor from the setup and the breaker persisted by the last tick."""


@dataclass(frozen=True)
class ExecutorInfo:
    """One entry of the registry."""

    name: str
    factory: Factory
    grace: timedelta
    """How long a dispatched track without a handle is left alone before the tick looks
    it up and may dispatch it again: the time the backend may take to show a start."""
    summary: str
    """Where tracks run, in a few words (the ``--executor`` help)."""
    settings: Mapping[str, str] = field(default_factory=dict)
    """Environment variables the executor reads, and what each one sets."""


def local_work_dir(setup: Setup) -> Path:
    return Path(setup.environ.get("ORCHESTRATOR_WORK_DIR")
                or setup.repo / ".orchestrator" / "work")


def _local(setup: Setup, breaker: Breaker | None) -> Executor:
    from .local import LocalExecutor

    return LocalExecutor(local_work_dir(setup), repo=setup.repo,
                         clock_offset=setup.clock_offset)


def _github(setup: Setup, breaker: Breaker | None) -> Executor:
    from .github import GitHubExecutor

    return GitHubExecutor.from_env(breaker=breaker, now=setup.now, environ=setup.environ)


LOCAL = "local"
REGISTRY: Mapping[str, ExecutorInfo] = {info.name: info for info in (
    ExecutorInfo(
        LOCAL, _local,
        # the launch marker is written before `dispatch` returns
        grace=timedelta(minutes=1),
        summary="subprocesses on this machine",
        settings={"ORCHESTRATOR_WORK_DIR":
                  "folder of the attempts (default: .orchestrator/work in the checkout)"},
    ),
    ExecutorInfo(
        "github", _github,
        # GitHub may take a minute or more to create a dispatched run
        grace=timedelta(minutes=10),
        summary="matrix legs of workflow_dispatch runs on GitHub Actions",
        settings={
            "GITHUB_REPOSITORY": "owner/name of the repository whose track workflow runs",
            "GITHUB_TOKEN": "token with actions: write (GH_TOKEN is read too)",
            "GITHUB_API_URL": "API of GitHub Enterprise Server (default: api.github.com)",
            "GITHUB_REF_NAME": "ref the track workflow is dispatched on (default: main)",
            "ORCHESTRATOR_DISPATCH_REF": "overrides GITHUB_REF_NAME",
        },
    ),
)}
NAMES = tuple(REGISTRY)
"""The executor names, for ``click.Choice``."""


def get(name: str) -> ExecutorInfo:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UserError(f"unknown executor {name!r}: expected one of "
                        f"{', '.join(NAMES)}") from None


def choice_help() -> str:
    """The ``--executor`` help: every executor and where it runs tracks."""
    return "Where tracks run: " + "; ".join(f"{i.name}, {i.summary}"
                                            for i in REGISTRY.values()) + "."
