"""The last lines a track printed to stdout, shown under its row of the brief.

- A local track's tail (one whose executor declares a work folder on this machine,
  :class:`orchestrator.executors.Capabilities`) is read from its current attempt's
  folder there when the brief is rendered (:func:`local_tails`): ``stdout.log`` as a
  regular file only, no link followed, never a FIFO waited on, and no more than
  :data:`READ_BYTES` of it.
- A GitHub leg's tail is read, when the fan-in renders the brief, from the outcome
  folder it downloaded (:func:`outcome_tails`): the ``<dispatch key>.stdout`` the leg
  uploaded beside its outcome, read as hostile as a work folder's file
  (:meth:`~orchestrator.executors.outcomes.Folder.stdout`). Tails never go into the
  state branch's records.
- Every tail is at most :data:`LINES` lines and :data:`CHARS` characters, stripped of
  control characters and terminal escapes, and redacted before it is cut (a window
  read from a file's middle loses its first, partial line); the template autoescapes it.
- At most :data:`MAX_TRACKS` tracks show a tail, the ones a reader needs first (failed,
  tapped out, ...), so a brief of 10,000 tracks reads at most that many files; the
  brief says how many were left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path

from .. import executors
from ..executors.outcomes import STDOUT_BYTES, Folder
from ..state.phases import TrackPhase
from ..state.records import Track
from ..support.safejson import tail_bytes
from ..support.text import last_lines
from .context import BriefContext

LINES = 20
CHARS = 4000
READ_BYTES = 16 * 1024
"""Bytes read from the end of a ``stdout.log``: 20 lines of 4,000 characters fit."""
MAX_TRACKS = 200
"""Tracks whose tail a brief shows."""
STDOUT = "stdout.log"

_FIRST = {TrackPhase.FAILED: 0, TrackPhase.TAPPED_OUT: 1, TrackPhase.CANCELLED: 2}


def tail_of(data: bytes | str, redact: Callable[[str], str], window: int = READ_BYTES) -> str:
    """The shown tail of ``data``, the end of a file read ``window`` bytes at most: its
    last lines, cleaned and redacted before they are cut."""
    return last_lines(data, LINES, CHARS, redact, whole=len(data) < window)


def shown_first(tracks: Iterable[Track]) -> list[Track]:
    """``tracks`` in the order their tails are kept: the failed ones first."""
    return sorted(tracks, key=lambda t: _FIRST.get(t.phase, 3))


def left_out(tracks: Iterable[Track], limit: int = MAX_TRACKS) -> int:
    """How many tracks show no tail because of :data:`MAX_TRACKS`."""
    return max(0, sum(1 for _ in tracks) - limit)


def in_work_folder(track: Track) -> bool:
    """Whether ``track``'s executor keeps its attempts in work folders on this machine."""
    return executors.declared(track.executor).work_dir is not None


def local_tails(work_dir: Path, tracks: Iterable[Track], redact: Callable[[str], str],
                limit: int = MAX_TRACKS) -> dict[str, str]:
    """Track name -> the tail of its current attempt's stdout in ``work_dir``, of the
    first ``limit`` local tracks (:func:`shown_first`); one that printed nothing has
    none."""
    found: dict[str, str] = {}
    for track in shown_first(t for t in tracks if in_work_folder(t))[:limit]:
        text = tail_of(tail_bytes(work_dir / track.key / STDOUT, READ_BYTES), redact)
        if text:
            found[track.name] = text
    return found


def with_local_tails(ctx: BriefContext, work_dir: Path,
                     redact: Callable[[str], str]) -> BriefContext:
    """``ctx`` with the tails of its local tracks, read from ``work_dir``."""
    local = [t for t in ctx.tracks if in_work_folder(t)]
    return dataclasses.replace(ctx, tails={**ctx.tails, **local_tails(work_dir, local, redact)},
                               tails_left_out=left_out(local))


def outcome_tails(folder: Folder, tracks: Iterable[Track], redact: Callable[[str], str],
                  limit: int = MAX_TRACKS) -> dict[str, str]:
    """Track name -> the tail of its current attempt's stdout as its leg left it in the
    outcome ``folder``, of the first ``limit`` such tracks (:func:`shown_first`)."""
    found: dict[str, str] = {}
    for track in shown_first(t for t in tracks if t.key in folder.stdouts)[:limit]:
        text = tail_of(folder.stdout(track.key), redact, STDOUT_BYTES)
        if text:
            found[track.name] = text
    return found


def with_outcome_tails(ctx: BriefContext, folder: Folder,
                       redact: Callable[[str], str]) -> BriefContext:
    """``ctx`` with the tails its tracks' legs left in the outcome ``folder``."""
    legs = [t for t in ctx.tracks if t.key in folder.stdouts]
    return dataclasses.replace(ctx, tails={**ctx.tails, **outcome_tails(folder, legs, redact)},
                               tails_left_out=left_out(legs))
