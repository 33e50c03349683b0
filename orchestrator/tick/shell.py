"""The imperative shell around :func:`orchestrator.planner.plan`: one tick, as a pipeline.

:meth:`Tick.run` reads its inputs once, then each step takes what the steps before it
returned and returns what it did; nothing is kept on the :class:`Tick` between steps.

1. **read** the state branch (one fetch), the schedules and ``orchestrator.json``
   (:class:`~.inputs.TickInputs`);
2. **observe**: ask the executor about open tracks and about dispatches that were
   marked but never recorded (look-up by dispatch key);
3. **mark**: plan, and commit the decision with compare-and-swap; a lost race re-plans
   on the new tip, which is safe because planning is pure. Consolidated runs get their
   brief inside this commit (:mod:`.consolidate`);
4. **act**, only once the mark landed: cancel and dispatch, outside the "lock";
5. **notify**: deliver the events the mark commit claimed (:mod:`.notifying`), after the
   dispatches and within the notification budget;
6. **record** the dispatch results and the deliveries in a second compare-and-swap
   commit;
7. **retain**: archive finished runs past ``keep_finished_runs_days``, about once a day.

Invariants:

- A crash between 3 and 6 is repaired by a later tick: a ``dispatched`` track without
  a handle is looked up by its dispatch key, and only re-dispatched, under the same
  key, after a grace period; an event still in the outbox is claimed again after its
  grace and delivered under the same event id.
- A tick with nothing to do commits and pushes nothing, except a heartbeat line once
  ``heartbeat_every`` has passed since the last one.
- Every commit appends to the touched runs' ``polls.jsonl`` and to
  ``state/ticks.jsonl`` (:mod:`.logs`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from .. import store
from ..errors import ExecutorError, OrchestratorError, Rewound, UserError
from ..runs.retention import Outcome, retain
from ..state import codec, layout
from ..state import index as state_index
from ..store import Snapshot, StateStore
from ..support import checkpoints
from ..support.credentials import redactor
from ..support.times import iso
from . import idle, logs, notifying
from . import memo as quiet
from . import scope as run_scope
from .consolidate import (
    Consolidated,
    Overlay,
    Templates,
    board_state,
    finish_runs,
    paused_schedules,
)
from .inputs import TickInputs
from .result import NOTHING_DECIDED, TickResult

if TYPE_CHECKING:  # an idle tick (:mod:`.idle`) imports neither planner nor executor
    from ..brief.context import BriefContext
    from ..brief.dashboard import Dashboard
    from ..executors.base import DispatchResult, Executor
    from ..executors.outcomes import Folder
    from ..planner import Decision, Observations, Request
    from ..state.breaker import Breaker
    from ..state.model import State
    from ..state.records import Run

log = logging.getLogger(__name__)

ExecutorFactory = Callable[["Breaker | None"], "Executor"]
Tails = Callable[["BriefContext"], "BriefContext"]
"""Adds the tracks' stdout tails to a brief's context (:mod:`orchestrator.brief.tails`)."""

_checkpoint = checkpoints.reached
"""The tick's points of no return (:mod:`~orchestrator.support.checkpoints`):
``before-mark`` (observed, nothing committed), ``mark-planned`` (the mark's commit is
computed, not pushed yet), ``after-mark`` (the mark landed, nothing dispatched yet),
``after-dispatch`` (dispatched, nothing notified nor recorded yet), ``after-notify``
(notified, nothing recorded yet) and ``after-record`` (recorded, not yet retained)."""


FUTURE_TOLERANCE = timedelta(minutes=5)
"""How far ``tick --now`` may run ahead of the machine's clock on a branch real ticks
use (clocks differ by a few seconds; a simulation by hours)."""


@dataclass(frozen=True)
class Clock:
    """Where a tick's ``now`` came from, and the machine's clock when it was given.

    A tick settles every slot up to its ``now`` (fired, or noted missed), so a tick far
    ahead of the real clock on a branch that real ticks use would leave them nothing
    to fire until real time catches up: it is refused unless ``force``."""

    machine: datetime
    """The machine's clock, read once by the command."""
    given: bool = False
    """``now`` came from ``tick --now``, not from the machine's clock."""
    force: bool = False

    @property
    def kind(self) -> str:
        return codec.CLOCK_GIVEN if self.given else codec.CLOCK_MACHINE

    def refuse_the_future(self, now: datetime, files: Mapping[str, bytes]) -> None:
        ahead = now - self.machine
        if not self.given or self.force or ahead <= FUTURE_TOLERANCE:
            return
        if codec.real_clock_ticks(files):
            raise UserError(
                f"--now {iso(now)} is {_span(ahead)} ahead of this machine's clock, and "
                "real ticks use this state branch: a tick settles every slot up to its "
                "now, so they would fire nothing until then. See the decision with "
                "--dry-run, simulate on a branch of its own (--state-branch NAME), or "
                "--force")

    def behind(self, now: datetime, files: Mapping[str, bytes]) -> list[str]:
        """A line when the branch's last tick is ahead of this real-clock tick."""
        last = codec.last_tick_at(files)
        if self.given or last is None or last - now <= FUTURE_TOLERANCE:
            return []
        return [f"the last tick, at {iso(last)}, is {_span(last - now)} ahead of this "
                "machine's clock (a tick --now in the future?): the slots up to it are "
                "settled and fire no more"]


