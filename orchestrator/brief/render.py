"""Rendering templates: the one place that finds a repository's own template, and the
sandbox every template (HTML, Markdown, index) is rendered in.

A repository's ``templates/<name>`` replaces the packaged one (``--template`` does for
one command). Those files are code the orchestrator runs, written by whoever can push to
the repository: they are rendered in jinja2's immutable sandbox, so a template reads the
values it is given and cannot reach Python (``lipsum.__globals__`` and the like fail).
HTML is autoescaped, whatever the template's file name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..config.policies import Pause
from ..errors import NotFound, UserError
from ..state.machine import RUN_TERMINAL
from ..state.records import Run
from .attempts import run_finished, run_started
from .context import BriefContext
from .dashboard import Dashboard
from .tails import MAX_TRACKS
from .text import fmt_clock, fmt_duration, fmt_when, md, redacting, shown
from .view import build_view

if TYPE_CHECKING:
    import jinja2

T = TypeVar("T")

DATA = Path(__file__).resolve().parent.parent / "data"
BRIEF_TEMPLATE = "brief.html.j2"
INDEX_TEMPLATE = "index.html.j2"
MARKDOWN_TEMPLATE = "brief.md.j2"
TEMPLATES_DIR = "templates"
"""Where a repository keeps its own templates, relative to its root."""


def repo_template(repo: Path, name: str, override: Path | None = None) -> Path | None:
    """The template to render ``name`` with: ``override`` when given, else the
    repository's ``templates/<name>`` when it has one, else ``None`` (the packaged one)."""
    if override is not None:
        return override
    path = repo / TEMPLATES_DIR / name
    return path if path.is_file() else None


@functools.lru_cache(maxsize=16)
def _environment(folder: str, markdown: bool) -> jinja2.Environment:
    """One environment per template folder and kind, so each template is compiled once
    per process (the loader still notices when a file changes)."""
    # jinja2 is imported on first use: a tick with nothing to render never loads it.
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(
        loader=jinja2.FileSystemLoader(folder),
        # HTML: on for every name, select_autoescape() would not cover ".j2" files.
        # Markdown: HTML escaping would be wrong there; the template's md filter escapes.
        autoescape=not markdown,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=not markdown,
        finalize=shown,  # every value shown is cleaned and redacted, whatever the template
    )
    env.filters["when"] = fmt_when
    env.filters["clock"] = fmt_clock
    env.filters["duration"] = fmt_duration
    if markdown:
        env.filters["md"] = md
    return env


def load(name: str, template: Path | None, *, markdown: bool = False) -> Template:
    """The template ``template`` (a path), or the packaged ``name`` when it is ``None``."""
    if template is None:
        path = DATA / name
    else:
        path = Path(template)
        if not path.is_file():
            raise NotFound(f"template not found: {path}")
    env = _environment(str(path.parent.resolve()), markdown)
    return Template(path, guarded(path, lambda: env.get_template(path.name)))


def guarded(path: Path, work: Callable[[], T]) -> T:
    """Run ``work`` (loading or rendering ``path``), turning template faults into a
    :class:`UserError` that names the file."""
    import jinja2
    from jinja2.sandbox import SecurityError

    try:
        return work()
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"{path}:{exc.lineno}: template syntax error: {exc.message}") from exc
    except jinja2.UndefinedError as exc:
        # The sandbox answers an unsafe attribute (``__globals__``) with an undefined.
        raise UserError(f"{path}: template uses an unknown name: {exc.message}") from exc
    except SecurityError as exc:
        raise UserError(f"{path}: template refused by the sandbox: {exc}") from exc


@dataclass(frozen=True)
class Template:
    path: Path
    compiled: jinja2.Template

    def render(self, context: dict[str, Any]) -> str:
        with redacting():
            return guarded(self.path, lambda: self.compiled.render(context))

    def module(self, context: dict[str, Any]) -> Any:
        """The template's macros, bound to ``context`` (for measuring pieces)."""
        with redacting():
            return guarded(self.path, lambda: self.compiled.make_module(context))


def render_html(ctx: BriefContext, template: Path | None = None) -> str:
    """The brief as one self-contained HTML page (``template`` replaces the packaged one)."""
    return load(BRIEF_TEMPLATE, template).render({
        "run": ctx.run,
        "schedule": ctx.schedule,
        "tracks": ctx.tracks,
        "dead_letters": ctx.dead_letters,
        "compensations": ctx.compensations,
        "runners": ctx.runners,
        "polls": ctx.polls,
        "generated_at": ctx.generated_at,
        "last_tick": ctx.last_tick,
        "view": build_view(ctx),
        "max_tails": MAX_TRACKS,
    })


@dataclass(frozen=True)
class IndexRow:
    run: Run
    status: str
    schedule_id: str
    slot: datetime
    duration: timedelta | None
    href: str | None
    """Link to the run's brief, relative to ``state/index.html`` (terminal runs only)."""
    acts: tuple[str, ...] = ()
    """Who triggered, backfilled, cancelled or retried the run (:meth:`Run.acts`)."""


def render_index(runs: list[Run], *, generated_at: datetime,
                 template: Path | None = None, paused: Mapping[str, Pause] | None = None,
                 older: int = 0, board: Dashboard | None = None) -> str:
    """``state/index.html``: the dashboard ``board`` (what needs attention, then each
    schedule), then ``runs``, newest first, linking to their briefs. Without a board,
    paused schedules come first. ``older`` runs on the branch are not listed (the
    page shows the newest and the open ones: ``orchestrator runs list`` shows every
    run)."""
    rows = []
    for run in sorted(runs, key=lambda r: (r.slot, r.run_id), reverse=True):
        started = run_started(run, [])
        finished = run_finished(run)
        duration = finished - started if started and finished else None
        href = f"runs/{run.run_id}/brief.html" if run.status in RUN_TERMINAL else None
        rows.append(IndexRow(run=run, status=run.status.value, schedule_id=run.schedule_id,
                             slot=run.slot, duration=duration, href=href,
                             acts=tuple(run.acts())))
    return load(INDEX_TEMPLATE, template).render({"runs": rows, "generated_at": generated_at,
                                                  "paused": dict(paused or {}),
                                                  "older": older, "board": board})
