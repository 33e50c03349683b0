"""Whether a repository's ``track.yml`` is the one this version ships.

Since legs report through outcome artifacts and a ``fan-in`` job, a ``track.yml``
from before (legs that commit their own report, one push per track) still works: the
tick reads its legs' pushes and job conclusions. ``validate`` says it is out of date,
and how to update it, instead of failing.

A track's ``approval.environment`` is GitHub's to hold, through the ``environment:``
line of the track job, which ships commented out. A gate with no such line would let
its leg run at once, so ``validate`` fails on it (:func:`gate_problems`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from ..support import safejson

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "scaffold" / "workflows" / "track.yml"
FAN_IN_MARK = "--outcomes"
"""What the current ``fan-in`` job runs (``orchestrator tick --run ... --outcomes``)."""


ENVIRONMENT_LINE = re.compile(r"^[ \t]+environment:[ \t]*\S", re.MULTILINE)
"""An ``environment:`` key that is not commented out, at a job's indentation or deeper."""
ENVIRONMENT_FIX = "environment: ${{ matrix.leg.environment }}"

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


def gate_problems(workflows: Path, gates: Iterable[tuple[str, str]]) -> list[str]:
    """One line when a gate ``(schedule/track, environment)`` would hold nothing on
    GitHub: ``workflows/track.yml`` exists but its track job names no environment."""
    first = min(gates, default=None)
    data = None if first is None else read_workflow(workflows / "track.yml")
    if first is None or data is None:
        return []  # no gate, or no track.yml: nothing runs on GitHub's side
    if ENVIRONMENT_LINE.search(data.decode("utf-8", errors="replace")):
        return []
    where, environment = first
    return [f".github/workflows/track.yml: the track job names no environment, so on "
            f"GitHub the approval gate of {where} (environment {environment}) would hold "
            f"nothing and its leg would run at once: uncomment `{ENVIRONMENT_FIX}` in the "
            "job (docs/how-to/approvals.md)"]
