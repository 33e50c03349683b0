"""``runs retry``: rerun tracks of a run, in the same run, as a fresh attempt.

The change is pure; the command commits it with the tick's compare-and-swap and then
runs a tick, which dispatches the retried tracks.

- The tracks named, or with ``failed`` every ``failed``, ``tapped_out``, ``cancelled``
  or ``skipped`` one, go back to ``pending`` with a fresh attempt budget.
- The tracks that need them (directly or not) go back to ``pending`` too, so they
  rerun after them.
- A finished run reopens (``running``, its whole allowance again from now) and gets
  its brief again when it ends; an open run may only have named tracks retried.
- A dead letter of a retried track is resolved: kept, with a note naming the retry.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..errors import NotFound, UserError
from ..state import codec, layout, machine
from ..state import index as state_index
from ..state import model as state_model
from ..state.phases import RunStatus, TrackPhase
from ..state.records import Act, Run, Track
from ..store import Change

RETRYABLE = frozenset({TrackPhase.FAILED, TrackPhase.TAPPED_OUT, TrackPhase.CANCELLED,
                       TrackPhase.SKIPPED})
"""What ``--failed`` retries."""


def _check_request(run: Run, tracks: Mapping[str, Track], names: Collection[str],
                   failed: bool) -> None:
    """Refuse a request naming an unknown track or nothing at all, or one the run's
    status cannot take: an open run may only have named tracks retried."""
    unknown = sorted(n for n in names if n not in tracks)
    if unknown:
        raise UserError(f"run {run.run_id} has no track {unknown[0]!r} "
                        f"(its tracks: {', '.join(sorted(tracks))})")
    if not names and not failed:
        raise UserError("name the tracks to retry (--track) or give --failed")
    if run.status is RunStatus.CONSOLIDATING:
        raise UserError(f"run {run.run_id} is being consolidated; retry after the next tick")
    if run.status not in machine.RUN_TERMINAL and not names:
        raise UserError(f"run {run.run_id} is still {run.status.value}: name the tracks "
                        "to retry with --track")


def _retryable(tracks: Mapping[str, Track]) -> set[str]:
    return {n for n, t in tracks.items() if t.phase in RETRYABLE}


def _reruns_after(name: str, track: Track, picked: set[str]) -> bool:
    """Whether ``track`` needs a picked track and so reruns after it (an open one is
    left to finish)."""
    return (name not in picked and track.phase not in machine.TRACK_OPEN
            and bool(picked & set(track.spec.needs)))


def _with_dependents(tracks: Mapping[str, Track], picked: set[str]) -> set[str]:
    """``picked`` and every track that needs one of them, directly or not."""
    picked = set(picked)
    while more := {n for n, t in tracks.items() if _reruns_after(n, t, picked)}:
        picked |= more
    return picked


def chosen(run: Run, tracks: Mapping[str, Track], names: Collection[str],
           failed: bool) -> list[str]:
    """The tracks to rerun: ``names`` and, with ``failed``, the retryable ones, then
    every track that needs one of them; one line naming what is wrong otherwise."""
    _check_request(run, tracks, names, failed)
    picked = set(names) | (_retryable(tracks) if failed else set())
    if not picked:
        raise UserError(f"run {run.run_id} has no failed, tapped out, cancelled or "
                        "skipped track")
    busy = sorted(n for n in picked if tracks[n].phase in machine.TRACK_OPEN)
    if busy:
        raise UserError(f"track {run.run_id}/{busy[0]} is still {tracks[busy[0]].phase.value}")
    return sorted(_with_dependents(tracks, picked))


def retry(files: Mapping[str, bytes], run_id: str, names: Collection[str], failed: bool,
          act: Act) -> Change:
    """The change that reruns the chosen tracks of ``run_id`` (see the module's rules)."""
    state = state_model.load(files, all_tracks=True)
    run = state.runs.get(run_id)
    tracks = state.tracks.get(run_id, {})
    if run is None or not tracks:
        raise NotFound(f"no run {run_id!r} with track records (unknown or compacted)")
    picked = chosen(run, tracks, names, failed)
    done = act.model_copy(update={"tracks": picked})
    why = f"retried {act.describe()}"
    specs = codec.read_specs(files, run_id)
    out: Change = {}
    for name in picked:
        track = tracks[name]
        fresh = machine.retry_track(
            track, act.at, why, attempt=track.attempt + 1,
            max_attempts=track.attempt + track.spec.max_attempts, not_before=None,
            handle=None, polls=0, dispatch_key=None, url=None, dispatched_at=None,
            started_at=None, finished_at=None, result=None)
        out[layout.track_path(run_id, name)] = codec.record_bytes(fresh, specs)
        key = layout.dlq_key(run_id, name)
        letter = state.dlq.get(key)
        if letter is not None and not letter.discarded:
            resolved = machine.revise(letter, discarded=True, discarded_by=act.by,
                                      discarded_reason=f"resolved: retried in run {run_id} "
                                      f"(attempt {fresh.attempt}) {act.describe()}")
            out[layout.dlq_path(key)] = codec.record_bytes(resolved, specs)
    retries = [*run.retries, done]
    if run.status in machine.RUN_TERMINAL:
        allowance = run.deadline - max(run.fire_at, run.created_at)
        run = machine.reopen_run(run, act.at, why, finished_at=None, retries=retries,
                                 deadline=max(run.deadline, act.at + allowance))
    else:
        run = machine.revise(run, retries=retries)
    out[layout.run_path(run_id)] = codec.to_json(run)
    return state_index.refresh(files, out)  # a reopened run is open again
