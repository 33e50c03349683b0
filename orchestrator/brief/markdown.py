"""The Markdown twin of the brief, for ``$GITHUB_STEP_SUMMARY``, rendered from
``brief.md.j2`` (a repository's ``templates/brief.md.j2`` replaces it).

The template's macros are measured piece by piece to decide what fits (:mod:`.cuts`),
then the template renders the whole page from what was kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import __version__
from ..state import run_dir
from .context import BriefContext
from .cuts import LEVELS, MARKDOWN_LIMIT, Plan, fit
from .render import MARKDOWN_TEMPLATE, Template, load
from .text import md_size
from .view import BriefView, build_view


def render_markdown(ctx: BriefContext, limit_bytes: int = MARKDOWN_LIMIT,
                    template: Path | None = None) -> str:
    """The brief as GitHub-flavoured Markdown, under ``limit_bytes`` (UTF-8).

    The first level of detail whose rows all fit wins (see :mod:`.cuts`); whatever is
    cut is said in the closing paragraph.
    """
    page = load(MARKDOWN_TEMPLATE, template, markdown=True)
    view = build_view(ctx)
    for level in range(LEVELS):
        plan, context = _plan(page, ctx, view, limit_bytes, level)
        if not plan.overflowed or level == LEVELS - 1:
            break
    context.update(sections=plan.sections, left_out=plan.left_out_words())
    return page.render(context)


def _plan(page: Template, ctx: BriefContext, view: BriefView, limit: int, level: int
          ) -> tuple[Plan, dict[str, Any]]:
    context: dict[str, Any] = {
        "run": ctx.run,
        "view": view,
        "dead_letters": ctx.dead_letters,
        "generated_at": ctx.generated_at,
        "last_tick": ctx.last_tick,
        "level": level,
        "cell": Plan(level).cell,
        "err_lines": Plan(level).err_lines,
        "limit": md_size(limit),
        "run_dir": run_dir(ctx.run.run_id),
        "version": __version__,
        "br": "  \n",
        "sections": [],
        "left_out": "",
    }
    macros = page.module(context)

    def size(text: Any) -> int:
        return len(str(text).encode())

    plan = fit(view, ctx.dead_letters, level, limit, size(macros.head()),
               lambda name: size(macros.opening(name)),
               lambda name, item: size(macros.row(name, item)))
    return plan, context
