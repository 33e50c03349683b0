"""What a tick is told, apart from the parts it works with: :class:`TickSettings`.

- A tick is built from a store, a checkout, an executor factory, its ``now``, the
  environment and one :class:`TickSettings`; the commands build it in one place
  (:meth:`orchestrator.commands.context.Config.tick`).
- :class:`Clock` says where ``now`` came from; a tick far ahead of the machine's clock
  on a branch that real ticks use is refused unless forced.
- Settings are frozen: a tick may be run many times and never changes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..errors import UserError
from ..state import codec
from ..support.times import iso
from .consolidate import Templates

if TYPE_CHECKING:
    from ..cadence.lateness import Sample
    from ..executors.outcomes import Folder
    from ..planner import Request


FUTURE_TOLERANCE = timedelta(minutes=5)
"""How far ``tick --now`` may run ahead of the machine's clock on a branch real ticks
use (clocks differ by a few seconds; a simulation by hours)."""

DISPATCH_GRACE = timedelta(minutes=10)
HEARTBEAT_EVERY = timedelta(minutes=60)


@dataclass(frozen=True)
class Clock:
    """Where a tick's ``now`` came from, and the machine's clock when it was given.

    A tick settles every slot up to its ``now`` (fired, or noted missed), so a tick far
    ahead of the real clock on a branch that real ticks use would leave them nothing
    to fire until real time catches up: it is refused unless ``force``."""

    machine: datetime
    """The machine's clock, read once by the command."""
    given: bool = False
    """``now`` came from ``tick --now``, not from the machine's clock."""
    force: bool = False

    @property
    def kind(self) -> str:
        return codec.CLOCK_GIVEN if self.given else codec.CLOCK_MACHINE

    def refuse_the_future(self, now: datetime, files: Mapping[str, bytes]) -> None:
        ahead = now - self.machine
        if not self.given or self.force or ahead <= FUTURE_TOLERANCE:
            return
        if codec.real_clock_ticks(files):
            raise UserError(
                f"--now {iso(now)} is {_span(ahead)} ahead of this machine's clock, and "
                "real ticks use this state branch: a tick settles every slot up to its "
                "now, so they would fire nothing until then. See the decision with "
                "--dry-run, simulate on a branch of its own (--state-branch NAME), or "
                "--force")

    def behind(self, now: datetime, files: Mapping[str, bytes]) -> list[str]:
        """A line when the branch's last tick is ahead of this real-clock tick."""
        last = codec.last_tick_at(files)
        if self.given or last is None or last - now <= FUTURE_TOLERANCE:
            return []
        return [f"the last tick, at {iso(last)}, is {_span(last - now)} ahead of this "
                "machine's clock (a tick --now in the future?): the slots up to it are "
                "settled and fire no more"]


def _span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"


@dataclass(frozen=True)
class TickSettings:
    """How a tick decides and what it writes; the defaults are a plain local tick."""

    executor_name: str = "local"
    dispatch_grace: timedelta = DISPATCH_GRACE
    heartbeat_every: timedelta = HEARTBEAT_EVERY
    templates: Templates = field(default_factory=Templates)
    """Each template not given is looked for in the repository's ``templates/`` (when
    the tick first renders), before the packaged one."""
    scope: str | None = None
    """Only this run is advanced (a fan-in job's tick): see :mod:`.scope`."""
    outcomes: Folder | None = None
    """A fan-in's outcome files, read by the command (:mod:`orchestrator.executors.outcomes`)."""
    retention: bool = True
    """Apply ``keep_finished_runs_days`` after the tick's work (``serve
    --compact-keep-days`` turns it off: its own compaction wins)."""
    clock: Clock | None = None
    """Where ``now`` came from (``None``: not said, as in tests driving the shell)."""
    requests: tuple[Request, ...] = ()
    """An operator's requests (``trigger``, ``backfill``, ``runs cancel``), planned
    with everything else: the tick reads every schedule then, without the memo."""
    lateness: Sample | None = None
    """GitHub's cron lateness as this scheduled tick measured it: added to the ledger
    in a commit the tick makes anyway (:mod:`orchestrator.cadence.lateness`)."""
