"""Badges: ``badges/<schedule>.svg`` and ``badges/repository.svg`` (pure).

- Plain SVG 1.1: no script, no external font, image or style sheet; the text is
  drawn in the reader's own sans-serif.
- Each badge has a ``<title>`` and an ``aria-label`` saying the same, for screen readers.
- The colours are the brief's (``brief.html.j2``'s light palette), one per status.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from xml.sax.saxutils import escape, quoteattr

from ..brief.text import fmt_duration
from . import models as m
from .documents import badge_file

COLOURS = {
    "completed": "#1a7f37", "failed": "#cf222e", "cancelled": "#8c959f",
    "running": "#0969da", "consolidating": "#0969da", "scheduled": "#aab4be",
    "paused": "#bc4c00", "held": "#bc4c00", "disabled": "#8c959f", "ended": "#8c959f",
    "none": "#8c959f",
}
"""Status -> colour: ``--complete``, ``--failed``, ``--cancelled``, ``--running``,
``--pending`` and ``--tapped_out`` (what waits on a person) of the brief."""
LABEL_COLOUR = "#5b6570"
"""The brief's ``--muted``."""
CHAR_WIDTH, PAD, HEIGHT = 7, 6, 20
"""A generous width per character of 11px sans-serif: the text never overflows."""


def _width(text: str) -> int:
    return len(text) * CHAR_WIDTH + 2 * PAD


def svg(label: str, message: str, colour: str) -> str:
    """A two-part badge: ``label`` on grey, ``message`` on ``colour``."""
    left, right = _width(label), _width(message)
    title = f"{label}: {message}"
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{left + right}" '
        f'height="{HEIGHT}" role="img" aria-label={quoteattr(title)}>\n'
        f"<title>{escape(title)}</title>\n"
        f'<rect width="{left}" height="{HEIGHT}" fill="{LABEL_COLOUR}"/>\n'
        f'<rect x="{left}" width="{right}" height="{HEIGHT}" fill="{colour}"/>\n'
        '<g fill="#ffffff" text-anchor="middle" font-family="sans-serif" font-size="11">\n'
        f'<text x="{left / 2:g}" y="14">{escape(label)}</text>\n'
        f'<text x="{left + right / 2:g}" y="14">{escape(message)}</text>\n'
        "</g>\n</svg>\n")


def _age(moment: str, now: datetime) -> str:
    """``3h`` or ``2d``: the largest unit of how long ago ``moment`` was."""
    then = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    return fmt_duration(max(now - then, now - now)).split()[0]


def schedule_message(entry: m.ScheduleEntry, now: datetime) -> tuple[str, str]:
    """What a schedule's badge says, and its colour key."""
    if entry.state != "active":
        return entry.state, entry.state
    if entry.failures_in_a_row >= 2:
        return f"failing x{entry.failures_in_a_row}", "failed"
    run = entry.last_run
    if run is None:
        return "no runs", "none"
    when = run.finished_at or run.started_at or run.slot
    return f"{run.status} {_age(when, now)} ago", run.status


def schedule_badge(entry: m.ScheduleEntry, now: datetime) -> str:
    message, key = schedule_message(entry, now)
    return svg(entry.id, message, COLOURS.get(key, COLOURS["none"]))


def _failing(entry: m.ScheduleEntry) -> bool:
    return entry.failures_in_a_row > 0 or (
        entry.last_run is not None and entry.last_run.status == "failed")


def repository_message(schedules: Sequence[m.ScheduleEntry], stale: bool) -> tuple[str, str]:
    """What the repository's badge says: a stale tick, then failures, then pauses."""
    failing = sum(1 for e in schedules if _failing(e))
    paused = sum(1 for e in schedules if e.state in ("paused", "held"))
    if stale:
        return "tick stale", "failed"
    if failing:
        return f"{failing} failing", "failed"
    if paused:
        return f"{paused} paused", "paused"
    if not schedules:
        return "no schedules", "none"
    return f"{len(schedules)} passing", "completed"


def repository_badge(index: m.Index) -> str:
    message, key = repository_message(index.schedules, index.heartbeat.stale)
    return svg("schedules", message, COLOURS[key])


def badges(index: m.Index, now: datetime) -> dict[str, str]:
    """Path -> SVG text of every badge the index's schedules have, and the repository's."""
    found = {badge_file(e.id): schedule_badge(e, now) for e in index.schedules}
    found["badges/repository.svg"] = repository_badge(index)
    return found
