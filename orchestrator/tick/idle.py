"""A tick with nothing to do, known before the planner is loaded.

Most ticks find nothing due. When the inputs alone prove the planner would decide
nothing, the shell skips planning and the executor, and neither is imported: the
commonest tick costs the reading of the state and the memo, no more.

- Only an unscoped tick without an operator's request can be idle.
- Idle needs every schedule left unread or absent (the memo vouched for them, or there
  are none) and none invalid: there is nothing to fire.
- Idle needs the index of open runs trusted as read (no note: nothing to rewrite), no
  open run or track, no compensation waiting, and no work queue on the branch: there
  is nothing to observe, settle, claim or dispatch.
- Idle needs no notification channel of the repository's (a schedule's own channels
  are read only with its file): there is no event to derive.
- Idle needs a heartbeat that is not due: the tick writes no line.
- Retention runs as on any tick; so does the next wake, from the memo.
- With ``ORCHESTRATOR_VERIFY_IDLE`` set, the shell plans an idle tick anyway and fails
  if that plan would change anything: the test suite runs so, and every idle tick it
  makes is checked against the planner.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..config.channels import any_enabled
from ..state import codec
from . import polllogs

if TYPE_CHECKING:
    from ..state.model import State
    from .inputs import TickInputs

VERIFY_ENV = "ORCHESTRATOR_VERIFY_IDLE"


def holds(inputs: TickInputs, now: datetime, heartbeat_every: timedelta, *,
          scoped: bool, requested: bool) -> bool:
    """Whether the planner would decide nothing on ``inputs`` at ``now``."""
    if scoped or requested:
        return False
    return (_nothing_to_fire(inputs) and _nothing_open(inputs.state)
            and not any_enabled(inputs.settings.notify, ())
            and _heartbeat_written(inputs, now, heartbeat_every))


def _nothing_to_fire(inputs: TickInputs) -> bool:
    """No schedule parsed or invalid, and the index of open runs trusted as read."""
    return not (inputs.schedules or inputs.invalid or inputs.loaded.note)


def _nothing_open(state: State) -> bool:
    """No run, track, compensation or queue to observe, and no backfill to go on with."""
    if state.runs or state.tracks or state.undos or state.queues:
        return False
    return all(cursor.backfill is None for cursor in state.cursors.values())


def _heartbeat_written(inputs: TickInputs, now: datetime,
                       heartbeat_every: timedelta) -> bool:
    """Whether the last tick's line is recent enough that this tick need write none."""
    last = codec.last_tick_at(inputs.snapshot.files)
    return (last is not None and now - last < heartbeat_every
            and last - now <= polllogs.AHEAD_TOLERANCE)
