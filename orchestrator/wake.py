"""When does something next fall due, and why? (Pure: ``now`` is passed in.)

A tick that knows its next due moment can wait for it (``tick --linger``, ``serve``)
instead of leaving it to GitHub's late cron. A due moment is any instant at which a
tick would decide something new without being told anything:

- a schedule's next slot (or a one-shot's ``at``);
- a track's ``not_before``: a retry's back-off end, a run's jitter (any open phase
  counts, so a phase that waits on ``not_before`` is covered as it is added);
- a running track's timeout (from its start);
- a running run's deadline (the hard ceiling).

Moments at or before ``now`` are not due *next*: the tick at ``now`` already saw
them, and one it could not act on (an open circuit breaker, a buffered run) would
otherwise wake the loop again and again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from . import machine
from .models import RunStatus, Schedule, ScheduleSpec
from .state import State
from .times import iso
from .triggers import for_spec


@dataclass(frozen=True, order=True)
class Wake:
    """One due moment: when, and a few words on why (for logs, status, job summary)."""

    at: datetime
    reason: str

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
    trigger = for_spec(spec)
    if until is None:
        return [info.at for info in trigger.next(after, 1).found]
    return trigger.slots(after, until)


def next_slot(spec: ScheduleSpec, after: datetime) -> datetime | None:
    """The first slot of a cron schedule strictly after ``after``."""
    found = cron_slots(spec, after)
    return found[0] if found else None


def _slots(schedules: Sequence[Schedule], state: State, now: datetime) -> Iterator[Wake]:
    for schedule in schedules:
        spec = schedule.spec
        cursor = state.cursors.get(schedule.id)
        if not spec.enabled:
            continue
        at = spec.at_utc()
        if at is not None:
            if at > now and not (cursor is not None and cursor.done and cursor.last_slot == at):
                yield Wake(at, f"{schedule.id}: one-shot at {at:%Y-%m-%dT%H:%MZ}")
            continue
        try:
            slot = next_slot(spec, now)
        except ValueError:  # a spec cron cannot evaluate: the tick reports it
            continue
        if slot is not None:
            yield Wake(slot, f"{schedule.id}: slot {slot:%Y-%m-%dT%H:%MZ}")


def _tracks(schedules: Sequence[Schedule], state: State, now: datetime) -> Iterator[Wake]:
    for run_id, tracks in state.tracks.items():
        run = state.runs.get(run_id)
        if run is None or run.status not in machine.RUN_OPEN:
            continue
        if run.status is not RunStatus.SCHEDULED and run.deadline > now:
            yield Wake(run.deadline, f"{run_id}: run deadline")
        for track in tracks.values():
            if track.phase not in machine.TRACK_OPEN:
                continue
            # Poll tracks waiting for their next poll keep it in `not_before` too.
            if track.not_before is not None and track.not_before > now:
                what = "retry" if track.attempt > 1 else "not before"
                yield Wake(track.not_before, f"{run_id}: {track.name} {what}")
            if track.started_at is not None:
                end = track.started_at + timedelta(minutes=track.spec.timeout_minutes)
                if end > now:
                    yield Wake(end, f"{run_id}: {track.name} timeout")


Source = Callable[[Sequence[Schedule], State, datetime], Iterator[Wake]]

SOURCES: tuple[Source, ...] = (
    _slots,
    _tracks,
    # A poll track's next poll joins here as its own source when poll tracks arrive
    # (until then a track waiting on `not_before` is covered by `_tracks`).
)
"""Where due moments come from; each yields its moments after ``now``."""


def due_moments(schedules: Iterable[Schedule], state: State, now: datetime) -> list[Wake]:
    """Every source's next due moment after ``now``, earliest first."""
    now = now.astimezone(UTC)
    listed = list(schedules)
    return sorted(wake for source in SOURCES for wake in source(listed, state, now))


def next_wake(schedules: Iterable[Schedule], state: State, now: datetime) -> Wake | None:
    """The earliest due moment after ``now``, or None when nothing will ever fall due."""
    moments = due_moments(schedules, state, now)
    return moments[0] if moments else None
