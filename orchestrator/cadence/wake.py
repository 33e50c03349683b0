"""When does something next fall due, and why? (Pure: ``now`` is passed in.)

A tick that knows its next due moment can wait for it (``tick --linger``, ``serve``)
instead of leaving it to GitHub's late cron. A due moment is any instant at which a
tick would decide something new without being told anything:

- a schedule's next slot (or a one-shot's ``at``);
- a track's ``not_before``: a retry's back-off end, a run's jitter (any open phase
  counts, so a phase that waits on ``not_before`` is covered as it is added);
- a running track's timeout (from its start), or a waiting approval's end;
- a running run's deadline (the hard ceiling).

Moments at or before ``now`` are not due *next*: the tick at ``now`` already saw
them, and one it could not act on (an open circuit breaker, a buffered run) would
otherwise wake the loop again and again.

Not every moment is worth keeping a runner waiting for (GitHub bills the wait). A
slot is, when its schedule has no other slot in the ``linger_min_interval_hours``
before it (:func:`lingers_before`; ``orchestrator.json`` can say otherwise per
schedule): a daily slot is, an hourly one is not (cron-sync gives it a tick just
after it instead). Under an external clock no slot is: the clock starts a tick at
each one. A retry's back-off end is (it is short and follows a failure); a
timeout or a run's deadline is not: the fan-in job settles a run that ends, and only
a hung track waits for the next tick to be tapped out. ``tick --linger`` waits for
the earliest moment worth it (:attr:`Wake.linger_target`); ``status`` still shows the
earliest of all.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..config.repository import Cadence
from ..state import machine
from ..state.phases import RunStatus, TrackPhase
from ..support.times import iso, iso_minute

if TYPE_CHECKING:  # a tick that parsed no schedule reads its wake from the memo
    from ..config.models import Schedule, ScheduleSpec
    from ..state.model import State
    from ..state.records import Cursor, Run, Track


@dataclass(frozen=True, order=True)
class Wake:
    """One due moment: when, and a few words on why (for logs, status, job summary)."""

    at: datetime
    reason: str
    worth_waiting: bool = field(default=True, compare=False)
    """Whether a lingering tick keeps its runner waiting for this moment."""
    wait_for: Wake | None = field(default=None, compare=False)
    """When this moment is not worth waiting for: the earliest after it that is."""
    slot: bool = field(default=False, compare=False)
    """A schedule's slot (or a one-shot's ``at``): an external clock calls at every one,
    worth a waiting runner or not."""

    @property
    def linger_target(self) -> Wake | None:
        """The moment ``tick --linger`` waits for: this one, or the next worth it."""
        return self if self.worth_waiting else self.wait_for

    def to_json(self) -> dict[str, str]:
        return {"at": iso(self.at), "reason": self.reason}

    def describe(self, now: datetime) -> str:
        """``2026-12-01T07:00:00Z (in 4 min): nightly: slot 07:00 UTC``."""
        return f"{iso(self.at)} ({until_words(self.at - now)}): {self.reason}"


def until_words(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return f"in {seconds} s"
    minutes = seconds // 60
    if minutes < 120:
        return f"in {minutes} min"
    hours = minutes // 60
    return f"in {hours} h {minutes % 60} min" if hours < 48 else f"in {hours // 24} days"


def cron_slots(spec: ScheduleSpec, after: datetime,
               until: datetime | None = None) -> list[datetime]:
    """The slots of ``spec`` in ``(after, until]``; without ``until``, the first one after
    ``after`` (or none).

    The one place the timing modules (this one, :mod:`.cadence`, :mod:`.estimate`) ask
    the cron evaluator, so a change of its interface is adapted here only."""
    from ..config.triggers import for_spec

    trigger = for_spec(spec)
    if until is None:
        return [info.at for info in trigger.next(after, 1).found]
    return trigger.slots(after, until)


def next_slot(spec: ScheduleSpec, after: datetime) -> datetime | None:
    """The first slot of a cron schedule strictly after ``after``."""
    found = cron_slots(spec, after)
    return found[0] if found else None


def settled_after(cursor: Cursor | None, now: datetime) -> datetime:
    """Where a schedule's next slot is looked for: after ``now``, or after the slots its
    cursor settled when those reach further (a tick ``--now`` in the future settled
    them, fired or missed): the next tick fires nothing at or before either."""
    return max(now, cursor.since) if cursor is not None else now


def lingers_before(schedule: Schedule, slot: datetime, cadence: Cadence) -> bool:
    """Whether ``slot`` deserves lead ticks and a tick waiting on its runner until it:
    never under an external clock (it calls at the slot); else ``orchestrator.json``'s
    word for the schedule, else whether no other slot of the schedule falls in the
    ``linger_min_interval_hours`` before it (a one-shot: yes)."""
    if cadence.mode == "external":
        return False
    override = cadence.linger_schedules.get(schedule.id)
    if override is not None:
        return override
    if schedule.spec.at_utc() is not None:
        return True
    gap = timedelta(hours=cadence.linger_min_interval_hours)
    if not gap:
        return True
    first = cron_slots(schedule.spec, slot - gap)
    return not first or first[0] >= slot


def lingering_slots(schedule: Schedule, slots: Sequence[datetime],
                    cadence: Cadence) -> list[bool]:
    """:func:`lingers_before` for ascending ``slots`` of one schedule (all of them from
    one span: the gap to the previous one decides, so the evaluator is asked once)."""
    if not slots:
        return []
    override = cadence.linger_schedules.get(schedule.id)
    if cadence.mode == "external" or override is not None or schedule.spec.at_utc() is not None:
        return [lingers_before(schedule, slots[0], cadence)] * len(slots)
    gap = timedelta(hours=cadence.linger_min_interval_hours)
    first = lingers_before(schedule, slots[0], cadence)
    return [first] + [b - a >= gap for a, b in itertools.pairwise(slots)]


def _slots(schedules: Sequence[Schedule], state: State, now: datetime,
           cadence: Cadence) -> Iterator[Wake]:
    for schedule in schedules:
        cursor = state.cursors.get(schedule.id)
        if not schedule.spec.enabled or (cursor is not None and cursor.paused is not None):
            continue  # a paused schedule fires nothing: no wake-up for its slots
        wake = _schedule_wake(schedule, cursor, now, cadence)
        if wake is not None:
            yield wake


def _schedule_wake(schedule: Schedule, cursor: Cursor | None, now: datetime,
                   cadence: Cadence) -> Wake | None:
    """The wake-up for the schedule's next slot, if one is to come."""
    spec = schedule.spec
    at = spec.at_utc()
    if at is not None:
        if at > now and not _fired(cursor, at):
            return Wake(at, f"{schedule.id}: one-shot at {iso_minute(at)}",
                        lingers_before(schedule, at, cadence), slot=True)
        return None
    try:
        # After the slots the cursor settled, which a tick --now in the future may
        # have put ahead of the clock: the next tick fires nothing before them.
        slot = next_slot(spec, settled_after(cursor, now))
    except ValueError:  # a spec cron cannot evaluate: the tick reports it
        return None
    if slot is None:
        return None
    return Wake(slot, f"{schedule.id}: slot {iso_minute(slot)}",
                lingers_before(schedule, slot, cadence), slot=True)


