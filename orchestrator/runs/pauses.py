"""Pauses a person ends: ``orchestrator schedules resume ID --reason R``.

- A pause lives on the state branch, in the schedule's cursor, never in its file:
  editing the file does not resume it.
- A resume records who, when and why; runs that finished before it no longer count
  towards the next pause, and slots that came due while paused are not fired.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from ..errors import NotFound, UserError
from ..spec.policies import Pause
from ..state import codec, layout
from ..state import model as state_model
from ..store import Change


def resume(files: Mapping[str, bytes], schedule_id: str, who: str, reason: str,
           now: datetime) -> Change:
    """End the pause of ``schedule_id``: record who, when and why. Slots that came due
    while it was paused are not fired afterwards (its cursor moves to ``now``)."""
    path = layout.cursor_path(schedule_id)  # that record alone, not the whole branch
    data = files.get(path)
    cursor = None if data is None else state_model.load({path: data}).cursors.get(schedule_id)
    if cursor is None:
        raise NotFound(f"schedule {schedule_id!r} has no state yet (never ticked)")
    if cursor.paused is None:
        raise UserError(f"schedule {schedule_id!r} is not paused")
    resumed = cursor.model_copy(update={
        "paused": None,
        "resumed": Pause(by=who, at=now, reason=reason),
        "failures_in_a_row": 0,
        "since": max(cursor.since, now),
    })
    return {layout.cursor_path(schedule_id): codec.to_json(resumed)}
