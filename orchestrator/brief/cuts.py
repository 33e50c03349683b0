"""What the Markdown twin keeps under a byte limit (pure decisions; the template renders).

Three levels of detail, the first that fits whole wins: everything with long cells
capped; then shorter cells, fewer error lines and the newest 20 poll lines; then only
the tracks that are not complete, rows added while they fit. Whatever is cut is counted
for the closing paragraph, never dropped silently. Sizes come from the rendered pieces
(``measure``), so a replacement template is measured as it will be written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..state.phases import TrackPhase
from ..state.records import DeadLetter
from .view import BriefView

MARKDOWN_LIMIT = 1024 * 1024
"""GitHub rejects a step summary larger than 1 MiB."""

RESERVE = 4096
"""Bytes kept back for the closing note about what was left out."""

LEVELS = 3
CELL = (500, 160, 80)
"""Characters kept of a long cell (summary, error line, reason, poll notes), by level."""
ERROR_LINES = (5, 2, 1)
"""Newest error lines shown per track, by level."""
POLLS_KEPT = 20
"""Poll lines kept from level 1 on (the newest)."""


@dataclass(frozen=True)
class Section:
    name: str
    """``tracks``, ``errors``, ``dead_letters`` or ``polls`` (the template's names)."""
    what: str
    """How the closing note counts rows left out (``track rows``)."""
    rows: list[Any]
    policy: tuple[tuple[str, int], ...] = ()
    """Rows the level leaves out whatever the room (what, how many), counted first."""


@dataclass
class Plan:
    """The sections and rows that fit, and what was left out, by kind."""

    level: int
    sections: list[Section] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)
    overflowed: bool = False
    """Rows had to be cut to fit (a lower level may still fit whole)."""

    @property
    def cell(self) -> int:
        return CELL[self.level]

    @property
    def err_lines(self) -> int:
        return ERROR_LINES[self.level]

    def left_out_words(self) -> str:
        return ", ".join(f"{n:,} {what}" for what, n in self.left_out.items())

    def count(self, what: str, n: int) -> None:
        self.left_out[what] = self.left_out.get(what, 0) + n


def candidates(view: BriefView, dead_letters: list[DeadLetter], level: int
               ) -> list[Section]:
    """Every row the level would show, newest poll first, in the page's order."""
    track_rows = view.rows
    track_policy: tuple[tuple[str, int], ...] = ()
    if level >= 2:
        # Complete tracks are what a reader needs least; count them instead.
        done = [r for r in track_rows if r.track.phase is TrackPhase.COMPLETE]
        track_rows = [r for r in track_rows if r.track.phase is not TrackPhase.COMPLETE]
        if done:
            track_policy = (("complete track rows", len(done)),)
    polls = list(reversed(view.polls))  # newest first: when rows are cut, old ones go
    poll_policy: tuple[tuple[str, int], ...] = ()
    if level >= 1 and len(polls) > POLLS_KEPT:
        poll_policy = (("older poll log lines", len(polls) - POLLS_KEPT),)
        polls = polls[:POLLS_KEPT]
    return [Section("tracks", "track rows", track_rows, track_policy),
            Section("errors", "error entries", view.errors),
            Section("dead_letters", "dead letters", dead_letters),
            Section("polls", "poll log lines", polls, poll_policy)]


def fit(view: BriefView, dead_letters: list[DeadLetter], level: int, limit: int, head: int,
        opening: Callable[[str], int], row: Callable[[str, Any], int]) -> Plan:
    """The rows of ``level`` that fit in ``limit`` bytes after a head of ``head`` bytes;
    ``opening`` and ``row`` give the size of a section's opening and of one row."""
    plan = Plan(level)
    budget = limit - RESERVE - head
    for section in candidates(view, dead_letters, level):
        for what, n in section.policy:
            plan.count(what, n)
        if not section.rows:
            continue
        size = opening(section.name)
        if size > budget:
            plan.count(section.what, len(section.rows))
            plan.overflowed = True
            continue
        budget -= size
        kept: list[Any] = []
        for i, item in enumerate(section.rows):
            size = row(section.name, item)
            if size > budget:
                plan.count(section.what, len(section.rows) - i)
                plan.overflowed = True
                break
            budget -= size
            kept.append(item)
        plan.sections.append(Section(section.name, section.what, kept))
    return plan
