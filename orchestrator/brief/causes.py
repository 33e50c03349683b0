"""What fired a run and what it fired: the brief's links along a chain (pure).

- A run fired by ``after`` links to its upstream runs' briefs; any run links to the
  runs it fired (those whose ``upstream`` names it), read by :func:`downstream_of`.
- Links are relative to the brief (``../<run id>/brief.html``), as briefs sit side by
  side in ``state/runs``. A name that is no run id is shown, never linked.
- Only ``after`` runs are read for downstreams: their id carries the ``-after-`` mark,
  and their slot is never before their upstream's (the newest upstream's slot).
- A run fired by an event or by its queue says so in one line: the event's id and its
  hash, or the queue and how many items it had taken in all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..config.fieldtypes import AFTER_MARK, EVENT_MARK, QUEUE_MARK
from ..config.models import ScheduleSpec
from ..state.layout import RUNS, is_run_id, run_path, slot_text
from ..state.model import load
from ..state.records import Run

MAX_LINKS = 50
"""Runs linked per list: a bound on the brief's size, far more than a chain fires."""


@dataclass(frozen=True)
class RunLink:
    """Another run, and its brief relative to this one (``None``: not linked)."""

    run_id: str
    href: str | None


@dataclass(frozen=True)
class Causes:
    """The brief's lines on the run's cause and on the runs it fired."""

    upstream: tuple[RunLink, ...] = ()
    """The runs whose ends fired it (``origin`` after)."""
    downstream: tuple[RunLink, ...] = ()
    """The runs it fired, as far as the branch showed when the brief was rendered."""
    left_out: int = 0
    """Runs of either list beyond :data:`MAX_LINKS`, not shown."""
    fired_by: str = ""
    """``Fired by event 'deploy-1842' (hash e884953412)``, or by a queue; else empty."""


def link(run_id: str) -> RunLink:
    """``run_id`` with its brief's path from a sibling brief, when it is a run id."""
    return RunLink(run_id, f"../{run_id}/brief.html" if is_run_id(run_id) else None)


def causes(run: Run, downstream: tuple[str, ...], schedule: ScheduleSpec | None) -> Causes:
    """The causes of ``run`` (``downstream``: the runs it fired)."""
    ups, downs = run.upstream, downstream
    return Causes(upstream=tuple(link(r) for r in ups[:MAX_LINKS]),
                  downstream=tuple(link(r) for r in downs[:MAX_LINKS]),
                  left_out=max(0, len(ups) - MAX_LINKS) + max(0, len(downs) - MAX_LINKS),
                  fired_by=_fired_by(run, schedule))


def _fired_by(run: Run, schedule: ScheduleSpec | None) -> str:
    """The one line naming an event or a queue as the run's cause, or ``""``."""
    mark = run.run_id.rpartition("--")[2]
    if run.origin == "event":
        digest = mark.partition(EVENT_MARK)[2]
        return f"Fired by event {run.event_id or '?'!r} (hash {digest})"
    if run.origin == "queue":
        taken = mark.partition(QUEUE_MARK)[2]
        watched = schedule.on_queue if schedule is not None else None
        queue = f"queue {watched.queue}" if watched is not None else "its queue"
        return f"Fired by {queue}, when it had taken {taken} items in all"
    return ""


def downstream_of(files: Mapping[str, bytes], run: Run) -> tuple[str, ...]:
    """The runs on the branch ``files`` that ``run`` fired: ``after`` runs whose
    ``upstream`` names it. Paths are filtered first, then only those records read."""
    since = slot_text(run.run_id)
    paths = [p for p in files if _fired_after(p, since)]
    if not paths:
        return ()
    found = load({p: files[p] for p in paths}).runs
    return tuple(sorted(r for r, other in found.items() if run.run_id in other.upstream))


def _fired_after(path: str, since: str) -> bool:
    """Whether ``path`` is the record of an ``after`` run of slot ``since`` or later."""
    if not path.startswith(RUNS + "/") or not path.endswith("/run.json"):
        return False
    name = path[len(RUNS) + 1:-len("/run.json")]
    return (AFTER_MARK in name and is_run_id(name) and slot_text(name) >= since
            and path == run_path(name))
