"""What every step of the tick's decision shares: the inputs, the decision being built,
and the helpers that change a track and say so.

A :class:`Context` is built once per :func:`orchestrator.planner.plan` call; the steps
(:mod:`.hygiene`, :mod:`.fire`, :mod:`.fan_in`, :mod:`.dispatch`) are functions of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..config.models import Schedule
from ..config.policies import FanIn
from ..executors.base import DispatchRequest, DispatchResult, Handle, Observation
from ..state import machine
from ..state.model import State
from ..state.phases import RunStatus, TrackPhase
from ..state.queueops import Enqueued
from ..state.records import Run, Track
from ..support.times import iso

ERROR_LOG_KEEP = 50


@dataclass(frozen=True)
class Observations:
    """What the shell learned from the executor before planning."""

    seen: Mapping[str, Observation] = field(default_factory=dict)
    """By dispatch key: news about dispatched or running attempts."""
    found: Mapping[str, DispatchResult | None] = field(default_factory=dict)
    """By dispatch key, for ``dispatched`` tracks without a handle: the dispatch that
    happened but was never recorded, or ``None`` when the backend was asked and has
    none. A key the backend could not be asked about is absent: such a track is never
    re-dispatched, however old (the run's deadline ends it)."""
    executor_available: bool = True
    """False when the backend's circuit breaker is open: nothing is dispatched."""
    machine: str | None = None
    """The machine this tick launches on (:attr:`~orchestrator.executors.base.Executor.
    machine`): what it marks dispatched is claimed by it."""


@dataclass(frozen=True)
class Caps:
    """Repository-wide capacity (``orchestrator.json``); ``None`` is no cap."""

    max_concurrent_tracks: int | None = None
    max_dispatches_per_tick: int | None = None


@dataclass
class Decision:
    """The new state and the effects to carry out once it is committed."""

    state: State
    dispatch: list[DispatchRequest] = field(default_factory=list)
    cancel: list[Handle] = field(default_factory=list)
    render: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    """One human-readable line per thing decided."""
    touched_runs: dict[str, list[str]] = field(default_factory=dict)
    """Run id -> what this tick changed in it (for the run's poll log)."""
    invalid: list[str] = field(default_factory=list)
    polls: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    """Run id -> one entry per poll answered in this tick (a line each in the poll log)."""
    dead_items: dict[str, str] = field(default_factory=dict)
    """Dead-letter key (``<queue>/<item>``) -> reason, for each item this tick made dead."""
    answers: dict[str, str] = field(default_factory=dict)
    """What each operator's request did, by request (:func:`.requests.key_of`)."""
    enqueued: dict[str, Enqueued] = field(default_factory=dict)
    """Queue -> what an enqueue request added to it."""

    def note(self, run_id: str | None, line: str) -> None:
        self.log.append(f"{run_id}: {line}" if run_id else line)
        if run_id is not None:
            self.touched_runs.setdefault(run_id, []).append(line)

    def to_json(self) -> dict[str, object]:
        return {
            "dispatch": [r.key for r in self.dispatch],
            "cancel": [h.key for h in self.cancel],
            "render": list(self.render),
            "log": list(self.log),
            "invalid": list(self.invalid),
            **({"answers": dict(self.answers)} if self.answers else {}),
        }


class Context:
    """One planning pass: its inputs and the :class:`Decision` it fills in."""

    def __init__(self, decision: Decision, schedules: dict[str, Schedule],
                 observations: Observations, now: datetime, executor: str,
                 dispatch_grace: timedelta, caps: Caps | None = None,
                 only_run: str | None = None, *,
                 left_alone: frozenset[str] = frozenset(),
                 upstreams: frozenset[str] = frozenset()) -> None:
        self.decision = decision
        self.state = decision.state
        self.schedules = schedules
        self.obs = observations
        self.now = now
        self.executor = executor
        self.grace = dispatch_grace
        self.caps = caps or Caps()
        self.only_run = only_run
        self.settled: set[str] = set()
        """Workers whose items this tick settled already (the settling loop repeats)."""
        """The one run a scoped tick (a fan-in job's) may touch: the claims of other
        runs' workers are not its to release."""
        self.left_alone = left_alone
        """Runs whose record the state machine refused to move: no step works on them."""
        self.upstreams = upstreams
        """Schedules whose runs a scoped tick leaves open: a downstream of theirs needs
        a full tick to count their end (:func:`orchestrator.tick.scope.downstreams`)."""

    def open_runs(self, schedule_id: str | None = None, *, active: bool = False) -> list[Run]:
        """Open runs by slot; ``active`` leaves out consolidating ones (their work is
        done, only the brief is pending) and repairs (old runs reopened by ``dlq
        requeue``), as overlap policies should. The runs left alone are left out of
        the walk over every schedule, but still count for their own schedule's overlap."""
        wanted = {RunStatus.SCHEDULED, RunStatus.RUNNING} if active else machine.RUN_OPEN
        runs = [r for r in self.state.runs.values() if r.status in wanted
                and not (active and r.repair)
                and (r.schedule_id == schedule_id if schedule_id is not None
                     else r.run_id not in self.left_alone)]
        return sorted(runs, key=lambda r: (r.slot, r.run_id))

    def fan_in_job(self, run: Run) -> bool:
        """Whether ``run``'s batches are recorded by a fan-in job (its schedule's
        ``fan_in``; a schedule gone from the files keeps the default)."""
        schedule = self.schedules.get(run.schedule_id)
        return schedule is None or schedule.spec.fan_in is FanIn.JOB

    def set_track(self, track: Track) -> None:
        records = self.state.undos if track.compensating else self.state.tracks
        records.setdefault(track.run_id, {})[track.name] = track

    def move(self, track: Track, to: TrackPhase, reason: str, *, at: datetime | None = None,
             **changes: object) -> Track:
        """Move ``track`` at ``at`` (default ``now``): a moment the backend measured,
        such as the command's own end, kept between the previous step and ``now``."""
        moved = machine.move_track(track, to, self.moment(track, at), reason, **changes)
        self.set_track(moved)
        name = f"{track.name} (undo)" if track.compensating else track.name
        self.decision.note(track.run_id, f"{name}: {track.phase.value} -> {to.value} ({reason})")
        return moved

    def moment(self, track: Track, at: datetime | None) -> datetime:
        """``at`` kept between ``track``'s previous step and ``now`` (a backend's clock
        may be ahead of the tick's or behind it); ``now`` when ``at`` is ``None``."""
        when = self.now if at is None else min(self.now, at)
        if track.state_history:
            when = max(when, track.state_history[-1].at)
        return when

    def handle_of(self, track: Track) -> Handle | None:
        if track.handle is None or track.dispatch_key is None:
            return None
        return Handle(key=track.dispatch_key, handle=track.handle,
                      timeout_minutes=track.spec.timeout_minutes)

    def abandoned(self, track: Track) -> bool:
        """Whether ``track`` is a dispatch another machine claimed and never recorded,
        past its timeout and the grace since it was marked: its attempt is over even if
        it ran, and that machine is gone. It is tapped out, never launched here."""
        return (track.phase is TrackPhase.DISPATCHED and track.handle is None
                and track.claimed_by is not None and track.claimed_by != self.obs.machine
                and track.dispatched_at is not None
                and self.now >= track.dispatched_at + self.grace
                + timedelta(minutes=track.spec.timeout_minutes))

    def tap_out(self, track: Track, reason: str) -> None:
        handle = self.handle_of(track)
        if handle is not None:
            self.decision.cancel.append(handle)
        self.move(track, TrackPhase.TAPPED_OUT, reason, finished_at=self.now,
                  error_log=log_line(track, f"{iso(self.now)} {reason}"))


def log_line(track: Track, line: str) -> list[str]:
    """``track``'s error log with ``line`` added, keeping the newest lines."""
    return [*track.error_log, line][-ERROR_LOG_KEEP:]