def _span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"


@dataclass(frozen=True)
class Seen:
    """What the executor said before the tick planned."""

    observations: Observations
    breaker: Breaker | None
    """The executor's breaker after observing (``None``: it keeps none)."""
    problems: tuple[str, ...] = ()
    """Outcome files of a fan-in tick that were skipped, one line each."""


@dataclass(frozen=True)
class Planned:
    """One planning pass over one tip: the decision and the files it changes."""

    decision: Decision
    changes: dict[str, bytes | None]
    consolidated: Consolidated
    parked: dict[str, str]
    """Dead letter key -> reason, for each track this change parks."""
    notify: notifying.Planned = notifying.OFF


@dataclass(frozen=True)
class Acted:
    """What carrying out a landed decision did."""

    results: list[DispatchResult]
    errors: list[str]
    """Dispatches that failed, one line each."""
    cancel_errors: list[str]
    breaker: Breaker | None


class Tick:
    """One tick against a store, a checkout and an executor. The object holds only its
    configuration; :meth:`run` may be called once or many times."""

    def __init__(
        self,
        store: StateStore,
        repo: Path,
        make_executor: ExecutorFactory,
        now: datetime,
        *,
        executor_name: str = "local",
        dispatch_grace: timedelta = timedelta(minutes=10),
        heartbeat_every: timedelta = timedelta(minutes=60),
        template: Path | None = None,
        index_template: Path | None = None,
        markdown_template: Path | None = None,
        scope: str | None = None,
        outcomes: Folder | None = None,
        repo_templates: bool = False,
        retention: bool = True,
        environ: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        requests: tuple[Request, ...] = (),
    ) -> None:
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware")
        self.store = store
        self.repo = repo
        self.make_executor = make_executor
        self.now = now.astimezone(UTC)
        self.executor_name = executor_name
        self.grace = dispatch_grace
        self.heartbeat_every = heartbeat_every
        self.templates = Templates(template, index_template, markdown_template,
                                   repo if repo_templates else None)
        """Each template not given is looked for in the repository's ``templates/``
        (when the tick first renders), before the packaged one."""
        self.scope = scope
        """Only this run is advanced (a fan-in job's tick): see :mod:`.scope`."""
        self.outcomes = outcomes
        self.retention = retention
        """Apply ``keep_finished_runs_days`` after the tick's work (``serve
        --compact-keep-days`` turns it off: its own compaction wins)."""
        self.notifications = notifying.Notifications(self.now, environ)
        """Where events go: the channels of ``orchestrator.json``, in ``environ`` (default:
        this process's environment, which holds the webhooks' URLs and the token)."""
        self.environ = os.environ if environ is None else environ
        """The environment the tails' redactor reads its secrets from."""
        self.clock = clock
        """Where ``now`` came from (``None``: not said, as in tests driving the shell)."""
        self.requests = requests
        """An operator's requests (``trigger``, ``backfill``, ``runs cancel``), planned
        with everything else: the tick reads every schedule then, without the memo."""

    # ---------------------------------------------------------------- the pipeline

    def run(self, *, dry_run: bool = False) -> TickResult:
        inputs = self.read()
        if self.clock is not None and not dry_run:
            self.clock.refuse_the_future(self.now, inputs.snapshot.files)
        if idle.holds(inputs, self.now, self.heartbeat_every, scoped=self.scope is not None,
                      requested=bool(self.requests)):
            return self.rest(inputs, dry_run)
        executor = self.make_executor(inputs.breaker(self.executor_name))
        tails = self.tails_reader(executor)
        seen = self.observe(inputs, executor)
        ahead = self.clock.behind(self.now, inputs.snapshot.files) if self.clock else []
        result = TickResult(now=self.now, executor=self.executor_name, dry_run=dry_run,
                            scope=self.scope, schedule_errors=list(inputs.invalid),
                            quarantined=inputs.state.quarantine_lines(), memo=inputs.memo,
                            record_log=[*ahead, *seen.problems], snapshot=inputs.snapshot)
        if dry_run:
            planned = self.plan(inputs, seen, tails)
            self._decided(result, inputs, planned)
            result.tip = inputs.snapshot.tip
            return result
        _checkpoint("before-mark")
        planned, outcome, final = self.mark(inputs, seen, tails)
        self._decided(result, final, planned)
        result.mark_landed = outcome.landed
        result.tip = outcome.tip
        result.parked = planned.parked if outcome.landed else {}
        result.finished = list(result.rendered)
        if outcome.landed:
            _checkpoint("after-mark")
            acted = self.act(planned.decision, executor)
            _checkpoint("after-dispatch")
            result.dispatched = [r.key for r in acted.results if r.error is None]
            result.dispatch_errors = acted.errors
            result.record_log += acted.cancel_errors
            sent = self.notify(final, planned)
            _checkpoint("after-notify")
            result.notify_log += [d.line for d in sent]
            if sent or acted.results or (acted.breaker is not None
                                         and acted.breaker != seen.breaker):
                self.record(inputs, acted, result, planned.notify, sent)
                _checkpoint("after-record")
        result.retention = self.retain(inputs)
        if result.retention is not None and result.retention.runs:
            self._forget_local(executor, result.retention.runs)
        return result

    def rest(self, inputs: TickInputs, dry_run: bool) -> TickResult:
        """An idle tick (:mod:`.idle`): nothing planned, nothing committed, no executor;
        retention as on any tick."""
        if os.environ.get(idle.VERIFY_ENV):
            self._verify_idle(inputs)
        ahead = self.clock.behind(self.now, inputs.snapshot.files) if self.clock else []
        result = TickResult(now=self.now, executor=self.executor_name, dry_run=dry_run,
                            idle=True, quarantined=inputs.state.quarantine_lines(),
                            memo=inputs.memo, record_log=ahead, snapshot=inputs.snapshot,
                            tip=inputs.snapshot.tip, cadence=inputs.settings.cadence)
        result.wake = quiet.next_wake(inputs.memo, inputs.schedules, inputs.state,
                                      self.now, inputs.settings.cadence)
        if not dry_run:
            result.retention = self.retain(inputs)
            if result.retention is not None and result.retention.runs:
                self._forget_local(self.make_executor(inputs.breaker(self.executor_name)),
                                   result.retention.runs)
        return result

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
                               scoped=self.scope is not None or bool(self.requests))

    def observe(self, inputs: TickInputs, executor: Executor) -> Seen:
        from ..executors.outcomes import Folder
        from .observing import gather

        if self.scope is None:
            return Seen(gather(executor, inputs.state), executor.health())
        view = run_scope.scoped(inputs.state, self.scope)
        folder = self.outcomes if self.outcomes is not None else Folder()
        known = run_scope.observations(folder, view, self.scope)
        obs = gather(executor, view, known)
        return Seen(obs, executor.health(), tuple(folder.problems))

    def plan(self, inputs: TickInputs, seen: Seen, tails: Tails | None = None) -> Planned:
        """Decide on ``inputs`` and turn the decision into the files of one commit;
        ``tails`` adds the stdout tails to the briefs it renders."""
        from ..planner import plan
        from ..state.breaker import merge_breaker

        loaded, files0 = inputs.loaded, inputs.snapshot.files
        state, others = loaded.state, {}
        if self.scope is not None:
            others, state = state.runs, run_scope.scoped(state, self.scope)
        decision = plan([] if self.scope else inputs.schedules, state, seen.observations,
                        self.now, executor=self.executor_name, dispatch_grace=self.grace,
                        invalid=inputs.invalid, caps=inputs.caps, only_run=self.scope,
                        requests=self.requests)
        if loaded.note:
            decision.log.insert(0, loaded.note)
        if seen.breaker is not None:
            decision.state.health[self.executor_name] = merge_breaker(
                inputs.breaker(self.executor_name), state.health.get(self.executor_name),
                seen.breaker)
        files: dict[str, bytes | None] = dict(decision.state.dump(base=state))
        consolidated = finish_runs(
            decision, files, files0, {s.id: s.spec for s in inputs.schedules}, others,
            redraw_index=paused_schedules(decision.state) != paused_schedules(state),
            now=self.now, executor=self.executor_name, templates=self.templates,
            tails=tails,
            board=lambda after, rest: self.board(inputs, after, rest))
        notes = self.notifications.plan(inputs, state, decision.state, files, files0,
                                        self.scope)
        files = state_index.refresh(files0, files, loaded.index)
        logs.append_logs(files, store.changes(files0, files), files0, decision, self.now,
                         self.executor_name, self.heartbeat_every,
                         self.clock.kind if self.clock else None)
        change = store.changes(files0, files)
        if inputs.memo is not None:  # only beside other changes: never a commit of its own
            change.update(quiet.changes(inputs.memo, inputs.schedules, decision.state, files0,
                                        change, lambda: inputs.settings.cadence))
        parked = {key: d.reason for key, d in sorted(decision.state.dlq.items())
                  if not d.discarded and state.dlq.get(key) is not d}
        parked.update(sorted(decision.dead_items.items()))  # items: the same alert
        return Planned(decision, change, consolidated, parked, notes)

    def board(self, inputs: TickInputs, after: State, others: Mapping[str, Run]
              ) -> Dashboard:
        """The index's dashboard on the state this tick commits. Every schedule is on
        it, so the files the memo vouched for are parsed here: only when the index is
        rendered (a run started or ended, a pause moved), never on a quiet tick."""
        from ..brief.dashboard import from_files
        from ..spec.files import load_all

        schedules, invalid = list(inputs.schedules), list(inputs.invalid)
        folder = self.repo / "schedules"
        if inputs.memo is not None and inputs.memo.left_out and folder.is_dir():
            parsed = load_all(folder, calendars=inputs.calendars)
            schedules = [s for s in parsed.schedules if s.id not in inputs.held]
            invalid = [e.message for e in parsed.errors] + [
                line for line in inputs.invalid if line == inputs.settings.caps_problem]
        state = board_state(inputs.state, after, others, inputs.snapshot.files,
                            [s.id for s in schedules])
        return from_files(inputs.snapshot.files, schedules, invalid, self.now, state=state,
                          last_tick=self.now)

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

    def record(self, inputs: TickInputs, acted: Acted, result: TickResult,
               notes: notifying.Planned = notifying.OFF,
               sent: list[notifying.Delivery] | None = None) -> None:
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
                    files[path] = logs.append_lines(
                        snap.files, path, [logs.poll_row(self.now, self.executor_name, rows)])
            lines[:] = [*([loaded.note] if loaded.note else []), *(str(r) for r in records)]
            return store.changes(snap.files, files) or None

        outcome = self.store.transact(change, f"tick {iso(self.now)}: record dispatch")
        # the record log of the attempt that ended the transaction
        result.record_log = [*result.record_log, *lines]
        result.record_landed = outcome.landed
        if outcome.tip:
            result.tip = outcome.tip

    def retain(self, inputs: TickInputs) -> Outcome | None:
        if self.scope is not None or not self.retention:
            return None
        return retain(self.store, inputs.settings.keep_finished_runs_days,
                      inputs.snapshot.files, inputs.loaded, self.now)

    def _decided(self, result: TickResult, inputs: TickInputs, planned: Planned) -> None:
        decision = planned.decision
        result.decision = decision
        result.rendered = list(planned.consolidated.rendered)
        result.summaries = planned.consolidated.summaries
        result.events = list(planned.notify.events)
        result.notify_log = planned.notify.log
        result.cadence = inputs.settings.cadence
        result.wake = quiet.next_wake(inputs.memo, inputs.schedules, decision.state,
                                      self.now, inputs.settings.cadence)
