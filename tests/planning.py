"""The planner as the unit tests call it: one pure tick of schedules over a state.

A plain function, like :mod:`tests.builders`, so module-level helpers and every unit
test module share it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from orchestrator.config.models import Schedule
from orchestrator.executors.base import Observation
from orchestrator.planner import Decision, Observations, plan
from orchestrator.state.model import State


def tick(schedules: Schedule | Sequence[Schedule], state: State, now: datetime,
         obs: Observations | Mapping[str, Observation] | None = None,
         **options: Any) -> Decision:
    """:func:`~orchestrator.planner.plan` of ``schedules`` (one or several) on ``state``
    at ``now``. ``obs`` is what the executor said: :class:`Observations`, or only the
    observations by dispatch key; nothing by default. ``options`` go to ``plan``
    (``executor``, ``caps``, ``dispatch_grace``, ...)."""
    planned = [schedules] if isinstance(schedules, Schedule) else list(schedules)
    if obs is None:
        obs = Observations()
    elif not isinstance(obs, Observations):
        obs = Observations(seen=dict(obs))
    return plan(planned, state, obs, now, **options)
