"""Step 4 of the tick: runs whose tracks are all terminal go to ``consolidating`` and
get a render effect; :func:`finish` then marks them ``completed`` or ``failed``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from .. import machine
from ..models import Run, Track
from .context import Context, P, R


def fan_in(ctx: Context) -> None:
    for run in ctx.open_runs():
        tracks = ctx.st.tracks.get(run.run_id, {})
        if run.status is R.CONSOLIDATING:
            ctx.d.render.append(run.run_id)  # a previous render did not land
            continue
        if tracks and all(t.phase in machine.TRACK_TERMINAL for t in tracks.values()):
            counts: dict[str, int] = {}
            for t in tracks.values():
                counts[t.phase.value] = counts.get(t.phase.value, 0) + 1
            summary = ", ".join(f"{n} {p}" for p, n in sorted(counts.items()))
            ctx.st.runs[run.run_id] = machine.move_run(
                run, R.CONSOLIDATING, ctx.now, f"all tracks terminal: {summary}")
            ctx.d.note(run.run_id, f"consolidating ({summary})")
            ctx.d.render.append(run.run_id)


def finish(run: Run, tracks: Iterable[Track], now: datetime) -> Run:
    """Mark a ``consolidating`` run ``completed`` (every track complete) or ``failed``."""
    tracks = list(tracks)
    bad = [t.name for t in tracks if t.phase is not P.COMPLETE]
    if bad:
        return machine.move_run(run, R.FAILED, now, f"not complete: {', '.join(sorted(bad))}",
                                finished_at=now)
    return machine.move_run(run, R.COMPLETED, now, "all tracks complete", finished_at=now)
