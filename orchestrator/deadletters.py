"""The dead letter queue: what ``dlq`` lists and shows, and what requeue and discard change.

A dead letter is a track that failed with no attempts left or was tapped out. It
stays parked until an operator requeues it (back to ``pending`` with a fresh
attempt budget; its run reopens) or discards it (kept, marked with who and why).
The changes here are pure; the command runs them through the same compare-and-swap
as the tick, so they never lose a race.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from . import machine, state_index
from . import state as st
from .errors import NotFound, UserError
from .models import DeadLetter, RunStatus, TrackPhase
from .planner.compensation import REASON as COMPENSATION_FAILED
from .store import Change
from .times import iso


def find(state: st.State, key: str) -> DeadLetter:
    letter = state.dlq.get(key)
    if letter is None:
        raise NotFound(f"no dead letter {key!r}")
    return letter


def listed(state: st.State, *, show_all: bool = False) -> list[DeadLetter]:
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
    state = st.load(files, all_tracks=True)
    letter = find(state, key)
    if letter.discarded:
        raise UserError(f"dead letter {key!r} was discarded; it cannot be requeued")
    if letter.reason == COMPENSATION_FAILED:
        # the saga stopped at this compensation and cancelled the ones after it
        raise UserError(f"dead letter {key!r} is a failed compensation: undo it by hand "
                        "(see `dlq show`), then discard it")
    run = state.runs.get(letter.run_id)
    track = state.tracks.get(letter.run_id, {}).get(letter.track)
    if run is None or track is None:
        raise NotFound(f"dead letter {key!r}: its run or track record is gone (compacted?)")
    if run.status is RunStatus.CONSOLIDATING:
        raise UserError(f"run {run.run_id} is being consolidated; requeue after the "
                        "next tick")
    if track.phase not in (TrackPhase.FAILED, TrackPhase.TAPPED_OUT):
        raise UserError(f"track {letter.run_id}/{letter.track} is {track.phase.value}, "
                        "not failed or tapped out")
    why = f"requeued by {who}" + (f": {reason}" if reason else "")
    track = machine.move_track(
        track, TrackPhase.PENDING, now, why, attempt=track.attempt + 1,
        max_attempts=track.attempt + track.spec.max_attempts, not_before=None, handle=None,
        polls=0,
        dispatch_key=None, url=None, dispatched_at=None, started_at=None, finished_at=None)
    out: Change = {
        st.track_path(letter.run_id, letter.track): st.record_bytes(
            track, st.read_specs(files, letter.run_id)),
        st.dlq_path(key): None,
    }
    if run.status is RunStatus.FAILED:
        allowance = run.deadline - max(run.fire_at, run.created_at)
        run = machine.move_run(run, RunStatus.RUNNING, now, why, finished_at=None,
                               deadline=max(run.deadline, now + allowance))
        out[st.run_path(run.run_id)] = st.to_json(run)
    return state_index.refresh(files, out)  # the reopened run is open again


def discard(files: Mapping[str, bytes], key: str, who: str, reason: str) -> Change | None:
    """Mark the dead letter discarded by ``who`` for ``reason``; ``None`` if it already is."""
    letter = find(st.load(files), key)
    if letter.discarded:
        return None
    done = machine.revise(letter, discarded=True, discarded_by=who, discarded_reason=reason)
    return {st.dlq_path(key): st.record_bytes(done, st.read_specs(files, letter.run_id))}
