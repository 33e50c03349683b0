"""Whether a repository's ``track.yml`` is the one this version ships.

Since legs report through outcome artifacts and a ``fan-in`` job, a ``track.yml``
from before (legs that commit their own report, one push per track) still works: the
tick reads its legs' pushes and job conclusions. ``validate`` says it is out of date,
and how to update it, instead of failing.
"""

from __future__ import annotations

from pathlib import Path

from ..support import safejson

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "scaffold" / "workflows" / "track.yml"
FAN_IN_MARK = "--outcomes"
"""What the current ``fan-in`` job runs (``orchestrator tick --run ... --outcomes``)."""


MAX_BYTES = 1 << 20
"""A workflow file larger than this is not read (GitHub's own limit is lower)."""


def read_workflow(path: Path) -> bytes | None:
    """The bytes of the workflow file ``path``; ``None`` when there is none or it is no
    regular file of at most :data:`MAX_BYTES` (a FIFO is refused, not waited on)."""
    try:
        return safejson.read_file(path, max_bytes=MAX_BYTES, root=path.parent)
    except (OSError, safejson.UnsafeJSON):
        return None


def outdated_notes(workflows: Path) -> list[str]:
    """One line when ``workflows/track.yml`` has no fan-in job; else none."""
    data = read_workflow(workflows / "track.yml")
    if data is None:
        return []  # no track.yml: local use, or another workflow per schedule
    text = data.decode("utf-8", errors="replace")
    if FAN_IN_MARK in text and "orchestrator outcome" in text:
        return []
    return [".github/workflows/track.yml is out of date: its legs push their own reports "
            "(one push per track, and a leg whose push fails is recorded failed); it still "
            "works, but copy the shipped one over it to get the fan-in job (one push per "
            f"batch, briefs as soon as the batch ends): cp {SHIPPED} "
            ".github/workflows/track.yml (then re-apply your own changes, if any)"]
