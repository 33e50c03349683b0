"""Tracks that wait for others (``needs``, ``when``), between firing and fan-in.

A track with ``needs`` stays ``pending`` until every needed track is terminal. Then,
with ``when: success``, it runs only if they all completed, else it becomes ``skipped``
(terminal, so its own dependants are settled in the same pass); with ``when: always``
it runs whatever their outcome. :func:`settle` is a pass of the settling loop
(:mod:`.settling`), before fan-in, so a run whose last tracks are skipped consolidates
in the same tick; :func:`ready` gates the dispatch step, so each stage is dispatched by
the tick that sees its needs finish.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config.models import When
from ..config.needs import order
from ..state import machine
from ..state.phases import RunStatus, TrackPhase
from ..state.records import Track
from .context import Context

ERROR_TAIL_LINES = 5
"""Lines of each track's error log handed to a dependant in ``ORCHESTRATOR_RESULTS``."""


def settle(ctx: Context) -> bool:
    """Skip every pending track whose needs ended without all completing (``success``);
    say whether any was skipped."""
    changed = False
    for run in ctx.open_runs():
        if run.status is RunStatus.CONSOLIDATING:
            continue
        tracks = ctx.state.tracks.get(run.run_id, {})
        if not any(_skippable(tracks, t) for t in tracks.values()):
            continue  # no first skip, so none at all: ordering the graph is the costly part
        changed |= _skip_unmet(ctx, tracks)
    return changed


def _skip_unmet(ctx: Context, tracks: Mapping[str, Track]) -> bool:
    """Skip the tracks of one run whose needs ended without all completing; whether any
    was skipped. Needs first: a skip reaches the dependants of the skipped track in
    this pass."""
    changed = False
    for name in order({n: t.spec.needs for n, t in tracks.items()}):
        track = tracks[name]
        unmet = _unmet(tracks, track) if _skippable(tracks, track) else []
        if unmet:
            ctx.move(track, TrackPhase.SKIPPED, f"needs did not complete: {', '.join(unmet)}",
                     finished_at=ctx.now, not_before=None)
            changed = True
    return changed


def _skippable(tracks: Mapping[str, Track], track: Track) -> bool:
    return _may_skip(track) and needs_terminal(tracks, track)


def _unmet(tracks: Mapping[str, Track], track: Track) -> list[str]:
    """Each need of ``track`` that did not complete, with its phase (or ``absent``)."""
    return [f"{n} {tracks[n].phase.value}" if n in tracks else f"{n} absent"
            for n in track.spec.needs if not _completed(tracks, n)]


def _completed(tracks: Mapping[str, Track], name: str) -> bool:
    return name in tracks and tracks[name].phase is TrackPhase.COMPLETE


def _may_skip(track: Track) -> bool:
    """A pending track with needs that runs only if they all complete."""
    return (track.phase is TrackPhase.PENDING and bool(track.spec.needs)
            and track.spec.when is When.SUCCESS)


def needs_terminal(tracks: Mapping[str, Track], track: Track) -> bool:
    """Whether every track ``track`` needs has finished (an absent one counts as done:
    it can never finish, and ``when: success`` treats it as not completed)."""
    return all(n not in tracks or tracks[n].phase in machine.TRACK_TERMINAL
               for n in track.spec.needs)


def ready(tracks: Mapping[str, Track], track: Track) -> bool:
    """Whether a pending ``track`` may be dispatched as far as its needs go."""
    return needs_terminal(tracks, track)


def results_for(tracks: Mapping[str, Track], track: Track) -> dict[str, Any] | None:
    """What a track with needs sees in ``ORCHESTRATOR_RESULTS``: every other track of
    the run, with its phase, attempt, result and the tail of its error log."""
    if not track.spec.needs:
        return None
    return {
        name: {
            "phase": other.phase.value,
            "attempt": other.attempt,
            "result": other.result,
            "error_tail": other.error_log[-ERROR_TAIL_LINES:],
            "started_at": other.started_at.isoformat() if other.started_at else None,
            "finished_at": other.finished_at.isoformat() if other.finished_at else None,
        }
        for name, other in sorted(tracks.items()) if name != track.name
    }
