"""The tick's whole decision, as one pure function.

:func:`plan` takes the schedules, the parsed state, what the executor observed and
``now``, and returns a :class:`Decision`: the new state plus the effects the shell
must carry out (dispatch, cancel, render). It performs no I/O and never reads the
clock, so a lost compare-and-swap race is handled by calling it again on the new
tip, and tests drive it with plain datetimes.

The steps of one call, in order. Each runs once, but for the settling loop
(:mod:`.settling`, **settle** below), which runs at three points:

=======================  ==============================================================
step (module)            why it is where it is
=======================  ==============================================================
``enqueue``              First: the items of ``queue add --executor``, so every step
(:mod:`.requests`)       reads the queue with them (``fire_on_queue`` fires on them).
``log_notes``            What the queue reader noticed, before any other step changes
(:mod:`.drain`)          a queue.
``hygiene``              Observations folded in first, so later steps see the tracks as
(:mod:`.hygiene`)        the executor last did. Timeouts, deadlines, retries, parking.
``cancel_runs``          An operator's cancels, before ``on_failure``, so a cancelled
(:mod:`.requests`)       run's saga starts at once.
``decide``               An approval or a rejection, before the settling, so a rejected
(:mod:`.approvals`)      track's dependants are skipped and an approved one dispatched.
``on_failure``           After the steps that end tracks for good: cancel the run, or
(:mod:`.compensation`)   start its saga. A failure found later waits for the next tick.
                         A cancel that stands stops what this machine runs of the run.
``watch_queues``         Legs queued too long on a label that took no leg: their runs'
(:mod:`.routing`)        cancel is asked, before dispatch reads the labels.
**settle**               Before firing, so ``overlap: skip`` does not count a run whose
                         last track this tick saw finish.
``release_stranded``     After the first settling: a worker that ended is settled from
(:mod:`.drain`)          its own report before its lease is judged. Never repeated.
``fire_due_slots``       The clock's due slots, under catch-up, overlap, daily caps and
(:mod:`.fire`)           pauses (:mod:`.pause`). ``cancel_previous`` ends tracks here.
                         Not in a tick scoped to one run.
``start_runs``           An operator's triggers and backfills, after the clock's slots.
(:mod:`.requests`)       Not in a tick scoped to one run.
``fire_events``          An outside system's events, once per event id, their inputs
(:mod:`.events`)         checked, beside the operator's runs. Not in a scoped tick.
``fire_on_queue``        A queue whose backlog calls for a drain fires its schedule,
(:mod:`.on_queue`)       after the first settling ended the drains that finished.
                         Not in a tick scoped to one run.
``fire_after``           Upstream runs that the first settling fanned in fire their
(:mod:`.after`)          downstreams, before dispatch sends the new runs' tracks.
**settle**               What ``cancel_previous`` ended; skips before dispatch, which
                         sends every pending track whose needs are terminal.
``dispatch_pending``     After settling, so a run buffered behind one that just ended
(:mod:`.dispatch`)       starts now. Caps apply (:mod:`.capacity`); drains are sized.
                         A track whose gate is not approved starts its wait instead.
**settle**               A drain whose queue was empty completes at dispatch: its
                         dependants are skipped and its run fans in within this tick.
``fire_after``           Again, for a run that fanned in at dispatch; a no-op for the
(:mod:`.after`)          upstream runs already counted (the cursor's ``seen``).
=======================  ==============================================================

The settling loop:

- Its passes (:data:`.settling.PASSES`) enable each other: a settled worker lets its
  drain finish, a finished drain lets its dependants be skipped, a skip lets a run fan in.
- It repeats because firing and dispatch end tracks too, and runs each time to a fixed
  point, so no step after it meets a half-settled state.
- Its passes may run in any order and reach the same decision (tested); only the number
  of rounds changes. Nothing outside it repeats (each would fire, send or cancel twice)
  but ``fire_after``, which counts each upstream run once.
- Fan-in only asks for a render; :func:`consolidate` finishes the run once its brief
  rendered, and :func:`record_dispatch` folds the executor's answers in, both after.

A tick that has nothing to do returns a state equal to its input, so the shell
commits nothing.

May import: executors (the request and observation types), state, config, cron,
support, errors. Nothing that reads a file or the clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from ..config.models import Schedule
from ..config.repository import CONFIG_FILE
from ..errors import IllegalTransition
from ..state.model import State
from . import drain
from .after import fire_after
from .approvals import ApprovalRequest, decide
from .compensation import on_failure
from .context import Caps, Context, Decision, Observations
from .dispatch import DispatchRecord, dispatch_pending, record_dispatch
from .events import fire_events
from .fan_in import Finished, consolidate, finish
from .fire import fire_due_slots, jitter
from .hygiene import backoff, hygiene
from .on_queue import fire_on_queue
from .requests import (
    BackfillRequest,
    CancelRequest,
    EnqueueRequest,
    EventRequest,
    Request,
    TriggerRequest,
    cancel_runs,
    enqueue,
    start_runs,
)
from .routing import watch_queues
from .settling import PASSES, Pass, settle

__all__ = [
    "ApprovalRequest",
    "BackfillRequest",
    "CancelRequest",
    "Caps",
    "Decision",
    "DispatchRecord",
    "EnqueueRequest",
    "EventRequest",
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
    settling: Sequence[Pass] = PASSES,
    upstreams: Iterable[str] = (),
) -> Decision:
    """Decide one tick. Pure: the same inputs always give the same decision.
    ``settling`` orders the settling loop's passes (a test runs every order).
    ``upstreams``: for a tick scoped to one run, the schedules whose runs it leaves
    open (a downstream needs a full tick); its ``schedules`` are the run's downstreams.

    A run whose record the state machine refuses to move is left alone, named in one
    line, and the tick decided again without it: one bad record never stops the rest.
    """
    by_id = {s.id: s for s in schedules}
    invalid, requests = list(invalid), list(requests)
    left_alone: dict[str, str] = {}
    while True:
        decision = Decision(state=state.copy(), invalid=list(invalid))
        ctx = Context(decision, by_id, observations, now, executor, dispatch_grace, caps,
                      only_run, left_alone=frozenset(left_alone),
                      upstreams=frozenset(upstreams))
        try:
            _steps(ctx, requests, settling, left_alone)
        except IllegalTransition as exc:
            if exc.run_id is None or exc.run_id in left_alone:
                raise  # not a run's record, or leaving it alone did not help
            left_alone[exc.run_id] = exc.message
            continue
        return decision


def _steps(ctx: Context, requests: list[Request], settling: Sequence[Pass],
           left_alone: dict[str, str]) -> None:
    """The steps of one decision, in the order the module's table gives."""
    for line in ctx.decision.invalid:
        what = "invalid settings" if line.startswith(CONFIG_FILE) else (
            "invalid schedule, ignored")
        ctx.decision.log.append(f"{what}: {line}")
    for run_id, why in sorted(left_alone.items()):
        ctx.decision.log.append(f"run {run_id} left alone: {why} (fix or cancel its record)")
    enqueue(ctx, requests)
    drain.log_notes(ctx)
    hygiene(ctx)
    cancel_runs(ctx, requests)
    decide(ctx, requests)
    on_failure(ctx)
    watch_queues(ctx)
    settle(ctx, settling)
    drain.release_stranded(ctx)
    if ctx.only_run is None:  # a fan-in job's tick fires only what ``after`` its run
        fire_due_slots(ctx)
        start_runs(ctx, requests)
        fire_events(ctx, requests)
        fire_on_queue(ctx)
    fire_after(ctx)
    settle(ctx, settling)
    dispatch_pending(ctx)
    settle(ctx, settling)
    fire_after(ctx)
