"""Pause after repeated failures (``pause_after_failures``), and the resume that ends it.

A schedule whose last N finished runs all ended ``failed`` (``cancelled`` ones left
out: an operator's cancel is neither a failure nor a success) is paused in its cursor on
the state branch: who (``orchestrator``), when, why. A paused schedule fires nothing;
its open runs go on. Only ``orchestrator schedules resume ID --reason R`` ends the
pause: the pause lives on the state branch, not in the schedule file, so editing
the file (even fixing the command that failed) does not silently resume it. Runs
that finished before the resume no longer count.

Pure: the rule is a function of the state and ``now``. The resume that ends a pause
is an operation on the state branch: :func:`orchestrator.runs.pauses.resume`.
"""

from __future__ import annotations

from datetime import datetime

from ..config.models import Schedule
from ..config.policies import Pause
from ..state import machine
from ..state import model as state_model
from ..state.phases import RunStatus
from ..state.records import Cursor, Run
from ..support.times import iso
from .context import Context

PAUSED_BY = "orchestrator"
"""Who a pause by the rule is recorded as (a resume records the operator)."""


def failure_streak(state: state_model.State, schedule_id: str, after: datetime | None = None
                   ) -> list[str]:
    """Run ids of the schedule's newest finished runs that all ended ``failed``, newest
    first (runs finished at or before ``after``, the last resume, are not counted)."""
    finished = sorted((r for r in state.runs.values() if _finished_since(r, schedule_id, after)),
                      key=lambda r: (r.slot, r.run_id), reverse=True)
    streak: list[str] = []
    for run in finished:
        if run.status is RunStatus.CANCELLED:
            continue  # neither a failure nor a success: the streak goes on past it
        if run.status is not RunStatus.FAILED:
            break
        streak.append(run.run_id)
    return streak


def _finished_since(run: Run, schedule_id: str, after: datetime | None) -> bool:
    """Whether ``run`` is the schedule's and finished after ``after`` (if given)."""
    if run.schedule_id != schedule_id or run.status not in machine.RUN_TERMINAL:
        return False
    return after is None or (run.finished_at or run.created_at) > after


def record_finish(cursor: Cursor, run: Run) -> Cursor:
    """``cursor`` counting the finished ``run``: one more failure in a row, or none. A
    requeued run that fails again was counted when it first failed; a cancelled run
    changes nothing."""
    if run.status is RunStatus.CANCELLED:
        return cursor
    again = sum(1 for h in run.state_history if h.to == RunStatus.FAILED.value) > 1
    if run.status is RunStatus.FAILED and again:
        return cursor
    count = cursor.failures_in_a_row + 1 if run.status is RunStatus.FAILED else 0
    if count == cursor.failures_in_a_row:
        return cursor
    return cursor.model_copy(update={"failures_in_a_row": count})


def apply_pause(ctx: Context, schedule: Schedule, cursor: Cursor) -> Cursor:
    """``cursor``, paused if the schedule's last ``pause_after_failures`` runs failed."""
    limit = schedule.spec.pause_after_failures
    if cursor.paused is not None:
        ctx.decision.log.append(f"{schedule.id}: paused since {iso(cursor.paused.at)} by "
                                f"{cursor.paused.by}; fires nothing until `orchestrator schedules "
                                f"resume {schedule.id}`")
        return cursor
    if limit is None:
        return cursor
    # The runs the tick loaded (all of them in a full load), or the cursor's count of
    # failures as runs finished (a tick loads only open runs)
    streak = failure_streak(ctx.state, schedule.id,
                            cursor.resumed.at if cursor.resumed is not None else None)
    count = max(len(streak), cursor.failures_in_a_row)
    if count < limit:
        return cursor
    reason = (f"{count} consecutive runs failed (pause_after_failures={limit})"
              + (f", the last {streak[0]}" if streak else ""))
    ctx.decision.log.append(f"{schedule.id}: paused: {reason}")
    return cursor.model_copy(update={"paused": Pause(by=PAUSED_BY, at=ctx.now,
                                                     reason=reason)})
