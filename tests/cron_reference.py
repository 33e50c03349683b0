"""The cron evaluator as it was before zone transitions were cached (a verbatim copy of
``orchestrator/cron/evaluate.py`` at that time): the reference of the differential test
in ``tests/unit/test_cron_speed.py``. Do not edit, except to follow renames.

Cron slots with daylight-saving semantics.

A slot is the UTC instant at which a schedule is due. Time is always a parameter:
:func:`slots` takes the interval, nothing here reads the clock. Every function takes
the expression, the zone it is read in and the DST policy, not a schedule: the
evaluator knows nothing of schedule files (:mod:`orchestrator.config.triggers` joins them).

Daylight saving follows Debian/Vixie cron (as does cronsim), unless ``dst`` says
otherwise:

- a **fixed-time** job (neither the minute nor the hour field starts with ``*``) whose
  local time falls in a spring-forward gap runs once, at the first valid instant after
  the gap (``dst.gap = shift``; ``skip`` drops it); one whose local time occurs twice
  on a fall-back day runs once, at the first occurrence (``dst.fold = first``; ``both``
  runs it at both);
- a job whose minute or hour field starts with ``*`` runs in real elapsed time: both
  passes of a repeated hour, nothing for wall times that do not exist.

How: matching is done on naive local wall-clock times, and the mapping to UTC is done
here, piecewise between the zone's offset changes. croniter is not used for
evaluation: its DST handling is wrong (7.0.0 fires ``30 1 * * *`` twice on a fall-back
day), and walking wall-clock time directly also lets a 60-minute window cost a few
matches rather than a per-minute scan.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from orchestrator.cron.dst import DstFold, DstGap, DstPolicy
from orchestrator.cron.fields import parse_cron

_TICK = timedelta(microseconds=1)

ZONE_SCAN_STEP = timedelta(hours=6)
"""Offsets are sampled this far apart to find a zone's changes. Two changes closer than
this that return to the same offset would be missed; no IANA zone has such a pair."""

FOLD_LOOKBACK = timedelta(days=1)
"""How far before an interval to look for a fall-back whose repeated hour reaches into
it. Larger than any backward jump in the IANA database (DST is 30 minutes to 2 hours)."""

NEXT_HORIZON = timedelta(days=366 * 10)
""":func:`next_slots` gives up this long after its start (covers 29 February, once in 4
or 8 years); :class:`Search` says when it did."""


# --------------------------------------------------------------------------- zones


@dataclass(frozen=True)
class ZoneChange:
    """An instant at which a zone's UTC offset changes."""

    at: datetime
    """UTC instant of the change: the first instant with the new offset."""
    before: timedelta
    after: timedelta

    @property
    def is_gap(self) -> bool:
        """Clocks jump forward: the wall times in between do not exist."""
        return self.after > self.before


