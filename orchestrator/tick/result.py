"""What one tick did: :class:`TickResult`, for the CLI's text, ``--json`` output and
the job summary (the tick itself is :mod:`orchestrator.tick.shell`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..support.times import iso

if TYPE_CHECKING:  # a tick that notifies nobody never imports the notify package
    from ..cadence.wake import Wake
    from ..notify.events import Event
    from ..planner import Decision
    from ..runs.retention import Outcome
    from ..spec.config import Cadence
    from ..store import Snapshot
    from .memo import Memo


NOTHING_DECIDED: dict[str, list[str]] = {
    "dispatch": [], "cancel": [], "render": [], "log": [], "invalid": []}
"""The JSON of a decision with nothing in it (:meth:`orchestrator.planner.Decision.to_json`)."""


@dataclass
class TickResult:
    """What one tick did, for the CLI's text and ``--json`` output."""

    now: datetime
    executor: str
    dry_run: bool
    decision: Decision | None = None
    mark_landed: bool = False
    record_landed: bool = False
    tip: str | None = None
    dispatched: list[str] = field(default_factory=list)
    dispatch_errors: list[str] = field(default_factory=list)
    rendered: list[str] = field(default_factory=list)
    record_log: list[str] = field(default_factory=list)
    schedule_errors: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    """One line per state record the tick could not read and left alone."""
    finished: list[str] = field(default_factory=list)
    summaries: dict[str, Callable[[int], str]] = field(default_factory=dict)
    """Run id -> the Markdown brief of each run this tick finished, rendered within a
    byte limit (for the job summary, whose limit the briefs share)."""
    wake: Wake | None = None
    """The next due moment after this tick, from the state it decided."""
    scope: str | None = None
    """The one run this tick advanced (``tick --run``), if it was scoped."""
    parked: dict[str, str] = field(default_factory=dict)
    """Dead letter key -> reason, for each track this tick parked and each queue item it
    made dead (``<queue>/<item-id>``): an alert each."""
    retention: Outcome | None = None
    """What the tick's compaction did, when it ran one (:mod:`orchestrator.runs.retention`)."""
    memo: Memo | None = None
    """The memo of quiet schedules the tick read: which schedules it left unread
    (``left_out``), whether it vouched for the whole folder (``whole``)."""
    events: list[Event] = field(default_factory=list)
    """The events this tick's decision derived (:mod:`orchestrator.notify.events`)."""
    notify_log: list[str] = field(default_factory=list)
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
        return self.quarantined + lines + self.record_log + self.notify_log + kept

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
            "dispatched": self.dispatched,
            "dispatch_errors": self.dispatch_errors,
            "rendered": self.rendered,
            "finished": self.finished,
            "schedule_errors": self.schedule_errors,
            "quarantined": self.quarantined,
            "log": self.log,
            "next_wake": self.wake.to_json() if self.wake else None,
            "run": self.scope,
            "parked": self.parked,
            "retention": self.retention.to_json() if self.retention else None,
            "events": [event.to_json() for event in self.events],
            "notify": self.notify_log,
        }
