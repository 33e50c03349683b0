"""When a schedule is due: one interface over ``cron`` and ``at``.

The planner, ``validate`` and the previews (``schedules next``, ``status``) ask a
:class:`Trigger` for slots and never look at which field a schedule uses. Build one
with :func:`for_spec`. Like the cron evaluator, a trigger never reads the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from .. import cron
from ..cron import Search, SlotInfo, SlotKind
from ..support.times import iso
from . import chains
from .models import ScheduleSpec


class Trigger(Protocol):
    """The instants at which a schedule is due, with their local times.

    Immutable and hashable: two equal triggers give the same slots (a preview shares
    one search among schedules with the same timing)."""

    def __hash__(self) -> int: ...

    @property
    def repeats(self) -> bool:
        """False for a one-shot: it fires once, however late (catch-up does not apply)."""
        ...

    def describe(self) -> str:
        """In words, with the time zone: ``"at 02:00 on Monday (Europe/Paris)"``."""
        ...

    def explain(self, after: datetime, until: datetime) -> list[SlotInfo]:
        """Every matched time in ``(after, until]``, also those that do not fire."""
        ...

    def slots(self, after: datetime, until: datetime) -> list[datetime]:
        """The firing instants in ``(after, until]``, ascending, aware UTC."""
        ...

    def next(self, start: datetime, n: int) -> Search:
        """The first ``n`` firing slots after ``start``, and whether the search gave up."""
        ...

    def lints(self, start: datetime) -> list[str]:
        """What is valid but probably not what the author meant, seen from ``start``."""
        ...


@dataclass(frozen=True)
class CronTrigger:
    """A five-field expression read in a time zone, with a daylight-saving policy."""

    expr: str
    timezone: str
    dst: cron.DstPolicy

    @property
    def repeats(self) -> bool:
        return True

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def describe(self) -> str:
        return f"{cron.cron_words(self.expr)} ({self.timezone})"

    def explain(self, after: datetime, until: datetime) -> list[SlotInfo]:
        return cron.explain(self.expr, self.zone, self.dst, after, until)

    def slots(self, after: datetime, until: datetime) -> list[datetime]:
        return cron.slots(self.expr, self.zone, self.dst, after, until)

    def next(self, start: datetime, n: int) -> Search:
        return cron.search(self.expr, self.zone, self.dst, start, n)

    def lints(self, start: datetime) -> list[str]:
        parsed = cron.parse_cron(self.expr)
        found = list(parsed.notes)
        if (parsed.both_days_restricted and len(parsed.days) < 31
                and len(parsed.weekdays) < 7):
            found.append(f"both day-of-month ({parsed.fields[2]}) and day-of-week "
                         f"({parsed.fields[4]}) are restricted: cron runs on days matching "
                         "EITHER field, not both")
        return found


@dataclass(frozen=True)
class AtTrigger:
    """A one-shot: one local wall time (or one instant, when written with an offset)."""

    at: datetime
    """As written: naive (read in ``timezone``) or aware."""
    timezone: str

    @property
    def repeats(self) -> bool:
        return False

    def _slot(self) -> SlotInfo:
        zone = ZoneInfo(self.timezone)
        if self.at.tzinfo is not None:
            at, kind = self.at.astimezone(UTC), SlotKind.NORMAL
            wall = at.astimezone(zone).replace(tzinfo=None)
        else:
            # A repeated local time means its first occurrence; one skipped by
            # spring-forward means the first instant after the gap (as cron shifts).
            wall = self.at
            at, kind = cron.local_to_utc(wall, zone)
        return SlotInfo(at, wall, kind, True, at.astimezone(zone))

    def describe(self) -> str:
        at = self.at if self.at.tzinfo is None else self.at.astimezone(ZoneInfo(self.timezone))
        return f"once at {at:%Y-%m-%d %H:%M} ({self.timezone})"

    def explain(self, after: datetime, until: datetime) -> list[SlotInfo]:
        slot = self._slot()
        return [slot] if _utc(after, "after") < slot.at <= _utc(until, "until") else []

    def slots(self, after: datetime, until: datetime) -> list[datetime]:
        return [s.at for s in self.explain(after, until)]

    def next(self, start: datetime, n: int) -> Search:
        slot = self._slot()
        return Search((slot,) if n > 0 and slot.at > _utc(start, "start") else ())

    def lints(self, start: datetime) -> list[str]:
        slot = self._slot()
        found = [] if slot.at > start else [
            f"'at' {iso(slot.at)} is in the past: a one-shot that never fired fires at the "
            "next tick"]
        # Said whether or not it is previewed: a one-shot has no other day to get right.
        note = cron.dst_note(slot, self.timezone)
        return [*found, note] if note else found


@dataclass(frozen=True)
class BoundedTrigger:
    """A cron trigger with a life span and excluded dates (``start_at``, ``end_at``,
    ``exclude``): no slot outside ``[start, end]`` or on an excluded local date, for
    the planner, the previews and ``cron-sync`` alike."""

    inner: CronTrigger
    start: datetime | None
    """Aware UTC; slots before it do not exist."""
    end: datetime | None
    """Aware UTC; slots after it do not exist."""
    exclude: frozenset[date]
    """Local dates in the inner trigger's zone (``exclude`` and the calendars' dates)."""
    calendars: tuple[str, ...] = ()
    """The shared calendars among them, by name (for :meth:`describe`)."""

    BATCH = 64
    """Slots asked for at a time while skipping excluded dates."""
    ROUNDS = 1000
    """How many batches :meth:`next` reads before it gives up (a horizon)."""

    @property
    def repeats(self) -> bool:
        return True

    def _keeps(self, at: datetime) -> bool:
        if self.start is not None and at < self.start:
            return False
        if self.end is not None and at > self.end:
            return False
        return not self.exclude or at.astimezone(self.inner.zone).date() not in self.exclude

    def describe(self) -> str:
        words = self.inner.describe()
        if self.start is not None:
            words += f", from {iso(self.start)}"
        if self.end is not None:
            words += f", until {iso(self.end)}"
        if self.exclude or self.calendars:
            words += f", except {len(self.exclude)} date{'s' if len(self.exclude) != 1 else ''}"
        if self.calendars:
            words += f" (calendar {', '.join(self.calendars)})"
        return words

    def explain(self, after: datetime, until: datetime) -> list[SlotInfo]:
        return [s for s in self.inner.explain(after, until) if self._keeps(s.at)]

    def slots(self, after: datetime, until: datetime) -> list[datetime]:
        lo, hi = self._from(after, "after"), _utc(until, "until")
        if self.end is not None:
            hi = min(hi, self.end)
        if lo >= hi:
            return []
        return [at for at in self.inner.slots(lo, hi) if self._keeps(at)]

    def _from(self, moment: datetime, name: str) -> datetime:
        """``moment`` in UTC, moved up to just before ``start_at`` (a search looks
        after its start, and the start itself may be a slot)."""
        lo = _utc(moment, name)
        if self.start is not None:
            lo = max(lo, self.start - timedelta(microseconds=1))
        return lo

    def next(self, start: datetime, n: int) -> Search:
        lo = self._from(start, "start")
        found: list[SlotInfo] = []
        for _ in range(self.ROUNDS):
            if len(found) >= n:
                break
            search = self.inner.next(lo, max(n - len(found), self.BATCH))
            if self._past_end(search.found, found, n):
                return Search(tuple(found))
            if search.horizon is not None or not search.found:
                return Search(tuple(found), search.horizon)
            lo = search.found[-1].at
        else:
            if len(found) < n:
                return Search(tuple(found), lo)
        return Search(tuple(found))

    def _past_end(self, slots: tuple[SlotInfo, ...], found: list[SlotInfo], n: int) -> bool:
        """Add to ``found`` the ``slots`` kept, up to ``n`` in all; whether one of them
        is past the end (then nothing follows)."""
        for slot in slots:
            if self.end is not None and slot.at > self.end:
                return True
            if self._keeps(slot.at) and len(found) < n:
                found.append(slot)
        return False

    def lints(self, start: datetime) -> list[str]:
        found = self.inner.lints(start)
        if self.end is not None and self.end <= start:
            found.append(f"end_at {iso(self.end)} is in the past: the schedule has ended")
        return found


def _utc(moment: datetime, name: str) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime, got {moment!r}")
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class AfterTrigger:
    """A schedule's clock (or none) with its ``after``, ``on_queue`` or ``on_event``: the
    clock's slots, and words that name the other causes. The runs they fire are the
    planner's to decide."""

    inner: Trigger | None
    words: str
    """``after ingest (completed)``, ``on an event``."""

    @property
    def repeats(self) -> bool:
        return self.inner is None or self.inner.repeats

    def describe(self) -> str:
        return self.words if self.inner is None else f"{self.inner.describe()}, {self.words}"

    def explain(self, after: datetime, until: datetime) -> list[SlotInfo]:
        return [] if self.inner is None else self.inner.explain(after, until)

    def slots(self, after: datetime, until: datetime) -> list[datetime]:
        return [] if self.inner is None else self.inner.slots(after, until)

    def next(self, start: datetime, n: int) -> Search:
        return Search(()) if self.inner is None else self.inner.next(start, n)

    def lints(self, start: datetime) -> list[str]:
        return [] if self.inner is None else self.inner.lints(start)


