"""Executors run the tracks of a run somewhere: local subprocesses or GitHub Actions.

:data:`REGISTRY` names every executor: how to build it for one tick, how long the
tick waits for a dispatch to show up before it looks it up again, the settings
(environment variables) it reads, and its optional :class:`Capabilities`.

- The commands ``tick``, ``serve`` and ``demo`` take their choices from it; adding an
  executor is one package, one entry here (or :func:`register`), and its tests.
- Callers outside this package ask :func:`declared` with the name a track recorded
  or the command line chose; they never compare an executor's name or class.
- Each factory and hook imports its module when called, so a local tick never loads
  the HTTP client.

May import: github (the REST client), state, config, store, support, errors.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError

if TYPE_CHECKING:  # an idle tick builds no executor, and never imports one
    from ..github.admin import WorkflowAdmin
    from ..state.breaker import Breaker
    from .base import Executor, LogReader


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
class Capabilities:
    """What an executor offers beyond the contract of :mod:`.base`; ``None`` or
    ``False``: not offered. A hook given an executor is given one its own entry's
    factory built."""

    work_dir: Callable[[Executor], Path] | None = None
    """The folder on this machine with one folder per attempt (``<dispatch key>/
    stdout.log``): the brief reads the tracks' stdout tails there and links
    ``orchestrator logs`` instead of a file."""
    forget: Callable[[Executor, tuple[str, ...]], object] | None = None
    """Drops the local output of archived runs (the tick's retention is theirs too)."""
    ended: Callable[[Setup, Iterable[str]], set[str]] | None = None
    """Which of these dispatch keys' attempts have ended, seen from this machine:
    ``serve`` wakes as soon as one does."""
    logs: Callable[[Mapping[str, str], datetime], LogReader] | None = None
    """Opens a reader of the tracks' logs with the environment's credentials, for
    ``orchestrator logs`` when no local output is here."""
    admin: Callable[[Mapping[str, str], datetime], WorkflowAdmin] | None = None
    """The workflow admin of the engine the tick runs on, for the housekeeping after a
    tick: the weekly keep-alive, the held scheduled tick cancelled."""
    clock: bool = False
    """Whether an external clock (``serve --clock-only``, ``cron-sync --external``)
    can start the tick on this engine."""
    environments: bool = False
    """Whether a leg can run in a deployment environment whose reviewers hold it
    (``approval.environment``); elsewhere such a track waits for ``approve``."""
    lingers: bool = False
    """Whether the tick runs on a billed runner that may wait for a near slot
    (``tick --linger``): the tick's summary then says which wait is worth it."""


NONE = Capabilities()


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
    capabilities: Capabilities = NONE


def local_work_dir(setup: Setup) -> Path:
    return Path(setup.environ.get("ORCHESTRATOR_WORK_DIR")
                or setup.repo / ".orchestrator" / "work")


def _local(setup: Setup, breaker: Breaker | None) -> Executor:
    from .local import LocalExecutor

    return LocalExecutor(local_work_dir(setup), repo=setup.repo,
                         clock_offset=setup.clock_offset)


def _local_work(executor: Executor) -> Path:
    from .local import LocalExecutor

    assert isinstance(executor, LocalExecutor), "built by the local entry's factory"
    return executor.work_dir


def _local_forget(executor: Executor, run_ids: tuple[str, ...]) -> list[str]:
    from .workfolder import forget

    return forget(_local_work(executor), run_ids)


def _local_ended(setup: Setup, keys: Iterable[str]) -> set[str]:
    from .workfolder import ended

    return ended(local_work_dir(setup), keys)


def _github(setup: Setup, breaker: Breaker | None) -> Executor:
    from .github import GitHubExecutor

    return GitHubExecutor.from_env(breaker=breaker, now=setup.now, environ=setup.environ)


def _github_logs(environ: Mapping[str, str], now: datetime) -> LogReader:
    from .github.leglogs import reader

    return reader(environ, now)


def _github_admin(environ: Mapping[str, str], now: datetime) -> WorkflowAdmin:
    from ..github.admin import WorkflowAdmin

    return WorkflowAdmin.from_env(environ, now=now)


LOCAL = "local"
REGISTRY: MutableMapping[str, ExecutorInfo] = {info.name: info for info in (
    ExecutorInfo(
        LOCAL, _local,
        # the launch marker is written before `dispatch` returns
        grace=timedelta(minutes=1),
        summary="subprocesses on this machine",
        settings={"ORCHESTRATOR_WORK_DIR":
                  "folder of the attempts (default: .orchestrator/work in the checkout)"},
        capabilities=Capabilities(work_dir=_local_work, forget=_local_forget,
                                  ended=_local_ended),
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
        capabilities=Capabilities(logs=_github_logs, admin=_github_admin, clock=True,
                                  lingers=True, environments=True),
    ),
)}
NAMES = tuple(REGISTRY)
"""The executor names, for ``click.Choice`` (those a user can pick; an entry
:func:`register` adds later is not among them)."""


def declared(name: str | None) -> Capabilities:
    """The capabilities of executor ``name`` (a track's record may name one this
    version no longer has: it offers none)."""
    info = REGISTRY.get(name or "")
    return info.capabilities if info is not None else NONE


@contextlib.contextmanager
def register(info: ExecutorInfo) -> Iterator[ExecutorInfo]:
    """Adds ``info`` to the registry while the ``with`` block runs (a backend of a
    test, or of a program embedding the orchestrator)."""
    if info.name in REGISTRY:
        raise ValueError(f"executor {info.name!r} is registered already")
    REGISTRY[info.name] = info
    try:
        yield info
    finally:
        del REGISTRY[info.name]


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
