"""The tick shell on the in-memory store and the in-memory executor, for the unit tier.

:class:`MemoryShell` holds the parts a :class:`~orchestrator.tick.shell.Tick` works
with: an :class:`~orchestrator.store.InMemoryStateStore`, a
:class:`~tests.memory_executor.MemoryExecutor` and schedules built in memory
(:mod:`tests.builders`). A unit test builds the tick's inputs with
:meth:`~orchestrator.tick.inputs.TickInputs.of` (:meth:`MemoryShell.inputs`) and drives
the steps itself (``observe``, ``mark``, ``act``, ``record``), or runs the whole
pipeline with :meth:`MemoryShell.run`.

There is no checkout in the unit tier: ``Tick.read`` reads one (schedule files,
``orchestrator.json``, git's listing), so :meth:`MemoryShell.run` runs a tick whose
``read`` takes the state branch from the store and the schedules and settings from
memory, as ``TickInputs.of`` does; every other step is the tick's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from orchestrator.config.models import Schedule
from orchestrator.config.repository import RepoSettings
from orchestrator.errors import Rewound
from orchestrator.state import model as state_model
from orchestrator.state.model import State
from orchestrator.state.records import Run, Track
from orchestrator.store import InMemoryStateStore
from orchestrator.tick.inputs import TickInputs
from orchestrator.tick.result import TickResult
from orchestrator.tick.settings import TickSettings
from orchestrator.tick.shell import Tick
from tests.memory_executor import MemoryExecutor

NO_CHECKOUT = Path("/nonexistent/unit-tier-has-no-checkout")
"""The tick's ``repo``: nothing a unit test runs reads it."""


class _FromMemory(Tick):
    """A tick whose first step takes its inputs from memory instead of a checkout."""

    def __init__(self, shell: MemoryShell, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shell = shell

    def read(self) -> TickInputs:
        snap = self.store.read()
        if self.store.rewound:
            raise Rewound(self.store.rewound)
        return TickInputs.of(snap, self.shell.schedules, self.shell.settings)


@dataclass
class MemoryShell:
    """A store, an executor and schedules, and ticks made from them."""

    store: InMemoryStateStore
    executor: MemoryExecutor
    schedules: list[Schedule] = field(default_factory=list)
    settings: RepoSettings | None = None
    """``orchestrator.json`` (``None``: no file, the defaults)."""

    def tick(self, now: datetime, **settings: Any) -> Tick:
        """A tick at ``now`` against the store and the executor; ``settings`` go to
        :class:`~orchestrator.tick.settings.TickSettings` (``heartbeat_every``,
        ``dispatch_grace``, ...)."""
        return _FromMemory(self, self.store, NO_CHECKOUT, lambda _breaker: self.executor,
                           now, TickSettings(executor_name=self.executor.name, **settings))

    def inputs(self) -> TickInputs:
        """The inputs of a tick on the store's tip, from the schedules in memory."""
        return TickInputs.of(self.store.read(), self.schedules, self.settings)

    def run(self, now: datetime, *, dry_run: bool = False, **settings: Any) -> TickResult:
        """One whole tick at ``now`` (:meth:`Tick.run`)."""
        return self.tick(now, **settings).run(dry_run=dry_run)

    # ------------------------------------------------------------------ what was committed

    @property
    def files(self) -> dict[str, bytes]:
        return dict(self.store.read().files)

    @property
    def commits(self) -> list[str]:
        """The message of every commit, oldest first."""
        return [message for _, message, _ in self.store.log]

    def changed(self, commit: int = -1) -> tuple[str, ...]:
        """The paths one commit changed (default: the last)."""
        return self.store.log[commit][2]

    def state(self) -> State:
        """Every record on the store's tip, parsed as ``status`` parses them."""
        return state_model.load(self.store.read().files, all_tracks=True)

    def run_record(self, run_id: str) -> Run:
        return self.state().runs[run_id]

    def track(self, run_id: str, name: str) -> Track:
        return self.state().tracks[run_id][name]
