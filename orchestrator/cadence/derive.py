"""The tick's cron, derived from the schedules (``orchestrator cron-sync``), and the
check that ``tick.yml`` still covers every slot (``validate``).

Every GitHub Actions job costs at least one billed minute, so a tick every quarter
hour spends about 2,900 minutes a month doing nothing. A derived cadence ticks only
shortly before each slot (``lead_minutes``, several times: GitHub starts scheduled
runs late and drops some; the first tick to arrive lingers until the slot) plus a
sparse safety tick (retries, deadlines, runs whose fan-in job never came), placed
only in the gaps the slots' ticks leave, so no day pays for one it does not need.

Under an external clock (``"mode": "external"``) the clock starts a tick at each slot
(:mod:`.clock`): ``tick.yml`` keeps the safety tick alone, placed a few minutes after
each slot that would have lingered (there it also catches a call the clock missed).
A clock that confirms its calls (``clock_confirms``: ``serve --clock-only`` calls again
until the state branch shows the slot fired, and warns of stale ticks) leaves
``tick.yml`` a weekly backstop tick and ``watchdog.yml`` a weekly check, half a week
apart so that the backstop's own tick cannot hide a clock that stopped.

GitHub evaluates ``schedule:`` in UTC, and a schedule's slots move in UTC with
daylight saving: the ticks are computed from a year of real slots (so both sides
of every change are in it) and written as UTC cron lines, narrowed to the months,
weekdays or days of the month in which each tick time is needed. Tick minutes sit
on a 5-minute grid at minutes 4, 9, ..., 59: never minute 0, when GitHub is busiest,
and never two ticks closer than GitHub's 5-minute minimum.

Pure: the workflow files are read and written by :mod:`.tickfile`.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..config.models import Schedule, ScheduleSpec, TrackSpec
from ..config.repository import Cadence, RepoConfig
from .wake import cron_slots, lingering_slots

GRID = 5
GRID_OFFSET = 4
HORIZON = timedelta(days=366)
"""A year and a day: every daylight-saving change of every zone, both directions."""
MARGIN = timedelta(days=35)
"""Ticks are derived this much beyond the year on both sides, so the safety ticks at
its ends fall where the days before and after put them (the lines stay the same
whatever the hour cron-sync runs at)."""
SLACK = timedelta(hours=1)
"""A gap between ticks may exceed ``safety_every_hours`` by this much (a daily tick
moves by an hour with daylight saving) before a safety tick fills it."""
HEARTBEAT_EVERY = 60
"""Minutes: an idle tick commits a heartbeat line once this long has passed (tick's default)."""
WATCHDOG_MINUTE = 41
BACKSTOP_LINE = "17 0 * * 1"
"""Under a clock that confirms its calls: tick.yml's one tick, Monday 00:17 UTC."""
BACKSTOP_WATCHDOG = f"{WATCHDOG_MINUTE} 12 * * 4"
"""And watchdog.yml's, Thursday 12:41 UTC: 84 hours after the backstop, longer than the
staleness limit of any clock calling at least daily, so a clock that stopped on Monday
is reported by Thursday even though the backstop ticked."""


@dataclass(frozen=True)
class Derived:
    """What cron-sync writes."""

    tick_cron: list[str]
    watchdog_cron: str
    max_staleness_minutes: int
    window_minutes: int
    """A slot is covered when a tick is scheduled at most this long before it."""


ZONED = "TZ="
"""How a cron line read with its ``timezone:`` is kept: ``TZ=<zone> <cron>``."""


def utc_spec(line: str) -> ScheduleSpec:
    """A cron line of a workflow as GitHub reads it: in UTC, or in the IANA zone its
    entry names (``timezone:``, since 2026-03; kept as ``TZ=<zone> <cron>``). GitHub
    documents that a time skipped by spring-forward runs right after the jump, as
    ``dst.gap: shift`` does; for the repeated fall-back hour it documents nothing,
    and it is read as once, at the first occurrence."""
    zone, cron = "UTC", line
    if line.startswith(ZONED):
        zone, _, cron = line[len(ZONED):].partition(" ")
    return ScheduleSpec(cron=cron, timezone=zone,
                        tracks=[TrackSpec(name="tick", run="orchestrator tick")])


def window(cadence: Cadence) -> timedelta:
    return timedelta(minutes=max(cadence.lead_minutes) + GRID)


def _on_grid(moment: datetime) -> datetime:
    """The grid minute at or before ``moment``."""
    moment = moment.replace(second=0, microsecond=0)
    back = (moment.minute - GRID_OFFSET) % GRID
    return moment - timedelta(minutes=back)


def cron_schedules(schedules: Iterable[Schedule]) -> list[Schedule]:
    """The schedules a tick must be there for: enabled ones (a one-shot counts too)."""
    return [s for s in schedules if s.spec.enabled]


def schedule_slots(schedule: Schedule, start: datetime, until: datetime) -> list[datetime]:
    at = schedule.spec.at_utc()
    if at is not None:
        return [at] if start < at <= until else []
    return cron_slots(schedule.spec, start, until)


def lead_ticks(slot: datetime, cadence: Cadence) -> list[datetime]:
    """The ticks before a slot worth lingering for (the first to arrive waits for it)."""
    return [_on_grid(slot - timedelta(minutes=lead)) for lead in cadence.lead_minutes]


def gathered_ticks(slots: Iterable[tuple[datetime, str]],
                   within: timedelta) -> list[datetime]:
    """The fewest grid ticks with one at most ``within`` after each slot (none before it),
    a tick serving the slots of several schedules but never two of one schedule (under
    ``catchup: latest`` the newer would make the older a miss). A tick fires the slots
    it follows, minutes late, for one billed minute, where lead ticks and a lingering
    runner would cost about 13. Greedy, so the count is the least: the first slot not
    yet served gets the latest tick its span allows, serving every slot up to it (or up
    to its schedule's next one); the tick then moves back to just after the last of
    them. ``slots``: (slot, schedule id).

    In whole seconds since the epoch (a slot with a fraction of a second is taken at
    the next second, so no tick comes before it): a year of an every-minute schedule is
    half a million slots, which datetimes made take seconds."""
    slots = list(slots)
    # schedule ids as numbers in the order of their names: ties sort as before
    ids = {sid: n for n, sid in enumerate(sorted({sid for _, sid in slots}))}
    # one int per slot, (second, schedule) in its order: sorting ints is what is fast
    k = max(len(ids), 1)
    keys = sorted({math.ceil(slot.timestamp()) * k + ids[sid] for slot, sid in slots})
    ticks = _greedy_ticks([key // k for key in keys], [key % k for key in keys],
                          int(within.total_seconds()) - 60)
    return [datetime.fromtimestamp(tick, UTC) for tick in ticks]


def _greedy_ticks(at: list[int], of: list[int], span: int) -> list[int]:
    """:func:`gathered_ticks` in seconds: ``at`` the slots' seconds, ascending, ``of``
    their schedules' numbers, ``span`` the seconds a tick may follow a slot by."""
    grid, offset = GRID * 60, GRID_OFFSET * 60
    ticks: list[int] = []
    i, n = 0, len(at)
    while i < n:
        # the grid minute at or before the slot's latest moment, whole minutes first
        latest = at[i] + span
        latest -= latest % 60
        latest -= (latest - offset) % grid
        served = {of[i]}
        j = i + 1
        while j < n and at[j] <= latest and of[j] not in served:
            served.add(of[j])
            j += 1
        last = at[j - 1]
        # the grid minute at or after the last slot served
        tick = last - last % 60
        tick -= (tick - offset) % grid
        if tick != last:
            tick += grid
        ticks.append(tick)
        # slots inside the tick's own grid minute are served by it all the same
        while j < n and at[j] <= tick:
            j += 1
        i = j
    return ticks


def tick_instants(schedules: Iterable[Schedule], cadence: Cadence, start: datetime,
                  until: datetime) -> set[datetime]:
    """The ticks the slots in ``(start, until]`` need: lead ticks before the slots worth
    lingering for, gathered ticks after the others. Under an external clock, a gathered
    tick after each slot that would have lingered and none for the others: the clock
    fires them, this tick catches a missed call and anchors the safety ticks. A slot
    whose next call of the clock comes within ``gather_minutes`` (and its catch-up
    window) needs none: that call's tick catches it."""
    found: set[datetime] = set()
    gathered: list[tuple[datetime, str]] = []
    external = cadence.mode == "external"
    view = cadence.model_copy(update={"mode": "derived"}) if external else cadence
    gather = timedelta(minutes=cadence.gather_minutes)
    calls = clock_calls(schedules, start, until + gather) if external else []
    for schedule in cron_schedules(schedules):
        slots = schedule_slots(schedule, start, until)
        reach = min(gather, timedelta(minutes=schedule.spec.catchup_window_minutes))
        for slot, lingers in zip(slots, lingering_slots(schedule, slots, view),
                                 strict=True):
            if lingers and not external:
                found.update(lead_ticks(slot, cadence))
            elif not external or (lingers and not _called_after(calls, slot, reach)):
                gathered.append((slot, schedule.id))
    found.update(gathered_ticks(gathered, timedelta(minutes=cadence.gather_minutes)))
    return found


def clock_calls(schedules: Iterable[Schedule], start: datetime,
                until: datetime) -> list[datetime]:
    """The external clock's calls at the slots of schedules without jitter, ascending
    (a jittered slot's call may come later than its slot)."""
    found: set[datetime] = set()
    for schedule in cron_schedules(schedules):
        if not schedule.spec.jitter_seconds:
            found.update(schedule_slots(schedule, start, until))
    return sorted(found)


def _called_after(calls: list[datetime], slot: datetime, reach: timedelta) -> bool:
    """Whether another call of the clock comes after ``slot`` and within ``reach``: that
    call's tick fires the slot when the slot's own call was lost, so no scheduled tick
    needs to catch it. ``serve --clock-only`` makes no call for a paused schedule: a
    lost call beside a paused neighbour waits for the safety tick."""
    i = bisect.bisect_right(calls, slot)
    return i < len(calls) and calls[i] - slot <= reach


def safety_ticks(ticks: Iterable[datetime], hours: int) -> set[datetime]:
    """Grid ticks that leave no gap between ``ticks`` longer than ``hours`` (plus
    :data:`SLACK`): each ``hours`` after the tick before it. Anchored to the slots'
    ticks, so a daily slot's lead ticks count as one of the day's safety ticks."""
    every = timedelta(hours=hours)
    ordered = sorted(set(ticks))
    added: set[datetime] = set()
    for before, after in itertools.pairwise(ordered):
        last = before
        while after - last > every + SLACK:
            last = _on_grid(last + every)
            added.add(last)
    return added


def _ticks_with_safety(schedules: list[Schedule], cadence: Cadence,
                       start: datetime) -> list[str]:
    """The slots' ticks of the year from ``start``, with the safety ticks between them,
    as cron lines; the plain safety line when no slot needs a tick at all."""
    until = start + HORIZON
    limit = timedelta(hours=cadence.safety_every_hours) + SLACK
    instants = tick_instants(schedules, cadence, start, until)
    if not instants:
        return [safety_line(cadence.safety_every_hours)]
    lines = compress(instants)
    if _longest_gap(instants, start, until) > limit:
        wide = tick_instants(schedules, cadence, start - MARGIN, until + MARGIN)
        added = {t for t in safety_ticks(wide, cadence.safety_every_hours)
                 if start < t <= until} - instants
        instants |= added
        # A safety tick on a few days only (where a daylight-saving change moves the
        # slots' ticks) runs on every such weekday of its months: the same each year.
        lines = sorted({*lines, *compress(added, days_of_month=False)},
                       key=lambda line: (line.split()[1:], line))
    # A year with one slot (a one-shot) leaves the rest of it to the plain safety line.
    # The lines match at least the instants: no gap between those, none between them.
    if _longest_gap(instants, start, until) > limit and max_gap(lines, start, HORIZON) > limit:
        lines.append(safety_line(cadence.safety_every_hours))
    return lines


def _longest_gap(instants: Iterable[datetime], start: datetime, until: datetime) -> timedelta:
    ordered = sorted(t for t in instants if start < t <= until)
    return max(b - a for a, b in itertools.pairwise([start, *ordered, until]))


def _field(values: Iterable[int], full: range) -> str:
    """``*``, or the values as a cron list with ranges (``1-5,7``)."""
    chosen = sorted(set(values))
    if chosen == list(full):
        return "*"
    parts: list[str] = []
    i = 0
    while i < len(chosen):
        j = i
        while j + 1 < len(chosen) and chosen[j + 1] == chosen[j] + 1:
            j += 1
        parts.append(str(chosen[i]) if j == i else
                     f"{chosen[i]},{chosen[j]}" if j == i + 1 else f"{chosen[i]}-{chosen[j]}")
        i = j + 1
    return ",".join(parts)


def compress(instants: Iterable[datetime], *, days_of_month: bool = True) -> list[str]:
    """UTC cron lines matching at least every instant (and little more). Without
    ``days_of_month`` no line names days of the month: it matches every day of its
    months (or of its weekdays), so it reads the same in any year."""
    seen: dict[tuple[int, int], tuple[set[int], set[int], set[int]]] = defaultdict(
        lambda: (set(), set(), set()))
    for moment in instants:
        months, doms, dows = seen[(moment.hour, moment.minute)]
        months.add(moment.month)
        doms.add(moment.day)
        dows.add((moment.weekday() + 1) % 7)  # cron: 0 is Sunday
    by_rest: dict[tuple[int, str, str, str], set[int]] = defaultdict(set)
    for (hour, minute), (months, doms, dows) in seen.items():
        # Restrict one day field only: cron ORs day-of-month and day-of-week. A few
        # days of the month (a monthly or one-shot slot) say more than the weekdays.
        dom, dow = _day_fields(doms, dows, days_of_month)
        by_rest[(minute, dom, _field(months, range(1, 13)), dow)].add(hour)
    by_hours: dict[tuple[str, str, str, str], set[int]] = defaultdict(set)
    for (minute, dom, month, dow), hours in by_rest.items():
        by_hours[(_field(hours, range(24)), dom, month, dow)].add(minute)
    lines = [f"{_field(minutes, range(60))} {hours} {dom} {month} {dow}"
             for (hours, dom, month, dow), minutes in by_hours.items()]
    return sorted(lines, key=lambda line: (line.split()[1:], line))


def _day_fields(doms: set[int], dows: set[int], days_of_month: bool) -> tuple[str, str]:
    """The day-of-month and day-of-week fields of a line: at most one restricted."""
    if days_of_month and len(doms) < 31 and (len(doms) <= 3 or len(dows) == 7):
        return _field(doms, range(1, 32)), "*"
    if len(dows) < 7:
        return "*", _field(dows, range(7))
    return "*", "*"


def safety_line(hours: int) -> str:
    hour = "*" if hours == 1 else "0" if hours == 24 else f"*/{hours}"
    return f"17 {hour} * * *"


def scheduled(lines: Iterable[str], start: datetime, until: datetime) -> list[datetime]:
    """Every instant the cron lines fire in ``(start, until]``, UTC, ascending."""
    found: set[datetime] = set()
    for line in lines:
        found.update(cron_slots(utc_spec(line), start, until))
    return sorted(found)


def max_gap(lines: list[str], start: datetime,
            span: timedelta = timedelta(days=35)) -> timedelta:
    """The longest time without a tick (no ticks at all: the whole span)."""
    ticks = scheduled(lines, start, start + span)
    if not ticks:
        return span
    return max([b - a for a, b in itertools.pairwise([start, *ticks, start + span])])


def watchdog_for(gap: timedelta) -> tuple[str, int]:
    """The watchdog's cron and threshold for ticks at most ``gap`` apart.

    The threshold allows an idle tick's hourly heartbeat, or one dropped tick, plus
    GitHub's delay; the watchdog then checks about once per threshold (every N hours,
    N dividing the day), so a stopped tick is reported within twice the threshold:
    checking twice an hour for a 90-minute limit would only spend minutes."""
    staleness = staleness_for(gap)
    every = max([h for h in (1, 2, 3, 4, 6, 8, 12, 24) if h * 60 <= staleness], default=1)
    return safety_line(every).replace("17 ", f"{WATCHDOG_MINUTE} ", 1), staleness


def staleness_for(gap: timedelta) -> int:
    """Minutes after which the last tick is stale, for ticks at most ``gap`` apart: an
    idle tick's hourly heartbeat or one dropped tick, plus GitHub's delay."""
    minutes = int(gap.total_seconds() // 60)
    return max(HEARTBEAT_EVERY + minutes, 2 * minutes) + 15


def backstop(schedules: Iterable[Schedule], config: RepoConfig, start: datetime) -> Derived:
    """Under a clock that confirms its calls: the weekly backstop tick, and a weekly
    watchdog whose limit follows the clock's calls and the backstop together."""
    span = timedelta(days=35)
    ticks = [*clock_calls(schedules, start, start + span),
             *scheduled([BACKSTOP_LINE], start, start + span)]
    return Derived([BACKSTOP_LINE], BACKSTOP_WATCHDOG,
                   staleness_for(_longest_gap(ticks, start, start + span)),
                   int(window(config.cadence).total_seconds() // 60))


def derive(schedules: Iterable[Schedule], config: RepoConfig, start: datetime) -> Derived:
    cadence = config.cadence
    if cadence.mode == "external" and cadence.clock_confirms:
        return backstop(list(schedules), config, start)
    if cadence.mode == "fixed":
        lines = list(cadence.fixed_cron)
    else:
        # The safety tick only where the slots' ticks leave a longer gap: hourly slots'
        # ticks already come often enough, and a safety tick beside a daily slot's
        # ticks would add to what the repository pays for ticking.
        lines = _ticks_with_safety(list(schedules), cadence, start)
    watchdog, staleness = watchdog_for(max_gap(lines, start))
    return Derived(lines, watchdog, staleness, int(window(cadence).total_seconds() // 60))


def uncovered(lines: list[str], schedules: Iterable[Schedule], cadence: Cadence,
              start: datetime, until: datetime) -> dict[str, list[datetime]]:
    """Schedule id -> its slots in ``(start, until]`` without the tick they need: one in
    the window before a slot worth lingering for, else one less than ``gather_minutes``
    after it (a tick before a slot it does not wait for would leave the slot to the
    tick after)."""
    span = window(cadence)
    gather = timedelta(minutes=cadence.gather_minutes)
    ticks = scheduled(lines, start - span, until + gather)
    missing: dict[str, list[datetime]] = {}
    for schedule in cron_schedules(schedules):
        slots = schedule_slots(schedule, start, until)
        for slot, lingers in zip(slots, lingering_slots(schedule, slots, cadence),
                                 strict=True):
            if lingers:
                i = bisect.bisect_right(ticks, slot)
                ok = i > 0 and slot - ticks[i - 1] <= span
            else:
                i = bisect.bisect_left(ticks, slot)
                ok = i < len(ticks) and ticks[i] - slot < gather
            if not ok:
                missing.setdefault(schedule.id, []).append(slot)
    return missing
