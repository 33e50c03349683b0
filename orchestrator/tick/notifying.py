"""The tick's notifications: derived in the mark commit, delivered once it landed.

- **Plan**: with a channel configured, each planning pass derives the events of its
  decision (:func:`orchestrator.notify.events.derive`) and writes them to the outbox of
  ``state/notify.json`` in the mark commit, claimed by this tick. A pass on a tip lost
  to a rival starts again from the rival's record, so an event is claimed once.
- **Deliver**: only once the mark landed, after the dispatches (schedules fire first),
  within ``notify.budget_seconds``; each channel in its own thread.
- **Settle**: the record commit takes the delivered and given-up channels off their
  entries and keeps the issue numbers learned.
- **A late cron** (:func:`cron_late`): the ledger on the tip against the tolerance of
  each schedule the tick read; an episode ends only for a schedule read within it.
- Without a channel configured, nothing is read or written; a ``state/notify.json`` that
  cannot be read holds notifications back with one line per tick, and costs nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from ..config.channels import any_enabled
from ..state import layout
from ..state.machine import RUN_TERMINAL

if TYPE_CHECKING:  # the notify package is imported only by a tick that notifies
    from ..config.models import ScheduleSpec
    from ..notify.channel import Delivery, Item
    from ..notify.events import CronLate, Event
    from ..notify.outbox import Prepared
    from ..state.model import State
    from .inputs import TickInputs

__all__ = ["OFF", "Delivery", "Notifications", "Planned", "markdown_of"]

Markdown = Callable[[str, int], "str | None"]
"""A run's Markdown brief within a number of bytes, if it can be rendered."""


@dataclass(frozen=True)
class Planned:
    """What one planning pass says about notifications."""

    prepared: Prepared | None = None
    """``None``: notifications are off, or held (see :attr:`lines`)."""
    letters: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    """Run id -> its waiting dead letters, for the runs of the claims."""
    budget: float = 20.0
    lines: tuple[str, ...] = ()

    @property
    def events(self) -> tuple[Event, ...]:
        return self.prepared.events if self.prepared else ()

    @property
    def log(self) -> list[str]:
        return [*self.lines, *(self.prepared.lines if self.prepared else ())]


OFF = Planned()


def cron_late(inputs: TickInputs, old: Mapping[str, bytes], told: Mapping[str, datetime],
              now: datetime, scope: str | None) -> tuple[CronLate | None, dict[str, datetime]]:
    """GitHub's cron lateness against the schedules' tolerance, from the ledger on the
    tip, and the schedules told in this episode after it. Too few samples, or a tick
    scoped to one run, change nothing."""
    from ..cadence import lateness
    from ..notify.events import CronLate

    tolerances = _tolerances(inputs)
    risk = None if scope else lateness.at_risk(lateness.read(old.get(layout.LATENESS)),
                                                 tolerances, now)
    if risk is None:
        return None, dict(told)
    new = tuple(sid for sid in risk.schedules if sid not in told)
    kept = {**_still_late(told, risk.schedules, tolerances), **dict.fromkeys(new, now)}
    if not risk.schedules:
        return None, kept
    return CronLate(risk.schedules, new, risk.tolerance_minutes, risk.measured.to_json(),
                    lateness.RISK_DAYS), kept


def _tolerances(inputs: TickInputs) -> dict[str, float | None]:
    """Each schedule read's ``max_lateness_minutes``, else the repository's."""
    default = inputs.settings.cadence.max_lateness_minutes
    return {s.id: s.spec.max_lateness_minutes or default for s in inputs.schedules}


def _still_late(told: Mapping[str, datetime], late: tuple[str, ...],
                read: Mapping[str, object]) -> dict[str, datetime]:
    """The episodes that go on: a schedule still late, or one this tick did not read
    (the memo left it out): only a schedule read within its tolerance ends its own."""
    return {sid: at for sid, at in told.items() if sid in late or sid not in read}


