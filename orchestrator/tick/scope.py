"""The tick scoped to one run: what a batch's ``fan-in`` job runs.

``orchestrator tick --run RUN --outcomes DIR`` records the outcome files of a batch
(:mod:`orchestrator.executors.outcomes`) and advances that run only: its next ready tracks,
retries whose back-off has passed, or, once every track is terminal, its
consolidation (brief, status, job summary), all in the one compare-and-swap commit
the tick makes anyway. It fires no slot and touches no other run, so a fan-in job
never does the cron tick's work (nor races it for other runs' files).

The planner is the same pure function: it is handed a state holding only that run
(its tracks and dead letters, and the breaker), and no schedules, so no slot can
fall due. Outcomes win over what the executor says: legs with an outcome file are
not asked about, the others (a leg that was cancelled before it could upload, a
leg of an older track.yml that pushed its own report) through the executor as usual.

The run's ``after`` downstreams (:func:`downstreams`):

- The tick also gets the schedules that fire after the run's schedule, with their
  cursors, so the commit that ends the run fires them (:mod:`orchestrator.planner.after`).
  It fires no slot of theirs: the planner fires slots only in a full tick.
- Only a downstream with a cursor and no open run is decided here: overlap and
  catch-up then need no other run. Otherwise the run stays open, and the next full
  tick, which sees every run, counts its end.
- Under the repository's ``max_concurrent_tracks`` the run stays open too: this tick
  cannot count the other runs' tracks in flight, which the cap weighs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..state.model import State

if TYPE_CHECKING:
    from ..config.models import Schedule
    from ..executors.base import Observation
    from ..executors.outcomes import Folder


def scoped(state: State, run_id: str, downstream: Iterable[str] = ()) -> State:
    """``state`` reduced to the run ``run_id`` and the cursors of ``downstream``
    (empty when there is no such run)."""
    run = state.runs.get(run_id)
    if run is None:
        return State(health=dict(state.health), queues=state.queues)
    # the queues too: the run's workers are settled and its drains sized here
    return State(runs={run_id: run}, tracks={run_id: dict(state.tracks.get(run_id, {}))},
                 dlq={k: v for k, v in state.dlq.items() if v.run_id == run_id},
                 health=dict(state.health), queues=state.queues,
                 cursors={s: state.cursors[s] for s in downstream},
                 known_runs=state.known_runs)


def downstreams(schedules: Iterable[Schedule], state: State, run_id: str, *,
                capped: bool = False) -> tuple[tuple[Schedule, ...], frozenset[str]]:
    """The schedules that fire after ``run_id``'s schedule, for its scoped tick to
    decide; or none, and that schedule to hold the run open, when one of them needs
    a full tick (no cursor yet, an open run of its own, or ``capped``: the repository
    caps the tracks in flight)."""
    run = state.runs.get(run_id)
    if run is None:
        return (), frozenset()
    found = tuple(s for s in schedules if _names(s, run.schedule_id))
    if not found or (not capped and all(_decidable(state, s.id) for s in found)):
        return found, frozenset()
    return (), frozenset({run.schedule_id})


def _names(schedule: Schedule, upstream: str) -> bool:
    """Whether ``schedule``'s ``after`` names ``upstream``."""
    return any(up.schedule == upstream for up in schedule.spec.upstreams)


def _decidable(state: State, schedule_id: str) -> bool:
    """Whether a scoped tick may decide the downstream ``schedule_id``: it has a cursor
    and no open run (its overlap has nothing to weigh)."""
    return (schedule_id in state.cursors
            and not any(r.schedule_id == schedule_id for r in state.runs.values()))


def observations(folder: Folder, state: State, run_id: str) -> dict[str, Observation]:
    """The outcomes of ``folder`` that speak of ``run_id``'s current attempts, as
    observations (an outcome of an older attempt is news to nobody)."""
    from ..executors.outcomes import observation

    current = {t.dispatch_key for t in state.tracks.get(run_id, {}).values()}
    return {key: observation(outcome) for key, outcome in folder.outcomes.items()
            if key in current}


def merge(known: Mapping[str, Observation],
          seen: Mapping[str, Observation]) -> dict[str, Observation]:
    """``seen`` (from the executor) overridden by ``known`` (from outcome files)."""
    return {**seen, **known}
