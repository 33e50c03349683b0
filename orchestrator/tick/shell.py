"""The imperative shell around :func:`orchestrator.planner.plan`.

One tick, in the order README's "How a tick works" lists:

1. read the state branch (one fetch) and the schedules in the checkout;
2. ask the executor about open tracks (observe) and about dispatches that were
   marked but never recorded (lookup);
3. plan, and commit the decision (the *mark*) with compare-and-swap; a lost race
   re-plans on the new tip, which is safe because planning is pure;
4. only once the mark landed: cancel and dispatch, outside the "lock";
5. record the dispatch results in a second compare-and-swap commit.

Consolidated runs get their brief rendered inside the mark commit, and every
commit appends to the touched runs' ``polls.jsonl`` and to ``state/ticks.jsonl``.
A crash between 3 and 5 is repaired by a later tick: a ``dispatched`` track without
a handle is looked up by its dispatch key (and only re-dispatched, under the same
key, after a grace period). A tick with nothing to do commits and pushes nothing,
except a heartbeat line once ``heartbeat_every`` has passed since the last one.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from .. import store
from ..errors import ExecutorError, OrchestratorError, Rewound
from ..executors.base import DispatchResult, Executor
from ..executors.outcomes import Folder
from ..planner import Caps, Decision, Observations, finish, plan, record_dispatch
from ..planner.pause import record_finish
from ..runs.retention import retain
from ..spec.config import RepoSettings
from ..spec.models import Schedule
from ..spec.policies import Pause
from ..state import codec, layout
from ..state import index as state_index
from ..state import model as state_model
from ..state.breaker import Breaker, merge_breaker
from ..state.records import Run
from ..store import Snapshot, StateStore
from ..support.times import iso
from . import memo as quiet
from . import scope as run_scope
from .observing import gather as gather
from .result import TickResult as TickResult

log = logging.getLogger(__name__)

ExecutorFactory = Callable[[Breaker | None], Executor]

Checkpoint = Callable[[str], None]
"""A hook called with the name of each point of no return a tick passes:
``after-mark`` (the mark landed, nothing dispatched yet) and ``after-dispatch``
(dispatched, nothing recorded yet)."""

CHECKPOINTS: list[Checkpoint] = []
"""Installed checkpoint hooks; the product installs none. Crash tests install one
that kills the process at a point, to prove that a later tick repairs the damage."""


def _checkpoint(point: str) -> None:
    for hook in CHECKPOINTS:
        hook(point)


@dataclass(frozen=True)
class Planned:
    """One planning pass over one snapshot: the decision and the files it changes."""

    decision: Decision
    changes: dict[str, bytes | None]
    rendered: list[str]
    """Runs whose brief was rendered (and which are finished by this change)."""
    summaries: dict[str, Callable[[int], str]]
    """Run id -> its Markdown brief, rendered within a byte limit."""
    parked: dict[str, str] = field(default_factory=dict)
    """Dead letter key -> reason, for each track this change parks."""


def _pauses(state: state_model.State) -> dict[str, Pause]:
    return {sid: c.paused for sid, c in sorted(state.cursors.items()) if c.paused}


def _append_lines(files: Mapping[str, bytes], path: str, lines: list[bytes],
                  keep: int | None = None) -> bytes:
    old = files.get(path, b"")
    joined = old + b"".join(lines)
    if keep is not None:
        rows = joined.splitlines(keepends=True)
        joined = b"".join(rows[-keep:])
    elif path.endswith("/polls.jsonl") and len(joined) > codec.POLLS_MAX_BYTES:
        joined = codec.cut_lines(joined, codec.POLLS_MAX_BYTES)
    return joined


class _Overlay(Mapping[str, bytes]):
    """``top`` over ``base``: the files as they will be once ``top`` is committed."""

    def __init__(self, top: Mapping[str, bytes], base: Mapping[str, bytes]) -> None:
        self.top = top
        self.base = base

    def __getitem__(self, path: str) -> bytes:
        return self.top[path] if path in self.top else self.base[path]

    def __contains__(self, path: object) -> bool:
        return path in self.top or path in self.base

    def __iter__(self) -> Iterator[str]:
        yield from self.top
        yield from (p for p in self.base if p not in self.top)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Tick:
    """One tick against a store, a checkout and an executor."""

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
        self.template = template
        self.index_template = index_template
        self.markdown_template = markdown_template
        self.repo_templates = repo_templates
        """Each template not given is looked for in the repository's ``templates/``
        (when the tick first renders), before the packaged one."""
        self._breaker_base: Breaker | None = None
        self.scope = scope
        """Only this run is advanced (a fan-in job's tick): see :mod:`.run_scope`."""
        self.outcomes = outcomes or Folder()
        self._caps: Caps | None = None
        self._memo: quiet.Memo | None = None
        self.retention = retention
        """Apply ``keep_finished_runs_days`` after the tick's work (``serve
        --compact-keep-days`` turns it off: its own compaction wins)."""
        self._start: tuple[Mapping[str, bytes], state_index.Loaded] | None = None
        """The files the tick read first, and the state loaded from them."""

    # ---------------------------------------------------------------- planning

    def _plan_files(self, snap: Snapshot, loaded: state_index.Loaded,
                    schedules: list[Schedule], invalid: list[str], obs: Observations,
                    breaker: Breaker | None) -> Planned:
        state = loaded.state
        others: dict[str, Run] = {}
        if self.scope is not None:
            others = state.runs
            state = run_scope.scoped(state, self.scope)
        decision = plan([] if self.scope else schedules, state, obs, self.now,
                        executor=self.executor_name, dispatch_grace=self.grace, invalid=invalid,
                        caps=self._caps)
        if loaded.note:
            decision.log.insert(0, loaded.note)
        if breaker is not None:
            decision.state.health[self.executor_name] = merge_breaker(
                self._breaker_base, state.health.get(self.executor_name), breaker)
        files: dict[str, bytes | None] = dict(decision.state.dump(base=state))
        summaries: dict[str, Callable[[int], str]] = {}
        # the index names paused schedules: a pause or resume renders it again
        pauses_moved = _pauses(decision.state) != _pauses(state)
        rendered = self._consolidate(decision, files, snap.files, schedules, summaries,
                                     others, pauses_moved)
        files = state_index.refresh(snap.files, files, loaded.index)
        self._append_logs(files, store.changes(snap.files, files), snap.files, decision)
        parked = {key: d.reason for key, d in sorted(decision.state.dlq.items())
                  if not d.discarded and state.dlq.get(key) is not d}
        change = store.changes(snap.files, files)
        if self._memo is not None:  # only beside other changes: never a commit of its own
            change.update(quiet.changes(self._memo, schedules, decision.state, snap.files,
                                        change, lambda: self._settings.cadence))
        return Planned(decision, change, rendered, summaries, parked)

    def _consolidate(self, decision: Decision, files: dict[str, bytes | None],
                     old: Mapping[str, bytes], schedules: list[Schedule],
                     summaries: dict[str, Callable[[int], str]],
                     others: Mapping[str, Run], pauses_moved: bool = False) -> list[str]:
        """Render the brief of each consolidated run and mark the run finished.

        A brief that fails to render (say, a broken user template) leaves its run
        ``consolidating``: the next tick tries again, and nothing else is held up.
        """
        created = any(p.endswith("/run.json") and p not in old for p in files)
        if not decision.render and not created and not pauses_moved:
            return []
        # jinja2 is only imported when there is something to render
        from ..brief import context_from_files, render_html, render_index, render_markdown
        self._find_templates()

        specs = {s.id: s.spec for s in schedules}
        rendered: list[str] = []
        for run_id in decision.render:
            run = decision.state.runs[run_id]
            finished = finish(run, decision.state.tracks.get(run_id, {}).values(), self.now)
            path = layout.run_path(run_id)
            files[path] = codec.to_json(finished)
            # The brief shows the poll log, so this tick's line (with the consolidation
            # itself) is appended before rendering; _append_logs writes the same line.
            done = f"{finished.status.value}; brief rendered"
            lines = [*decision.touched_runs.get(run_id, []), done]
            polls = layout.polls_path(run_id)
            files[polls] = _append_lines(old, polls, self._poll_rows(decision, run_id, lines))
            view = _Overlay({k: v for k, v in files.items() if v is not None}, old)
            try:
                ctx = context_from_files(view, run_id, now=self.now, last_tick=self.now,
                                         schedule=specs.get(run.schedule_id))
                html = render_html(ctx, self.template)
            except Exception as exc:  # never let one brief block the tick
                files[path] = codec.to_json(run)
                del files[polls]
                # logged, not written to the run's poll log: a template that stays
                # broken must not make every tick commit
                decision.log.append(f"{run_id}: brief not rendered, will retry: "
                                    f"{type(exc).__name__}: {exc}")
                continue
            decision.state.runs[run_id] = finished
            cursor = decision.state.cursors.get(run.schedule_id)
            if cursor is not None:  # the pause rule counts failures as runs finish
                counted = record_finish(cursor, finished)
                if counted is not cursor:
                    decision.state.cursors[run.schedule_id] = counted
                    files[layout.cursor_path(run.schedule_id)] = codec.to_json(counted)
            files[layout.brief_path(run_id)] = html.encode()
            decision.note(run_id, done)
            rendered.append(run_id)
            summaries[run_id] = functools.partial(render_markdown, ctx,
                                                  template=self.markdown_template)
        try:
            # the tick loaded only the open runs (a scoped tick: one); the page lists
            # them and the newest others, never the whole history
            runs, older = state_index.page_runs(old, {**others, **decision.state.runs})
            files[layout.INDEX] = render_index(list(runs.values()),
                                           generated_at=self.now,
                                           template=self.index_template,
                                           paused=_pauses(decision.state),
                                           older=older).encode()
        except Exception as exc:  # a broken index template keeps the old index
            decision.log.append(f"index not rendered: {type(exc).__name__}: {exc}")
        return rendered

    def _find_templates(self) -> None:
        if not self.repo_templates:
            return
        from ..brief import BRIEF_TEMPLATE, INDEX_TEMPLATE, MARKDOWN_TEMPLATE, repo_template

        self.template = repo_template(self.repo, BRIEF_TEMPLATE, self.template)
        self.index_template = repo_template(self.repo, INDEX_TEMPLATE, self.index_template)
        self.markdown_template = repo_template(self.repo, MARKDOWN_TEMPLATE,
                                               self.markdown_template)
        self.repo_templates = False

    def _poll_row(self, changes: list[str]) -> bytes:
        return codec.json_line({"at": iso(self.now), "executor": self.executor_name,
                             "changes": changes})

    def _poll_rows(self, decision: Decision, run_id: str, changes: list[str]) -> list[bytes]:
        """The tick's line for ``run_id``, after one line per poll a track answered."""
        answers = [codec.json_line({**entry, "executor": self.executor_name})
                   for entry in decision.polls.get(run_id, [])]
        return [*answers, self._poll_row(changes)]

    def _append_logs(self, files: dict[str, bytes | None], changed: Mapping[str, object],
                     old: Mapping[str, bytes], decision: Decision) -> None:
        for run_id, lines in sorted(decision.touched_runs.items()):
            if run_id not in decision.state.runs:
                continue
            files[layout.polls_path(run_id)] = _append_lines(
                old, layout.polls_path(run_id), self._poll_rows(decision, run_id, lines))
        last = codec.last_tick_at(old)
        stale = last is None or self.now - last >= self.heartbeat_every
        if changed or stale:
            summary = {
                "at": iso(self.now),
                "executor": self.executor_name,
                "fired": sum(1 for p in changed if p.endswith("/run.json") and p not in old),
                "dispatched": len(decision.dispatch),
                "rendered": len(decision.render),
                "invalid": len(decision.invalid),
            }
            files[layout.TICKS] = _append_lines(old, layout.TICKS, [codec.json_line(summary)],
                                            keep=codec.TICKS_KEEP)

    # ---------------------------------------------------------------- the tick

    def run(self, *, dry_run: bool = False) -> TickResult:
        result = self._tick(dry_run)
        if not dry_run and self.scope is None and self.retention and self._start:
            result.retention = retain(self.store, self._settings.keep_finished_runs_days,
                                      *self._start, self.now)
        return result

    def _tick(self, dry_run: bool) -> TickResult:
        result = TickResult(now=self.now, executor=self.executor_name, dry_run=dry_run,
                            scope=self.scope)
        snap = self.store.read()
        rewound = getattr(self.store, "rewound", None)  # only a remote can be rewound
        if rewound:
            raise Rewound(rewound)
        # schedules the memo vouches for are neither parsed nor planned (see .quiet)
        self._settings = settings = RepoSettings.read(self.repo)
        self._memo = None if self.scope else quiet.Memo.read(snap.files, self.repo, self.now,
                                                             settings.key)
        loaded, loaded0 = quiet.select(self._memo, self.repo / "schedules", snap.files)
        schedules = loaded.schedules
        invalid = [e.message for e in loaded.errors]
        self._caps = Caps(settings.max_concurrent_tracks, settings.max_dispatches_per_tick)
        problem = settings.caps_problem
        if problem:  # reported like an invalid schedule; the schedules are still served
            invalid.append(problem)
        result.schedule_errors = invalid
        self._start = (snap.files, loaded0)
        state0 = loaded0.state
        held = state0.held_schedules()
        schedules = [s for s in schedules if s.id not in held]
        result.quarantined = state0.quarantine_lines()
        self._breaker_base = state0.health.get(self.executor_name)
        executor = self.make_executor(self._breaker_base)
        if self.scope is None:
            obs = gather(executor, state0)
        else:
            view = run_scope.scoped(state0, self.scope)
            known = run_scope.observations(self.outcomes, view, self.scope)
            obs = gather(executor, view, known)
            result.record_log += self.outcomes.problems
        breaker = executor.health()

        if dry_run:
            planned = self._plan_files(snap, loaded0, schedules, invalid, obs, breaker)
            result.decision = planned.decision
            result.rendered, result.summaries = planned.rendered, planned.summaries
            result.tip = snap.tip
            assert result.decision is not None
            result.wake = quiet.next_wake(self._memo, schedules, result.decision.state,
                                          self.now, self._settings.cadence)
            return result

        marked: Planned | None = None

        def mark(s: Snapshot) -> dict[str, bytes | None] | None:
            nonlocal marked, schedules
            # plan() never mutates its input, so the state parsed for observation is
            # reused while the compare-and-swap still sees the same tip
            loaded = loaded0 if s.tip == snap.tip else state_index.load(s.files)
            if s.tip != snap.tip and self._memo is not None and self._memo.left_out:
                # the memo was checked against the tip it lost to: plan everything
                schedules = [x for x in quiet.select(self._memo, self.repo / "schedules",
                                                     s.files, everything=True)[0].schedules
                             if x.id not in held]
            marked = self._plan_files(s, loaded, schedules, invalid, obs, breaker)
            return marked.changes or None

        outcome = self.store.transact(mark, f"tick {iso(self.now)}: decide", snapshot=snap)
        # the plan made on the tip the compare-and-swap ended on (re-planned per race)
        assert marked is not None, "transact calls the change function or raises"
        decision = marked.decision
        result.decision = decision
        result.rendered, result.summaries = marked.rendered, marked.summaries
        result.wake = quiet.next_wake(self._memo, schedules, decision.state, self.now,
                                      self._settings.cadence)
        result.mark_landed = outcome.landed
        result.tip = outcome.tip
        result.parked = marked.parked if outcome.landed else {}
        result.finished = list(result.rendered)
        if not outcome.landed:
            return result
        _checkpoint("after-mark")

        for handle in decision.cancel:
            try:
                executor.cancel(handle)
            except ExecutorError as exc:
                result.record_log.append(f"cancel {handle.key} failed: {exc}")
        results: list[DispatchResult] = []
        if decision.dispatch:
            try:
                results = executor.dispatch(decision.dispatch)
            except OrchestratorError as exc:
                # Some of it may have been sent: record nothing. The tracks stay
                # `dispatched` without a handle, and a later tick's look-up adopts what
                # was started and re-dispatches only what the backend says it never saw.
                result.dispatch_errors.append(f"dispatch failed: {exc.message}")
        _checkpoint("after-dispatch")
        result.dispatched = [r.key for r in results if r.error is None]
        result.dispatch_errors += [f"{r.key}: {r.error}" for r in results if r.error]
        breaker_after = executor.health()
        if results or (breaker_after is not None and breaker_after != breaker):
            self._record(results, breaker_after, result)
        return result

    def _record(self, results: list[DispatchResult], breaker: Breaker | None,
                result: TickResult) -> None:
        def record(s: Snapshot) -> dict[str, bytes | None] | None:
            loaded = state_index.load(s.files)
            before = loaded.state
            state = before.copy()
            records = record_dispatch(state, results, self.now)
            if breaker is not None:
                state.health[self.executor_name] = merge_breaker(
                    self._breaker_base, before.health.get(self.executor_name), breaker)
            files: dict[str, bytes | None] = dict(state.dump(base=before))
            touched: dict[str, list[str]] = {}
            for record in records:
                touched.setdefault(record.run_id, []).append(record.change)
            files = state_index.refresh(s.files, files, loaded.index)
            changed = store.changes(s.files, files)
            if changed:
                for run_id, rows in sorted(touched.items()):
                    row = codec.json_line({"at": iso(self.now), "executor": self.executor_name,
                                        "changes": rows})
                    files[layout.polls_path(run_id)] = _append_lines(
                        s.files, layout.polls_path(run_id), [row])
            result.record_log = [*([loaded.note] if loaded.note else []),
                                 *(str(r) for r in records)]
            return store.changes(s.files, files) or None

        outcome = self.store.transact(record, f"tick {iso(self.now)}: record dispatch")
        result.record_landed = outcome.landed
        if outcome.tip:
            result.tip = outcome.tip
