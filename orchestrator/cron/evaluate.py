"""Cron slots with daylight-saving semantics.

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

import bisect
import functools
import operator
from dataclasses import dataclass, field
from datetime import MAXYEAR, UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from .days import DAY as _DAY_S
from .days import matching_seconds, plain_spacing, times_of_day
from .dst import DstFold, DstGap, DstPolicy
from .fields import CronExpr, parse_cron

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
    """The offset changes of ``zone`` in ``(after, until]``, ascending.

    Read from a table of each calendar year's changes, computed once per zone and year
    and kept (a preview of 1,000 schedules asks about the same few zones and years
    thousands of times).
    """
    after, until = _utc(after, "after"), _utc(until, "until")
    if until <= after:
        return []
    found: list[ZoneChange] = []
    for year in range(after.year, until.year + 1):
        found += [c for c in _year_changes(zone, year) if after < c.at <= until]
    return found


@functools.lru_cache(maxsize=1024)
def _year_changes(zone: ZoneInfo, year: int) -> tuple[ZoneChange, ...]:
    """The changes of ``zone`` in ``(1 January year, 1 January year + 1]`` (UTC)."""
    if year >= MAXYEAR:
        return ()
    start = datetime(year, 1, 1, tzinfo=UTC)
    return tuple(_scan(zone, start, datetime(year + 1, 1, 1, tzinfo=UTC)))


def _scan(zone: ZoneInfo, after: datetime, until: datetime) -> list[ZoneChange]:
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
    found = _matched(expr, zone, dst, after, until, changes)
    gaps = _in_gaps(expr, dst, after, changes)
    if not gaps:
        return found  # ascending already: segments are in order, and so is each one
    return _once(sorted(found + gaps))


def _matched(expr: CronExpr, zone: ZoneInfo, dst: DstPolicy, after: datetime,
             until: datetime, changes: list[ZoneChange]) -> list[_Found]:
    """The matches of ``expr`` at instants in ``(after, until]``, ascending; those in the
    repeated hour of a fall-back are marked so."""
    folds = [(c.at, c.at + (c.before - c.after)) for c in changes if not c.is_gap]
    repeat_fires = not expr.fixed or dst.fold is DstFold.BOTH
    found: list[_Found] = []
    for lo, hi, offset in _segments(zone, after, until, changes):
        # Between two changes the offset is constant, so wall time maps 1:1 to UTC.
        for base, minutes in expr.hour_matches(_naive(lo + offset), _naive(hi + offset)):
            at_base = base.replace(tzinfo=UTC) - offset
            for minute in minutes:
                at = at_base + minute
                if at > after:
                    found.append(_found_at(at, base + minute, folds, repeat_fires))
    return found


def _segments(zone: ZoneInfo, after: datetime, until: datetime, changes: list[ZoneChange]
              ) -> list[tuple[datetime, datetime, timedelta]]:
    """``(after, until]`` cut at the zone's changes after ``after``: each piece, from
    its start to its end (exclusive), with its constant UTC offset."""
    inside = [c for c in changes if c.at > after]
    bounds = [after, *(c.at for c in inside), until + _TICK]
    offsets = [_offset(zone, after), *(c.after for c in inside)]
    return [(bounds[i], bounds[i + 1], offset) for i, offset in enumerate(offsets)]


def _found_at(at: datetime, wall: datetime, folds: list[tuple[datetime, datetime]],
              repeat_fires: bool) -> _Found:
    """The match at ``at`` (wall time ``wall``), marked when it falls in one of the
    repeated hours ``folds``."""
    if folds and any(start <= at < end for start, end in folds):
        return (at, True, wall, SlotKind.REPEATED, repeat_fires)
    return (at, False, wall, SlotKind.NORMAL, True)


def _in_gaps(expr: CronExpr, dst: DstPolicy, after: datetime, changes: list[ZoneChange]
             ) -> list[_Found]:
    """The wall times ``expr`` matches in the spring-forward gaps after ``after``."""
    shift = expr.fixed and dst.gap is DstGap.SHIFT
    kind = SlotKind.SHIFTED if shift else SlotKind.SKIPPED
    gaps: list[_Found] = []
    for change in changes:
        if not change.is_gap or change.at <= after:
            continue
        missing = expr.matches(_naive(change.at + change.before), _naive(change.at + change.after))
        gaps += [(change.at, True, wall, kind, shift) for wall in missing]
    return gaps


def _once(found: list[_Found]) -> list[_Found]:
    """``found`` (sorted) with every instant after its first made not to fire."""
    # A time shifted out of a gap runs once, also when it meets another slot there
    # (Vixie: "0 2,3 * * *" runs once at 03:00 on a spring-forward day).
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


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_WALL_EPOCH = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)
_NEAR = timedelta(hours=1)
_YEAR = timedelta(days=300)

def _seconds(moment: datetime, epoch: datetime = _EPOCH) -> int:
    """Whole seconds since ``epoch``, rounded down: a slot (always whole seconds) is
    after ``moment`` exactly when its seconds are more than these."""
    return (moment - epoch) // _SECOND


def _next_change(zone: ZoneInfo, moment: datetime) -> ZoneChange | None:
    """The first change of ``zone`` after ``moment``, if any before the next year ends
    (a zone without daylight saving is not scanned to the horizon)."""
    for year in range(moment.year, min(moment.year + 2, MAXYEAR)):
        for change in _year_changes(zone, year):
            if change.at > moment:
                return change
    return None


@dataclass
class _Slots:
    """Firing slots in whole seconds since 1970: the UTC instants, and, to read their
    wall times and kinds back, the offset of each plain stretch and the few slots
    resolved near a change of offset."""

    seconds: list[int] = field(default_factory=list)
    stretches: list[tuple[int, int]] = field(default_factory=list)
    """(index of the stretch's first slot, its offset in seconds), ascending."""
    resolved: dict[int, tuple[int, SlotKind]] = field(default_factory=dict)
    """index -> (wall seconds, kind) of the slots resolved near a change."""

    def wall_and_kind(self, index: int) -> tuple[int, SlotKind]:
        if index in self.resolved:
            return self.resolved[index]
        at = bisect.bisect_right(self.stretches, (index, _MAX_OFFSET)) - 1
        return self.seconds[index] + self.stretches[at][1], SlotKind.NORMAL


_MAX_OFFSET = 10 * 86_400


def _firing(text: str, zone: ZoneInfo, dst: DstPolicy, start: datetime, n: int
            ) -> tuple[_Slots, datetime | None]:
    """The first ``n`` firing slots after ``start``, and where the search gave up
    (``None`` when it found ``n``).

    Between the zone's changes the offset is constant and nothing is repeated or
    skipped: there the slots are the expression's wall times (read off tables of the
    days it matches, so a year without 29 February costs nothing) minus the offset, in
    whole seconds. Only a window around each change, from an hour before it to a day
    after (longer than any repeated hour), goes through :func:`_resolve`, and only when
    the expression matches a wall time near it. Windows partition ``(start, horizon]``
    and :func:`_resolve` of a window is the restriction of the whole, so the slots do
    not depend on where the windows fall."""
    expr = parse_cron(text)
    found = _Slots()
    seconds = found.seconds
    lo = _utc(start, "start")
    end = lo + NEXT_HORIZON
    while len(seconds) < n and lo < end:
        change = _next_change(zone, lo - FOLD_LOOKBACK)
        near = lo + _YEAR if change is None else change.at - _NEAR
        if lo < near:
            hi = min(near, end)
            _add_stretch(found, expr, zone, lo, hi, n)
        else:
            assert change is not None
            hi = min(change.at + FOLD_LOOKBACK, end)
            _add_window(found, text, zone, dst, lo, hi, n)
        lo = hi
    return found, (end if len(seconds) < n else None)


def _add_stretch(found: _Slots, expr: CronExpr, zone: ZoneInfo, lo: datetime,
                 hi: datetime, n: int) -> None:
    """Add to ``found`` the slots in ``(lo, hi]``, where the offset is constant: the
    expression's wall times less the offset, up to ``n`` in all."""
    seconds = found.seconds
    offset = _offset(zone, lo) // _SECOND
    walls = matching_seconds(expr, _seconds(lo) + offset, _seconds(hi) + offset,
                             n - len(seconds))
    if walls:
        found.stretches.append((len(seconds), offset))
        seconds += [wall - offset for wall in walls[:n - len(seconds)]]


def _add_window(found: _Slots, text: str, zone: ZoneInfo, dst: DstPolicy, lo: datetime,
                hi: datetime, n: int) -> None:
    """Add to ``found`` the slots in the window ``(lo, hi]`` around a change, resolved
    one by one, up to ``n`` in all."""
    seconds = found.seconds
    # Offsets are less than a day: no wall time outside this range maps into the
    # window, so a rare expression skips the change without resolving it.
    if not matching_seconds(parse_cron(text), _seconds(lo) - _DAY_S, _seconds(hi) + _DAY_S, 1):
        return
    for at, _, wall, kind, fires in _resolve(text, zone, dst, lo, hi):
        if fires and len(seconds) < n:
            found.resolved[len(seconds)] = (_seconds(wall, _WALL_EPOCH), kind)
            seconds.append(_seconds(at))


def _infos(found: _Slots, zone: ZoneInfo, n: int) -> tuple[SlotInfo, ...]:
    infos = []
    for i, second in enumerate(found.seconds[:n]):
        at = _EPOCH + _SECOND * second
        wall, kind = found.wall_and_kind(i)
        infos.append(SlotInfo(at, _WALL_EPOCH + _SECOND * wall, kind, True,
                              at.astimezone(zone)))
    return tuple(infos)


def search(expr: str, zone: ZoneInfo, dst: DstPolicy, start: datetime, n: int) -> Search:
    """The first ``n`` firing slots strictly after ``start``, within :data:`NEXT_HORIZON`."""
    found, horizon = _firing(expr, zone, dst, start, n)
    return Search(_infos(found, zone, n), horizon)


@dataclass(frozen=True)
class Spacing:
    """How the first ``n`` firing slots after an instant are spaced: what a question
    about many slots (are any two close, is one at minute 0) reads without building a
    :class:`SlotInfo` for each."""

    count: int
    """How many there are: ``n``, unless the search gave up (see :attr:`horizon`)."""
    shortest: timedelta | None
    """The shortest time between two consecutive ones (None for fewer than two)."""
    minute_zero: bool
    """One of them falls on minute 0 of a UTC hour, not moved there out of a gap."""
    horizon: datetime | None = None
    """As :attr:`Search.horizon`."""


def spacing(expr: str, zone: ZoneInfo, dst: DstPolicy, start: datetime, n: int) -> Spacing:
    """The spacing of :func:`search`'s slots (the same slots).

    When the zone keeps one offset until well after the ``n``-th slot and the
    expression's times of day come around at least twice among them, it is read off the
    expression's structure and its table of days instead of from the slots."""
    lo = _utc(start, "start")
    change = _next_change(zone, lo - FOLD_LOOKBACK)
    near = lo + _YEAR if change is None else change.at - _NEAR
    if lo < near and n > 1:
        parsed = parse_cron(expr)
        offset = _offset(zone, lo) // _SECOND
        shortest = plain_spacing(parsed, _seconds(lo) + offset, _seconds(near) + offset, n)
        if shortest is not None:
            zero = any((t - offset) % 3600 < 60 for t in times_of_day(parsed))
            return Spacing(n, _SECOND * shortest, zero)
    return _walked_spacing(expr, zone, dst, start, n)


def _walked_spacing(expr: str, zone: ZoneInfo, dst: DstPolicy, start: datetime,
                    n: int) -> Spacing:
    """The spacing of the firing slots themselves, found one by one."""
    found, horizon = _firing(expr, zone, dst, start, n)
    seconds = found.seconds
    shifted = {seconds[i] for i, (_, kind) in found.resolved.items()
               if kind is SlotKind.SHIFTED}
    gap = min(map(operator.sub, seconds[1:], seconds[:-1]), default=None)
    zero = any(s % 3600 < 60 and s not in shifted for s in seconds)
    return Spacing(len(seconds), None if gap is None else _SECOND * gap, zero, horizon)


def next_slots(expr: str, zone: ZoneInfo, dst: DstPolicy, start: datetime, n: int
               ) -> list[datetime]:
    """The first ``n`` slots strictly after ``start`` (fewer if none within the horizon)."""
    return [_EPOCH + _SECOND * s for s in _firing(expr, zone, dst, start, n)[0].seconds]


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
