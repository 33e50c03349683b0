"""A schedule change as a change: what a schedule's new version does that its old one
did not (``validate --base``).

- Pure: the two versions, the merge instant and the repository's :class:`~.estimate.
  Setup` are parameters; nothing reads the clock, the checkout or git.
- Slots are compared over :data:`HORIZON` after the merge. A removed and an added slot
  of the same local day (each in its own version's zone) are paired as one moved slot,
  in time order: the first removed with the first added, and so on.
- Daylight saving is compared over :data:`DST_HORIZON`, since a month often holds no
  change of offset: each note (:func:`~orchestrator.cron.dst_note`) that only one
  version has is a difference.
- The first tick after merging is the planner's own firing step
  (:func:`~orchestrator.planner.fire.fire_schedule`) on a cursor that stands where the
  old version left it: its latest slot at or before the merge fired, no run open.
- The cost is the schedule's own jobs over the 30 days, every slot fired, priced as
  :mod:`.estimate` prices a run: its track legs and its fan-in job, each billed by the
  started minute. The tick's jobs are the repository's, not one schedule's.
- An unchanged schedule has no :class:`Change`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from ..config.models import Schedule, ScheduleSpec
from ..config.policies import FanIn
from ..config.triggers import for_spec
from ..cron import dst_note, zone_changes
from ..planner.context import Context, Decision, Observations
from ..planner.fire import MISSED_LOOKBACK, fire_schedule
from ..state.model import State
from ..state.records import Cursor
from .estimate import Billing, billed

HORIZON = timedelta(days=30)
"""The slots compared: this long after the merge."""
DST_HORIZON = timedelta(days=366)
"""The daylight-saving notes compared: a year after the merge, every change of offset."""
_AROUND = timedelta(days=1)
"""The notes of a change of offset are read within a day of it."""
_GRACE = timedelta(minutes=10)
"""The planner's dispatch grace; firing never reads it."""


@dataclass(frozen=True)
class Slots:
    """The slots of :data:`HORIZON` that only one version has, aware UTC, ascending."""

    added: tuple[datetime, ...] = ()
    removed: tuple[datetime, ...] = ()
    moved: tuple[tuple[datetime, datetime], ...] = ()
    """(the old slot, the new one), paired within a local day."""

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.moved)


@dataclass(frozen=True)
class FirstTick:
    """What the first tick at the merge instant does with the new version."""

    fired: tuple[datetime, ...] = ()
    skipped: tuple[datetime, ...] = ()
    """Due, left by ``catchup: latest`` (or ``none``), which fires the newest."""
    missed: tuple[datetime, ...] = ()
    """Older than the catch-up window: recorded, never fired."""
    held: tuple[tuple[datetime, str], ...] = ()
    """(slot, why): due but not fired by ``overlap`` or the daily cap."""
    next_slot: datetime | None = None


@dataclass(frozen=True)
class Change:
    """One schedule's difference between two versions; ``old`` or ``new`` may be absent."""

    schedule_id: str
    old: ScheduleSpec | None
    new: ScheduleSpec | None
    merged: datetime
    slots: Slots = Slots()
    old_count: int = 0
    new_count: int = 0
    dst_gained: tuple[str, ...] = ()
    dst_lost: tuple[str, ...] = ()
    first_tick: FirstTick | None = None
    minutes: tuple[float, float] = (0.0, 0.0)
    """Runner-minutes of the old and the new version's own jobs over the 30 days."""
    policies: tuple[str, ...] = ()
    """The catch-up and overlap settings that changed, as ``name: old -> new``."""

    @property
    def kind(self) -> str:
        return "added" if self.old is None else "removed" if self.new is None else "changed"

    @property
    def zone(self) -> ZoneInfo:
        spec = self.new or self.old
        assert spec is not None
        return spec.zone


def _slots(spec: ScheduleSpec | None, start: datetime) -> list[datetime]:
    if spec is None or not spec.enabled:
        return []
    return for_spec(spec).slots(start, start + HORIZON)


def _by_day(found: Iterable[datetime], zone: ZoneInfo) -> dict[date, list[datetime]]:
    days: dict[date, list[datetime]] = {}
    for at in found:
        days.setdefault(at.astimezone(zone).date(), []).append(at)
    return days


def compare_slots(old: list[datetime], new: list[datetime], old_zone: ZoneInfo,
                  new_zone: ZoneInfo) -> Slots:
    """The slots only one side has; a removed and an added slot of one local day are
    paired as moved, in time order."""
    kept = set(old) & set(new)
    removed = _by_day(_without(old, kept), old_zone)
    added = _by_day(_without(new, kept), new_zone)
    moved = _pair(removed, added)
    return Slots(_flat(added), _flat(removed), tuple(sorted(moved)))


def _without(found: list[datetime], kept: set[datetime]) -> list[datetime]:
    return [s for s in found if s not in kept]


def _pair(removed: dict[date, list[datetime]], added: dict[date, list[datetime]]
          ) -> list[tuple[datetime, datetime]]:
    """Pairs of one day taken out of ``removed`` and ``added``, first with first."""
    moved: list[tuple[datetime, datetime]] = []
    for day in sorted(removed.keys() & added.keys()):
        pairs = min(len(removed[day]), len(added[day]))
        moved += zip(removed[day][:pairs], added[day][:pairs], strict=True)
        del removed[day][:pairs], added[day][:pairs]
    return moved


