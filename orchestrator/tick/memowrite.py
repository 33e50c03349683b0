"""The memo's entries that a commit writes (:mod:`.memo` reads them): which of the
schedules the tick parsed are quiet, until when, and the entry of the whole folder.

- Both files are written only beside other changes (:func:`changes`), never in a
  commit of their own.
- An entry is keyed with the cursor this change commits, not the one the tick read.
- A schedule with an open run or a backfill, or one this tick did not read, gets no
  new entry; the entries of the schedules left unread are carried over.
- The folder's entry is written only when every schedule of git's listing has an entry
  and the bytes the tick parsed are the blobs git listed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from ..cadence.wake import lingers_before, next_slot, settled_after
from ..config.repository import Cadence
from ..state import codec, layout
from ..state import model as state_model
from ..state.machine import RUN_OPEN
from ..store import blob_id
from . import worktree
from .memo import (
    FOLDER,
    QUIET,
    Memo,
    Quiet,
    QuietFile,
    QuietFolder,
    Soonest,
    schedule_ids,
    soonest_entries,
)

if TYPE_CHECKING:
    from ..config.models import Schedule
    from ..state.records import Cursor


def _quiet_until(schedule: Schedule, cursor: Cursor, now: datetime
                 ) -> tuple[bool, datetime | None]:
    """Whether ``schedule`` with ``cursor`` needs no tick before a moment, and which:
    its next slot, or ``None`` when only a change of its file or cursor can wake it
    (disabled, or a one-shot that fired)."""
    spec = schedule.spec
    if not spec.enabled:
        return not cursor.enabled, None  # the first tick after the edit records it
    if _looked_at_every_tick(schedule, cursor):
        return False, None
    at = spec.at_utc()
    if at is not None:
        return cursor.done and cursor.last_slot == at, None
    from ..config.triggers import for_spec

    try:
        if for_spec(spec).slots(cursor.since, now):
            return False, None  # not settled up to now: a later tick has to look again
        until = next_slot(spec, settled_after(cursor, now))
    except ValueError:
        return False, None
    return until is not None, until


def _looked_at_every_tick(schedule: Schedule, cursor: Cursor) -> bool:
    """Whether an enabled schedule needs every tick: its cursor not enabled yet, a
    pause (said every tick), failures in a row enough for one, an ``after`` (an
    upstream run may end in any tick) or an ``on_queue`` (a queue may fill)."""
    limit = schedule.spec.pause_after_failures
    if not cursor.enabled or cursor.paused is not None or schedule.spec.upstreams:
        return True
    if schedule.spec.on_queue is not None:
        return True
    return limit is not None and cursor.failures_in_a_row >= limit


def changes(memo: Memo, schedules: Iterable[Schedule], state: state_model.State,
            files: Mapping[str, bytes], change: Mapping[str, bytes | None],
            cadence: Callable[[], Cadence]) -> dict[str, bytes | None]:
    """What ``change`` calls for in ``state/quiet.json`` and
    ``state/quiet-folder.json`` (nothing when ``change`` is empty): the entries of the
    schedules left unread, one for each parsed schedule that is quiet in ``state`` (the
    state this change commits), and the entry of the whole folder when every schedule
    in it has one."""
    if not change:
        return {}
    entries, cursors = _carried(memo)
    for sid, (cursor_id, entry) in _quiet_entries(memo, schedules, state, files, change,
                                                  cadence).items():
        cursors[sid], entries[sid] = cursor_id, entry
    folder = _folder(memo, entries, cursors, change)
    out: dict[str, bytes | None] = {
        QUIET: codec.to_json(QuietFile(schedules=dict(sorted(entries.items())))),
        FOLDER: codec.to_json(folder) if folder else None}
    return {path: data for path, data in out.items() if files.get(path) != data}


def _quiet_entries(memo: Memo, schedules: Iterable[Schedule], state: state_model.State,
                   files: Mapping[str, bytes], change: Mapping[str, bytes | None],
                   cadence: Callable[[], Cadence]) -> dict[str, tuple[str, Quiet]]:
    """Schedule id -> the blob id of its cursor and its entry, for each of the parsed
    ``schedules`` that is quiet in ``state`` (the state this change commits)."""
    open_schedules = {run.schedule_id for run in state.runs.values()
                      if run.status in RUN_OPEN}
    policy = functools.cache(cadence)  # read once, and only when a slot asks for it
    found: dict[str, tuple[str, Quiet]] = {}
    for schedule in schedules:
        cursor = state.cursors.get(schedule.id)
        data = _cursor_bytes(schedule.id, files, change)
        if cursor is None or data is None or not _may_enter(memo, schedule.id, cursor,
                                                            open_schedules):
            continue
        entry = _entry(memo, schedule, cursor, data, policy)
        if entry is not None:
            found[schedule.id] = entry
    return found


def _carried(memo: Memo) -> tuple[dict[str, Quiet], dict[str, str]]:
    """The entries of the schedules left unread, and their cursors' blob ids."""
    if memo.whole is not None:
        entries = {sid: memo.entries[sid] for sid in memo.whole if sid in memo.entries}
    else:
        entries = dict(memo.skipped)
    return entries, {sid: memo.cursors[sid] for sid in entries if sid in memo.cursors}