def _fired(cursor: Cursor | None, at: datetime) -> bool:
    """Whether the cursor shows the one-shot at ``at`` fired."""
    return cursor is not None and cursor.done and cursor.last_slot == at


def _open_runs(state: State, runs: Mapping[str, Any]) -> Iterator[tuple[str, Run, Any]]:
    """(run id, run, its entry of ``runs``) for every open run of ``state``."""
    for run_id, entry in runs.items():
        run = state.runs.get(run_id)
        if run is not None and run.status in machine.RUN_OPEN:
            yield run_id, run, entry


def _tracks(schedules: Sequence[Schedule], state: State, now: datetime,
            cadence: Cadence) -> Iterator[Wake]:
    for run_id, run, tracks in _open_runs(state, state.tracks):
        if run.status is not RunStatus.SCHEDULED and run.deadline > now:
            yield Wake(run.deadline, f"{run_id}: run deadline", False)
        for track in tracks.values():
            if track.phase in machine.TRACK_OPEN:
                yield from _track(run_id, track, now)


def _track(run_id: str, track: Track, now: datetime) -> Iterator[Wake]:
    """An open track's next poll, retry or start, and its timeout."""
    # Poll tracks waiting for their next poll keep it in `not_before` too.
    if track.not_before is not None and track.not_before > now:
        what = ("next poll" if track.phase is TrackPhase.WAITING
                else "retry" if track.attempt > 1 else "not before")
        yield Wake(track.not_before, f"{run_id}: {track.name} {what}")
    if track.started_at is not None:
        end = track.started_at + timedelta(minutes=track.spec.timeout_minutes)
        if end > now:
            yield Wake(end, f"{run_id}: {track.name} timeout", False)
    yield from _approval_end(run_id, track, now)


