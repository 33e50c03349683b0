"""The Markdown twin of the brief, for ``$GITHUB_STEP_SUMMARY``, rendered from
``brief.md.j2`` (a repository's ``templates/brief.md.j2`` replaces it).

The template's macros are measured piece by piece to decide what fits (:mod:`.cuts`),
then the template renders the whole page from what was kept.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import UserError
from ..state.layout import run_dir
from .context import BriefContext
from .cuts import LEVELS, MARKDOWN_LIMIT, Plan, fit
from .render import MARKDOWN_TEMPLATE, Template, guarded, load
from .text import md_size, redacting
from .view import BriefView, build_view

MACROS = ("head", "opening", "row")
"""What the code measures to decide what fits; the page itself is the template's body."""


def render_markdown(ctx: BriefContext, limit_bytes: int = MARKDOWN_LIMIT,
                    template: Path | None = None) -> str:
    """The brief as GitHub-flavoured Markdown, under ``limit_bytes`` (UTF-8).

    The first level of detail whose rows all fit wins (see :mod:`.cuts`); whatever is
    cut is said in the closing paragraph.
    """
    page = load(MARKDOWN_TEMPLATE, template, markdown=True)
    view = build_view(ctx)
    with redacting():  # one redactor for every piece measured, not one per value
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
        "compensations": ctx.compensations,
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
    missing = [m for m in MACROS if not callable(getattr(macros, m, None))]
    if missing:
        raise UserError(f"{page.path}: a Markdown brief template must define the macros "
                        f"{', '.join(MACROS)} (missing: {', '.join(missing)})")

    def size(piece: Callable[[], Any]) -> int:
        return len(str(guarded(page.path, piece)).encode())

    plan = fit(view, ctx.dead_letters, level, limit, size(macros.head),
               lambda name: size(lambda: macros.opening(name)),
               lambda name, item: size(lambda: macros.row(name, item)))
    return plan, context
