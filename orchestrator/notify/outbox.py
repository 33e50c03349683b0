"""Which channels each event goes to, and the outbox's moves: pure.

- :class:`Routes` reads ``orchestrator.json``'s ``notify`` and each schedule's own: an
  event of a schedule goes to the repository's channels and the schedule's webhooks;
  a schedule's ``github_issues`` wins over the repository's.
- :func:`prepare` turns a decision's events into the record of the mark commit: the
  streaks moved, new entries claimed by this tick, stale entries (a tick died before
  delivering them) claimed again after :data:`CLAIM_GRACE`, at most
  :data:`MAX_ATTEMPTS` times. The compare-and-swap makes one tick the claimant.
- :func:`settle` folds what the claimant delivered into the record of its second
  commit: channels served or given up leave the entry, issue numbers join streaks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..config.channels import EventKind, NotifySpec, any_enabled
from ..config.models import ScheduleSpec
from ..state.machine import RUN_TERMINAL
from ..state.model import State
from .channel import ISSUES, Delivery
from .events import Event
from .record import MAX_OUTBOX, NotifyRecord, Pending, Streak

CLAIM_GRACE = timedelta(minutes=5)
"""An entry claimed this long ago and still in the outbox was left by a tick that died:
a later tick claims it again. Longer than a tick spends between its commit and its
deliveries: the dispatch (its API waits end after 2 minutes), then the delivery budget
(a budget over 3 minutes lengthens the grace by as much)."""
DISPATCH_ALLOWANCE = timedelta(minutes=3)
MAX_ATTEMPTS = 3
"""Claims of one entry before it is dropped with a line."""

ISSUE_KINDS = frozenset({EventKind.RUN_FAILED, EventKind.RUN_RECOVERED,
                         EventKind.DEAD_LETTER, EventKind.SCHEDULE_PAUSED})
"""The events a schedule's issue tells (``tick_stale`` has an issue of its own)."""


@dataclass(frozen=True)
class Routes:
    """Where events go: the repository's settings and each schedule's own."""

    repo: NotifySpec
    schedules: Mapping[str, ScheduleSpec] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return any_enabled(self.repo, (s.notify for s in self.schedules.values()))

    def issues_for(self, schedule: str | None) -> bool:
        own = self.schedules.get(schedule) if schedule else None
        if own is not None and own.notify is not None and own.notify.github_issues is not None:
            return own.notify.github_issues
        return self.repo.github_issues

    def channels(self, event: Event) -> list[str]:
        names: list[str] = []
        if event.kind in ISSUE_KINDS and self.issues_for(event.schedule):
            names.append(ISSUES)
        own = self.schedules.get(event.schedule) if event.schedule else None
        hooks = [*self.repo.webhooks, *(own.notify.webhooks if own is not None
                                        and own.notify is not None else [])]
        for hook in hooks:
            if hook.wants(event.kind) and hook.channel not in names:
                names.append(hook.channel)
        return names


@dataclass(frozen=True)
class Prepared:
    """The notifications of one planning pass."""

    record: NotifyRecord
    events: tuple[Event, ...] = ()
    claims: tuple[Pending, ...] = ()
    """What this tick delivers once its commit lands, in order."""
    lines: tuple[str, ...] = ()


def prepare(record: NotifyRecord, events: Sequence[Event], routes: Routes, now: datetime,
            after: State, *, scoped: str | None = None) -> Prepared:
    """The record of the mark commit for ``events``, and what this tick claims.

    A tick scoped to one run claims only that run's new events and never prunes what
    other runs left (it does not see them)."""
    lines: list[str] = []
    streaks = dict(record.streaks)
    fresh: list[Pending] = []
    for event in events:
        streak = _move_streak(streaks, event)
        channels = routes.channels(event)
        if channels:
            fresh.append(Pending(event=event, channels=channels, claimed_at=now,
                                 streak=streak.since if streak else None,
                                 issue=streak.issue if streak else None))
    if scoped is None:
        grace = max(CLAIM_GRACE, DISPATCH_ALLOWANCE + timedelta(
            seconds=routes.repo.budget_seconds))
        kept, again, lines = _reclaim(record.outbox, now, grace)
    else:
        kept, again = list(record.outbox), []
    outbox = [*kept, *again, *fresh]
    if len(outbox) > MAX_OUTBOX:
        dropped = outbox[: len(outbox) - MAX_OUTBOX]
        outbox = outbox[len(dropped):]
        lines.append(f"notify: {len(dropped)} undelivered event(s) dropped, the outbox "
                     f"keeps {MAX_OUTBOX}: {', '.join(p.event.id for p in dropped[:5])}")
    new = NotifyRecord(streaks=streaks, outbox=outbox,
                       **_told(record, events, after, now, scoped))
    kept_ids = {id(p) for p in outbox}
    claims = tuple(p for p in (*again, *fresh) if id(p) in kept_ids)
    return Prepared(new, tuple(events), claims, tuple(lines))


