"""What one tick did: :class:`TickResult`, for the CLI's text, ``--json`` output and
the job summary (the tick itself is :mod:`orchestrator.tick.shell`).

- Built once, at the end of the tick, from what its steps returned; frozen, with
  tuples and read-only mappings. A command that adds lines after the tick (the
  heartbeat ping, the workflows' keep-alive) makes a new one with :meth:`TickResult.with_lines`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..support.times import iso

if TYPE_CHECKING:  # a tick that notifies nobody never imports the notify package
    from ..cadence.wake import Wake
    from ..config.repository import Cadence
    from ..notify.events import Event
    from ..planner import Decision
    from ..runs.retention import Outcome
    from ..store import Snapshot
    from .memo import Memo


NOTHING_DECIDED: dict[str, list[str]] = {
    "dispatch": [], "cancel": [], "render": [], "log": [], "invalid": []}
"""The JSON of a decision with nothing in it (:meth:`orchestrator.planner.Decision.to_json`)."""


@dataclass(frozen=True)
class TickResult:
    """What one tick did, for the CLI's text and ``--json`` output."""

    now: datetime
    executor: str
    dry_run: bool
    decision: Decision | None = None
    mark_landed: bool = False
    record_landed: bool = False
    tip: str | None = None
    dispatched: tuple[str, ...] = ()
    dispatch_errors: tuple[str, ...] = ()
    rendered: tuple[str, ...] = ()
    record_log: tuple[str, ...] = ()
    schedule_errors: tuple[str, ...] = ()
    quarantined: tuple[str, ...] = ()
    """One line per state record the tick could not read and left alone."""
    finished: tuple[str, ...] = ()
    summaries: Mapping[str, Callable[[int], str]] = field(default_factory=dict)
    """Run id -> the Markdown brief of each run this tick finished, rendered within a
    byte limit (for the job summary, whose limit the briefs share)."""
    wake: Wake | None = None
    """The next due moment after this tick, from the state it decided."""
    scope: str | None = None
    """The one run this tick advanced (``tick --run``), if it was scoped."""
    parked: Mapping[str, str] = field(default_factory=dict)
    """Dead letter key -> reason, for each track this tick parked and each queue item it
    made dead (``<queue>/<item-id>``): an alert each."""
    retention: Outcome | None = None
    """What the tick's compaction did, when it ran one (:mod:`orchestrator.runs.retention`)."""
    memo: Memo | None = None
    """The memo of quiet schedules the tick read: which schedules it left unread
    (``left_out``), whether it vouched for the whole folder (``whole``)."""
    events: tuple[Event, ...] = ()
    """The events this tick's decision derived (:mod:`orchestrator.notify.events`)."""
    notify_log: tuple[str, ...] = ()
    """One line per delivery, and per notification problem."""
    cadence: Cadence | None = None
    """``orchestrator.json``'s cadence as the tick read it (for what runs after it, e.g.
    the cancel of an idle pending tick: :mod:`orchestrator.cadence.pending`)."""
    snapshot: Snapshot | None = None
    """The state branch as the tick read it (for what runs after it, e.g. the
    workflows' keep-alive: :mod:`orchestrator.cadence.keepalive`)."""
    idle: bool = False
    """Nothing to plan (:mod:`orchestrator.tick.idle`): :attr:`decision` is ``None``, and
    the output shows the empty decision the planner would have made."""

    @property
    def log(self) -> list[str]:
        lines = list(self.decision.log) if self.decision else []
        kept = self.retention.lines() if self.retention else []
        return [*self.quarantined, *lines, *self.record_log, *self.notify_log, *kept]

    def with_lines(self, lines: Iterable[str]) -> TickResult:
        """This result with ``lines`` added to its record log (what a command did
        after the tick)."""
        return replace(self, record_log=(*self.record_log, *lines))

    def to_json(self) -> dict[str, Any]:
        return {
            "now": iso(self.now),
            "executor": self.executor,
            "dry_run": self.dry_run,
            "committed": self.mark_landed,
            "recorded": self.record_landed,
            "tip": self.tip,
            "decision": self.decision.to_json() if self.decision else
            (dict(NOTHING_DECIDED) if self.idle else None),
            "idle": self.idle,
            "dispatched": list(self.dispatched),
            "dispatch_errors": list(self.dispatch_errors),
            "rendered": list(self.rendered),
            "finished": list(self.finished),
            "schedule_errors": list(self.schedule_errors),
            "quarantined": list(self.quarantined),
            "log": self.log,
            "next_wake": self.wake.to_json() if self.wake else None,
            "run": self.scope,
            "parked": dict(self.parked),
            "retention": self.retention.to_json() if self.retention else None,
            "events": [event.to_json() for event in self.events],
            "notify": list(self.notify_log),
        }
