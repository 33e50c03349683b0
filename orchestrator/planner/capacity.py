"""Stampede caps: which of the tracks ready to go are dispatched this tick.

Three caps, each opt-in: a schedule's ``max_parallel`` (tracks of one run in flight),
and the repository's ``max_concurrent_tracks`` (in flight across all runs) and
``max_dispatches_per_tick`` (``orchestrator.json``). "In flight" is ``dispatched`` or
``running``: a pending track holds no runner.

Free capacity is shared fairly: the oldest run first (by slot), then round-robin
over the schedules of runs equally old, so one schedule with a thousand tracks
cannot starve the others that fired with it. What waits, and why, goes to the tick's log, and to the
poll log of each run the tick touched anyway (a run whose only news is "still
waiting" gets no poll line, so an idle tick still commits nothing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..state import machine
from ..state.model import State
from ..state.phases import TrackPhase
from .context import Context

IN_FLIGHT = frozenset({TrackPhase.DISPATCHED, TrackPhase.RUNNING})


def in_flight(state: State) -> Counter[str]:
    """Open run id -> how many of its tracks are dispatched or running (what the caps
    count; compensations are not capped)."""
    # a drain track holds no runner of its own: its workers do
    return Counter({run.run_id: sum(1 for t in state.tracks.get(run.run_id, {}).values()
                                    if t.phase in IN_FLIGHT
                                    and (t.spec.drain is None or t.work is not None))
                    for run in state.runs.values() if run.status in machine.RUN_OPEN})


def admit(ctx: Context, wanting: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ``(run_id, track)`` pairs of ``wanting`` to dispatch now, in dispatch order.

    ``wanting`` lists the pending tracks whose time has come, in any order."""
    wanting = list(wanting)
    caps = ctx.caps
    per_run = in_flight(ctx.state)
    total = sum(per_run.values())
    admitted: list[tuple[str, str]] = []
    waiting: dict[tuple[str, str], str] = {}
    for tier in _by_age(ctx, wanting):
        while tier:  # round-robin over the schedules of runs this old
            for sid in list(tier):
                queue = tier[sid]
                pick = _first_under_max(ctx, queue, per_run)
                if pick is None:  # every run of this schedule is at its max_parallel
                    waiting.update(_at_max_parallel(ctx, queue))
                    del tier[sid]
                    continue
                limit = _global_limit(caps.max_concurrent_tracks, total,
                                      caps.max_dispatches_per_tick, len(admitted))
                if limit is not None:
                    _hold_the_rest(wanting, admitted, waiting, limit)
                    _report(ctx, wanting, waiting)
                    return admitted
                run_id, name = queue.pop(pick)
                admitted.append((run_id, name))
                per_run[run_id] += 1
                total += 1
                if not queue:
                    del tier[sid]
    _report(ctx, wanting, waiting)
    return admitted


def _first_under_max(ctx: Context, queue: list[tuple[str, str]],
                     per_run: Counter[str]) -> int | None:
    """The index in ``queue`` of the first track whose run is under its max_parallel."""
    return next((i for i, (run_id, _) in enumerate(queue)
                 if per_run[run_id] < _max_parallel(ctx, run_id)), None)


def _at_max_parallel(ctx: Context, queue: list[tuple[str, str]]
                     ) -> dict[tuple[str, str], str]:
    """Why each track of ``queue`` waits: its run is at its max_parallel."""
    return {(run_id, name): f"max_parallel {_max_parallel(ctx, run_id)} of the run in flight"
            for run_id, name in queue}


def _hold_the_rest(wanting: list[tuple[str, str]], admitted: list[tuple[str, str]],
                   waiting: dict[tuple[str, str], str], limit: str) -> None:
    """Hold every track neither admitted nor already waiting, for the global ``limit``."""
    taken = set(admitted)
    for key in wanting:
        if key not in taken and key not in waiting:
            waiting[key] = limit


def _by_age(ctx: Context, wanting: list[tuple[str, str]]
            ) -> list[dict[str, list[tuple[str, str]]]]:
    """``wanting`` in tiers of runs with the same slot, oldest first; in each tier a
    queue per schedule (in order of schedule id)."""
    tiers: dict[object, dict[str, list[tuple[str, str]]]] = {}
    for run_id, name in sorted(wanting, key=lambda k: (ctx.state.runs[k[0]].slot, k)):
        run = ctx.state.runs[run_id]
        tiers.setdefault(run.slot, {}).setdefault(run.schedule_id, []).append((run_id, name))
    return [{sid: tier[sid] for sid in sorted(tier)} for tier in tiers.values()]


def _max_parallel(ctx: Context, run_id: str) -> float:
    schedule = ctx.schedules.get(ctx.state.runs[run_id].schedule_id)
    cap = schedule.spec.max_parallel if schedule is not None else None
    return float("inf") if cap is None else cap


def _global_limit(max_tracks: int | None, in_flight: int, max_dispatches: int | None,
                  dispatched: int) -> str | None:
    """Why no more track may go this tick, or ``None`` while the repository has room."""
    if max_tracks is not None and in_flight >= max_tracks:
        return f"max_concurrent_tracks {max_tracks} in flight"
    if max_dispatches is not None and dispatched >= max_dispatches:
        return f"max_dispatches_per_tick {max_dispatches} reached"
    return None


def _report(ctx: Context, wanting: list[tuple[str, str]],
            waiting: dict[tuple[str, str], str]) -> None:
    by_run: dict[str, dict[str, list[str]]] = {}
    for run_id, name in wanting:
        why = waiting.get((run_id, name))
        if why is not None:
            by_run.setdefault(run_id, {}).setdefault(why, []).append(name)
    for run_id, reasons in by_run.items():
        for why, names in reasons.items():
            line = f"waiting: {', '.join(names)} ({why})"
            if run_id in ctx.decision.touched_runs:
                ctx.decision.note(run_id, line)
            else:
                ctx.decision.log.append(f"{run_id}: {line}")