def _move_streak(streaks: dict[str, Streak], event: Event) -> Streak | None:
    """The schedule's streak after ``event`` (a recovery: the streak it ended)."""
    sid = event.schedule
    if sid is None:
        return None
    streak = streaks.get(sid)
    if event.kind is EventKind.RUN_FAILED and event.run_id is not None:
        streak = (Streak(since=event.run_id) if streak is None
                  else streak.model_copy(update={"failed": streak.failed + 1}))
        streaks[sid] = streak
    elif event.kind is EventKind.RUN_RECOVERED:
        streaks.pop(sid, None)
    return streak


def _reclaim(outbox: Iterable[Pending], now: datetime, grace: timedelta
             ) -> tuple[list[Pending], list[Pending], list[str]]:
    """The entries left as they are, those claimed again by this tick, and a line per
    entry given up."""
    kept: list[Pending] = []
    again: list[Pending] = []
    lines: list[str] = []
    for entry in outbox:
        if now < entry.claimed_at + grace:
            kept.append(entry)
        elif entry.attempt >= MAX_ATTEMPTS:
            lines.append(f"notify: {entry.event.id} dropped after {entry.attempt} attempts "
                         f"(still owed to {', '.join(entry.channels)})")
        else:
            again.append(entry.model_copy(update={"claimed_at": now,
                                                  "attempt": entry.attempt + 1}))
    return kept, again, lines


def _told(record: NotifyRecord, events: Sequence[Event], after: State, now: datetime,
          scoped: str | None) -> dict[str, dict[str, datetime]]:
    """The record's memory of SLA misses and quarantines after ``events``: an SLA miss
    is remembered while its run is open, a quarantine while the record stays unreadable
    (every one the state shows has been told once this commit lands)."""
    sla = dict(record.sla)
    for event in events:
        if event.kind is EventKind.SLA_MISSED and event.run_id:
            sla[event.run_id] = now
    open_runs = {rid for rid, run in after.runs.items() if run.status not in RUN_TERMINAL}
    if scoped is not None:  # it sees one run and no quarantine: the rest stays as it is
        if scoped not in open_runs:
            sla.pop(scoped, None)
        return {"sla": sla, "quarantined": dict(record.quarantined)}
    return {"sla": {rid: at for rid, at in sla.items() if rid in open_runs},
            "quarantined": {path: record.quarantined.get(path, now)
                            for path in after.quarantined}}


def settle(record: NotifyRecord, claims: Sequence[Pending],
           deliveries: Sequence[Delivery]) -> NotifyRecord:
    """``record`` after the claimant delivered ``claims``: each channel served or given
    up leaves its entry (an entry owed nothing more goes), a deferred one stays for a
    later tick; issue numbers and hand-closed issues join their streaks."""
    outbox = _outbox_left(record, claims, deliveries)
    streaks = dict(record.streaks)
    for d in deliveries:
        streak = streaks.get(d.schedule or "")
        if streak is not None and d.streak == streak.since:
            streaks[d.schedule or ""] = _streak_told(streak, d)
    return record.model_copy(update={"streaks": streaks, "outbox": outbox})


def _outbox_left(record: NotifyRecord, claims: Sequence[Pending],
                 deliveries: Sequence[Delivery]) -> list[Pending]:
    """The outbox without the channels the claimant served or gave up."""
    done: dict[str, set[str]] = {}
    for d in deliveries:
        if d.status != "deferred":
            done.setdefault(d.event_id, set()).add(d.channel)
    mine = {p.event.id for p in claims}
    outbox = []
    for entry in record.outbox:
        served = done.get(entry.event.id, set()) if entry.event.id in mine else set()
        left = [c for c in entry.channels if c not in served]
        if left:
            outbox.append(entry if left == entry.channels
                          else entry.model_copy(update={"channels": left}))
    return outbox


def _streak_told(streak: Streak, d: Delivery) -> Streak:
    """``streak`` with the issue a delivery opened or found closed by hand."""
    if d.issue is not None and streak.issue != d.issue:
        streak = streak.model_copy(update={"issue": d.issue, "issue_url": d.issue_url})
    if d.closed_by_hand and not streak.closed_by_hand:
        streak = streak.model_copy(update={"closed_by_hand": True})
    return streak
