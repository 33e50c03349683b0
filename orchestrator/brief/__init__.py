"""The brief: one self-contained HTML page per run, an index of runs, a Markdown twin.

The brief is what a person reads instead of N worker logs, on a laptop or a phone, from
GitHub Pages, an artifact or the job summary. Everything a track wrote (result
summaries, error messages, poll notes) is untrusted text: the HTML is rendered by jinja2
with autoescaping forced on, links are kept only for ``http``/``https``/``file`` URLs and
relative paths, and the Markdown escapes HTML and Markdown syntax alike. Every template
runs in jinja2's sandbox (a repository may replace each one).

Rendering is pure: time comes in as ``generated_at``/``now``; nothing here reads the
clock or the network.

By role: :mod:`.context` reads a run's records; :mod:`.attempts`, :mod:`.timeline`,
:mod:`.drains`, :mod:`.causes` and :mod:`.view` derive what is shown; :mod:`.dashboard`
builds the index's dashboard (its queue section :mod:`.queueboard`, its cron lateness
:mod:`.lateboard`); :mod:`.cuts` decides what the Markdown keeps under GitHub's limit;
:mod:`.render` finds and renders templates (HTML and the index); :mod:`.markdown`
renders the Markdown twin; :mod:`.text` formats and escapes.

Template context (documented in the README; every template may be replaced):

``brief.html.j2``
    ``run``, ``schedule`` (``ScheduleSpec`` or ``None``), ``tracks``, ``dead_letters``,
    ``polls`` (list of dicts), ``generated_at``, ``last_tick`` (datetime or ``None``) and
    ``view`` (:class:`BriefView`, derived). Filters: ``when``, ``clock``, ``duration``.
``index.html.j2``
    ``runs`` (list of :class:`IndexRow`, newest first), ``generated_at``, ``paused``,
    ``older`` and ``board`` (:class:`Dashboard` or ``None``).
``brief.md.j2``
    see the packaged template's opening comment; filter ``md`` besides the three above.

May import: executors (the registry's capabilities), runs, cadence (the cron
lateness ledger), state, config, cron, support, errors.
"""

from .attempts import Attempt, attempts_of
from .context import DEFAULT_STALE_AFTER, BriefContext, context_from_files
from .cuts import MARKDOWN_LIMIT
from .dashboard import Dashboard
from .markdown import render_markdown
from .render import (
    BRIEF_TEMPLATE,
    DATA,
    INDEX_TEMPLATE,
    MARKDOWN_TEMPLATE,
    IndexRow,
    render_html,
    render_index,
    repo_template,
)
from .text import PHASE_LABELS, describe_cron, fmt_clock, fmt_duration, fmt_when, md, safe_url
from .timeline import Bar, Timeline, TimelineRow
from .view import PHASE_ORDER, BriefView, Counts, Headline, TrackRow, build_view

__all__ = [
    "BRIEF_TEMPLATE", "DATA", "DEFAULT_STALE_AFTER", "INDEX_TEMPLATE", "MARKDOWN_LIMIT",
    "MARKDOWN_TEMPLATE", "PHASE_LABELS", "PHASE_ORDER", "Attempt", "Bar", "BriefContext",
    "BriefView", "Counts", "Dashboard", "Headline", "IndexRow", "Timeline", "TimelineRow",
    "TrackRow",
    "attempts_of", "build_view", "context_from_files", "describe_cron", "fmt_clock",
    "fmt_duration", "fmt_when", "md", "render_html", "render_index", "render_markdown",
    "repo_template", "safe_url",
]
