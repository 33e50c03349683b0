"""``state/notify.json``: what notifications remember on the state branch.

- **Streaks**: per failing schedule, its first failed run and the GitHub issue opened
  for it. The issue's number is kept here, so racing ticks never open two: the
  compare-and-swap lets one tick start a streak, and that tick alone opens its issue.
- **The outbox**: events derived by a landed commit and not yet delivered, each with
  the channels still owed it and who claimed it when. It is empty between ticks
  unless a tick died between its commit and its delivery.
- **What was told** once and must not be told again: SLA misses per run, quarantined
  records per path, a late cron per schedule. Entries go once their run is finished,
  the record readable, or the cron within what the schedule tolerates.
- Read as hostile input like every record: a file that cannot be read is named in one
  line and left alone, and notifications wait until it is fixed or deleted (guessing
  would open a second issue).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from ..config.fieldtypes import Frozen, Id, UTCDateTime
from ..state import codec, layout
from .events import Event

MAX_OUTBOX = 200
"""Undelivered events kept at most; older ones are dropped with a line."""


class Streak(Frozen):
    """A schedule failing since ``since``, and its issue."""

    since: str = Field(max_length=100)
    """The run that started the streak: the issue's key (its body carries it)."""
    failed: int = Field(1, ge=1)
    issue: int | None = Field(None, ge=1)
    issue_url: str | None = Field(None, max_length=1000)
    closed_by_hand: bool = False
    """Someone closed the issue while the schedule still failed: it is not reopened,
    nor commented on, for this streak."""


class Pending(Frozen):
    """An event a landed commit owes to ``channels``."""

    event: Event
    channels: list[str] = Field(min_length=1, max_length=30)
    claimed_at: UTCDateTime
    """When a tick claimed it (in the commit that derived it, or in a later one after
    :data:`~.outbox.CLAIM_GRACE`); only that tick delivers it."""
    attempt: int = Field(1, ge=1)
    streak: str | None = Field(None, max_length=100)
    """The schedule's streak when the event was derived (a recovery ends it)."""
    issue: int | None = Field(None, ge=1)
    """The streak's issue then, if known."""


class NotifyRecord(Frozen):
    streaks: dict[Id, Streak] = Field(default_factory=dict)
    outbox: list[Pending] = Field(default_factory=list, max_length=MAX_OUTBOX)
    sla: dict[str, UTCDateTime] = Field(default_factory=dict)
    """Run id -> when its SLA miss was told."""
    quarantined: dict[str, UTCDateTime] = Field(default_factory=dict)
    """Path -> when its quarantine was told."""
    cron_late: dict[Id, UTCDateTime] = Field(default_factory=dict)
    """Schedule id -> when its ``cron_late`` episode was told; it goes once the measured
    lateness is within what the schedule tolerates."""

    def failing(self) -> dict[str, int]:
        return {sid: streak.failed for sid, streak in self.streaks.items()}


EMPTY = NotifyRecord()


def read(files: Mapping[str, bytes]) -> tuple[NotifyRecord | None, str | None]:
    """The record on the branch (empty when there is none), or ``None`` and one line
    naming the file when it cannot be read."""
    if layout.NOTIFY not in files:
        return EMPTY, None
    try:
        return codec.parse_record(NotifyRecord, layout.NOTIFY, files[layout.NOTIFY]), None
    except codec.CorruptState as exc:
        return None, (f"quarantined {exc.message}; notifications wait until it is fixed "
                      "or deleted")
    except (KeyError, OSError) as exc:
        return None, f"quarantined {layout.NOTIFY}: cannot be read: {exc}"


def dump(record: NotifyRecord) -> bytes:
    return codec.to_json(record)
