"""The dashboard's cron lateness: GitHub's cron as the ledger measured it, week by week,
beside what the schedules tolerate (``max_lateness_minutes``).

- Pure: the ledger's bytes, tick.yml's lines, the tolerances and ``now`` are passed in.
- A week is 7 days ending at ``now``, then the 7 before, and so on. The newest is the
  period ``status`` and ``lateness`` report, so the page says what they say.
- At most :data:`WEEKS` weeks, from the oldest with a sample; no section at all when
  none has one.
- The ledger is read by :func:`orchestrator.cadence.lateness.read`: a line that does
  not read is skipped, and costs only itself.
- The chart is geometry in the SVG's own units; its words are in ``label``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..cadence import lateness
from .text import fmt_duration

WEEKS = 5
"""Weeks drawn: the ledger keeps 30 days."""
NEEDS_SHOWN = 5
"""Tolerances listed beside the chart, the strictest first."""
IDS_SHOWN = 10
"""Schedule ids named per tolerance (the rest counted)."""
COLUMN, GAP, PLOT, HEIGHT = 48, 16, 80, 108
"""A week's column, the space around it (half each side, room for its labels), the
bars' height and the SVG's (the rest is the week's label and its drops)."""
WEEK = timedelta(days=7)


@dataclass(frozen=True)
class Week:
    """One week's figures, and its column in the SVG's units."""

    first: datetime
    last: datetime
    figures: lateness.Figures
    x: int
    max_y: float
    p95_y: float
    p50_y: float
    over: bool
    """Its p95 is later than the strictest tolerance."""

    @property
    def max_height(self) -> float:
        return round(PLOT - self.max_y, 1)

    @property
    def p95_height(self) -> float:
        return round(PLOT - self.p95_y, 1)

    @property
    def name(self) -> str:
        return f"{self.first:%b} {self.first.day}"

    @property
    def span(self) -> str:
        return f"{self.first:%Y-%m-%d} to {self.last:%Y-%m-%d}"

    @property
    def cells(self) -> tuple[str, ...]:
        """Its row of the table: samples, p50, p95, max, dropped."""
        f = self.figures
        return (str(f.samples), late(f.p50), late(f.p95), late(f.max), str(f.dropped))

    @property
    def words(self) -> str:
        f = self.figures
        if not f.samples:
            return f"week from {self.name}: no sample, {f.dropped} dropped"
        return (f"week from {self.name}: p50 {late(f.p50)}, p95 {late(f.p95)}, max "
                f"{late(f.max)}, {f.samples} sample(s), {f.dropped} dropped")


@dataclass(frozen=True)
class Need:
    """The schedules that tolerate the same lateness."""

    minutes: float
    ids: tuple[str, ...]
    more: int
    """Schedules of this tolerance not named."""

    @property
    def words(self) -> str:
        names = ", ".join(self.ids) + (f" and {self.more} more" if self.more else "")
        return f"{names}: {late(self.minutes * 60)}"


@dataclass(frozen=True)
class LateBoard:
    """The section: its weeks, the tolerances beside them, and the chart's words."""

    weeks: tuple[Week, ...]
    """Oldest first, as the chart reads left to right."""
    needs: tuple[Need, ...]
    """The strictest first; empty when no schedule says how late it may start."""
    need_y: float | None
    """The strictest tolerance's line in the chart, if any."""
    label: str

    plot: int = PLOT
    height: int = HEIGHT
    column: int = COLUMN

    @property
    def width(self) -> int:
        return len(self.weeks) * (COLUMN + GAP)


def late(seconds: float | None) -> str:
    """``45m``, ``3h 04m``; ``-`` for none. Cron is late by minutes: seconds are noise."""
    if seconds is None:
        return "-"
    minutes = round(seconds / 60)
    return f"{minutes}m" if minutes < 60 else fmt_duration(timedelta(minutes=minutes))


def section(data: bytes | None, lines: Sequence[str],
            tolerances: Mapping[str, float | None], now: datetime) -> LateBoard | None:
    """The section of the ledger ``data`` as of ``now``; ``None`` without a sample."""
    by_week = weekly(lateness.read(data), now)
    if not by_week:
        return None
    figures = [lateness.overall(samples, lines) for samples in by_week]
    needs = grouped(tolerances)
    strictest = needs[0].minutes * 60 if needs else None
    top = max([f.max or 0.0 for f in figures] + [strictest or 0.0]) or 1.0
    weeks = tuple(_week(now - WEEK * (len(figures) - i), f, i, top, strictest)
                  for i, f in enumerate(figures))
    label = ("GitHub's cron lateness per week, oldest first: "
             + "; ".join(w.words for w in weeks))
    if needs:
        label += f"; the strictest tolerance is {needs[0].words}"
    return LateBoard(weeks, tuple(needs[:NEEDS_SHOWN]),
                     _y(strictest, top) if strictest is not None else None, label)


def weekly(samples: Sequence[lateness.Sample], now: datetime
           ) -> list[list[lateness.Sample]]:
    """The samples of each of the last :data:`WEEKS` weeks up to ``now``, oldest first,
    from the oldest week with one (none: empty)."""
    weeks: list[list[lateness.Sample]] = [[] for _ in range(WEEKS)]
    for sample in samples:
        back = _weeks_back(now - sample.slot)
        if 0 <= back < WEEKS:
            weeks[back].append(sample)
    while weeks and not weeks[-1]:
        weeks.pop()
    return weeks[::-1]


def _weeks_back(age: timedelta) -> int:
    """0 for a slot in ``[now - 7 days, now]`` (as ``lateness --days 7`` counts), 1 for
    the 7 days before, ...; -1 for a slot after ``now``."""
    if age < timedelta(0):
        return -1
    return max(0, math.ceil(age / WEEK) - 1)


def grouped(tolerances: Mapping[str, float | None]) -> list[Need]:
    """The schedules by the lateness they tolerate, the strictest first."""
    ids: dict[float, list[str]] = {}
    for sid, minutes in tolerances.items():
        if minutes is not None:
            ids.setdefault(minutes, []).append(sid)
    return [Need(m, tuple(sorted(ids[m])[:IDS_SHOWN]), max(0, len(ids[m]) - IDS_SHOWN))
            for m in sorted(ids)]


def _week(first: datetime, found: lateness.Figures, i: int, top: float,
          strictest: float | None) -> Week:
    over = strictest is not None and (found.p95 or 0.0) > strictest
    return Week(first=first, last=first + WEEK, figures=found, x=GAP // 2 + i * (COLUMN + GAP),
                max_y=_y(found.max, top), p95_y=_y(found.p95, top),
                p50_y=_y(found.p50, top), over=over)


def _y(seconds: float | None, top: float) -> float:
    """The top of a bar of ``seconds`` (the plot's foot for none, a pixel for a little)."""
    if not seconds or seconds <= 0:
        return float(PLOT)
    return round(PLOT - max(1.0, seconds / top * (PLOT - 2)), 1)
