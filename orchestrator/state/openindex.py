"""The record of the index of open runs, ``state/open.json``: :class:`OpenIndex`.

- It lists each open run (scheduled, running or consolidating) with its schedule,
  status and slot; a finished run is never in it.
- It fingerprints ``state/runs`` by the count of its folders and a :func:`digest` of
  their names, so a writer that changed the folder behind its back is caught.
- Loading, checking and keeping it in step with the records is
  :mod:`~orchestrator.state.index`'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Literal

from pydantic import Field

from ..config.fieldtypes import Frozen, UTCDateTime
from .phases import RunStatus


class OpenRun(Frozen):
    """One open run, as the index lists it."""

    schedule_id: str
    status: RunStatus
    slot: UTCDateTime


class OpenIndex(Frozen):
    """``state/open.json``: the open runs and a fingerprint of the run folders."""

    format: Literal[1] = 1
    runs: dict[str, OpenRun] = Field(default_factory=dict)
    """Run id -> the open run (scheduled, running or consolidating)."""
    run_folders: int = 0
    """How many folders ``state/runs/`` holds (open and finished runs)."""
    digest: str = hashlib.sha256(b"").hexdigest()
    """:func:`digest` of those folders' names: a writer that added or removed a run
    without updating the index is caught by the next tick."""
    quarantined: dict[str, str] = Field(default_factory=dict)
    """Path -> what is wrong, for records the last load could not read: read again by
    every tick (and reported, and their run left alone) until someone mends them."""
    runs_tree: str | None = None
    """The id of ``state/runs``'s tree when this index was last checked against it or
    written with it (``None``: not since the folder last changed). While the tip's
    tree has this id, the folder count and digest hold without listing the folder."""
    oldest_finished: str | None = None
    """The run folder, not open, with the earliest slot (``None``: there is none): what
    retention asks before it lists the runs. Set whenever ``runs_tree`` is."""
    lost: dict[str, str] = Field(default_factory=dict)
    """Run id -> what became of it, for each run an index listed as open whose run
    record the tree lost (its folder deleted, or a file now): named by every tick until
    the record is back or a person deletes the entry."""

    def by_schedule(self, schedule_id: str) -> list[str]:
        """The open runs of one schedule, by slot (what overlap policies look at)."""
        return sorted((r for r, o in self.runs.items() if o.schedule_id == schedule_id),
                      key=lambda r: (self.runs[r].slot, r))


def digest(names: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()
