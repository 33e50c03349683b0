"""The tick's whole decision, as one pure function.

:func:`plan` takes the schedules, the parsed state, what the executor observed and
``now``, and returns a :class:`Decision`: the new state plus the effects the shell
must carry out (dispatch, cancel, render). It performs no I/O and never reads the
clock, so a lost compare-and-swap race is handled by calling it again on the new
tip, and tests drive it with plain datetimes.

Order inside one call (steps 2 and 3 of README's "How a tick works"):

1. **Observe**: fold executor observations and dispatch look-ups into open tracks.
2. **Hygiene**: tap out tracks past ``timeout_minutes`` and every open track of a run
   past its deadline; re-dispatch ``dispatched`` tracks nobody has seen after a grace
   period; retry failed tracks with attempts left (after backoff), park the others
   in the dead letter queue.
3. **Decide**: fire the slots due since each schedule's cursor, under the catch-up,
   overlap and daily-cap policies.
4. **Fan in**: runs whose tracks are all terminal go to ``consolidating`` and get a
   render effect; :func:`finish` then marks them ``completed`` or ``failed``.
5. **Dispatch**: pending tracks whose ``not_before`` has passed (after fan-in, so a
   run buffered behind one that just finished starts in the same tick).

A tick that has nothing to do returns a state equal to its input, so the shell
commits nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from . import cron, machine
from .executors.base import DispatchRequest, DispatchResult, Handle, Observation
from .models import (
    CatchupPolicy,
    Cursor,
    DeadLetter,
    OverlapPolicy,
    Run,
    RunStatus,
    Schedule,
    SlotNote,
    Track,
    TrackPhase,
    run_id_for,
    utc_date_key,
)
from .state import State, dlq_key
from .text import one_line

P = TrackPhase
R = RunStatus

NOTES_KEEP = 20
"""Slot notes (missed, skipped, ...) kept per schedule cursor."""
FIRES_KEEP_DAYS = 8
"""Days of ``fires_per_day`` counters kept per cursor."""
MISSED_LOOKBACK = timedelta(days=31)
"""Missed slots older than this before the catch-up window are not enumerated."""
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
        }


def jitter(run_id: str, seconds: int) -> timedelta:
    """Deterministic delay in ``0..seconds`` derived from the run id."""
    if seconds <= 0:
        return timedelta(0)
    digest = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big")
    return timedelta(seconds=digest % (seconds + 1))


def backoff(track: Track) -> timedelta:
    """Delay before attempt ``track.attempt + 1``: doubles with each failed attempt."""
    base = track.spec.retry_backoff_seconds
    return timedelta(seconds=min(base * 2 ** (track.attempt - 1), 24 * 3600))


def plan(
    schedules: Iterable[Schedule],
    state: State,
    observations: Observations,
    now: datetime,
    *,
    executor: str = "local",
    dispatch_grace: timedelta = timedelta(minutes=10),
    invalid: Iterable[str] = (),
) -> Decision:
    """Decide one tick. Pure: the same inputs always give the same decision."""
    decision = Decision(state=state.copy(), invalid=list(invalid))
    for line in decision.invalid:
        decision.log.append(f"invalid schedule, ignored: {line}")
    by_id = {s.id: s for s in schedules}
    planner = _Planner(decision, by_id, observations, now, executor, dispatch_grace)
    planner.hygiene()
    planner.fire_due_slots()
    planner.fan_in()
    planner.dispatch_pending()
    return decision


def finish(run: Run, tracks: Iterable[Track], now: datetime) -> Run:
    """Mark a ``consolidating`` run ``completed`` (every track complete) or ``failed``."""
    tracks = list(tracks)
    bad = [t.name for t in tracks if t.phase is not P.COMPLETE]
    if bad:
        return machine.move_run(run, R.FAILED, now, f"not complete: {', '.join(sorted(bad))}",
                                finished_at=now)
    return machine.move_run(run, R.COMPLETED, now, "all tracks complete", finished_at=now)


def record_dispatch(state: State, results: Iterable[DispatchResult], now: datetime) -> list[str]:
    """Fold dispatch results into ``state`` (in place); return what changed.

    Only tracks still ``dispatched`` under the same key are touched: if another
    tick or a report moved the track on meanwhile, its news wins.
    """
    lines: list[str] = []
    by_key = {r.key: r for r in results}
    for run_id, tracks in state.tracks.items():
        for name, track in list(tracks.items()):
            res = by_key.get(track.dispatch_key or "")
            if res is None or track.phase is not P.DISPATCHED:
                continue
            if res.error and res.not_sent:
                tracks[name] = machine.move_track(
                    track, P.PENDING, now, f"not dispatched: {res.error}", dispatch_key=None,
                    dispatched_at=None, handle=None)
                lines.append(f"{run_id}/{name}: not dispatched, will retry: {res.error}")
            elif res.error:
                log = _log(track, f"{now:%Y-%m-%dT%H:%M:%SZ} dispatch failed: {res.error}")
                tracks[name] = machine.move_track(track, P.FAILED, now, "dispatch failed",
                                                  error_log=log, finished_at=now)
                lines.append(f"{run_id}/{name}: dispatch failed: {res.error}")
            elif track.handle != res.handle or track.url != res.url:
                tracks[name] = track.model_copy(update={"handle": res.handle, "url": res.url})
                lines.append(f"{run_id}/{name}: started" + (f", {res.url}" if res.url else ""))
    return lines


def _log(track: Track, line: str) -> list[str]:
    return [*track.error_log, line][-ERROR_LOG_KEEP:]


class _Planner:
    def __init__(self, decision: Decision, schedules: dict[str, Schedule],
                 observations: Observations, now: datetime, executor: str,
                 dispatch_grace: timedelta) -> None:
        self.d = decision
        self.st = decision.state
        self.schedules = schedules
        self.obs = observations
        self.now = now
        self.executor = executor
        self.grace = dispatch_grace

    # ------------------------------------------------------------------ helpers

    def open_runs(self, schedule_id: str | None = None, *, active: bool = False) -> list[Run]:
        """Open runs by slot; ``active`` leaves out consolidating ones (their work is
        done, only the brief is pending), as overlap policies should."""
        wanted = {R.SCHEDULED, R.RUNNING} if active else machine.RUN_OPEN
        runs = [r for r in self.st.runs.values() if r.status in wanted
                and (schedule_id is None or r.schedule_id == schedule_id)]
        return sorted(runs, key=lambda r: (r.slot, r.run_id))

    def set_track(self, track: Track) -> None:
        self.st.tracks.setdefault(track.run_id, {})[track.name] = track

    def move(self, track: Track, to: TrackPhase, reason: str, **changes: object) -> Track:
        moved = machine.move_track(track, to, self.now, reason, **changes)
        self.set_track(moved)
        self.d.note(track.run_id, f"{track.name}: {track.phase.value} -> {to.value} ({reason})")
        return moved

    def handle_of(self, track: Track) -> Handle | None:
        if track.handle is None or track.dispatch_key is None:
            return None
        return Handle(key=track.dispatch_key, handle=track.handle,
                      timeout_minutes=track.spec.timeout_minutes)

    def tap_out(self, track: Track, reason: str) -> None:
        handle = self.handle_of(track)
        if handle is not None:
            self.d.cancel.append(handle)
        self.move(track, P.TAPPED_OUT, reason, finished_at=self.now,
                  error_log=_log(track, f"{self.now:%Y-%m-%dT%H:%M:%SZ} {reason}"))

    # ------------------------------------------------------------------ 1 + 2

    def hygiene(self) -> None:
        for run in self.open_runs():
            tracks = self.st.tracks.get(run.run_id, {})
            for name in sorted(tracks):
                track = self.observe(tracks[name])
                track = self.timeouts(run, track)
                self.retry_or_park(track)

    def observe(self, track: Track) -> Track:
        key = track.dispatch_key
        if key is None or track.phase not in (P.DISPATCHED, P.RUNNING):
            return track
        found = self.obs.found.get(key)
        if found is not None and track.handle is None and found.handle is not None:
            track = track.model_copy(update={"handle": found.handle, "url": found.url})
            self.set_track(track)
            self.d.note(track.run_id, f"{track.name}: adopted unrecorded dispatch {key}")
        seen = self.obs.seen.get(key)
        if seen is not None and seen.handle is not None and seen.handle != track.handle:
            track = track.model_copy(update={"handle": seen.handle,
                                             "url": seen.url or track.url})
            self.set_track(track)
            self.d.note(track.run_id, f"{track.name}: CI run found for {key}")
        if seen is None or seen.phase is None:
            return track
        if seen.phase is track.phase:
            news = {k: v for k, v in (("started_at", seen.started_at), ("url", seen.url))
                    if v is not None and getattr(track, k) is None}
            if news:  # e.g. a queued job that started: its timeout counts from now on
                track = track.model_copy(update=news)
                self.set_track(track)
            return track
        if not machine.can_move_track(track.phase, seen.phase):
            return track  # stale or backward news: the state already knows better
        changes: dict[str, object] = {}
        if seen.url and seen.url != track.url:
            changes["url"] = seen.url
        if seen.started_at and track.started_at is None:
            changes["started_at"] = seen.started_at
        if seen.phase in machine.TRACK_TERMINAL:
            changes["finished_at"] = seen.finished_at or self.now
            if seen.result is not None:
                changes["result"] = seen.result
        if seen.error:
            changes["error_log"] = _log(track, f"{self.now:%Y-%m-%dT%H:%M:%SZ} {seen.error}")
        reason = f"{self.executor}: {seen.error}" if seen.error else f"seen by {self.executor}"
        return self.move(track, seen.phase, one_line(reason), **changes)

    def timeouts(self, run: Run, track: Track) -> Track:
        if track.phase not in machine.TRACK_OPEN:
            return track
        # The deadline counts from the run's start: a run still waiting (jitter, a
        # buffered overlap, an open circuit breaker) has not started its clock.
        if run.status is not R.SCHEDULED and self.now >= run.deadline:
            self.tap_out(track, f"run deadline {run.deadline:%Y-%m-%dT%H:%M:%SZ} passed")
            return self.st.tracks[run.run_id][track.name]
        # A track's timeout counts from its start, as the backends do (time queued for
        # a runner or a task slot is not the track's).
        limit = timedelta(minutes=track.spec.timeout_minutes)
        if track.started_at is not None and self.now >= track.started_at + limit:
            self.tap_out(track, f"timeout of {track.spec.timeout_minutes:g} minutes")
            return self.st.tracks[run.run_id][track.name]
        key = track.dispatch_key or ""
        if (track.phase is P.DISPATCHED and track.handle is None
                and key in self.obs.found and self.obs.found[key] is None
                and track.dispatched_at is not None
                and self.now >= track.dispatched_at + self.grace):
            # Nobody recorded a dispatch and the look-up found none: the tick that
            # marked it died before dispatching. Same key again, so an idempotent
            # backend cannot start it twice.
            track = self.move(track, P.PENDING, "dispatch never recorded; re-dispatching",
                              not_before=None)
        return track

    def retry_or_park(self, track: Track) -> None:
        if track.phase is P.FAILED and track.attempt < track.max_attempts:
            wait = backoff(track)
            self.move(track, P.PENDING,
                      f"retry {track.attempt + 1}/{track.max_attempts} after {wait}",
                      attempt=track.attempt + 1, not_before=self.now + wait, handle=None,
                      dispatch_key=None, url=None, started_at=None, finished_at=None,
                      dispatched_at=None)
        elif track.phase in (P.FAILED, P.TAPPED_OUT):
            key = dlq_key(track.run_id, track.name)
            current = self.st.dlq.get(key)
            if current is not None and current.attempts >= track.attempt:
                return  # already parked (or parked and discarded) for this attempt
            reason = (f"failed after {track.attempt} attempt(s)" if track.phase is P.FAILED
                      else track.state_history[-1].reason if track.state_history
                      else "tapped out")
            self.st.dlq[key] = DeadLetter(
                key=key, run_id=track.run_id, track=track.name, reason=reason,
                parked_at=self.now, attempts=track.attempt, payload=track.spec,
                error_log=track.error_log, state_history=track.state_history)
            self.d.note(track.run_id, f"{track.name}: parked in the dead letter queue ({reason})")

    # ------------------------------------------------------------------ 3

    def fire_due_slots(self) -> None:
        for sid in sorted(self.schedules):
            schedule = self.schedules[sid]
            try:
                self.fire_schedule(schedule)
            except ValueError as exc:  # a spec the model accepted but cron cannot use
                self.d.invalid.append(f"{schedule.path or sid}: {exc}")
                self.d.log.append(f"{sid}: cannot evaluate: {exc}")

    def fire_schedule(self, schedule: Schedule) -> None:
        spec = schedule.spec
        sid = schedule.id
        now = self.now
        window = timedelta(minutes=spec.catchup_window_minutes)
        cursor = self.st.cursors.get(sid)
        first_seen = cursor is None
        if cursor is None:
            start = now if spec.catchup is CatchupPolicy.NONE else now - window
            cursor = Cursor(schedule_id=sid, since=start, enabled=spec.enabled)
        if not spec.enabled:
            if cursor.enabled:
                cursor = cursor.model_copy(update={"enabled": False})
                self.d.log.append(f"{sid}: disabled")
            self.st.cursors[sid] = cursor
            return
        if not cursor.enabled:
            since = now if spec.catchup is CatchupPolicy.NONE else cursor.since
            cursor = cursor.model_copy(update={"enabled": True, "since": since})
            self.d.log.append(f"{sid}: enabled again")
        at = spec.at_utc()
        if cursor.done and (at is None or cursor.last_slot == at):
            self.st.cursors[sid] = cursor
            return  # a one-shot that fired; a new `at` arms it again

        notes: list[SlotNote] = []
        due: list[datetime]
        fire: list[datetime]
        if at is not None:
            due = fire = [at] if at <= now else []  # a one-shot fires once, however late
        else:
            # A slot exactly `window` old is still eligible: slots() excludes `after`.
            lower = max(cursor.since, now - window - timedelta(microseconds=1))
            if lower > cursor.since:
                floor = max(cursor.since, lower - MISSED_LOOKBACK)
                notes += [SlotNote(slot=s, reason="missed", at=now)
                          for s in cron.slots(spec, floor, lower)[-NOTES_KEEP:]]
            due = cron.slots(spec, lower, now)
            if first_seen:
                # Never a back-fill, whatever the policy: slots from before the file
                # was first seen were nobody's promise, so they are not noted either.
                fire = due[-1:]
            elif spec.catchup is CatchupPolicy.ALL:
                fire = due
            else:
                fire = due[-1:]
                notes += [SlotNote(slot=s, reason="skipped", at=now) for s in due[:-1]]
        if first_seen:
            self.d.log.append(self.first_slot_line(schedule, fire))
        if not due and not notes:
            self.st.cursors[sid] = cursor  # nothing due: cursor unchanged
            return

        fires = dict(cursor.fires_per_day)
        last_run_id = cursor.last_run_id
        last_slot = cursor.last_slot
        for slot in fire:
            run_id = run_id_for(sid, slot)
            if run_id in self.st.runs or run_id in self.st.known_runs:
                continue  # already fired (idempotency key)
            day = utc_date_key(slot, spec.zone)
            if spec.max_runs_per_day is not None and fires.get(day, 0) >= spec.max_runs_per_day:
                notes.append(SlotNote(slot=slot, reason="daily_cap", at=now))
                self.d.log.append(f"{sid}: {slot:%Y-%m-%dT%H:%MZ} not fired: "
                                  f"daily cap of {spec.max_runs_per_day} reached")
                continue
            if not self.overlap_allows(schedule, slot):
                notes.append(SlotNote(slot=slot, reason="overlap", at=now))
                continue
            self.create_run(schedule, slot, run_id)
            fires[day] = fires.get(day, 0) + 1
            last_run_id, last_slot = run_id, slot
        for note in notes:
            if note.reason in ("missed", "skipped"):
                self.d.log.append(f"{sid}: {note.slot:%Y-%m-%dT%H:%MZ} {note.reason} "
                                  f"(catchup={spec.catchup.value})")
        keep_from = (now - timedelta(days=FIRES_KEEP_DAYS)).date().isoformat()
        upcoming = [] if spec.at is not None else cron.next_slots(spec, now, 1)
        settled = max([cursor.since, *due, *(n.slot for n in notes)])
        self.st.cursors[sid] = cursor.model_copy(update={
            "since": settled,
            "last_run_id": last_run_id,
            "next_run_at": upcoming[0] if upcoming else None,
            # A one-shot has had its chance once its instant came (fired, or skipped by
            # policy and noted, like any cron slot); `last_slot` remembers which instant.
            "done": at is not None and bool(fire),
            "last_slot": at if at is not None and fire else last_slot,
            "fires_per_day": {k: v for k, v in sorted(fires.items()) if k >= keep_from},
            "notes": [*cursor.notes, *notes][-NOTES_KEEP:],
            "last_error": None,
        })

    def first_slot_line(self, schedule: Schedule, fire: list[datetime]) -> str:
        spec = schedule.spec
        if fire:
            first: datetime | None = fire[0]
        elif spec.at is not None:
            first = spec.at_utc()
        else:
            upcoming = cron.next_slots(spec, self.now, 1)
            first = upcoming[0] if upcoming else None
        when = f"first slot at {first:%Y-%m-%dT%H:%MZ}" if first else "no slot ahead"
        return f"{schedule.id}: new schedule: {when}"

    def overlap_allows(self, schedule: Schedule, slot: datetime) -> bool:
        spec = schedule.spec
        open_runs = self.open_runs(schedule.id, active=True)
        if not open_runs or spec.overlap is OverlapPolicy.ALLOW:
            return True
        stamp = f"{slot:%Y-%m-%dT%H:%MZ}"
        if spec.overlap is OverlapPolicy.SKIP:
            self.d.log.append(f"{schedule.id}: {stamp} skipped: {open_runs[-1].run_id} "
                              "still open (overlap=skip)")
            return False
        if spec.overlap is OverlapPolicy.BUFFER_ONE:
            if len(open_runs) > 1:
                self.d.log.append(f"{schedule.id}: {stamp} skipped: one run already "
                                  "buffered (overlap=buffer_one)")
                return False
            self.d.log.append(f"{schedule.id}: {stamp} buffered behind "
                              f"{open_runs[0].run_id} (overlap=buffer_one)")
            return True
        # cancel_previous
        for run in open_runs:
            for _, track in sorted(self.st.tracks.get(run.run_id, {}).items()):
                if track.phase in machine.TRACK_OPEN:
                    handle = self.handle_of(track)
                    if handle is not None:
                        self.d.cancel.append(handle)
                    self.move(track, P.CANCELLED, f"superseded by slot {stamp}",
                              finished_at=self.now)
        return True

    def create_run(self, schedule: Schedule, slot: datetime, run_id: str) -> None:
        spec = schedule.spec
        fire_at = slot + jitter(run_id, spec.jitter_seconds)
        run = Run(
            run_id=run_id, schedule_id=schedule.id, slot=slot, fire_at=fire_at,
            created_at=self.now,
            deadline=max(fire_at, self.now) + timedelta(minutes=spec.deadline_minutes),
            tracks=[t.name for t in spec.tracks], description=spec.description,
            cron=spec.cron, timezone=spec.timezone, workflow=spec.workflow,
        )
        self.st.runs[run_id] = run
        self.st.tracks[run_id] = {
            t.name: Track(run_id=run_id, name=t.name, spec=t, max_attempts=t.max_attempts,
                          not_before=fire_at if fire_at > self.now else None)
            for t in spec.tracks
        }
        late = self.now - slot
        self.d.note(run_id, f"fired slot {slot:%Y-%m-%dT%H:%MZ} with {len(spec.tracks)} "
                            f"track(s)" + (f", {_minutes(late)} late" if late >= timedelta(
                                minutes=1) else ""))

    # ------------------------------------------------------------------ 4

    def dispatch_pending(self) -> None:
        if not self.obs.executor_available:
            if any(t.phase is P.PENDING for ts in self.st.tracks.values() for t in ts.values()):
                self.d.log.append(f"{self.executor}: circuit breaker open; dispatch deferred")
            return
        for run in self.open_runs():
            if run.status is R.CONSOLIDATING or self.buffered(run):
                continue
            tracks = self.st.tracks.get(run.run_id, {})
            for name in sorted(tracks):
                track = tracks[name]
                if track.phase is not P.PENDING:
                    continue
                if track.not_before is not None and track.not_before > self.now:
                    continue
                request = DispatchRequest(run_id=run.run_id, track=name, attempt=track.attempt,
                                          spec=track.spec, workflow=run.workflow)
                self.move(track, P.DISPATCHED, f"attempt {track.attempt} to {self.executor}",
                          dispatch_key=request.key, dispatched_at=self.now,
                          executor=self.executor, handle=None, not_before=None)
                self.d.dispatch.append(request)
                run = self.st.runs[run.run_id]
                if run.status is R.SCHEDULED:
                    # The deadline counts from the start: a run that waited behind
                    # another (buffer_one) gets its whole allowance once it starts.
                    allowance = run.deadline - max(run.fire_at, run.created_at)
                    run = machine.move_run(run, R.RUNNING, self.now, "first dispatch",
                                           deadline=max(run.deadline, self.now + allowance))
                    self.st.runs[run.run_id] = run

    def buffered(self, run: Run) -> bool:
        """A ``buffer_one`` run waits while an older run of its schedule is open."""
        schedule = self.schedules.get(run.schedule_id)
        if schedule is None or schedule.spec.overlap is not OverlapPolicy.BUFFER_ONE:
            return False
        return any(o.slot < run.slot for o in self.open_runs(run.schedule_id, active=True))

    # ------------------------------------------------------------------ 5

    def fan_in(self) -> None:
        for run in self.open_runs():
            tracks = self.st.tracks.get(run.run_id, {})
            if run.status is R.CONSOLIDATING:
                self.d.render.append(run.run_id)  # a previous render did not land
                continue
            if tracks and all(t.phase in machine.TRACK_TERMINAL for t in tracks.values()):
                counts: dict[str, int] = {}
                for t in tracks.values():
                    counts[t.phase.value] = counts.get(t.phase.value, 0) + 1
                summary = ", ".join(f"{n} {p}" for p, n in sorted(counts.items()))
                self.st.runs[run.run_id] = machine.move_run(
                    run, R.CONSOLIDATING, self.now, f"all tracks terminal: {summary}")
                self.d.note(run.run_id, f"consolidating ({summary})")
                self.d.render.append(run.run_id)


def _minutes(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"