class Notifications:
    """The notifications of a tick, in the environment it runs in."""

    def __init__(self, now: datetime, environ: Mapping[str, str] | None = None) -> None:
        self.now = now
        self.environ = os.environ if environ is None else environ

    def plan(self, inputs: TickInputs, before: State, after: State,
             files: dict[str, bytes | None], old: Mapping[str, bytes],
             scope: str | None) -> Planned:
        """Derive the events of a decision and put the record of the mark commit in
        ``files``."""
        specs = {s.id: s.spec for s in inputs.schedules}
        if not any_enabled(inputs.settings.notify, (s.notify for s in specs.values())):
            return OFF
        from ..notify import record as notify_record
        from ..notify.events import Links, Seen, derive
        from ..notify.outbox import Routes, prepare

        routes = Routes(inputs.settings.notify, specs)
        record, problem = notify_record.read(old)
        if record is None:
            return Planned(lines=(problem or "",))
        late, told = cron_late(inputs, old, record.cron_late, self.now, scope)
        seen = Seen(self.now, Links.from_env(inputs.settings.notify.brief_url, self.environ),
                    specs, record.failing(), frozenset(record.sla),
                    frozenset(record.quarantined), late)
        try:
            prepared = prepare(record, derive(before, after, seen), routes, self.now, after,
                               scoped=scope)
            prepared = replace(prepared, record=prepared.record.model_copy(
                update={"cron_late": told}))
        except Exception as exc:  # a bad record of the state costs only the notification
            return Planned(lines=(f"notify: events not derived: {type(exc).__name__}: "
                                  f"{exc}".splitlines()[0],))
        if prepared.record != record:
            files[layout.NOTIFY] = notify_record.dump(prepared.record)
        return Planned(prepared, _letters(prepared, after), inputs.settings.notify.budget_seconds)

    def deliver(self, planned: Planned, markdown: Markdown) -> list[Delivery]:
        """Deliver what ``planned`` claimed (its commit landed), within its budget."""
        prepared = planned.prepared
        if prepared is None or not prepared.claims:
            return []
        from ..notify import deliver as delivery
        from ..notify.channel import Deadline
        from ..support.credentials import redactor

        redact = redactor(self.environ)
        grouped = delivery.by_channel(_pairs(planned, prepared, markdown))
        channels = {name: delivery.build(name, self.environ, redact, self.now, planned.budget)
                    for name in grouped}
        return delivery.deliver(grouped, channels, Deadline(planned.budget))

    def deliver_safely(self, planned: Planned, markdown: Markdown) -> list[Delivery]:
        """:meth:`deliver`, and nothing that goes wrong in it reaches the tick: the
        claims then stay in the outbox, and a later tick claims them again."""
        try:
            return self.deliver(planned, markdown)
        except Exception as exc:
            from ..notify.channel import Delivery

            claims = planned.prepared.claims if planned.prepared else ()
            why = f"{type(exc).__name__}: {exc}".splitlines()[0]
            return [Delivery(name, p.event.id, "deferred",
                             f"notify: {name}: {p.event.id}: not delivered ({why})")
                    for p in claims for name in p.channels]

    @staticmethod
    def settle(files: Mapping[str, bytes], planned: Planned,
               deliveries: list[Delivery]) -> bytes | None:
        """The record of the record commit on the tip ``files``, or ``None`` when it
        does not change (or cannot be read there)."""
        if planned.prepared is None or not deliveries:
            return None
        from ..notify import record as notify_record
        from ..notify.outbox import settle

        record, _ = notify_record.read(files)
        if record is None:
            return None
        settled = settle(record, planned.prepared.claims, deliveries)
        return notify_record.dump(settled) if settled != record else None


def _letters(prepared: Prepared, after: State) -> dict[str, tuple[tuple[str, str], ...]]:
    """Run id -> its waiting dead letters (key and reason), for the runs of the claims."""
    runs = {p.event.run_id for p in prepared.claims if p.event.run_id}
    return {rid: tuple((k, d.reason) for k, d in sorted(after.dlq.items())
                       if d.run_id == rid and not d.discarded) for rid in runs}


def _openers(prepared: Prepared) -> set[str | None]:
    """The runs whose failure another pending event (not claimed now) opens an issue for."""
    from ..notify.channel import ISSUES

    claimed = {p.event.id for p in prepared.claims}
    return {p.event.run_id for p in prepared.record.outbox
            if ISSUES in p.channels and p.event.id not in claimed
            and p.event.kind.value == "run_failed"}


def _pairs(planned: Planned, prepared: Prepared, markdown: Markdown) -> list[tuple[str, Item]]:
    """(channel, item) for every channel of every claim of ``prepared``."""
    from ..notify.channel import Item

    openers = _openers(prepared)
    pairs = []
    for pending in prepared.claims:
        event = pending.event
        streak = prepared.record.streaks.get(event.schedule or "")
        item = Item(pending, streak,
                    opener_elsewhere=pending.streak in openers,
                    markdown=_for_run(markdown, event.run_id),
                    letters=planned.letters.get(event.run_id or "", ()))
        pairs += [(name, item) for name in pending.channels]
    return pairs


def _for_run(markdown: Markdown, run_id: str | None) -> Callable[[int], str | None]:
    def render(limit: int) -> str | None:
        return markdown(run_id, limit) if run_id else None
    return render


def markdown_of(summaries: Mapping[str, Callable[[int], str]], files: Mapping[str, bytes],
                specs: Mapping[str, ScheduleSpec], now: datetime) -> Markdown:
    """The Markdown brief of a run: the one this tick rendered, else rendered from
    ``files`` (a run an earlier tick finished); ``None`` when neither works."""

    def render(run_id: str, limit: int) -> str | None:
        try:
            if run_id in summaries:
                return summaries[run_id](limit)
            from ..brief import context_from_files, render_markdown

            schedule = layout.parse_run_id(run_id)[0]
            ctx = context_from_files(files, run_id, now=now, schedule=specs.get(schedule))
            if ctx.run.status not in RUN_TERMINAL:
                return None
            return render_markdown(ctx, limit)
        except Exception:  # a brief is a courtesy in a notification, never its failure
            return None

    return render
