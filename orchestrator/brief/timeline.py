"""The timeline's geometry: one row per track, one bar per attempt, in viewBox units (pure)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..state.machine import RUN_TERMINAL
from ..state.records import Track
from .attempts import Attempt, run_finished
from .context import BriefContext
from .text import fmt_clock, fmt_duration


@dataclass(frozen=True)
class Bar:
    """A rectangle of the timeline, in viewBox units (x from 0 to 1000)."""

    x: float
    width: float
    kind: str
    """A phase value, or ``queued`` for the wait between dispatch and start."""
    title: str
    open: bool = False


@dataclass(frozen=True)
class Mark:
    """A poll's answer on a track's row, in viewBox units."""

    x: float
    title: str


@dataclass(frozen=True)
class TimelineRow:
    name: str
    phase: str
    attempts: int
    y: float
    bars: list[Bar]
    note: str = ""
    marks: list[Mark] = field(default_factory=list)


@dataclass(frozen=True)
class Tick:
    x_pct: float
    label: str


@dataclass(frozen=True)
class Timeline:
    start: datetime
    end: datetime
    rows: list[TimelineRow]
    ticks: list[Tick]
    row_height: int
    height: int
    deadline_x: float | None
    """Position of the deadline line, ``None`` when it lies beyond the right edge."""
    deadline: datetime
    slot_x: float | None
    """Position of the scheduled slot, ``None`` when it lies far before the first bar."""
    slot: datetime
    now_x: float | None
    width: int = 1000



_NICE_STEPS = [
    timedelta(seconds=s) for s in (
        1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
        43200, 86400, 172800, 604800)
]


def _ticks(start: datetime, end: datetime, x: Any) -> list[Tick]:
    span = end - start
    step = next((s for s in _NICE_STEPS if span / s <= 6), _NICE_STEPS[-1])
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    steps, rest = divmod(start - epoch, step)
    first = epoch + step * (steps + (1 if rest else 0))  # the first multiple of step
    fmt = "%H:%M:%S" if step < timedelta(minutes=1) else "%H:%M"
    if step >= timedelta(days=1):
        fmt = "%m-%d"
    ticks = []
    moment = first
    while moment <= end:
        pct = x(moment) / 10
        if 4 <= pct <= 96:  # labels are centred; keep them inside the axis
            ticks.append(Tick(round(pct, 2), f"{moment.astimezone(UTC):{fmt}}"))
        moment += step
    return ticks


def poll_marks(track: Track, x: Any) -> list[Mark]:
    """A mark for each answer of a poll track: every "not yet", and the answer that
    ended a poll (complete, failed, ...) once the track has waited."""
    marks: list[Mark] = []
    polled = False
    for step in track.state_history:
        answered = step.from_ in ("dispatched", "running") and step.to not in (
            "running", "pending")
        polled = polled or step.to == "waiting"
        if answered and polled:
            what = "not yet" if step.to == "waiting" else step.to.replace("_", " ")
            marks.append(Mark(x(step.at), f"{track.name} · poll answered {what} · "
                                          f"{fmt_clock(step.at)}"))
    return marks


Scale = Callable[[datetime], float]
"""A moment -> its x in viewBox units, clamped to the axis."""


def layout(ctx: BriefContext, attempts: dict[str, list[Attempt]]) -> Timeline:
    now = ctx.generated_at
    start, end = _window(ctx, attempts)
    x = _scale(start, end)
    row_h = 26 if len(ctx.tracks) <= 64 else 14
    rows = [_row(track, attempts[track.name], index * row_h, now, x)
            for index, track in enumerate(ctx.tracks)]
    deadline, slot = ctx.run.deadline, ctx.run.slot
    slot_x = x(slot) if start <= slot <= end else None
    now_x = x(now) if ctx.run.status not in RUN_TERMINAL and now <= end else None
    return Timeline(start=start, end=end, rows=rows, ticks=_ticks(start, end, x),
                    row_height=row_h, height=max(row_h * len(rows), row_h),
                    deadline_x=x(deadline) if deadline <= end else None, deadline=deadline,
                    slot_x=slot_x, slot=slot, now_x=now_x)


def _window(ctx: BriefContext, attempts: dict[str, list[Attempt]]
            ) -> tuple[datetime, datetime]:
    """The span the timeline shows: the activity, stretched to the deadline and the slot
    when they are near it, with a margin of 2 % on each side."""
    t0, t1 = _activity(ctx, attempts)
    deadline = ctx.run.deadline
    # Draw the deadline when it is on (or near) the activity; a 4-hour ceiling over a
    # 5-minute run would squash every bar into a sliver, so then it is named instead.
    if deadline > t1 and _worth_stretching(deadline - t0, t1 - t0):
        t1 = deadline
    # Likewise the slot: a few minutes of lateness is worth seeing, hours are not.
    slot = ctx.run.slot
    if slot < t0 and _worth_stretching(t1 - slot, t1 - t0):
        t0 = slot
    pad = (t1 - t0) * 0.02
    start, end = t0 - pad, t1 + pad
    if deadline < start:
        start = deadline - pad
    return start, end


def _activity(ctx: BriefContext, attempts: dict[str, list[Attempt]]
              ) -> tuple[datetime, datetime]:
    """From the first dispatch or start to the last end (``now`` for an attempt still
    going) or the run's end: the slot's fire time and a minute when nothing ran."""
    every = [a for al in attempts.values() for a in al]
    t0 = min(_begins(every) or [ctx.run.fire_at])
    minute = timedelta(minutes=1)
    t1 = max(_ends(every, ctx.generated_at) or [t0 + minute])
    finished = run_finished(ctx.run)
    if finished and finished > t1:
        t1 = finished
    return t0, t1 if t1 > t0 else t0 + minute


def _ends(attempts: list[Attempt], now: datetime) -> list[datetime]:
    """When each attempt ended, ``now`` for one still going."""
    return [a.finished or now for a in attempts]


def _begins(attempts: list[Attempt]) -> list[datetime]:
    """When each attempt that began did: its dispatch, or its start."""
    begins = (a.dispatched or a.started for a in attempts)
    return [moment for moment in begins if moment is not None]


def _worth_stretching(stretched: timedelta, span: timedelta) -> bool:
    """Whether stretching ``span`` to ``stretched`` leaves the bars readable."""
    return stretched <= span * 1.5


def _scale(start: datetime, end: datetime) -> Scale:
    total = (end - start).total_seconds()

    def x(moment: datetime) -> float:
        return round(max(0.0, min(1000.0, (moment - start).total_seconds() / total * 1000)), 2)

    return x


def _row(track: Track, attempts: list[Attempt], y: float, now: datetime,
         x: Scale) -> TimelineRow:
    bars = [bar for a in attempts for bar in _attempt_bars(track.name, a, now, x)]
    note = "" if bars else ("skipped" if track.phase.value == "skipped"
                            else "not dispatched")
    return TimelineRow(track.name, track.phase.value, len(attempts), y, bars, note,
                       poll_marks(track, x))


def _attempt_bars(name: str, a: Attempt, now: datetime, x: Scale) -> list[Bar]:
    """The bars of one attempt: its wait in the queue, if any, then its run up to its
    end (or ``now``); none when it never began."""
    begin = a.dispatched or a.started
    if begin is None:
        return []
    label = f"{name} · attempt {a.number} · {a.outcome.replace('_', ' ')}"
    queued = _queued_bar(label, a, x)
    run_from = a.started or begin
    stop = a.finished or now
    ran = Bar(x(run_from), max(x(stop) - x(run_from), 3.0), a.outcome,
              f"{label} · {fmt_clock(run_from)} to "
              f"{fmt_clock(a.finished) if a.finished else 'now'} "
              f"({fmt_duration(stop - run_from)})", open=a.open)
    return [queued, ran] if queued is not None else [ran]


def _queued_bar(label: str, a: Attempt, x: Scale) -> Bar | None:
    """The wait between dispatch and start, when the attempt started after it."""
    if not (a.dispatched and a.started and a.started > a.dispatched):
        return None
    return Bar(x(a.dispatched), max(x(a.started) - x(a.dispatched), 1.5), "queued",
               f"{label} · queued {fmt_clock(a.dispatched)} to {fmt_clock(a.started)} "
               f"({fmt_duration(a.started - a.dispatched)})")
