"""Retention: the tick archives finished runs itself, so the state branch stays small.

``keep_finished_runs_days`` in ``orchestrator.json`` (default 30, ``null`` keeps
every run) is applied by every full tick after its own work, with the rules of
``orchestrator compact`` (:mod:`.compaction`): open runs and runs with a dead letter
waiting stay, everything archived stays reachable under ``orchestrator-archive/<ts>``.
A fresh runner's shallow clone then downloads the runs of the retention period, not
of the whole history.

**Cheap to decide.** A run id ends with its slot (``<schedule>--20261201T0700Z``), a
lower bound of when the run ended. The index of open runs names the finished run with
the earliest slot, so most ticks decide from that one id, without listing
``state/runs``; when it is old enough, the listing names the candidates
(:func:`candidates`, slots older than the retention):
no record is read unless a run's slot is more than the retention *plus one day* old
(:func:`ripe`). That day is the batch: the tick then archives every candidate that
finished before the cutoff, so the next compaction comes about a day later, each
archiving a day of runs, not a run per tick.
:data:`RECORD` (``state/retention.json``, written in the compaction's commit) says
when it last ran; a tick never compacts twice within a day, even when the candidates
it found stay (a run that ended long after its slot).

**A branch that refuses a force push** (a protected branch, a hook): the tick says so
in one line and archives with an ordinary commit instead, deleting the runs' folders
(the branch's history keeps them, as in single-branch mode): the tip, which is what a
shallow clone downloads, shrinks all the same. The refusal is recorded, and the
rewrite is tried again only once :data:`RETRY_REWRITE` has passed.

**Racing writers** are those of every compaction: the archive is one compare-and-swap
push, whoever loses re-reads and re-applies (the compaction re-plans on the new tip).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import Field

from ..config.fieldtypes import Frozen, UTCDateTime
from ..errors import OrchestratorError, PushRejected
from ..state import codec, layout
from ..state import index as state_index
from ..state import model as state_model
from ..store import ArchiveFn, Change, ChangeFn, Snapshot, StateStore, as_state_files
from .compaction import Compactor, Plan, archive_tag, items_ripe

RECORD = layout.RETENTION

BATCH = timedelta(days=1)
"""How much older than the retention a run's slot must be before a tick compacts, and
how long after a compaction the next one may start."""

RETRY_REWRITE = timedelta(days=7)
"""After a refused force push, how long compactions use ordinary commits before trying
the rewrite again (the branch's protection may have been lifted)."""


class Record(Frozen):
    """``state/retention.json``: the tick's last compaction."""

    at: UTCDateTime
    """When it ran (the tick's ``now``)."""
    keep_days: int
    archived: int = Field(ge=0)
    """Runs archived by it."""
    tag: str | None = None
    """The tag holding the history it cut, when it rewrote the branch."""
    refused: str | None = None
    """Why the last force push was refused; then compactions commit ordinarily."""
    refused_at: UTCDateTime | None = None


def _older(run_ids: Iterable[str], cutoff: datetime) -> Iterator[str]:
    """The run ids whose slot is before ``cutoff``. A slot's text (``YYYYMMDDTHHMMZ``)
    sorts as its time, so most ids are ruled out by comparing that text with the
    cutoff's, unparsed (:func:`~.layout.slot_text`): every tick looks at every run id."""
    bound = layout.slot_stamp(cutoff)  # the cutoff's minute: at or after
    for run_id in run_ids:
        if layout.slot_text(run_id) <= bound and (slot := layout.run_slot(run_id)) is not None \
                and slot < cutoff:
            yield run_id


def candidates(run_ids: Iterable[str], keep_days: int, now: datetime,
               keep: Collection[str] = ()) -> list[str]:
    """The runs (pure, from their ids) whose slot is more than ``keep_days`` before
    ``now``, except those in ``keep``; sorted. Only these can have finished before the
    cutoff, so only their records are read."""
    cutoff = now - timedelta(days=keep_days)
    return sorted(r for r in _older(run_ids, cutoff) if r not in keep)


def ripe(run_ids: Iterable[str], keep_days: int, now: datetime) -> bool:
    """Whether one of ``run_ids`` has a slot more than ``keep_days`` plus :data:`BATCH`
    before ``now``: what starts a compaction (which then takes every candidate, so the
    next one comes a day later)."""
    cutoff = now - timedelta(days=keep_days) - BATCH
    return any(True for _ in _older(run_ids, cutoff))


def read_record(files: Mapping[str, bytes]) -> Record | None:
    """The last compaction's record; ``None`` when there is none or it is unreadable
    (then the next compaction writes it anew)."""
    files = as_state_files(files)
    files.prefetch([RECORD])  # this file alone, not its siblings (the runs' index page)
    data = files.get(RECORD)
    if data is None:
        return None
    try:
        return codec.parse_record(Record, RECORD, data)
    except codec.CorruptState:
        return None


def due(state: state_model.State, open_runs: Iterable[str], record: Record | None, keep_days: int,
        now: datetime) -> list[str]:
    """The candidates a tick compacts now (pure): none unless one is :func:`ripe`, none
    within :data:`BATCH` of the last compaction; never an open run, a run with a dead
    letter waiting or a quarantined run (whose record cannot be read)."""
    if record is not None and timedelta(0) <= now - record.at < BATCH:
        return []
    kept = {*open_runs, *(d.run_id for d in state.dlq.values() if not d.discarded)}
    kept |= {r for r in map(layout.runs_entry, state.quarantined) if r is not None}
    found = candidates(state.known_runs, keep_days, now, kept)
    return found if ripe(found, keep_days, now) else []


@dataclass(frozen=True)
class Outcome:
    """What a tick's compaction did."""

    keep_days: int
    runs: tuple[str, ...] = ()
    """The runs archived."""
    tag: str | None = None
    """The tag holding the old history, when the branch was rewritten."""
    refused: str | None = None
    """Why the force push was refused (the runs were then deleted by an ordinary commit)."""
    problem: str | None = None
    """Why the compaction failed (the tick went on; the next one tries again)."""
    skipped: tuple[str, ...] = ()
    items: int = 0
    """Queue items done before the cutoff, archived with the runs."""

    def lines(self) -> list[str]:
        """One line per thing worth telling, for the tick's output and serve's log."""
        out: list[str] = []
        if self.refused:
            out.append(f"retention: the force push of the compaction was refused "
                       f"({self.refused}); archived with an ordinary commit instead (the "
                       f"branch's history keeps the runs); the rewrite is tried again after "
                       f"{RETRY_REWRITE.days} days")
        if self.problem:
            out.append(f"retention: compaction failed, tried again by a later tick: "
                       f"{self.problem}")
        elif self.runs or self.items:
            where = (f"previous history kept as tag {self.tag}" if self.tag else
                     "the branch's history keeps them")
            items = f" and {self.items} queue item(s) done" if self.items else ""
            out.append(f"retention: archived {len(self.runs)} run(s) finished{items} more "
                       f"than {self.keep_days} days ago; {where}")
        out += [f"retention: {line}" for line in self.skipped]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"keep_days": self.keep_days, "archived": list(self.runs),
                "archived_items": self.items, "tag": self.tag,
                "refused": self.refused, "problem": self.problem,
                "skipped": list(self.skipped)}


