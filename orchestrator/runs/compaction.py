"""Compaction: archive finished runs (and queue items done as long ago), keeping the
old tip under a tag.

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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from ..state import index as state_index
from ..state import layout
from ..state.codec import CorruptState, parse_record, parse_with_spec, read_specs
from ..state.machine import RUN_TERMINAL
from ..store import Change, ChangeFn, Snapshot, StateFiles, TransactResult, as_state_files
from ..support.times import iso

if TYPE_CHECKING:
    from ..state.queue import QueueBook
    from ..state.records import DeadLetter, Run


@dataclass(frozen=True)
class Plan:
    """What a compaction removes."""

    runs: tuple[str, ...]
    dead_letters: tuple[str, ...]
    change: Change
    skipped: tuple[str, ...] = ()
    """One line per candidate run left alone because its record could not be read."""
    items: int = 0
    """Queue items done before the cutoff, archived with the runs."""


class Archiver(Protocol):
    """The one store operation compaction needs (:meth:`GitStateStore.archive`)."""

    def archive(self, change_fn: ChangeFn, message: str, tag: str) -> TransactResult: ...


def _finished(run: Run) -> datetime | None:
    if run.finished_at is not None:
        return run.finished_at
    return run.state_history[-1].at if run.state_history else None


def _archivable(run: Run, waiting: set[str], cutoff: datetime) -> bool:
    """Ended before ``cutoff`` with no dead letter ``waiting`` for a person."""
    done = _finished(run)
    return (run.status in RUN_TERMINAL and run.run_id not in waiting
            and done is not None and done < cutoff)


def _dead_letters(files: StateFiles) -> dict[str, DeadLetter]:
    """Every dead letter of a track, by its path."""
    from ..state.records import DeadLetter

    letters: dict[str, DeadLetter] = {}
    for name, is_dir in sorted(files.listdirs([layout.DLQ])[layout.DLQ].items()):
        if not is_dir and name.endswith(".json"):
            path, run_id = f"{layout.DLQ}/{name}", layout.dead_letter_run(name[:-5])
            letters[path] = parse_with_spec(DeadLetter, path, files[path],
                                            read_specs(files, run_id))
    return letters


def plan(files: Mapping[str, bytes], keep_days: int, now: datetime,
         candidates: Iterable[str] | None = None) -> Plan:
    """The runs to archive (pure): terminal (completed, failed or cancelled) and
    finished more than ``keep_days`` days before ``now``. Open runs are never touched,
    nor runs that still have a dead letter waiting for a human (a requeue needs the
    run); discarded dead letters of archived runs go with them.

    ``candidates`` (run ids) limits the records read to those runs' (the tick, whose
    listing already tells which runs are old enough, never reads the others); a
    candidate whose record is unreadable is left alone and named in
    :attr:`Plan.skipped`, one without a record (archived meanwhile) is passed over.
    Without it every run record is read, as ``compact`` does."""
    cutoff = now - timedelta(days=keep_days)
    files = as_state_files(files)
    letters = _dead_letters(files)
    waiting = {letter.run_id for letter in letters.values() if not letter.discarded}
    skipped: list[str] = []
    runs = _runs_to_weigh(files, candidates, waiting, skipped)
    old = sorted(run.run_id for run in runs if _archivable(run, waiting, cutoff))
    change: Change = dict.fromkeys(_files_under(files, old))
    gone = sorted(path for path, letter in letters.items() if letter.run_id in set(old))
    change.update(dict.fromkeys(gone))
    items = _done_items(files, cutoff, now, change)
    return Plan(tuple(old), tuple(gone), change, tuple(skipped), items)


def _runs_to_weigh(files: StateFiles, candidates: Iterable[str] | None, waiting: set[str],
                   skipped: list[str]) -> list[Run]:
    """The run records :func:`plan` weighs: every one, or the ``candidates``' without a
    dead letter ``waiting`` (an unreadable one named in ``skipped``)."""
    from ..state.records import Run

    if candidates is None:
        return [parse_record(Run, path, files[path]) for path in _run_records(files)]
    return _read_candidates(files, sorted(set(candidates) - waiting), skipped)


def _done_items(files: StateFiles, cutoff: datetime, now: datetime, change: Change) -> int:
    """Add to ``change`` the removal of every queue item done before ``cutoff`` (by the
    days of its queue's done chunks); how many. A queue with nothing that old is read
    no further than its summary."""
    from ..state import queueload, queueops
    from ..state.queueformat import chunk_day

    removed = 0
    for book in queueload.load(files)[0].values():
        if not any(chunk_day(c) < f"{cutoff:%Y%m%d}" for c in book.done):
            continue
        removed += len(queueops.purge_done(book, cutoff, now))
        change.update(book.dump())
    return removed


def items_ripe(books: Iterable[QueueBook], keep_days: int, now: datetime,
               batch: timedelta) -> bool:
    """Whether some queue holds items done more than ``keep_days`` plus ``batch`` ago
    (from the summaries' done chunks alone)."""
    books = list(books)
    if not books:  # no queue: the queues' module is never loaded
        return False
    from ..state.queueformat import chunk_day

    day = f"{now - timedelta(days=keep_days) - batch:%Y%m%d}"
    return any(chunk_day(c) < day for book in books for c in book.done)


def _run_records(files: Mapping[str, bytes]) -> list[str]:
    return [path for path in files if layout.kind_of(path) is layout.Kind.RUN]


def _read_candidates(files: StateFiles, run_ids: list[str],
                     skipped: list[str]) -> list[Run]:
    from ..state.records import Run

    paths = [layout.run_path(run_id) for run_id in run_ids]
    if paths:
        # one git call for every candidate's record, found in the listing of the whole
        # tree (which the deletions need anyway) rather than folder by folder
        iter(files)
        files.prefetch(paths)
    runs: list[Run] = []
    for run_id, path in zip(run_ids, paths, strict=True):
        data = files.get(path)
        if data is None:  # archived meanwhile by a racing compaction (or gone by hand)
            continue
        try:
            runs.append(parse_record(Run, path, data))
        except CorruptState as exc:  # one bad record costs only its own run
            skipped.append(f"{run_id}: left alone: {exc.message}")
    return runs


def _files_under(files: Mapping[str, bytes], run_ids: list[str]) -> list[str]:
    """Every file in the folders of ``run_ids``."""
    if not run_ids:
        return []
    # One listing of the whole tree (``ls-tree -r``: trees only, no blob is read) costs
    # far less than listing a thousand folders by name, which git matches entry by entry.
    # a set, not a tuple of prefixes for startswith: thousands of runs, tens of thousands
    # of paths
    wanted = set(run_ids)
    return [path for path in files if layout.run_of(path) in wanted]


def archive_tag(now: datetime) -> str:
    """``orchestrator-archive/20261231T120000Z``: ``now`` in UTC, in a ref-safe form (a
    tag name cannot hold ``:``)."""
    return "orchestrator-archive/" + iso(now).replace("-", "").replace(":", "")


class Compactor:
    """A compaction's change function: plans on each snapshot it is given (a lost race
    re-plans on the new tip) and keeps the plan of the last one in :attr:`last`.

    ``extra`` adds files to the same commit (the tick's retention record), given the
    snapshot and the plan; the commit lands even when only they change."""

    def __init__(self, keep_days: int, now: datetime, candidates: Iterable[str] | None = None,
                 extra: Callable[[Snapshot, Plan], Change] | None = None) -> None:
        self.keep_days = keep_days
        self.now = now
        self.candidates = None if candidates is None else tuple(candidates)
        self.extra = extra
        self.last: Plan | None = None

    def __call__(self, snap: Snapshot) -> Change | None:
        self.last = plan(snap.files, self.keep_days, self.now, self.candidates)
        # the archived runs' folders leave the index's fingerprint in the same commit
        change = state_index.refresh(snap.files, self.last.change) if self.last.change else {}
        if self.extra is not None:
            change.update(self.extra(snap, self.last))
        return change or None

    def message(self) -> str:
        cutoff = self.now - timedelta(days=self.keep_days)
        return f"compact: archive runs finished before {iso(cutoff)}"


def compact(store: Archiver, keep_days: int, now: datetime,
            extra: Callable[[Snapshot, Plan], Change] | None = None) -> Plan | None:
    """Archive what :func:`plan` finds on the tip (re-planned on a lost race) under
    :func:`archive_tag`; the plan that landed, or ``None`` when nothing was archived.
    ``extra`` adds files to the same commit, as :class:`Compactor`'s does."""
    compactor = Compactor(keep_days, now, extra=extra)
    result = store.archive(compactor, compactor.message(), archive_tag(now))
    return compactor.last if result.landed else None
