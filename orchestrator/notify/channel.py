"""The one interface every channel keeps, and what a delivery reports.

A :class:`Channel` is a place events go: the GitHub issue of a failing schedule, a
webhook. Its guarantees, which the tick relies on:

- **Idempotent per event id.** Every message carries its event's id. A channel that
  can look (an issue's comments) looks before it posts again on a retry; one that
  cannot sends the id as its ``Idempotency-Key`` header, so a receiver may drop a copy.
- **Never raises into the tick.** Every failure becomes a :class:`Delivery` with one
  line saying what and why; nothing a receiver answers can stop a schedule.
- **Bounded time.** It returns before its :class:`Deadline`; retries and waits spend
  that budget and nothing more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from .record import Pending, Streak

ISSUES = "github_issues"
"""The channel name of GitHub issues; webhooks are ``webhook:<format>:<VARIABLE>``."""

Status = Literal["delivered", "dropped", "deferred"]


class Deadline:
    """The seconds a delivery may still spend, by a monotonic clock (no wall time)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.budget = seconds
        self.end = clock() + seconds

    def left(self) -> float:
        return max(0.0, self.end - self.clock())

    @property
    def passed(self) -> bool:
        return self.left() <= 0.05


def no_markdown(limit: int) -> str | None:
    return None


@dataclass(frozen=True)
class Item:
    """One event for one channel, with what the channel may need to tell it well."""

    pending: Pending
    streak: Streak | None = None
    """The schedule's streak on the tip the tick's commit landed on."""
    opener_elsewhere: bool = False
    """The streak's first failure is still owed to the issue channel by another claim:
    the issue may not exist yet, so this item waits for a later tick."""
    markdown: Callable[[int], str | None] = field(default=no_markdown)
    """The run's Markdown brief within a number of bytes (``None``: none to give)."""
    letters: tuple[tuple[str, str], ...] = ()
    """The run's dead letters waiting for a person: (key, reason)."""

    @property
    def event_id(self) -> str:
        return self.pending.event.id


@dataclass(frozen=True)
class Delivery:
    """What one channel did with one event."""

    channel: str
    event_id: str
    status: Status
    line: str
    """One line for the tick's log: what was done, or why not."""
    schedule: str | None = None
    streak: str | None = None
    """The streak an issue number or a hand-closed issue belongs to."""
    issue: int | None = None
    issue_url: str | None = None
    closed_by_hand: bool = False


class Channel(Protocol):
    """A place events go; see the module docstring for what every one guarantees."""

    name: str

    def deliver(self, items: Sequence[Item], deadline: Deadline) -> list[Delivery]:
        """One :class:`Delivery` per item, in order, before ``deadline``."""
        ...


def dropped(channel: str, item: Item, why: str) -> Delivery:
    return Delivery(channel, item.event_id, "dropped", f"notify: {channel}: {item.event_id}: "
                    f"not sent: {why}")