def _cursor_bytes(schedule_id: str, files: Mapping[str, bytes],
                  change: Mapping[str, bytes | None]) -> bytes | None:
    """The cursor of ``schedule_id`` as this change commits it."""
    path = layout.cursor_path(schedule_id)
    return change.get(path) if path in change else files.get(path)


def _may_enter(memo: Memo, schedule_id: str, cursor: Cursor,
               open_schedules: Collection[str]) -> bool:
    """Whether a parsed schedule may get an entry: read this tick, with no open run and
    no backfill (a backfill's next slot is due any tick)."""
    return (schedule_id in memo.files and schedule_id not in open_schedules
            and cursor.backfill is None)


def _entry(memo: Memo, schedule: Schedule, cursor: Cursor, data: bytes,
           cadence: Callable[[], Cadence]) -> tuple[str, Quiet] | None:
    """The blob id of the cursor ``data`` and the entry of ``schedule``, when it is
    quiet in the state this change commits."""
    quiet, until = _quiet_until(schedule, cursor, memo.now)
    if not quiet:
        return None
    cursor_id = blob_id(data)
    return cursor_id, Quiet(
        key=memo.key(schedule.id, memo.files[schedule.id], cursor_id), checked=memo.now,
        until=until,
        lingers=until is not None and lingers_before(schedule, until, cadence()))


def _folder(memo: Memo, entries: Mapping[str, Quiet], cursors: Mapping[str, str],
            change: Mapping[str, bytes | None]) -> QuietFolder | None:
    """The entry of the whole folder, when every schedule in it is quiet and the bytes
    the tick parsed (or the entry it trusted) are the blobs git's listing names."""
    listing = memo.listing
    if listing is None or not memo.read_all_clean:
        return None
    ids = schedule_ids(listing)
    if not ids or not all(_entered(sid, entries, cursors, change)
                          and _listed(memo, listing, sid) for sid in ids):
        return None
    return _folder_entry(memo, listing, ids, entries, cursors)


def _folder_entry(memo: Memo, listing: worktree.Clean, ids: frozenset[str],
                  entries: Mapping[str, Quiet], cursors: Mapping[str, str]) -> QuietFolder:
    """The folder's entry over the entries of its schedules ``ids``."""
    mine = {sid: entries[sid] for sid in ids}
    return QuietFolder(
        key=memo.folder_key(listing, {sid: cursors[sid] for sid in ids}),
        checked=max(e.checked for e in mine.values()),
        soonest=[Soonest(schedule=sid, until=q.until, lingers=q.lingers)
                 for sid, q in soonest_entries(mine) if q.until is not None])


def _entered(schedule_id: str, entries: Mapping[str, Quiet], cursors: Mapping[str, str],
             change: Mapping[str, bytes | None]) -> bool:
    """Whether ``schedule_id`` has an entry, made for the cursor this change commits."""
    if schedule_id not in entries or schedule_id not in cursors:
        return False
    path = layout.cursor_path(schedule_id)
    return path not in change or blob_id(change[path] or b"") == cursors[schedule_id]


def _listed(memo: Memo, listing: worktree.Clean, schedule_id: str) -> bool:
    """Whether what the tick knows of ``schedule_id`` is the blob git's listing names:
    not so when the file was edited since git listed it, or a filter rewrites it."""
    if memo.whole is not None and schedule_id in memo.whole:
        return True  # the folder's entry vouched for the listing itself
    return memo.files.get(schedule_id) == listing.blobs[f"{schedule_id}.json"]
