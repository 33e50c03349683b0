"""Finishing runs inside the mark commit: each consolidated run's brief, and the index.

- A run is finished (:func:`orchestrator.planner.consolidate`) only in the commit that
  holds its brief: a brief that fails to render (a broken user template, say) keeps its
  run ``consolidating``, and the next tick tries again. Nothing else is held up.
- Such a failure is logged, never written to the run's poll log: a template that stays
  broken must not make every tick commit.
- The page of runs is rendered again whenever a run is created or finished or a pause
  moves, from the open runs and the newest others only (never the whole history). A
  broken index template keeps the old page.
- Its dashboard (:mod:`orchestrator.brief.dashboard`) is built then, and only then,
  on the state this commit leaves: a tick that renders nothing reads no more.
- jinja2 is imported only when there is something to render.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..state import codec, layout
from ..state.model import State
from ..store import as_state_files
from . import polllogs

if TYPE_CHECKING:
    from ..brief.context import BriefContext
    from ..brief.dashboard import Dashboard
    from ..config.models import ScheduleSpec
    from ..config.policies import Pause
    from ..planner import Decision
    from ..state.records import Run


@dataclass(frozen=True)
class Templates:
    """The templates a tick renders with; ``None`` means the packaged one."""

    brief: Path | None = None
    index: Path | None = None
    markdown: Path | None = None
    repo: Path | None = None
    """Look in this repository's ``templates/`` for each template not given."""

    def resolved(self) -> Templates:
        """The templates, each not given looked for in the repository (on first render:
        a tick with nothing to render never imports the brief)."""
        if self.repo is None:
            return self
        from ..brief import BRIEF_TEMPLATE, INDEX_TEMPLATE, MARKDOWN_TEMPLATE, repo_template

        return Templates(repo_template(self.repo, BRIEF_TEMPLATE, self.brief),
                         repo_template(self.repo, INDEX_TEMPLATE, self.index),
                         repo_template(self.repo, MARKDOWN_TEMPLATE, self.markdown))


@dataclass
class Consolidated:
    """What finishing the consolidated runs adds to a tick's change."""

    rendered: list[str] = field(default_factory=list)
    """Runs whose brief rendered: they are finished by this change."""
    summaries: dict[str, Callable[[int], str]] = field(default_factory=dict)
    """Run id -> its Markdown brief, rendered within a byte limit."""


class Overlay(Mapping[str, bytes]):
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


def paused_schedules(state: State) -> dict[str, Pause]:
    """Schedule id -> its pause: the index names paused schedules."""
    return {sid: c.paused for sid, c in sorted(state.cursors.items()) if c.paused}


Board = Callable[[State, Mapping[str, "Run"]], "Dashboard"]
"""The state after the decision and the other open runs -> the index's dashboard."""


def finish_runs(decision: Decision, files: dict[str, bytes | None], old: Mapping[str, bytes],
                specs: Mapping[str, ScheduleSpec], others: Mapping[str, Run], *,
                redraw_index: bool, now: datetime, executor: str,
                templates: Templates, board: Board | None = None,
                tails: Callable[[BriefContext], BriefContext] | None = None) -> Consolidated:
    """Render the brief of each run in ``decision.render`` into ``files`` and finish the
    run in ``decision.state``; then the index, when anything it lists moved."""
    done = Consolidated()
    if not decision.render and not _creates_run(files, old) and not redraw_index:
        return done
    chosen = templates.resolved()
    for run_id in decision.render:
        _finish_one(decision, run_id, files, old, specs, now, executor, chosen, done, tails)
    _render_index(decision, files, old, others, now, chosen, board)
    return done


def _creates_run(files: Mapping[str, bytes | None], old: Mapping[str, bytes]) -> bool:
    """Whether ``files`` write a run record that ``old`` does not have."""
    return any(p not in old and layout.kind_of(p) is layout.Kind.RUN for p in files)


