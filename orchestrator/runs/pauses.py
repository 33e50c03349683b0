"""Pauses a person starts or ends: ``orchestrator schedules pause ID --reason R`` and
``schedules resume ID --reason R`` (or ``unpause``).

- A pause lives on the state branch, in the schedule's cursor, never in its file:
  editing the file does not resume it.
- A manual pause is the automatic one with a person's name and note, as Kubernetes'
  ``suspend`` or Temporal's pause with a note: it needs no pull request, and the same
  resume ends it.
- A resume records who, when and why; runs that finished before it no longer count
  towards the next pause, and slots that came due while paused are not fired.
- A schedule that never ticked can be paused: the pause writes its first cursor,
  settled up to the pause, so the first tick honours it and a resume starts from
  the resume, never from a backlog since the file was added.
- Pausing an id with neither a schedule file nor a cursor is refused (a typo would
  otherwise hold nothing, silently).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from ..config.policies import Pause
from ..errors import NotFound, UserError
from ..state import codec, layout
from ..state import model as state_model
from ..state.records import Cursor
from ..store import Change
from ..support.times import iso


def _cursor(files: Mapping[str, bytes], schedule_id: str, defined: bool) -> Cursor | None:
    """The schedule's cursor; ``None`` when it never ticked. ``defined`` says whether
    a schedule file names the id: with neither, the id is refused."""
    path = layout.cursor_path(schedule_id)  # that record alone, not the whole branch
    data = files.get(path)
    cursor = None if data is None else state_model.load({path: data}).cursors.get(schedule_id)
    if cursor is None and not defined:
        raise NotFound(f"no schedule {schedule_id!r}: no file schedules/{schedule_id}.json "
                       "in this checkout and no state on the state branch")
    return cursor


def pause(files: Mapping[str, bytes], schedule_id: str, who: str, reason: str,
          now: datetime, *, defined: bool = True) -> Change:
    """Pause ``schedule_id`` by hand: it fires nothing until a resume; who, when and
    why are kept where the automatic pause keeps them. A schedule that never ticked
    gets its first cursor here, settled up to ``now``."""
    cursor = _cursor(files, schedule_id, defined)
    if cursor is None:
        cursor = Cursor(schedule_id=schedule_id, since=now)
    if cursor.paused is not None:
        raise UserError(f"schedule {schedule_id!r} is already paused since "
                        f"{iso(cursor.paused.at)} by {cursor.paused.by}: {cursor.paused.reason}")
    paused = cursor.model_copy(update={"paused": Pause(by=who, at=now, reason=reason)})
    return {layout.cursor_path(schedule_id): codec.to_json(paused)}


def resume(files: Mapping[str, bytes], schedule_id: str, who: str, reason: str,
           now: datetime, *, defined: bool = True) -> Change:
    """End the pause of ``schedule_id``: record who, when and why. Slots that came due
    while it was paused are not fired afterwards (its cursor moves to ``now``)."""
    cursor = _cursor(files, schedule_id, defined)
    if cursor is None or cursor.paused is None:
        raise UserError(f"schedule {schedule_id!r} is not paused")
    resumed = cursor.model_copy(update={
        "paused": None,
        "resumed": Pause(by=who, at=now, reason=reason),
        "failures_in_a_row": 0,
        "since": max(cursor.since, now),
    })
    return {layout.cursor_path(schedule_id): codec.to_json(resumed)}
