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
- A retried track takes the schedule's current definition of it (given as
  ``current``), or keeps the one the run fired with (``current`` is ``None``); the
  run's record of the retry says which. A track the schedule no longer has, or whose
  needs the run lacks, is refused with one line.
- A drain's workers are disposable: a worker is never retried itself (``--failed``
  takes its drain instead), and a retried drain's workers leave the run, so it sizes
  afresh and its new workers work under keys of the new attempt.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ..config.models import TrackSpec
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
    _refuse_workers(run, tracks, names)
    if not names and not failed:
        raise UserError("name the tracks to retry (--track) or give --failed")
    if run.status is RunStatus.CONSOLIDATING:
        raise UserError(f"run {run.run_id} is being consolidated; retry after the next tick")
    if run.status not in machine.RUN_TERMINAL and not names:
        raise UserError(f"run {run.run_id} is still {run.status.value}: name the tracks "
                        "to retry with --track")


def _refuse_workers(run: Run, tracks: Mapping[str, Track], names: Collection[str]) -> None:
    """A drain's worker is never retried by name: its drain is."""
    for name in sorted(names):
        work = tracks[name].work
        if work is not None:
            raise UserError(f"track {run.run_id}/{name} is a worker of drain track "
                            f"{work.drain!r}: retry {work.drain} instead")


def _owner(track: Track) -> str:
    """The track a retry of ``track`` reruns: a worker's drain, or the track itself."""
    return track.work.drain if track.work is not None else track.name


def _retryable(tracks: Mapping[str, Track]) -> set[str]:
    return {_owner(t) for t in tracks.values() if t.phase in RETRYABLE}


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


def _definition(run: Run, tracks: Mapping[str, Track], name: str,
                current: Mapping[str, TrackSpec] | None) -> TrackSpec:
    """The spec track ``name`` reruns with: the current one, or as it fired."""
    fired = tracks[name].spec
    if current is None:
        return fired
    spec = current.get(name)
    if spec is None:
        raise UserError(f"schedule {run.schedule_id} no longer has track {name!r}: retry "
                        "with --as-fired to rerun it as the run fired it")
    missing = sorted(set(spec.needs) - set(tracks))
    if missing:
        raise UserError(f"track {name!r} of schedule {run.schedule_id} now needs "
                        f"{missing[0]!r}, which run {run.run_id} does not have: retry "
                        "with --as-fired")
    if run.origin in ("manual", "event"):  # their inputs override every track's own
        spec = spec.model_copy(update={"inputs": {**spec.inputs, **fired.inputs}})
    return spec


def _workers_of(tracks: Mapping[str, Track], drains: Collection[str]) -> list[str]:
    return sorted(n for n, t in tracks.items() if t.work is not None and t.work.drain in drains)


def _resolve(state: state_model.State, run_id: str, name: str, attempt: int, act: Act,
             specs: Mapping[str, Any]) -> Change:
    """The dead letter of ``name``, resolved as retried (nothing when it has none)."""
    key = layout.dlq_key(run_id, name)
    letter = state.dlq.get(key)
    if letter is None or letter.discarded:
        return {}
    resolved = machine.revise(letter, discarded=True, discarded_by=act.by,
                              discarded_reason=f"resolved: retried in run {run_id} "
                              f"(attempt {attempt}) {act.describe()}")
    return {layout.dlq_path(key): codec.record_bytes(resolved, specs)}


def _rerun(track: Track, spec: TrackSpec, act: Act, why: str) -> Track:
    budget = 1 if spec.drain is not None else spec.max_attempts  # a drain runs once
    return machine.retry_track(
        track, act.at, why, spec=spec, attempt=track.attempt + 1,
        max_attempts=track.attempt + budget, not_before=None,
        handle=None, polls=0, dispatch_key=None, url=None, dispatched_at=None,
        started_at=None, finished_at=None, result=None)


def retry(files: Mapping[str, bytes], run_id: str, names: Collection[str], failed: bool,
          act: Act, current: Mapping[str, TrackSpec] | None = None) -> Change:
    """The change that reruns the chosen tracks of ``run_id`` (see the module's rules);
    ``current``: the schedule's tracks by name as they are now (``None``: as fired)."""
    state = state_model.load(files, all_tracks=True)
    run = state.runs.get(run_id)
    tracks = state.tracks.get(run_id, {})
    if run is None or not tracks:
        raise NotFound(f"no run {run_id!r} with track records (unknown or compacted)")
    picked = chosen(run, tracks, names, failed)
    definitions = {n: _definition(run, tracks, n, current) for n in picked}
    which = "as-fired" if current is None else "current"
    done = act.model_copy(update={"tracks": picked, "definition": which})
    why = f"retried {act.describe()}"
    specs = codec.read_specs(files, run_id)
    out: Change = {}
    for name in picked:
        fresh = _rerun(tracks[name], definitions[name], act, f"{why} ({which} definition)")
        out[layout.track_path(run_id, name)] = codec.record_bytes(fresh, specs)
        out.update(_resolve(state, run_id, name, fresh.attempt, act, specs))
    dropped = _workers_of(tracks, picked)
    for name in dropped:  # a retried drain sizes afresh
        out[layout.track_path(run_id, name)] = None
        out.update(_resolve(state, run_id, name, tracks[name].attempt + 1, act, specs))
    run = machine.revise(run, tracks=[n for n in run.tracks if n not in dropped])
    out[layout.run_path(run_id)] = codec.to_json(_reopened(run, act, why, done))
    return state_index.refresh(files, out)  # a reopened run is open again


def _reopened(run: Run, act: Act, why: str, done: Act) -> Run:
    """``run`` with the retry recorded, running again when it had finished."""
    retries = [*run.retries, done]
    if run.status not in machine.RUN_TERMINAL:
        return machine.revise(run, retries=retries)
    allowance = run.deadline - max(run.fire_at, run.created_at)
    return machine.reopen_run(run, act.at, why, finished_at=None, retries=retries,
                              deadline=max(run.deadline, act.at + allowance))
