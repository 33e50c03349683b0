"""The tick's decision, before any file is written: :func:`decide`.

- Pure: the inputs of one tip, what the executor said and ``now`` in, a
  :class:`~orchestrator.planner.Decision` out; nothing is read, nothing is written.
- The compare-and-swap retry calls it again on each new tip (:meth:`.shell.Tick.mark`),
  with the same :class:`Seen`: the executor is asked once per tick.
- A tick scoped to one run decides on a state holding that run only, with the
  cursors of its ``after`` downstreams (:func:`.scope.scoped`); :func:`split` says
  which state that is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from . import scope as run_scope

if TYPE_CHECKING:
    from ..config.models import Schedule
    from ..planner import Decision, Observations
    from ..state.breaker import Breaker
    from ..state.model import State
    from ..state.records import Run
    from .inputs import TickInputs
    from .settings import TickSettings


@dataclass(frozen=True)
class Seen:
    """What the executor said before the tick planned."""

    observations: Observations
    breaker: Breaker | None
    """The executor's breaker after observing (``None``: it keeps none)."""
    problems: tuple[str, ...] = ()
    """Outcome files of a fan-in tick that were skipped, one line each."""


def split(inputs: TickInputs, scope: str | None) -> tuple[State, Mapping[str, Run]]:
    """The state the tick decides on, and the open runs a scoped tick leaves out."""
    state = inputs.loaded.state
    if scope is None:
        return state, {}
    found, _ = _downstreams(inputs, scope)
    return run_scope.scoped(state, scope, [s.id for s in found]), state.runs


def _downstreams(inputs: TickInputs, scope: str) -> tuple[tuple[Schedule, ...], frozenset[str]]:
    """:func:`.scope.downstreams` of the run ``scope`` on ``inputs``."""
    capped = inputs.settings.max_concurrent_tracks is not None
    return run_scope.downstreams(inputs.schedules, inputs.loaded.state, scope, capped=capped)


def decide(inputs: TickInputs, seen: Seen, now: datetime, settings: TickSettings
           ) -> Decision:
    """The planner's decision on ``inputs``, with the executor's breaker merged into
    the state it leaves and the index's note (a rebuilt index, say) first in its log."""
    from ..planner import plan
    from ..state.breaker import merge_breaker

    name, scope = settings.executor_name, settings.scope
    state, _ = split(inputs, scope)
    schedules, held = (inputs.schedules, frozenset()) if scope is None else (
        _downstreams(inputs, scope))
    decision = plan(schedules, state, seen.observations, now,
                    executor=name, dispatch_grace=settings.dispatch_grace,
                    invalid=inputs.invalid, caps=inputs.caps, only_run=scope,
                    requests=settings.requests, upstreams=held)
    if inputs.loaded.note:
        decision.log.insert(0, inputs.loaded.note)
    if seen.breaker is not None:
        decision.state.health[name] = merge_breaker(
            inputs.breaker(name), state.health.get(name), seen.breaker)
    return decision
