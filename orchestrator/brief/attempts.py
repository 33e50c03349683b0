"""Attempts of a track rebuilt from its history, and a run's start and end (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..state.machine import RUN_TERMINAL, TRACK_OPEN
from ..state.phases import RunStatus, TrackPhase
from ..state.records import Run, Track, Transition


@dataclass(frozen=True)
class Attempt:
    """One attempt of a track, rebuilt from its ``state_history``."""

    number: int
    dispatched: datetime | None
    started: datetime | None
    finished: datetime | None
    outcome: str
    """The phase the attempt ended in, or the current phase while it is open."""

    @property
    def open(self) -> bool:
        return self.finished is None

    @property
    def run_time(self) -> timedelta | None:
        """Start to finish (from dispatch when no start was observed)."""
        begin = self.started or self.dispatched
        if begin and self.finished:
            return self.finished - begin
        return None


def attempts_of(track: Track) -> list[Attempt]:
    """The track's attempts, oldest first (from its history, else its current fields)."""
    out = _from_history(track)
    if not out and (track.dispatched_at or track.started_at):
        out.append(Attempt(number=track.attempt, dispatched=track.dispatched_at,
                           started=track.started_at, finished=track.finished_at,
                           outcome=track.phase.value))
    if out:
        out[-1] = _with_record_times(out[-1], track)
    return out


_TERMINAL = frozenset(p.value for p in TrackPhase if p not in TRACK_OPEN)


def _from_history(track: Track) -> list[Attempt]:
    """The attempts that ``track.state_history`` shows, as the history's steps dated them."""
    out: list[Attempt] = []
    number = 0
    cur: dict[str, Any] | None = None
    for step in track.state_history:
        if step.to == TrackPhase.DISPATCHED.value:
            cur, number = _dispatched(cur, step, number)
        elif step.to == TrackPhase.PENDING.value:
            cur = _pending(cur, out)
        elif cur is not None:  # else tapped out or cancelled before a dispatch: nothing ran
            _went_on(cur, step)
    if cur is not None:
        out.append(Attempt(**cur))
    return out


def _dispatched(cur: dict[str, Any] | None, step: Transition,
                number: int) -> tuple[dict[str, Any] | None, int]:
    """The attempt after a dispatch step, and the count of attempts begun so far."""
    if step.from_ == TrackPhase.WAITING.value:
        return cur, number  # a poll dispatched again: the same attempt goes on
    if cur is not None and cur.get("finished") is None:
        # Re-dispatch of a lost dispatch: the same attempt starts over.
        cur["dispatched"] = step.at
        return cur, number
    return {"number": number + 1, "dispatched": step.at, "started": None,
            "finished": None, "outcome": step.to}, number + 1


def _pending(cur: dict[str, Any] | None, out: list[Attempt]) -> dict[str, Any] | None:
    """The attempt after a step back to pending: a finished one is over (a retry or
    requeue) and goes to ``out``."""
    if cur is not None and cur["finished"] is not None:
        out.append(Attempt(**cur))
        return None
    return cur


def _went_on(cur: dict[str, Any], step: Transition) -> None:
    """Note in the attempt ``cur`` a step of its own: its start, or its end."""
    if step.to == TrackPhase.RUNNING.value:
        cur["started"] = cur["started"] or step.at  # a poll's later runs go on
        cur["outcome"] = step.to
    elif step.to in _TERMINAL:
        cur["finished"] = step.at
        cur["outcome"] = step.to


def _with_record_times(last: Attempt, track: Track) -> Attempt:
    """``last`` with the start and end the track's record holds, where they belong to it."""
    # The record's own times belong to the current attempt and are the command's
    # own, measured by the backend; the history may only know the tick that noticed
    # (and a start never shown as "running": dispatched -> complete in one tick).
    current = last.number == track.attempt
    started = last.started
    if current and _record_start_holds(last, track):
        started = track.started_at
    finished = last.finished
    if track.phase not in TRACK_OPEN and track.finished_at is not None and (
            finished is None or current):
        finished = track.finished_at
    # An attempt still open at render time carries the current phase (e.g. running).
    outcome = track.phase.value if finished is None else last.outcome
    return Attempt(number=last.number, dispatched=last.dispatched, started=started,
                   finished=finished, outcome=outcome)


def _record_start_holds(last: Attempt, track: Track) -> bool:
    """Whether the record's start is the current attempt's ``last``: the history has
    none, or (no poll) the record's is not before the dispatch."""
    if track.started_at is None:
        return False
    if last.started is None:
        return True
    # a poll's start is its latest one: keep the first
    return track.polls == 0 and (last.dispatched is None
                                 or track.started_at >= last.dispatched)


def run_started(run: Run, attempts: Iterable[Attempt]) -> datetime | None:
    """When the run's work began: its first command's start as the executor measured
    it (``attempts``, else the span recorded when it finished), else the tick that
    first dispatched it."""
    attempts = list(attempts)
    measured = _earliest(a.started for a in attempts)
    if measured is not None:
        return measured
    if run.work_started_at is not None:
        return run.work_started_at
    # a dispatch only bounds the start: on a loaded machine the command starts later
    sent = _earliest(a.dispatched for a in attempts)
    if sent is not None:
        return sent
    return next((step.at for step in run.state_history
                 if step.to == RunStatus.RUNNING.value), None)


def _earliest(times: Iterable[datetime | None]) -> datetime | None:
    """The earliest of the ``times`` that are known, or ``None``."""
    return min((t for t in times if t is not None), default=None)


def run_finished(run: Run, attempts: Iterable[Attempt] = ()) -> datetime | None:
    """When a finished run's work ended: its last command's end (``attempts``, else the
    span recorded when it finished), else the tick that finished it."""
    if run.status not in RUN_TERMINAL:
        return None
    ends = [a.finished for a in attempts if a.finished is not None]
    if ends:
        return max(ends)
    if run.work_finished_at is not None:
        return run.work_finished_at
    if run.finished_at is not None:
        return run.finished_at
    if run.state_history:
        return run.state_history[-1].at
    return None

