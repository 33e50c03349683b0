"""Poll tracks: a track that answers "not yet" waits without holding a runner.

A poll answers "not yet" with exit code 75 (``EX_TEMPFAIL``, reported by the backend
as ``waiting``) or with a result holding ``poll_again_in_minutes``. The track then
goes to ``waiting`` with no attempt used: it is dispatched again after the minutes it
asked for (else its ``poll_interval_minutes``, else :data:`DEFAULT_POLL_MINUTES`) under
a new dispatch key, until it completes, fails (and follows the retry rules) or the
run's deadline taps it out. Every answer of a poll track is one entry of
:attr:`Decision.polls <orchestrator.planner.context.Decision.polls>`, a line in the
run's poll log.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from ..executors.base import Observation
from ..state.phases import TrackPhase
from ..state.records import Track
from ..support.times import iso
from .context import Context

DEFAULT_POLL_MINUTES = 5.0
POLL_AGAIN = "poll_again_in_minutes"
MAX_POLL_MINUTES = 24 * 60


def asked_minutes(result: dict[str, Any] | None) -> float | None:
    """The ``poll_again_in_minutes`` of a result, if it is a usable number."""
    if not isinstance(result, dict):
        return None
    value = result.get(POLL_AGAIN)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return min(float(value), MAX_POLL_MINUTES)


def answered_not_yet(seen: Observation) -> bool:
    """A ``waiting`` observation, or a completed one whose result asks to poll again."""
    if seen.phase is TrackPhase.WAITING:
        return True
    return seen.phase is TrackPhase.COMPLETE and asked_minutes(seen.result) is not None


def is_poll_track(track: Track) -> bool:
    """A track that has polled in this attempt, or is declared as a poller."""
    return track.polls > 0 or track.spec.poll_interval_minutes is not None


def wait(ctx: Context, track: Track, seen: Observation, at: datetime) -> Track:
    """Move ``track`` to ``waiting`` after a "not yet" answered at ``at``."""
    minutes = (asked_minutes(seen.result) or track.spec.poll_interval_minutes
               or DEFAULT_POLL_MINUTES)
    at = ctx.moment(track, at)
    again = at + timedelta(minutes=minutes)
    number = track.polls + 1
    moved = ctx.move(track, TrackPhase.WAITING,
                     f"poll {number}: not yet; again after {minutes:g} min",
                     at=at, polls=number, not_before=again, handle=None, started_at=None,
                     finished_at=None, result=seen.result if seen.result is not None
                     else track.result)
    record(ctx, moved, number, "not yet", at, again)
    return moved


def record(ctx: Context, track: Track, number: int, answer: str, at: datetime,
           again: datetime | None = None) -> None:
    """One entry for the run's poll log."""
    line = f"{track.name}: poll {number} of attempt {track.attempt}: {answer}"
    if again is not None:
        line += f"; next poll at {iso(again)}"
    entry: dict[str, object] = {"at": iso(at), "track": track.name, "attempt": track.attempt,
                                "poll": number, "answer": answer, "changes": [line]}
    ctx.decision.polls.setdefault(track.run_id, []).append(entry)