def compact(store: StateStore, archive: ArchiveFn, keep_days: int, now: datetime,
            run_ids: Iterable[str], record: Record | None) -> Outcome:
    """Archive what :func:`~.compaction.plan` finds among ``run_ids`` and write the
    :class:`Record` in the same commit. Rewrites the branch under
    :func:`~.compaction.archive_tag`, unless a force push was refused less than
    :data:`RETRY_REWRITE` ago or is refused now: then an ordinary commit. Never raises
    an :class:`~.errors.OrchestratorError`: it is returned as :attr:`Outcome.problem`."""
    ids = tuple(run_ids)
    refused: str | None = None
    refused_at: datetime | None = None
    if record is not None and _still_refused(record, now):
        refused, refused_at = record.refused, record.refused_at
    tag: str | None = None if refused else archive_tag(now)

    def write_record(snap: Snapshot, plan: Plan) -> Change:
        done = Record(at=now, keep_days=keep_days, archived=len(plan.runs),
                      tag=tag if plan.runs or plan.items else None, refused=refused,
                      refused_at=refused_at)
        return {RECORD: codec.to_json(done)}

    compactor = Compactor(keep_days, now, ids, write_record)

    def unless_done(fn: ChangeFn) -> ChangeFn:
        # Another tick that compacted since this one read (a racing tick, lingering
        # ticks) has done the day's work: its record is not overwritten.
        def change(snap: Snapshot) -> Change | None:
            other = read_record(snap.files)
            if other != record and other is not None and timedelta(0) <= now - other.at < BATCH:
                return None
            return fn(snap)

        return change

    refused_now: str | None = None
    try:
        if tag is not None:
            try:
                result = archive(unless_done(compactor), compactor.message(), tag)
            except PushRejected as exc:
                refused_now = refused = exc.message
                refused_at, tag = now, None
                result = store.transact(unless_done(compactor), compactor.message())
        else:
            result = store.transact(unless_done(compactor), compactor.message())
    except OrchestratorError as exc:
        # Written alone, the record still holds the next tick back for a day: a
        # compaction that keeps failing must not cost every tick a failed push.
        note = Record(at=now, keep_days=keep_days, archived=0, refused=refused,
                      refused_at=refused_at)
        with contextlib.suppress(OrchestratorError):
            store.transact(unless_done(lambda snap: {RECORD: codec.to_json(note)}),
                           compactor.message())
        return Outcome(keep_days, refused=refused_now, problem=exc.message)
    return _outcome(keep_days, compactor.last if result.landed else None, tag, refused_now)


