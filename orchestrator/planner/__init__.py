"""The tick's whole decision, as one pure function.

:func:`plan` takes the schedules, the parsed state, what the executor observed and
``now``, and returns a :class:`Decision`: the new state plus the effects the shell
must carry out (dispatch, cancel, render). It performs no I/O and never reads the
clock, so a lost compare-and-swap race is handled by calling it again on the new
tip, and tests drive it with plain datetimes.

Order inside one call, each step in its own module:

1. **Observe** (:mod:`.hygiene`): fold executor observations and dispatch look-ups
   into open tracks.
2. **Hygiene** (:mod:`.hygiene`): tap out tracks past ``timeout_minutes`` and every
   open track of a run past its deadline; re-dispatch ``dispatched`` tracks nobody has
   seen after a grace period; retry failed tracks with attempts left (after backoff),
   park the others in the dead letter queue.
   Then a schedule's ``on_failure`` (:mod:`.compensation`): cancel a run at its first
   final failure, and run the compensations of its completed tracks (a saga); legs
   queued too long on a runner label are sent to the next one (:mod:`.routing`).
   Then the workers of drain tracks that ended are settled item by item, claims whose
   lease passed without a live worker are released, and drain tracks whose workers
   all ended complete (:mod:`.drain`).
3. **Decide** (:mod:`.fire`): fire the slots due since each schedule's cursor, under
   the catch-up, overlap and daily-cap policies (a paused schedule fires nothing,
   :mod:`.pause`); then an operator's triggers and backfills (:mod:`.requests`; its
   cancels come before ``on_failure``, so a cancelled run's saga starts at once); then
   (:mod:`.graph`) skip the tracks whose needs ended without
   completing (``when: success``).
4. **Fan in** (:mod:`.fan_in`): runs whose tracks are all terminal go to
   ``consolidating`` and get a render effect; :func:`consolidate` then marks each
   whose brief rendered ``completed`` or ``failed`` and counts it on its cursor.
   Fan-in also runs before step 3, so a run whose last track this tick saw finish no
   longer counts as open for the overlap policy.
5. **Dispatch** (:mod:`.dispatch`): pending tracks whose ``not_before`` has passed
   and whose needs are terminal, and waiting poll tracks whose next poll is due (after
   fan-in, so a run buffered behind one that just finished starts in the same tick),
   as far as the stampede caps allow (:mod:`.capacity`). A drain track is sized
   here: its items are claimed and its workers dispatched in the same decision
   (:mod:`.drain`).
   :func:`record_dispatch` folds the executor's answers back in afterwards.

A tick that has nothing to do returns a state equal to its input, so the shell
commits nothing.

May import: executors (the request and observation types), state, spec, cron,
support, errors. Nothing that reads a file or the clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from ..spec.models import Schedule
from ..state.model import State
from . import drain
from .compensation import on_failure
from .context import Caps, Context, Decision, Observations
from .dispatch import DispatchRecord, dispatch_pending, record_dispatch
from .fan_in import Finished, consolidate, fan_in, finish
from .fire import fire_due_slots, jitter
from .graph import settle
from .hygiene import backoff, hygiene
from .requests import (
    BackfillRequest,
    CancelRequest,
    Request,
    TriggerRequest,
    cancel_runs,
    start_runs,
)
from .routing import watch_queues

__all__ = [
    "BackfillRequest",
    "CancelRequest",
    "Caps",
    "Decision",
    "DispatchRecord",
    "Finished",
    "Observations",
    "Request",
    "TriggerRequest",
    "backoff",
    "consolidate",
    "finish",
    "jitter",
    "plan",
    "record_dispatch",
]


def plan(
    schedules: Iterable[Schedule],
    state: State,
    observations: Observations,
    now: datetime,
    *,
    executor: str = "local",
    dispatch_grace: timedelta = timedelta(minutes=10),
    invalid: Iterable[str] = (),
    caps: Caps | None = None,
    only_run: str | None = None,
    requests: Iterable[Request] = (),
) -> Decision:
    """Decide one tick. Pure: the same inputs always give the same decision."""
    decision = Decision(state=state.copy(), invalid=list(invalid))
    for line in decision.invalid:
        decision.log.append(f"invalid schedule, ignored: {line}")
    by_id = {s.id: s for s in schedules}
    ctx = Context(decision, by_id, observations, now, executor, dispatch_grace, caps,
                  only_run)
    drain.log_notes(ctx)
    requests = list(requests)
    hygiene(ctx)  # 1 + 2
    cancel_runs(ctx, requests)  # 2a: an operator's cancels
    on_failure(ctx)  # 2b
    watch_queues(ctx)  # 2c
    drain.settle_workers(ctx)  # 2d: workers that ended; then stranded claims
    drain.release_stranded(ctx)
    drain.finish_drains(ctx)
    # A run whose last track this tick saw finish is closed before slots are weighed:
    # overlap=skip must not skip the next slot for a run that is already over.
    settle(ctx)
    fan_in(ctx)
    fire_due_slots(ctx)  # 3
    start_runs(ctx, requests)  # 3: an operator's triggers, and every backfill's next slots
    settle(ctx)  # 3: skips, before fan-in counts the run's tracks
    drain.settle_workers(ctx)  # the workers cancel_previous just ended
    drain.finish_drains(ctx)
    fan_in(ctx)  # 4: and runs that cancel_previous just ended
    dispatch_pending(ctx)  # 5
    drain.finish_drains(ctx)  # a drain whose workers had nothing left to claim
    fan_in(ctx)  # and a run whose drain track found its queue empty end in this tick
    return decision
