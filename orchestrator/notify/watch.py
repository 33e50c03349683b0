"""The watchers' alerts: ``tick_stale`` and ``rewind_refused`` through the same channels.

A tick that cannot run, or cannot write the state branch, cannot say so in its own
commits; ``orchestrator status --notify`` (``watchdog.yml``) and ``serve``'s heartbeat
check can. So these events skip the outbox:

- ``tick_stale`` goes to the repository's webhooks and to an issue titled
  "orchestrator: no tick since ..." (label ``orchestrator-watchdog``), unless one is
  open already; once ticks resume, the watcher closes it with a comment.
- ``rewind_refused`` goes to the webhooks.
- ``keepalive_due`` (the tick's weekly check of the scheduled workflows) goes to the
  webhooks and to an issue labelled ``orchestrator-keepalive``, closed by the first
  check that finds a commit again; its id names the last commit's time and the week.
- The event id names the silence (the last tick's time) or the rewound tip, so every
  alert about one outage carries one id; ``serve`` sends each id once per process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ..config.channels import EventKind, NotifySpec
from ..support.credentials import redactor
from ..support.times import iso
from . import deliver as delivery
from .channel import ISSUES, Deadline, Item
from .events import Event, Links, digest, stamp
from .record import Pending


def stale_event(last_tick: datetime | None, now: datetime, limit_minutes: float,
                links: Links) -> Event:
    since = iso(last_tick) if last_tick is not None else None
    summary = (f"no tick since {since}, more than {limit_minutes:g} minutes ago" if since
               else "no tick recorded on the state branch")
    return Event(id=f"tick_stale:{stamp(last_tick) if last_tick else 'never'}",
                 kind=EventKind.TICK_STALE, at=now, link=links.run,
                 summary=f"{summary}: the scheduler is quiet, nothing fires",
                 details={"last_tick": since or "", "limit_minutes": f"{limit_minutes:g}"}
                 if since else {"limit_minutes": f"{limit_minutes:g}"})


def rewind_event(message: str, now: datetime, links: Links) -> Event:
    return Event(id=f"rewind_refused:{digest(message)}", kind=EventKind.REWIND_REFUSED,
                 at=now, link=links.run, summary=message[:1000],
                 details={"accept": "orchestrator status --accept-rewind"})


def keepalive_event(activity: datetime, disabled_at: datetime, now: datetime,
                    links: Links) -> Event:
    """GitHub's 60 days are near; one id per silence and weekly check."""
    return Event(id=f"keepalive_due:{stamp(activity)}:{stamp(now)}",
                 kind=EventKind.KEEPALIVE_DUE, at=now, link=links.run,
                 summary=f"no commit on the default branch since {iso(activity)}: in a "
                 f"public repository GitHub disables the scheduled workflows at "
                 f"{iso(disabled_at)}; push a commit to keep them running",
                 details={"last_activity": iso(activity), "disabled_at": iso(disabled_at)})


WATCHED_BY_ISSUE = frozenset({EventKind.TICK_STALE, EventKind.KEEPALIVE_DUE})


def channels_for(kind: EventKind, spec: NotifySpec) -> list[str]:
    names = [ISSUES] if spec.github_issues and kind in WATCHED_BY_ISSUE else []
    return names + [h.channel for h in spec.webhooks if h.wants(kind)]


@dataclass
class Watcher:
    """Sends the watchers' events; remembers what it sent for as long as it lives."""

    spec: NotifySpec
    environ: Mapping[str, str]
    sent: set[str] = field(default_factory=set)
    stale_told: bool = False

    def send(self, event: Event, now: datetime, *, once: bool = False) -> list[str]:
        """Deliver ``event`` to its channels; lines for the log. ``once``: not again
        for an id this watcher sent already."""
        names = channels_for(event.kind, self.spec)
        if not names or (once and event.id in self.sent):
            return []
        self.sent.add(event.id)
        if event.kind is EventKind.TICK_STALE:
            self.stale_told = True
        pending = Pending(event=event, channels=names, claimed_at=now)
        redact = redactor(self.environ)
        channels = {n: delivery.build(n, self.environ, redact, now, self.spec.budget_seconds)
                    for n in names}
        done = delivery.deliver({n: [Item(pending)] for n in names}, channels,
                                Deadline(self.spec.budget_seconds))
        return [d.line for d in done]

    def resumed(self, last_tick: datetime, now: datetime) -> list[str]:
        """Close the watchdog issue once ticks run again."""
        self.stale_told = False
        return self._close(f"Ticks resumed: the last tick was at {iso(last_tick)}.", now)

    def active(self, activity: datetime, now: datetime) -> list[str]:
        """Close the keep-alive issue once the default branch has a recent commit."""
        from .issues import KEEPALIVE_LABEL

        return self._close(f"A commit at {iso(activity)}: GitHub's 60 days start again.",
                           now, KEEPALIVE_LABEL)

    def _close(self, line: str, now: datetime, label: str | None = None) -> list[str]:
        if not self.spec.github_issues:
            return []
        from .issues import WATCHDOG_LABEL, IssueChannel

        redact = redactor(self.environ)
        built = delivery.build(ISSUES, self.environ, redact, now, self.spec.budget_seconds)
        if not isinstance(built, IssueChannel):
            return []
        return built.close_watchdog(line, Deadline(self.spec.budget_seconds),
                                    label or WATCHDOG_LABEL)