def _approval_end(run_id: str, track: Track, now: datetime) -> Iterator[Wake]:
    """When a track waiting for a person is tapped out, if nobody decides before."""
    gate, approval = track.current_gate, track.spec.approval
    if not track.awaits_approval or gate is None or gate.since is None or approval is None:
        return
    end = gate.since + timedelta(minutes=approval.timeout_minutes)
    if end > now:
        yield Wake(end, f"{run_id}: {track.name} approval timeout", False)


def _policies(schedules: Sequence[Schedule], state: State, now: datetime,
              cadence: Cadence) -> Iterator[Wake]:
    """A compensation's retry or timeout, and the moment a leg waiting for a runner is
    moved to the next label (``runs_on``)."""
    yield from _compensations(state, now)
    yield from _queued_legs(schedules, state, now)


def _compensations(state: State, now: datetime) -> Iterator[Wake]:
    for run_id, _, undos in _open_runs(state, state.undos):
        for undo in undos.values():
            if undo.phase not in machine.TRACK_OPEN:
                continue
            if undo.not_before is not None and undo.not_before > now:
                yield Wake(undo.not_before, f"{run_id}: {undo.name} compensation retry")
            if undo.started_at is not None:
                end = undo.started_at + timedelta(minutes=undo.spec.timeout_minutes)
                if end > now:
                    yield Wake(end, f"{run_id}: {undo.name} compensation timeout")


def _queued_since(track: Track) -> datetime | None:
    """When ``track`` was dispatched, if it is a leg on a runner label not started yet."""
    if track.runner is None or track.started_at is not None:
        return None
    return track.dispatched_at if track.phase in machine.TRACK_OPEN else None


def _queued_legs(schedules: Sequence[Schedule], state: State,
                 now: datetime) -> Iterator[Wake]:
    specs = {s.id: s.spec for s in schedules}
    for run_id, run, tracks in _open_runs(state, state.tracks):
        spec = specs.get(run.schedule_id)
        if spec is None:
            continue
        for track in tracks.values():
            since = _queued_since(track)
            end = (since + timedelta(minutes=spec.queue_timeout_minutes)
                   if since is not None else None)
            if end is not None and end > now:
                yield Wake(end, f"{run_id}: {track.name} queue timeout on {track.runner}")


Source = Callable[[Sequence["Schedule"], "State", datetime, Cadence], Iterator["Wake"]]

SOURCES: tuple[Source, ...] = (
    _slots,
    _tracks,
    _policies,
    # A poll track's next poll is its `not_before`, covered by `_tracks`.
)
"""Where due moments come from; each yields its moments after ``now``."""


def due_moments(schedules: Iterable[Schedule], state: State, now: datetime,
                cadence: Cadence | None = None) -> list[Wake]:
    """Every source's next due moment after ``now``, earliest first (``cadence``:
    ``orchestrator.json``'s, which says which slots are worth waiting for)."""
    now = now.astimezone(UTC)
    listed = list(schedules)
    policy = cadence or Cadence()
    return sorted(wake for source in SOURCES for wake in source(listed, state, now, policy))


def next_wake(schedules: Iterable[Schedule], state: State, now: datetime,
              cadence: Cadence | None = None) -> Wake | None:
    """The earliest due moment after ``now`` (None when nothing will ever fall due); when
    it is not worth waiting for, its :attr:`Wake.wait_for` is the earliest that is."""
    return earliest(due_moments(schedules, state, now, cadence))


def earliest(moments: Sequence[Wake]) -> Wake | None:
    """The first of ``moments`` (ascending), with :attr:`Wake.wait_for` the first worth
    waiting for when it is not."""
    if not moments:
        return None
    first = moments[0]
    if first.worth_waiting:
        return first
    return replace(first, wait_for=next((m for m in moments if m.worth_waiting), None))
