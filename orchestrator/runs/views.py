"""Read-only views of runs: the rows of ``runs list`` and the detail of ``runs show``.

Pure: each function takes parsed state and returns JSON-able data or text lines;
the commands read the state branch and print.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..state import model as state_model
from ..state.phases import TrackPhase
from ..state.records import Run, Track
from ..support.times import iso


def _when(moment: datetime | None) -> str:
    return iso(moment) if moment is not None else "-"


def run_row(run: Run, tracks: Mapping[str, Track]) -> dict[str, Any]:
    """One run as a row: its identity, status and how many tracks are in each phase."""
    counts: dict[str, int] = {}
    for t in tracks.values():
        counts[t.phase.value] = counts.get(t.phase.value, 0) + 1
    return {
        "run_id": run.run_id,
        "schedule": run.schedule_id,
        "status": run.status.value,
        "slot": iso(run.slot),
        "finished_at": iso(run.finished_at) if run.finished_at else None,
        "tracks": dict(sorted(counts.items())),
        "origin": run.origin,
        "acts": run.acts(),
    }


def run_rows(state: state_model.State, runs: Iterable[Run]) -> list[dict[str, Any]]:
    """The rows of ``runs``, newest slot first."""
    return [run_row(r, state.tracks.get(r.run_id, {}))
            for r in sorted(runs, key=lambda r: (r.slot, r.run_id), reverse=True)]


def rows_text(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["no runs"]
    width = max(len(r["run_id"]) for r in rows)
    lines = []
    for row in rows:
        tracks = ", ".join(f"{n} {p}" for p, n in row["tracks"].items())
        origin = f"  ({row['origin']})" if row.get("origin", "cron") != "cron" else ""
        lines.append(f"{row['run_id']:<{width}}  {row['status']:<13}  {tracks}{origin}")
    return lines


def run_detail(run: Run, tracks: Mapping[str, Track]) -> dict[str, Any]:
    """The run and its tracks, as stored (``runs show --json``)."""
    return {
        "run": run.model_dump(mode="json", by_alias=True),
        "tracks": {n: t.model_dump(mode="json", by_alias=True)
                   for n, t in sorted(tracks.items())},
    }


def run_text(run: Run, tracks: Mapping[str, Track]) -> list[str]:
    """The run, its history and its tracks with their last errors, for a human."""
    lines = [f"{run.run_id}  {run.status.value}",
             f"  schedule  {run.schedule_id}  {run.cron or ''} {run.timezone}".rstrip(),
             f"  slot      {_when(run.slot)}   fire at {_when(run.fire_at)}   "
             f"deadline {_when(run.deadline)}"]
    lines += [f"  {act}" for act in run.acts()]
    for h in run.state_history:
        lines.append(f"  {_when(h.at)}  {h.from_} -> {h.to}  {h.reason}")
    for name, t in sorted(tracks.items()):
        summary = (t.result or {}).get("summary", "")
        lines.append(f"  track {name}: {t.phase.value} (attempt {t.attempt}/{t.max_attempts})"
                     + (f"  {summary}" if summary else "") + (f"  {t.url}" if t.url else ""))
        lines += _gate_lines(t)
        for line in t.error_log[-3:]:
            lines.append(f"    ! {line}")
    return lines


def _gate_lines(track: Track) -> list[str]:
    """Where the track's approval gate stands: who decided, or who it waits for."""
    gate, approval = track.current_gate, track.spec.approval
    if gate is None or approval is None:
        return []
    if gate.decided is not None:
        verdict = "approved" if gate.approved is not None else "rejected"
        return [f"    {verdict} {gate.decided.describe()} at {_when(gate.decided.at)}"]
    if not track.awaits_approval or gate.since is None:
        return []
    how = (f": orchestrator approve {track.run_id} {track.name} --reason ..."
           if track.phase is TrackPhase.PENDING else " on GitHub")
    return [f"    waiting for approval by {approval.describe()} since "
            f"{_when(gate.since)}{how}"]
