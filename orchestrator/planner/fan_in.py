"""Step 4 of the tick: runs whose tracks are all terminal go to ``consolidating`` and
get a render effect; :func:`finish` then marks them ``completed`` or ``failed``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from ..state import machine
from ..state.records import Run, Track
from ..support.times import iso
from .compensation import open_compensations
from .context import Context, P, R


def fan_in(ctx: Context) -> None:
    for run in ctx.open_runs():
        tracks = ctx.st.tracks.get(run.run_id, {})
        if run.run_id in ctx.d.render:
            continue  # already seen by this tick (fan-in runs before and after firing)
        if run.status is R.CONSOLIDATING:
            ctx.d.render.append(run.run_id)  # a previous render did not land
            continue
        if open_compensations(ctx, run.run_id):
            continue  # consolidated once the saga is over
        # A track named by the run without a record of its own (deleted by hand, lost
        # in a bad merge) is lost: it can never report, so the run ends at its
        # deadline instead of staying open and blocking later slots.
        lost = [name for name in run.tracks if name not in tracks]
        if lost and ctx.now < run.deadline:
            line = (f"{run.run_id}: no record of track(s) {', '.join(lost)}; treated as "
                    f"lost, the run ends at its deadline {iso(run.deadline)}")
            if line not in ctx.d.log:  # fan-in runs twice a tick
                ctx.d.log.append(line)
            continue
        if (tracks or lost) and all(t.phase in machine.TRACK_TERMINAL
                                    for t in tracks.values()):
            counts: dict[str, int] = {"lost": len(lost)} if lost else {}
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
    bad += [name for name in run.tracks if name not in {t.name for t in tracks}]  # lost
    if bad:
        return machine.move_run(run, R.FAILED, now, f"not complete: {', '.join(sorted(bad))}",
                                finished_at=now)
    return machine.move_run(run, R.COMPLETED, now, "all tracks complete", finished_at=now)
