"""Compaction: archive finished runs, keeping the old tip under a tag.

The state branch grows by a few commits per tick. Compaction moves it to one new
root commit holding everything but the archived runs; the full history stays
reachable from the tag ``orchestrator-archive/<UTC timestamp>``. The tag and the
branch are pushed atomically and the branch with the same lease as every other
write, so a tick or a report racing the compaction is never lost: whoever loses
re-reads and re-applies. In single-branch mode the branch is not rewritten: the
archived runs are deleted by an ordinary commit.

:func:`plan` is pure; :func:`compact` runs it through the store (``compact`` and the
``serve`` loop's daily consumer both call it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from . import state_index
from .machine import RUN_TERMINAL
from .models import DeadLetter, Run
from .state import ROOT, parse_record, parse_with_spec, read_specs, run_dir
from .store import Change, ChangeFn, Snapshot, TransactResult
from .times import iso


@dataclass(frozen=True)
class Plan:
    """What a compaction removes."""

    runs: tuple[str, ...]
    dead_letters: tuple[str, ...]
    change: Change


class Archiver(Protocol):
    """The one store operation compaction needs (:meth:`GitStateStore.archive`)."""

    def archive(self, change_fn: ChangeFn, message: str, tag: str) -> TransactResult: ...


def _finished(run: Run) -> datetime | None:
    if run.finished_at is not None:
        return run.finished_at
    return run.state_history[-1].at if run.state_history else None


def plan(files: Mapping[str, bytes], keep_days: int, now: datetime) -> Plan:
    """The runs to archive (pure): terminal (completed or failed) and finished more than
    ``keep_days`` days before ``now``. Open runs are never touched, nor runs that still
    have a dead letter waiting for a human (a requeue needs the run); discarded dead
    letters of archived runs go with them."""
    cutoff = now - timedelta(days=keep_days)
    runs_prefix, dlq_prefix = f"{ROOT}/runs/", f"{ROOT}/dlq/"
    letters: dict[str, DeadLetter] = {}
    for path in files:
        if path.startswith(dlq_prefix) and path.endswith(".json"):
            run_id = path[len(dlq_prefix):-5].rpartition("--")[0]
            letters[path] = parse_with_spec(DeadLetter, path, files[path],
                                            read_specs(files, run_id))
    waiting = {letter.run_id for letter in letters.values() if not letter.discarded}
    old: list[str] = []
    for path in files:
        parts = path.split("/")
        if path.startswith(runs_prefix) and len(parts) == 4 and parts[3] == "run.json":
            run = parse_record(Run, path, files[path])
            done = _finished(run)
            if (run.status in RUN_TERMINAL and done is not None and done < cutoff
                    and run.run_id not in waiting):
                old.append(run.run_id)
    old.sort()
    dirs = tuple(run_dir(run_id) + "/" for run_id in old)
    change: Change = {path: None for path in files if path.startswith(dirs)} if dirs else {}
    gone = sorted(path for path, letter in letters.items() if letter.run_id in set(old))
    change.update(dict.fromkeys(gone))
    return Plan(tuple(old), tuple(gone), change)


def archive_tag(now: datetime) -> str:
    """``orchestrator-archive/20261231T120000Z``: ``now`` in UTC, in a ref-safe form (a
    tag name cannot hold ``:``)."""
    return "orchestrator-archive/" + iso(now).replace("-", "").replace(":", "")


def compact(store: Archiver, keep_days: int, now: datetime) -> Plan | None:
    """Archive what :func:`plan` finds on the tip (re-planned on a lost race) under
    :func:`archive_tag`; the plan that landed, or ``None`` when nothing was archived."""
    last: Plan | None = None

    def change(snap: Snapshot) -> Change | None:
        nonlocal last
        last = plan(snap.files, keep_days, now)
        # the archived runs' folders leave the index's fingerprint in the same commit
        return state_index.refresh(snap.files, last.change) if last.change else None

    cutoff = now - timedelta(days=keep_days)
    result = store.archive(change, f"compact: archive runs finished before {iso(cutoff)}",
                           archive_tag(now))
    return last if result.landed else None
