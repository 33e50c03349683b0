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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..state.model import State

if TYPE_CHECKING:
    from ..executors.base import Observation
    from ..executors.outcomes import Folder


def scoped(state: State, run_id: str) -> State:
    """``state`` reduced to the run ``run_id`` (empty when there is no such run)."""
    run = state.runs.get(run_id)
    if run is None:
        return State(health=dict(state.health), queues=state.queues)
    # the queues too: the run's workers are settled and its drains sized here
    return State(runs={run_id: run}, tracks={run_id: dict(state.tracks.get(run_id, {}))},
                 dlq={k: v for k, v in state.dlq.items() if v.run_id == run_id},
                 health=dict(state.health), queues=state.queues)


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