def for_spec(spec: ScheduleSpec) -> Trigger:
    """The trigger of a schedule: its ``cron`` or its ``at``, with its ``after``.
    :class:`ValueError` for a spec with ``exclude_calendars`` that no loader resolved."""
    clock = _clock(spec)
    words = [chains.describe(spec.upstreams)] if spec.upstreams else []
    if spec.on_queue is not None:
        words.append(spec.on_queue.describe())
    words += ["on an event"] if spec.on_event is not None else []
    if not words:
        assert clock is not None  # the model requires a clock without another cause
        return clock
    return AfterTrigger(clock, ", ".join(words))


def _clock(spec: ScheduleSpec) -> Trigger | None:
    """The ``cron`` or ``at`` trigger, or ``None`` for a schedule fired only by
    ``after``, ``on_queue`` or ``on_event``."""
    if spec.at is not None:
        return AtTrigger(spec.at, spec.timezone)
    if spec.cron is None:
        return None
    plain = CronTrigger(spec.cron, spec.timezone, spec.dst)
    if spec.start_at is None and spec.end_at is None and not spec.exclude \
            and not spec.exclude_calendars:
        return plain
    return BoundedTrigger(plain, spec.bound_utc("start_at"), spec.bound_utc("end_at"),
                          spec.excluded_dates(), tuple(spec.exclude_calendars))