def _offset(zone: ZoneInfo, moment: datetime) -> timedelta:
    offset = moment.astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def zone_changes(zone: ZoneInfo, after: datetime, until: datetime) -> list[ZoneChange]:
    """The offset changes of ``zone`` in ``(after, until]``, ascending."""
    changes: list[ZoneChange] = []
    lo, lo_off = after, _offset(zone, after)
    while lo < until:
        hi = min(lo + ZONE_SCAN_STEP, until)
        hi_off = _offset(zone, hi)
        if hi_off != lo_off:
            # Bisect on whole seconds: zone changes happen on whole seconds.
            a, b = int(lo.timestamp()), int(-(-hi.timestamp() // 1))
            while b - a > 1:
                mid = (a + b) // 2
                if _offset(zone, datetime.fromtimestamp(mid, UTC)) == lo_off:
                    a = mid
                else:
                    b = mid
            at = datetime.fromtimestamp(b, UTC)
            changes.append(ZoneChange(at=at, before=lo_off, after=_offset(zone, at)))
        lo, lo_off = hi, hi_off
    return changes


def local_to_utc(wall: datetime, zone: ZoneInfo) -> tuple[datetime, SlotKind]:
    """Map a naive wall time to one UTC instant, the way a one-shot ``at`` is read.

    A time that occurs twice maps to its first occurrence; a time that does not
    exist (spring-forward gap) maps to the first valid instant after the gap.
    """
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if first <= second:  # equal: an ordinary time; less: the first of two
        return first, SlotKind.NORMAL
    # In a gap zoneinfo reads fold=1 with the new offset (earlier) and fold=0 with
    # the old one (later); the change lies between the two readings.
    change = zone_changes(zone, second - _TICK, first)
    return (change[0].at if change else first), SlotKind.SHIFTED


# --------------------------------------------------------------------------- slots


class SlotKind(StrEnum):
    """How a matched wall-clock time relates to daylight saving."""

    NORMAL = "normal"
    """An ordinary slot (or the first occurrence of a repeated time)."""
    SHIFTED = "shifted"
    """Its wall time falls in a spring-forward gap; moved to the first instant after it."""
    SKIPPED = "skipped"
    """Its wall time falls in a spring-forward gap and it does not run (``dst.gap =
    skip``, or a job that runs in elapsed time)."""
    REPEATED = "repeated"
    """The second occurrence of a wall time on a fall-back day. Runs for elapsed-time
    jobs and ``dst.fold = both``; not for fixed-time jobs with ``dst.fold = first``."""


@dataclass(frozen=True)
class SlotInfo:
    """One matched wall-clock time, where it lands in UTC, and whether it fires."""

    at: datetime
    """Aware UTC instant of the slot (for a skipped one: the instant of the gap)."""
    wall: datetime
    """The naive local wall-clock time the expression matched."""
    kind: SlotKind
    fires: bool
    """False for skipped and not-repeated times, and for a shifted time that coincides
    with another slot (it runs once)."""
    local: datetime
    """``at`` in the schedule's zone."""


def _utc(moment: datetime, name: str) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime, got {moment!r}")
    return moment.astimezone(UTC)


def _naive(moment: datetime) -> datetime:
    return moment.replace(tzinfo=None)


def explain(expr: str, zone: ZoneInfo, dst: DstPolicy, after: datetime, until: datetime
            ) -> list[SlotInfo]:
    """Every wall time ``expr`` matches in ``zone`` for instants in ``(after, until]``.

    Includes times that do not fire (skipped by a gap, not repeated in a fold) so
    that a preview can say why. :func:`slots` is the firing subset.
    """
    return [SlotInfo(at, wall, kind, fires, at.astimezone(zone))
            for at, _, wall, kind, fires in _resolve(expr, zone, dst, after, until)]


_Found = tuple[datetime, bool, datetime, SlotKind, bool]
"""(UTC instant, not-normal, wall time, kind, fires): sorts by instant, normal first."""


def _resolve(text: str, zone: ZoneInfo, dst: DstPolicy, after: datetime, until: datetime
             ) -> list[_Found]:
    after, until = _utc(after, "after"), _utc(until, "until")
    if until <= after:
        return []
    expr = parse_cron(text)
    changes = zone_changes(zone, after - FOLD_LOOKBACK, until)
    inside = [c for c in changes if c.at > after]
    folds = [(c.at, c.at + (c.before - c.after)) for c in changes if not c.is_gap]
    repeat_fires = not expr.fixed or dst.fold is DstFold.BOTH
    shift = expr.fixed and dst.gap is DstGap.SHIFT
    normal, repeated = SlotKind.NORMAL, SlotKind.REPEATED

    found: list[_Found] = []
    bounds = [after, *(c.at for c in inside), until + _TICK]
    offsets = [_offset(zone, after), *(c.after for c in inside)]
    for i, offset in enumerate(offsets):
        lo, hi = bounds[i], bounds[i + 1]
        # Between two changes the offset is constant, so wall time maps 1:1 to UTC.
        for base, minutes in expr.hour_matches(_naive(lo + offset), _naive(hi + offset)):
            at_base = base.replace(tzinfo=UTC) - offset
            for minute in minutes:
                at = at_base + minute
                if at <= after:
                    continue
                if folds and any(start <= at < end for start, end in folds):
                    found.append((at, True, base + minute, repeated, repeat_fires))
                else:
                    found.append((at, False, base + minute, normal, True))
    gaps: list[_Found] = []
    for change in inside:
        if not change.is_gap:
            continue
        missing = expr.matches(_naive(change.at + change.before), _naive(change.at + change.after))
        kind = SlotKind.SHIFTED if shift else SlotKind.SKIPPED
        gaps += [(change.at, True, wall, kind, shift) for wall in missing]
    if not gaps:
        return found  # ascending already: segments are in order, and so is each one

    # A time shifted out of a gap runs once, also when it meets another slot there
    # (Vixie: "0 2,3 * * *" runs once at 03:00 on a spring-forward day).
    found += gaps
    found.sort()
    seen: set[datetime] = set()
    result: list[_Found] = []
    for item in found:
        at, rank, wall, kind, fires = item
        if fires and at in seen:
            item = (at, rank, wall, kind, False)
        elif fires:
            seen.add(at)
        result.append(item)
    return result


def slots(expr: str, zone: ZoneInfo, dst: DstPolicy, after: datetime, until: datetime
          ) -> list[datetime]:
    """The aware UTC instants at which ``expr`` is due in ``(after, until]``, ascending.

    Cost grows with the number of matches and the days spanned, not with minutes:
    callers still bound the interval (the tick uses the catch-up window).
    """
    return [at for at, _, _, _, fires in _resolve(expr, zone, dst, after, until) if fires]


@dataclass(frozen=True)
class Search:
    """The outcome of looking for the next slots: what was found, and where it stopped."""

    found: tuple[SlotInfo, ...]
    """The firing slots, ascending."""
    horizon: datetime | None = None
    """Set when the search gave up at this instant (:data:`NEXT_HORIZON` after its
    start) before finding as many slots as asked for."""


def search(expr: str, zone: ZoneInfo, dst: DstPolicy, start: datetime, n: int) -> Search:
    """The first ``n`` firing slots strictly after ``start``, within :data:`NEXT_HORIZON`."""
    found: list[SlotInfo] = []
    lo = _utc(start, "start")
    end = lo + NEXT_HORIZON
    span = timedelta(hours=1)
    while len(found) < n and lo < end:
        hi = min(lo + span, end)
        found += [s for s in explain(expr, zone, dst, lo, hi) if s.fires]
        lo, span = hi, min(span * 2, timedelta(days=64))
    return Search(tuple(found[:n]), end if len(found) < n else None)


def next_slots(expr: str, zone: ZoneInfo, dst: DstPolicy, start: datetime, n: int
               ) -> list[datetime]:
    """The first ``n`` slots strictly after ``start`` (fewer if none within the horizon)."""
    return [s.at for s in search(expr, zone, dst, start, n).found]


def dst_note(slot: SlotInfo, zone_name: str) -> str | None:
    """One sentence on how daylight saving changes this slot, or None for a plain one."""
    wall = f"{slot.wall:%Y-%m-%d %H:%M}"
    local = f"{slot.local:%H:%M %Z}"
    if slot.kind is SlotKind.SHIFTED:
        if slot.fires:
            return (f"{wall} does not exist in {zone_name} (clocks go forward): "
                    f"runs at {local} ({slot.at:%H:%M} UTC) instead")
        return (f"{wall} does not exist in {zone_name} (clocks go forward): runs once "
                f"with the slot at {local}")
    if slot.kind is SlotKind.SKIPPED:
        return f"{wall} does not exist in {zone_name} (clocks go forward): skipped"
    if slot.kind is SlotKind.REPEATED:
        if slot.fires:
            return (f"{wall} occurs twice in {zone_name} (clocks go back): runs again at "
                    f"{local} ({slot.at:%H:%M} UTC)")
        return (f"{wall} occurs twice in {zone_name} (clocks go back): runs only at the "
                "first occurrence")
    return None
