"""The dead letter queue: what ``dlq`` lists and shows, and what requeue and discard change.

A dead letter is a track that failed with no attempts left or was tapped out, or a
compensation that failed all its attempts (``compensation_failed``). It stays parked
until an operator requeues it (back to ``pending`` with a fresh attempt budget; its
run reopens) or discards it (kept, marked with who and why). Requeuing a failed
compensation reopens the saga where it stopped: the compensations cancelled behind it
run again after it, in the same order, and the run ends ``failed`` again once none is
open (the track that set the saga off still failed).
The changes here are pure; the command runs them through the same compare-and-swap
as the tick, so they never lose a race.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from ..errors import InvalidId, NotFound, UserError
from ..planner.compensation import REASON as COMPENSATION_FAILED
from ..planner.compensation import order
from ..state import codec, layout, machine
from ..state import index as state_index
from ..state import model as state_model
from ..state.phases import RunStatus, TrackPhase
from ..state.records import DeadLetter, Run, Track
from ..store import Change
from ..support.times import iso


def check_key(key: str) -> str:
    """``key`` if it is a dead letter's key (``<run_id>--<track>``), else
    :class:`InvalidId` saying so (and which key a dispatch key's letter has)."""
    try:
        layout.dlq_path(key)
        return key
    except InvalidId:
        pass
    head, sep, attempt = key.rpartition("--")
    hint = ""
    if sep and attempt.split(".")[0].isdigit():
        with contextlib.suppress(InvalidId):
            layout.dlq_path(head.removesuffix("--undo"))
            hint = (f" ({key!r} is a dispatch key, of one attempt: its dead letter is "
                    f"{head.removesuffix('--undo')!r})")
    raise InvalidId(f"invalid dead letter key {key!r}: expected <run_id>--<track>, e.g. "
                    f"nightly--20261201T0700Z--ingest{hint}")


def find(state: state_model.State, key: str) -> DeadLetter:
    letter = state.dlq.get(key)
    if letter is None:
        raise NotFound(f"no dead letter {key!r}")
    return letter


def listed(state: state_model.State, *, show_all: bool = False) -> list[DeadLetter]:
    """Dead letters oldest first; discarded ones only with ``show_all``."""
    return sorted((d for d in state.dlq.values() if show_all or not d.discarded),
                  key=lambda d: (d.parked_at, d.key))


def list_text(letters: list[DeadLetter]) -> list[str]:
    if not letters:
        return ["dead letter queue is empty"]
    return [f"{d.key}  {iso(d.parked_at)}  {d.reason}" + ("  (discarded)" if d.discarded else "")
            for d in letters]


def letter_text(letter: DeadLetter) -> list[str]:
    """One dead letter for a human: payload, error log, history, who discarded it."""
    # The planner's reason for a failed track already counts its attempts
    # ("failed after 2 attempt(s)"); a tap-out's reason does not.
    attempts = "" if "attempt" in letter.reason else f" (attempt {letter.attempts})"
    lines = [f"{letter.key}: {letter.reason}{attempts}",
             f"  payload: {letter.payload.model_dump_json(exclude_defaults=True)}"]
    for entry in letter.error_log:
        # an entry may hold a stderr tail on several lines: keep them under their "!"
        first, *rest = entry.splitlines() or [""]
        lines.append(f"  ! {first}")
        lines += [f"      {line}" for line in rest]
    lines += [f"  {iso(h.at)}  {h.from_} -> {h.to}  {h.reason}" for h in letter.state_history]
    if letter.discarded:
        lines.append(f"  discarded by {letter.discarded_by}: {letter.discarded_reason}")
    return lines


def requeue(files: Mapping[str, bytes], key: str, who: str, reason: str,
            now: datetime) -> Change:
    """Put the parked track back to ``pending`` with a fresh attempt budget, drop its
    dead letter and reopen a failed run (with its whole allowance again, from ``now``)."""
    state = state_model.load(files, all_tracks=True)
    letter, run, track = _parked(state, key)
    compensation = letter.reason == COMPENSATION_FAILED
    why = f"requeued by {who}" + (f": {reason}" if reason else "")
    track = machine.move_track(
        track, TrackPhase.PENDING, now, why, attempt=track.attempt + 1,
        max_attempts=track.attempt + track.spec.max_attempts, not_before=None, handle=None,
        polls=0,
        dispatch_key=None, url=None, dispatched_at=None, started_at=None, finished_at=None)
    out: Change = {layout.dlq_path(key): None}
    if compensation:
        out.update(_reopen_saga(state, track, why, now))
    else:
        out[layout.track_path(letter.run_id, letter.track)] = codec.record_bytes(
            track, codec.read_specs(files, letter.run_id))
    if run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
        # A reopened saga undoes the run's effects: a new run must not race it.
        out[layout.run_path(run.run_id)] = codec.to_json(
            _reopen(run, why, now, repair=not compensation))
    return state_index.refresh(files, out)  # the reopened run is open again


def _parked(state: state_model.State, key: str) -> tuple[DeadLetter, Run, Track]:
    """The dead letter ``key`` with its run and its track (or compensation), refused
    unless the track may go back to ``pending`` now."""
    letter = find(state, key)
    if letter.discarded:
        raise UserError(f"dead letter {key!r} was discarded; it cannot be requeued")
    compensation = letter.reason == COMPENSATION_FAILED
    run = state.runs.get(letter.run_id)
    records = state.undos if compensation else state.tracks
    track = records.get(letter.run_id, {}).get(letter.track)
    if run is None or track is None:
        raise NotFound(f"dead letter {key!r}: its run or track record is gone (compacted?)")
    if run.status is RunStatus.CONSOLIDATING:
        raise UserError(f"run {run.run_id} is being consolidated; requeue after the "
                        "next tick")
    if track.phase not in (TrackPhase.FAILED, TrackPhase.TAPPED_OUT):
        what = "compensation" if compensation else "track"
        raise UserError(f"{what} {letter.run_id}/{letter.track} is {track.phase.value}, "
                        "not failed or tapped out")
    return letter, run, track


def _reopen(run: Run, why: str, now: datetime, *, repair: bool) -> Run:
    """A failed run running again, with its whole allowance again, from ``now``; a
    ``repair`` is left out by the overlap policy of its schedule's new slots."""
    allowance = run.deadline - max(run.fire_at, run.created_at)
    return machine.move_run(run, RunStatus.RUNNING, now, why, finished_at=None,
                            deadline=max(run.deadline, now + allowance), repair=repair)


def _reopen_saga(state: state_model.State, requeued: Track, why: str, now: datetime) -> Change:
    """The records of a saga reopened at ``requeued`` (already ``pending``): the
    compensations the saga cancelled after it go back to ``pending`` too. The tick
    runs them as before, one at a time, in the same order (newest completed track
    first), each with the attempts it had not used."""
    undos = dict(state.undos.get(requeued.run_id, {}))
    undos[requeued.name] = requeued
    out: Change = {layout.undo_path(requeued.run_id, requeued.name): codec.to_json(requeued)}
    chain = order(state.tracks.get(requeued.run_id, {}), undos)
    after = chain[[u.name for u in chain].index(requeued.name) + 1:]
    for undo in after:
        if undo.phase is TrackPhase.CANCELLED:
            reopened = machine.reopen_compensation(
                undo, now, f"{why} (the saga reopens at {requeued.name})",
                finished_at=None, not_before=None)
            out[layout.undo_path(undo.run_id, undo.name)] = codec.to_json(reopened)
    return out


def select(state: state_model.State, keys: Iterable[str], schedule: str | None = None,
           every: bool = False) -> list[str]:
    """The keys of the dead letters waiting (not discarded) that ``keys`` names, or of
    ``schedule``'s, or all of them (``every``), oldest first. Named keys must exist."""
    keys = list(dict.fromkeys(keys))
    for key in keys:
        find(state, check_key(key))
    waiting = listed(state)
    if every:
        return [d.key for d in waiting]
    if schedule is not None:
        # a run id is <schedule id>--<slot>
        return [d.key for d in waiting if d.run_id.rpartition("--")[0] == schedule]
    return keys


def each(files: Mapping[str, bytes], keys: Iterable[str],
         change: Callable[[Mapping[str, bytes], str], Change | None]) -> Change:
    """``change`` applied to every key in turn, each on the files the ones before it
    left: one change for one compare-and-swap commit."""
    current = dict(files)
    out: Change = {}
    for key in keys:
        step = change(current, key) or {}
        out.update(step)
        for path, data in step.items():
            if data is None:
                current.pop(path, None)
            else:
                current[path] = data
    return {path: data for path, data in out.items() if files.get(path) != data}


def discard(files: Mapping[str, bytes], key: str, who: str, reason: str) -> Change | None:
    """Mark the dead letter discarded by ``who`` for ``reason``; ``None`` if it already is."""
    letter = find(state_model.load(files), key)
    if letter.discarded:
        return None
    done = machine.revise(letter, discarded=True, discarded_by=who, discarded_reason=reason)
    return {layout.dlq_path(key): codec.record_bytes(done, codec.read_specs(files, letter.run_id))}