def _flat(days: dict[date, list[datetime]]) -> tuple[datetime, ...]:
    return tuple(sorted(s for day in days.values() for s in day))


def dst_notes(spec: ScheduleSpec | None, start: datetime) -> set[str]:
    """The daylight-saving notes of ``spec``'s slots within :data:`DST_HORIZON`."""
    if spec is None or not spec.enabled:
        return set()
    trigger = for_spec(spec)
    notes: set[str] = set()
    for change in zone_changes(spec.zone, start, start + DST_HORIZON):
        window = trigger.explain(max(start, change.at - _AROUND), change.at + _AROUND)
        notes.update(n for n in (dst_note(s, spec.timezone) for s in window) if n)
    return notes


def last_slot(spec: ScheduleSpec, until: datetime) -> datetime | None:
    """The latest slot of ``spec`` at or before ``until``, within the planner's lookback."""
    found = for_spec(spec).slots(until - MISSED_LOOKBACK, until)
    return found[-1] if found else None


def _cursor(schedule_id: str, old: ScheduleSpec | None, merged: datetime) -> Cursor | None:
    """Where the old version left the schedule's cursor: its latest slot fired (none
    for a new schedule, which the planner meets for the first time)."""
    if old is None:
        return None
    since = last_slot(old, merged) if old.enabled else None
    return Cursor(schedule_id=schedule_id, since=since or merged - MISSED_LOOKBACK,
                  enabled=old.enabled)


def first_tick(schedule: Schedule, old: ScheduleSpec | None, merged: datetime) -> FirstTick:
    """The planner's firing step for ``schedule`` at ``merged``, the old version's cursor
    given (:func:`_cursor`)."""
    cursor = _cursor(schedule.id, old, merged)
    state = State(cursors={schedule.id: cursor} if cursor is not None else {})
    ctx = Context(Decision(state), {schedule.id: schedule}, Observations(), merged,
                  "github", _GRACE)
    fire_schedule(ctx, schedule)
    after = ctx.state.cursors[schedule.id]
    new_notes = after.notes[len(cursor.notes) if cursor is not None else 0:]

    def noted(reason: str) -> tuple[datetime, ...]:
        return tuple(n.slot for n in new_notes if n.reason == reason)

    upcoming = for_spec(schedule.spec).next(merged, 1).found
    return FirstTick(tuple(sorted(r.slot for r in ctx.state.runs.values())),
                     noted("skipped"), noted("missed"),
                     tuple((n.slot, n.reason) for n in new_notes
                           if n.reason in ("overlap", "daily_cap")),
                     upcoming[0].at if upcoming else None)


def run_minutes(spec: ScheduleSpec, track_minutes: float = 1.0) -> int:
    """Runner-minutes of one run of ``spec``, as :mod:`.estimate`'s month bills a run: a
    job per track leg, and a fan-in job unless ``fan_in`` is ``next_tick``."""
    legs = len(spec.run_tracks) * billed(track_minutes * 60)
    return legs + (billed(Billing().fan_in_seconds) if spec.fan_in is FanIn.JOB else 0)


def _minutes(spec: ScheduleSpec | None, slots: int) -> float:
    return 0.0 if spec is None else float(slots * run_minutes(spec))


_POLICIES = ("catchup", "catchup_window_minutes", "overlap", "max_runs_per_day")


def _policies(old: ScheduleSpec | None, new: ScheduleSpec | None) -> tuple[str, ...]:
    if old is None or new is None:
        return ()
    changed = [(name, getattr(old, name), getattr(new, name)) for name in _POLICIES]
    return tuple(f"{name}: {_word(a)} -> {_word(b)}" for name, a, b in changed if a != b)


def _word(value: object) -> str:
    return str(getattr(value, "value", value))


def compare(old: Schedule | None, new: Schedule | None, merged: datetime
            ) -> Change | None:
    """What ``new`` changes of ``old`` from ``merged`` on; ``None`` when nothing."""
    old_spec, new_spec = _spec(old), _spec(new)
    either = new or old
    if old_spec == new_spec or either is None:
        return None
    before, after = _slots(old_spec, merged), _slots(new_spec, merged)
    old_notes, new_notes = dst_notes(old_spec, merged), dst_notes(new_spec, merged)
    return Change(
        either.id, old_spec, new_spec, merged,
        slots=compare_slots(before, after, (old or either).spec.zone,
                            (new or either).spec.zone),
        old_count=len(before), new_count=len(after),
        dst_gained=tuple(sorted(new_notes - old_notes)),
        dst_lost=tuple(sorted(old_notes - new_notes)),
        first_tick=None if new is None else first_tick(new, old_spec, merged),
        minutes=(_minutes(old_spec, len(before)), _minutes(new_spec, len(after))),
        policies=_policies(old_spec, new_spec))


def _spec(schedule: Schedule | None) -> ScheduleSpec | None:
    return None if schedule is None else schedule.spec


def compare_all(old: Iterable[Schedule], new: Iterable[Schedule], merged: datetime
                ) -> list[Change]:
    """Every schedule that differs between the two sets, by id."""
    before = {s.id: s for s in old}
    after = {s.id: s for s in new}
    found = (compare(before.get(sid), after.get(sid), merged)
             for sid in sorted(before.keys() | after.keys()))
    return [c for c in found if c is not None]