def _render_index(decision: Decision, files: dict[str, bytes | None],
                  old: Mapping[str, bytes], others: Mapping[str, Run], now: datetime,
                  chosen: Templates, board: Board | None) -> None:
    """The index page into ``files``; a broken template keeps the old one."""
    from ..brief import render_index

    try:
        # the tick loaded only the open runs (a scoped tick: one); the page lists them
        # and the newest others, never the whole history
        from ..state.history import page_runs  # an idle tick renders no page

        runs, older = page_runs(old, {**others, **decision.state.runs})
        files[layout.INDEX] = render_index(
            list(runs.values()), generated_at=now, template=chosen.index,
            paused=paused_schedules(decision.state), older=older,
            board=board(decision.state, others) if board is not None else None).encode()
    except Exception as exc:  # a broken index template keeps the old index
        decision.log.append(f"index not rendered: {type(exc).__name__}: {exc}")


def _finish_one(decision: Decision, run_id: str, files: dict[str, bytes | None],
                old: Mapping[str, bytes], specs: Mapping[str, ScheduleSpec], now: datetime,
                executor: str, templates: Templates, done: Consolidated,
                tails: Callable[[BriefContext], BriefContext] | None) -> None:
    from ..brief import context_from_files, render_html, render_markdown
    from ..planner import consolidate

    finished = consolidate(decision.state, run_id, now)
    run = finished.run
    path = layout.run_path(run_id)
    files[path] = codec.to_json(run)
    # The brief shows the poll log, so this tick's line (with the consolidation itself)
    # is appended before rendering; polllogs.append_logs writes the same line.
    line = f"{run.status.value}; brief rendered"
    polls = layout.polls_path(run_id)
    files[polls] = polllogs.append_lines(old, polls, polllogs.poll_rows(
        decision, run_id, [*decision.touched_runs.get(run_id, []), line], now, executor))
    view = Overlay({k: v for k, v in files.items() if v is not None}, old)
    try:
        ctx = context_from_files(view, run_id, now=now, last_tick=now,
                                 schedule=specs.get(run.schedule_id))
        if tails is not None:
            ctx = tails(ctx)
        html = render_html(ctx, templates.brief)
    except Exception as exc:  # never let one brief block the tick
        files[path] = codec.to_json(decision.state.runs[run_id])
        del files[polls]
        decision.log.append(f"{run_id}: brief not rendered, will retry: "
                            f"{type(exc).__name__}: {exc}")
        return
    decision.state.runs[run_id] = run
    if finished.cursor is not None:
        decision.state.cursors[run.schedule_id] = finished.cursor
        files[layout.cursor_path(run.schedule_id)] = codec.to_json(finished.cursor)
    files[layout.brief_path(run_id)] = html.encode()
    decision.note(run_id, line)
    done.rendered.append(run_id)
    done.summaries[run_id] = functools.partial(render_markdown, ctx,
                                               template=templates.markdown)


def board_state(loaded: State, after: State, others: Mapping[str, Run],
                old: Mapping[str, bytes], schedule_ids: list[str]) -> State:
    """The state the dashboard describes: what the tick loaded, with the decision's
    records over it (a scoped tick decided one run: ``others`` are the rest), and the
    cursors the tick did not read (quiet schedules) read from ``old``."""
    merged = loaded.copy()
    merged.runs.update(others)
    for name in ("cursors", "runs", "tracks", "dlq", "undos", "queues"):
        getattr(merged, name).update(getattr(after, name))
    _read_missing_cursors(merged, old, schedule_ids)
    return merged


def _read_missing_cursors(merged: State, old: Mapping[str, bytes],
                          schedule_ids: list[str]) -> None:
    """The cursors of ``schedule_ids`` that ``merged`` lacks, read from ``old`` into it
    (with their quarantine lines)."""
    from ..state import model as state_model

    missing = [layout.cursor_path(sid) for sid in schedule_ids if sid not in merged.cursors]
    found = as_state_files(old)
    found.prefetch([p for p in missing if p in found])
    if missing:
        extra = state_model.load({p: found[p] for p in missing if p in found})
        merged.cursors.update(extra.cursors)
        merged.quarantined.update(extra.quarantined)