def _still_refused(record: Record, now: datetime) -> bool:
    """Whether a force push was refused less than :data:`RETRY_REWRITE` ago."""
    return record.refused_at is not None and now - record.refused_at < RETRY_REWRITE


def _outcome(keep_days: int, plan: Plan | None, tag: str | None,
             refused_now: str | None) -> Outcome:
    """What a compaction came to (``plan``: the one that landed, if any); the tag only
    when it archived something."""
    if plan is None:
        return Outcome(keep_days, refused=refused_now)
    cut = bool(plan.runs or plan.items)
    return Outcome(keep_days, plan.runs, tag if cut else None, refused_now,
                   skipped=plan.skipped, items=plan.items)


def by_hand(keep_days: int, now: datetime) -> Callable[[Snapshot, Plan], Change]:
    """The record of an ``orchestrator compact`` that archived something, written in its
    commit: ``status`` then tells of it, and the tick's own compaction waits its batch."""
    def write(snap: Snapshot, plan: Plan) -> Change:
        if not (plan.runs or plan.items or plan.dead_letters):
            return {}  # nothing archived: no commit for a record alone
        done = Record(at=now, keep_days=keep_days, archived=len(plan.runs),
                      tag=archive_tag(now))
        return {RECORD: codec.to_json(done)}

    return write


def describe(record: Record | None, keep_days: int | None) -> dict[str, Any]:
    """What ``status`` shows of the retention (pure)."""
    return {"keep_finished_runs_days": keep_days,
            "last_compaction": None if record is None else record.model_dump(mode="json")}


def describe_lines(report: Mapping[str, Any]) -> list[str]:
    keep = report["keep_finished_runs_days"]
    last = report["last_compaction"]
    policy = ("keep every run (keep_finished_runs_days is null)" if keep is None else
              f"archive runs finished more than {keep} days ago")
    if last is None:
        return [f"retention     {policy}; no compaction yet"]
    where = f", tag {last['tag']}" if last["tag"] else ""
    line = (f"retention     {policy}; last compaction {last['at']}: "
            f"{last['archived']} run(s){where}")
    if last["refused"]:
        line += f" (force push refused {last['refused_at']}: ordinary commits)"
    return [line]


def _runs_ripe(loaded: state_index.Loaded, keep_days: int, now: datetime) -> bool:
    """Whether a run may be old enough to archive, from what the tick read: the index's
    oldest finish when ``state/runs`` was not listed, else the candidates in the listing."""
    if loaded.vouched:
        oldest = loaded.index.oldest_finished
        return oldest is not None and ripe([oldest], keep_days, now)
    return bool(due(loaded.state, loaded.index.runs, None, keep_days, now))


def _compacted_lately(record: Record | None, now: datetime) -> bool:
    """Within :data:`BATCH` of the last compaction (one recorded ahead of ``now`` does
    not count)."""
    return record is not None and timedelta(0) <= now - record.at < BATCH


def retain(store: StateStore, keep_days: int | None, files: Mapping[str, bytes],
           loaded: state_index.Loaded, now: datetime) -> Outcome | None:
    """A tick's retention step, after its own work: compact when :func:`due` finds
    candidates in what the tick read first (``files``, ``loaded``), else nothing (and
    nothing is read). ``keep_days`` is ``keep_finished_runs_days`` (``None``: keep every
    run). ``None`` when no compaction was attempted."""
    archive = store.archive
    if keep_days is None or archive is None:
        return None  # a store that keeps no history to archive into (in memory)
    # done queue items go by the same days, decided from the queues' summaries alone
    items = items_ripe(loaded.state.queues.values(), keep_days, now, BATCH)
    if not items and not _runs_ripe(loaded, keep_days, now):
        return None  # the record is read only when there are candidates
    record = read_record(files)
    if _compacted_lately(record, now):
        return None
    ids = due(loaded.state, loaded.index.runs, record, keep_days, now)
    return compact(store, archive, keep_days, now, ids, record) if ids or items else None
