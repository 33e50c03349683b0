"""The dashboard's queue section: per work queue its backlog, what workers hold, its dead
items, what is done, and a bar chart of the items done per day.

- Pure, and read from the queues' summaries only (:class:`~orchestrator.state.queue.QueueBook`
  as loaded): no item record is read, whatever the queue's size.
- Throughput comes from the done chunks' names and sizes: a chunk holds ids finished on
  the UTC day its name starts with. Items purged since are not counted.
- Bounded: at most :data:`QUEUES_SHOWN` queues of :data:`THROUGHPUT_DAYS` bars each; the
  cost is one pass over each summary's chunks and dead entries.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..state.items import ItemStatus
from ..state.queue import QueueBook, describe
from ..state.queueformat import chunk_day

QUEUES_SHOWN = 50
"""Queues drawn on the page, by name (``queue stats`` shows every one)."""
THROUGHPUT_DAYS = 14
"""UTC days of the throughput chart, ending with ``now``'s."""
BAR_WIDTH, BAR_GAP, CHART_HEIGHT = 8, 2, 32


@dataclass(frozen=True)
class Bar:
    """One day of the chart, in the SVG's own units (its top-left corner)."""

    day: str
    """``2026-12-03``."""
    done: int
    x: int
    y: float
    height: float


@dataclass(frozen=True)
class QueueRow:
    name: str
    backlog: int
    in_flight: int
    """Items claimed by a worker."""
    dead: int
    """Dead items waiting for a decision (discarded ones are not counted)."""
    done: int
    bars: tuple[Bar, ...]
    """One per day, oldest first."""
    recent: int
    """Done over the chart's days."""
    label: str
    """The chart in words, for screen readers and the bars' tooltip."""
    note: str
    """Why its summary was rebuilt from its items, or empty."""

    @property
    def width(self) -> int:
        return len(self.bars) * (BAR_WIDTH + BAR_GAP) - BAR_GAP


def rows(queues: Mapping[str, QueueBook], now: datetime) -> tuple[QueueRow, ...]:
    """The first :data:`QUEUES_SHOWN` queues of ``queues`` by name."""
    return tuple(_row(queues[name], now) for name in sorted(queues)[:QUEUES_SHOWN])


def _row(book: QueueBook, now: datetime) -> QueueRow:
    seen = describe(book)
    bars = chart(per_day(book.done), now)
    recent = sum(b.done for b in bars)
    label = (f"{recent} done in the last {len(bars)} days, oldest first: "
             + ", ".join(str(b.done) for b in bars))
    return QueueRow(name=book.name, backlog=seen["backlog"],
                    in_flight=book.counts.get(ItemStatus.CLAIMED.value, 0),
                    dead=seen["dead"], done=book.counts.get(ItemStatus.DONE.value, 0),
                    bars=bars, recent=recent, label=label, note=book.note or "")


def per_day(done: Mapping[str, int]) -> Counter[str]:
    """Items done per UTC day (``YYYYMMDD``), from the done chunks' names and sizes."""
    days: Counter[str] = Counter()
    for chunk, count in done.items():
        days[chunk_day(chunk)] += count
    return days


def chart(days: Mapping[str, int], now: datetime) -> tuple[Bar, ...]:
    """The bars of the last :data:`THROUGHPUT_DAYS` UTC days up to ``now``'s, the
    tallest as high as the chart; a day with none gets no height, any other at least 1."""
    today = now.astimezone(UTC).date()
    wanted = [today - timedelta(days=back) for back in range(THROUGHPUT_DAYS - 1, -1, -1)]
    counts = [days.get(f"{d:%Y%m%d}", 0) for d in wanted]
    top = max(counts) or 1
    bars = []
    for i, (day, count) in enumerate(zip(wanted, counts, strict=True)):
        height = max(1.0, round(count / top * (CHART_HEIGHT - 2), 1)) if count else 0.0
        bars.append(Bar(day=f"{day:%Y-%m-%d}", done=count, x=i * (BAR_WIDTH + BAR_GAP),
                        y=CHART_HEIGHT - height, height=height))
    return tuple(bars)
