"""A drain track rolled up for the brief: what its workers did to the queue (pure).

- One :class:`DrainView` per drain track, never a row per item, so a brief of a
  10,000-item drain stays one readable page.
- An ended drain is read from its own result; an open one is summed from what its
  settled workers reported so far, and nothing is known yet of what remains.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..state.phases import TrackPhase
from ..state.records import Track
from .text import PHASE_LABELS, as_text, fmt_duration


@dataclass(frozen=True)
class DrainView:
    """One drain track rolled up: what its workers did to the queue, never a row per
    item, so a brief of a 10,000-item drain stays one readable page."""

    name: str
    queue: str
    phase: str
    phase_label: str
    workers: int
    drained: int
    failed: int
    dead: int
    released: int
    back: int
    refused: int
    remaining: int | None
    """Items left in the queue when the drain ended (``None``: still draining)."""
    slowest: list[tuple[str, str]]
    """(item id, duration) of the slowest items, slowest first."""
    failures: list[tuple[str, str]]
    """(item id, error line) of items whose attempt failed."""

    @property
    def summary(self) -> str:
        parts = [f"{self.drained} drained", f"{self.failed} failed", f"{self.dead} dead",
                 f"{self.released} released"]
        if self.back:
            parts.append(f"{self.back} put back")
        if self.refused:
            parts.append(f"{self.refused} reports refused")
        tail = (f"; {self.remaining} remain in the queue" if self.remaining is not None
                else "; still draining")
        return ", ".join(parts) + f" by {self.workers} worker(s){tail}"


def _number(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _pairs(rows: Any, seconds: bool = False) -> list[tuple[str, str]]:
    out = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, list) and len(row) >= 2:
            value = row[1]
            text = (fmt_duration(timedelta(seconds=float(value)))
                    if seconds and isinstance(value, int | float) else as_text(value))
            out.append((as_text(row[0]), text))
    return out


_DRAIN_COUNTS = ("done", "failed", "dead", "released", "back", "refused")


def _drain_ended(track: Track) -> bool:
    return track.result is not None and track.phase in (TrackPhase.COMPLETE, TrackPhase.FAILED)


def _reported(workers: list[Track], key: str) -> list[Any]:
    """Every row the workers listed under ``key`` (``slowest``, ``failures``)."""
    return [row for w in workers for row in (w.result or {}).get(key) or []]


def _drain_data(track: Track, workers: list[Track]) -> dict[str, Any]:
    """The drain's roll-up as recorded in its result once it ended, else summed from
    what its settled workers reported so far (nothing remains known then)."""
    if _drain_ended(track):
        data: dict[str, Any] = dict(track.result or {})
        data.setdefault("done", data.get("drained"))
        return data
    data = {k: sum(_number(w.result or {}, k) for w in workers) for k in _DRAIN_COUNTS}
    data["slowest"] = _reported(workers, "slowest")
    data["failures"] = _reported(workers, "failures")
    data["remaining"] = None
    return data


def _drain_view(track: Track, workers: list[Track]) -> DrainView:
    assert track.spec.drain is not None  # drain_views passes drain tracks only
    data = _drain_data(track, workers)
    remaining = data.get("remaining")
    return DrainView(
        name=track.name, queue=track.spec.drain.queue, phase=track.phase.value,
        phase_label=PHASE_LABELS[track.phase], workers=len(workers),
        drained=_number(data, "done"), failed=_number(data, "failed"),
        dead=_number(data, "dead"), released=_number(data, "released"),
        back=_number(data, "back"), refused=_number(data, "refused"),
        remaining=remaining if isinstance(remaining, int) else None,
        slowest=_pairs(data.get("slowest"), seconds=True)[:5],
        failures=_pairs(data.get("failures"))[:10])


def _is_drain(track: Track) -> bool:
    """A drain track itself, not one of its workers."""
    return track.spec.drain is not None and track.work is None


def _workers_of(tracks: list[Track], drain: str) -> list[Track]:
    return [t for t in tracks if t.work is not None and t.work.drain == drain]


def drain_views(tracks: list[Track]) -> list[DrainView]:
    """A roll-up of each drain track of the run, from its result once it ended, else
    from what its settled workers reported so far."""
    return [_drain_view(track, _workers_of(tracks, track.name))
            for track in tracks if _is_drain(track)]
