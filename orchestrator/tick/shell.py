"""The imperative shell around :func:`orchestrator.planner.plan`: one tick, as a pipeline.

:meth:`Tick.run` reads its inputs once, then each step takes what the steps before it
returned and returns what it did; nothing is kept on the :class:`Tick` between steps.

1. **read** the state branch (one fetch), the schedules and ``orchestrator.json``
   (:class:`~.inputs.TickInputs`);
2. **observe**: ask the executor about open tracks and about dispatches that were
   marked but never recorded (look-up by dispatch key);
3. **mark**: decide (:func:`.deciding.decide`, pure), assemble the commit's files from
   its parts (:data:`.contributors.CONTRIBUTORS`: records, briefs, outbox, index, poll logs,
   memo) and commit them with compare-and-swap; a lost race decides and assembles
   again on the new tip, and nothing else;
4. **act**, only once the mark landed: cancel and dispatch, outside the "lock";
5. **notify**: deliver the events the mark commit claimed (:mod:`.notifying`), after the
   dispatches and within the notification budget;
6. **record** the dispatch results and the deliveries in a second compare-and-swap
   commit;
7. **retain**: archive finished runs past ``keep_finished_runs_days``, about once a day.

What the steps returned becomes one frozen :class:`~.result.TickResult`, at the end.

Invariants:

- A crash between 3 and 6 is repaired by a later tick: a ``dispatched`` track without
  a handle is looked up by its dispatch key, and only re-dispatched, under the same
  key, after a grace period; an event still in the outbox is claimed again after its
  grace and delivered under the same event id.
- A tick with nothing to do commits and pushes nothing, except a heartbeat line once
  ``heartbeat_every`` has passed since the last one.
- Every commit appends to the touched runs' ``polls.jsonl`` and to
  ``state/ticks.jsonl`` (:mod:`.polllogs`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .. import store
from ..errors import ExecutorError, OrchestratorError, Rewound
from ..runs.retention import Outcome, retain
from ..state import index as state_index
from ..state import layout
from ..store import Snapshot, StateStore
from ..support import checkpoints
from ..support.credentials import redactor
from ..support.times import iso
from . import idle, notifying, polllogs
from . import memo as quiet
from . import scope as run_scope
from .consolidate import Overlay
from .inputs import TickInputs
from .result import NOTHING_DECIDED, TickResult
from .settings import TickSettings

if TYPE_CHECKING:  # an idle tick (:mod:`.idle`) imports neither planner nor executor
    from ..brief.context import BriefContext
    from ..executors.base import DispatchResult, Executor
    from ..executors.outcomes import Folder
    from ..planner import Decision
    from ..state.breaker import Breaker
    from .contributors import Planned, Tails
    from .deciding import Seen

log = logging.getLogger(__name__)

ExecutorFactory = Callable[["Breaker | None"], "Executor"]

_checkpoint = checkpoints.reached
"""The tick's points of no return (:mod:`~orchestrator.support.checkpoints`):
``before-mark`` (observed, nothing committed), ``mark-planned`` (the mark's commit is
computed, not pushed yet), ``after-mark`` (the mark landed, nothing dispatched yet),
``after-dispatch`` (dispatched, nothing notified nor recorded yet), ``after-notify``
(notified, nothing recorded yet) and ``after-record`` (recorded, not yet retained)."""


@dataclass(frozen=True)
class Acted:
    """What carrying out a landed decision did."""

    results: list[DispatchResult]
    errors: list[str]
    """Dispatches that failed, one line each."""
    cancel_errors: list[str]
    breaker: Breaker | None


@dataclass(frozen=True)
class Recorded:
    """What the record commit did."""

    landed: bool
    tip: str | None
    lines: tuple[str, ...]
    """The record log of the attempt that ended the transaction."""


NOT_RECORDED = Recorded(False, None, ())


class Tick:
    """One tick against a store, a checkout and an executor. The object holds only its
    configuration; :meth:`run` may be called once or many times."""

    def __init__(self, store: StateStore, repo: Path, make_executor: ExecutorFactory,
                 now: datetime, settings: TickSettings | None = None, *,
                 environ: Mapping[str, str] | None = None) -> None:
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware")
        self.store = store
        self.repo = repo
        self.make_executor = make_executor
        self.now = now.astimezone(UTC)
        self.settings = TickSettings() if settings is None else settings
        self.notifications = notifying.Notifications(self.now, environ)
        """Where events go: the channels of ``orchestrator.json``, in ``environ`` (default:
        this process's environment, which holds the webhooks' URLs and the token)."""
        self.environ = os.environ if environ is None else environ
        """The environment the tails' redactor reads its secrets from."""

    @property
    def executor_name(self) -> str:
        return self.settings.executor_name

    @property
    def scope(self) -> str | None:
        return self.settings.scope

    @property
    def outcomes(self) -> Folder | None:
        return self.settings.outcomes

    # ---------------------------------------------------------------- the pipeline

    def run(self, *, dry_run: bool = False) -> TickResult:
        inputs = self.read()
        clock = self.settings.clock
        if clock is not None and not dry_run:
            clock.refuse_the_future(self.now, inputs.snapshot.files)
        if idle.holds(inputs, self.now, self.settings.heartbeat_every,
                      scoped=self.scope is not None, requested=bool(self.settings.requests)):
            return self.rest(inputs, dry_run)
        executor = self.make_executor(inputs.breaker(self.executor_name))
        tails = self.tails_reader(executor)
        seen = self.observe(inputs, executor)
        ahead = clock.behind(self.now, inputs.snapshot.files) if clock else []
        first = (*ahead, *seen.problems)
        if dry_run:
            planned = self.plan(inputs, seen, tails)
            return self._result(inputs, inputs, planned, first, dry_run=True,
                                tip=inputs.snapshot.tip)
        _checkpoint("before-mark")
        planned, outcome, final = self.mark(inputs, seen, tails)
        acted: Acted | None = None
        sent: list[notifying.Delivery] = []
        recorded = NOT_RECORDED
        if outcome.landed:
            _checkpoint("after-mark")
            acted = self.act(planned.decision, executor)
            _checkpoint("after-dispatch")
            sent = self.notify(final, planned)
            _checkpoint("after-notify")
            if sent or acted.results or (acted.breaker is not None
                                         and acted.breaker != seen.breaker):
                recorded = self.record(inputs, acted, planned.notify, sent)
                _checkpoint("after-record")
        retention = self.retain(inputs)
        if retention is not None and retention.runs:
            self._forget_local(executor, retention.runs)
        return self._result(inputs, final, planned, first, dry_run=False, tip=outcome.tip,
                            landed=outcome.landed, acted=acted, sent=sent,
                            recorded=recorded, retention=retention)

    def rest(self, inputs: TickInputs, dry_run: bool) -> TickResult:
        """An idle tick (:mod:`.idle`): nothing planned, nothing committed, no executor;
        retention as on any tick."""
        if os.environ.get(idle.VERIFY_ENV):
            self._verify_idle(inputs)
        clock = self.settings.clock
        ahead = clock.behind(self.now, inputs.snapshot.files) if clock else []
        retention = None
        if not dry_run:
            retention = self.retain(inputs)
            if retention is not None and retention.runs:
                self._forget_local(self.make_executor(inputs.breaker(self.executor_name)),
                                   retention.runs)
        cadence = inputs.settings.cadence
        return TickResult(
            now=self.now, executor=self.executor_name, dry_run=dry_run, idle=True,
            quarantined=tuple(inputs.state.quarantine_lines()), memo=inputs.memo,
            record_log=tuple(ahead), snapshot=inputs.snapshot, tip=inputs.snapshot.tip,
            cadence=cadence, retention=retention,
            wake=quiet.next_wake(inputs.memo, inputs.schedules, inputs.state, self.now,
                                 cadence))

    def _verify_idle(self, inputs: TickInputs) -> None:
        """Plan an idle tick all the same, and fail unless the plan is empty: no change,
        no effect, no line."""
        executor = self.make_executor(inputs.breaker(self.executor_name))
        planned = self.plan(inputs, self.observe(inputs, executor))
        decided = planned.decision.to_json()
        if planned.changes or decided != NOTHING_DECIDED:
            raise AssertionError(f"a tick found idle would have planned: changes "
                                 f"{sorted(planned.changes)}, decision {decided}")

    def tails_reader(self, executor: Executor) -> Tails | None:
        """What adds the tracks' stdout tails to a brief the tick renders: the work
        folders of an executor that declares them (the local one) hold them, a fan-in's
        outcome folder those its legs left; ``None`` when there are none to read."""
        from .. import executors

        redact, folder = redactor(self.environ), self.outcomes
        work_dir = executors.declared(self.executor_name).work_dir
        if work_dir is not None:
            work = work_dir(executor)

            def local(ctx: BriefContext) -> BriefContext:
                from ..brief.tails import with_local_tails

                return with_local_tails(ctx, work, redact)

            return local
        if folder is None or not folder.stdouts:
            return None

        def legs(ctx: BriefContext) -> BriefContext:
            from ..brief.tails import with_outcome_tails

            return with_outcome_tails(ctx, folder, redact)

        return legs

    def _forget_local(self, executor: Executor, run_ids: tuple[str, ...]) -> None:
        """Archived runs' local work folders go with them (the same retention)."""
        from .. import executors

        forget = executors.declared(self.executor_name).forget
        if forget is not None:
            forget(executor, run_ids)

    def read(self) -> TickInputs:
        snap = self.store.read()
        if self.store.rewound:
            raise Rewound(self.store.rewound)
        return TickInputs.load(snap, self.repo, self.now,
                               scoped=self.scope is not None or bool(self.settings.requests))

    def observe(self, inputs: TickInputs, executor: Executor) -> Seen:
        from ..executors.outcomes import Folder
        from .deciding import Seen
        from .observing import gather

        if self.scope is None:
            return Seen(gather(executor, inputs.state), executor.health())
        view = run_scope.scoped(inputs.state, self.scope)
        folder = self.outcomes if self.outcomes is not None else Folder()
        known = run_scope.observations(folder, view, self.scope)
        obs = gather(executor, view, known)
        return Seen(obs, executor.health(), tuple(folder.problems))

    def plan(self, inputs: TickInputs, seen: Seen, tails: Tails | None = None) -> Planned:
        """Decide on ``inputs`` and assemble the files of one commit from its parts;
        ``tails`` adds the stdout tails to the briefs it renders."""
        from .contributors import Draft, assemble
        from .deciding import decide

        decision = decide(inputs, seen, self.now, self.settings)
        return assemble(Draft(inputs, decision, self.settings, self.now, self.repo,
                              self.notifications, tails))

    def mark(self, inputs: TickInputs, seen: Seen, tails: Tails | None = None
             ) -> tuple[Planned, store.TransactResult, TickInputs]:
        """Commit the decision; returns the plan made on the tip the compare-and-swap
        ended on (one per race lost), what the store did, and that tip's inputs."""
        attempts: list[tuple[Planned, TickInputs]] = []

        def change(snap: Snapshot) -> dict[str, bytes | None] | None:
            # plan() never mutates its input, so the state parsed for observation is
            # reused while the compare-and-swap still sees the same tip
            on_tip = inputs.on(snap, self.repo)
            attempts.append((self.plan(on_tip, seen, tails), on_tip))
            _checkpoint("mark-planned")
            return attempts[-1][0].changes or None

        outcome = self.store.transact(change, f"tick {iso(self.now)}: decide",
                                      snapshot=inputs.snapshot)
        assert attempts, "transact calls the change function or raises"
        planned, final = attempts[-1]
        return planned, outcome, final

    def act(self, decision: Decision, executor: Executor) -> Acted:
        """Cancel and dispatch what the landed ``decision`` says."""
        cancel_errors: list[str] = []
        for handle in decision.cancel:
            try:
                executor.cancel(handle)
            except ExecutorError as exc:
                cancel_errors.append(f"cancel {handle.key} failed: {exc}")
        errors: list[str] = []
        results: list[DispatchResult] = []
        if decision.dispatch:
            try:
                results = executor.dispatch(decision.dispatch)
            except OrchestratorError as exc:
                # Some of it may have been sent: record nothing. The tracks stay
                # `dispatched` without a handle, and a later tick's look-up adopts what
                # was started and re-dispatches only what the backend says it never saw.
                errors.append(f"dispatch failed: {exc.message}")
        errors += [f"{r.key}: {r.error}" for r in results if r.error]
        return Acted(results, errors, cancel_errors, executor.health())

    def notify(self, inputs: TickInputs, planned: Planned) -> list[notifying.Delivery]:
        """Deliver the events the landed mark claimed; never raises, never waits past
        the notification budget."""
        if planned.notify.prepared is None or not planned.notify.prepared.claims:
            return []
        view = Overlay({k: v for k, v in planned.changes.items() if v is not None},
                       inputs.snapshot.files)
        markdown = notifying.markdown_of(planned.consolidated.summaries, view,
                                         {s.id: s.spec for s in inputs.schedules}, self.now)
        return self.notifications.deliver_safely(planned.notify, markdown)

    def record(self, inputs: TickInputs, acted: Acted,
               notes: notifying.Planned = notifying.OFF,
               sent: list[notifying.Delivery] | None = None) -> Recorded:
        """Commit the dispatch results, the executor's breaker and what was notified."""
        from ..planner import record_dispatch
        from ..state.breaker import merge_breaker

        base = inputs.breaker(self.executor_name)
        lines: list[str] = []

        def change(snap: Snapshot) -> dict[str, bytes | None] | None:
            loaded = state_index.load(snap.files)
            before = loaded.state
            state = before.copy()
            records = record_dispatch(state, acted.results, self.now)
            if acted.breaker is not None:
                state.health[self.executor_name] = merge_breaker(
                    base, before.health.get(self.executor_name), acted.breaker)
            files: dict[str, bytes | None] = dict(state.dump(base=before))
            touched: dict[str, list[str]] = {}
            for record in records:
                touched.setdefault(record.run_id, []).append(record.change)
            files = state_index.refresh(snap.files, files, loaded.index)
            told = notifying.Notifications.settle(snap.files, notes, sent or [])
            if told is not None:
                files[layout.NOTIFY] = told
            if store.changes(snap.files, files):
                for run_id, rows in sorted(touched.items()):
                    path = layout.polls_path(run_id)
                    files[path] = polllogs.append_lines(
                        snap.files, path, [polllogs.poll_row(self.now, self.executor_name, rows)])
            lines[:] = [*([loaded.note] if loaded.note else []), *(str(r) for r in records)]
            return store.changes(snap.files, files) or None

        outcome = self.store.transact(change, f"tick {iso(self.now)}: record dispatch")
        return Recorded(outcome.landed, outcome.tip, tuple(lines))

    def retain(self, inputs: TickInputs) -> Outcome | None:
        if self.scope is not None or not self.settings.retention:
            return None
        return retain(self.store, inputs.settings.keep_finished_runs_days,
                      inputs.snapshot.files, inputs.loaded, self.now)

    def _result(self, inputs: TickInputs, final: TickInputs, planned: Planned,
                first: tuple[str, ...], *, dry_run: bool, tip: str | None,
                landed: bool = False, acted: Acted | None = None,
                sent: Sequence[notifying.Delivery] = (), recorded: Recorded = NOT_RECORDED,
                retention: Outcome | None = None) -> TickResult:
        """What the tick did, from what its steps returned: ``inputs`` as first read,
        ``final`` the tip the mark ended on, ``acted`` once the mark landed."""
        decision, cadence = planned.decision, final.settings.cadence
        rendered = tuple(planned.consolidated.rendered)
        done = acted or Acted([], [], [], None)
        return TickResult(
            now=self.now, executor=self.executor_name, dry_run=dry_run, scope=self.scope,
            schedule_errors=tuple(inputs.invalid),
            quarantined=tuple(inputs.state.quarantine_lines()), memo=inputs.memo,
            snapshot=inputs.snapshot, decision=decision, rendered=rendered,
            summaries=planned.consolidated.summaries, events=planned.notify.events,
            cadence=cadence,
            wake=quiet.next_wake(final.memo, final.schedules, decision.state, self.now,
                                 cadence),
            mark_landed=landed, tip=recorded.tip or tip,
            parked=planned.parked if landed else {},
            finished=() if dry_run else rendered,
            dispatched=tuple(r.key for r in done.results if r.error is None),
            dispatch_errors=tuple(done.errors),
            record_log=(*first, *done.cancel_errors, *recorded.lines),
            notify_log=(*planned.notify.log, *(d.line for d in sent)),
            record_landed=recorded.landed, retention=retention)
