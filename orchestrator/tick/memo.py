"""The memo of quiet schedules: what lets a tick leave a schedule unread until its slot.

A daily schedule needs a tick's attention once a day; parsing it on every tick made a
tick's cost grow with the number of schedules. The memo is two files:
``state/quiet.json`` (a :class:`Quiet` entry per schedule) and
``state/quiet-folder.json`` (:class:`QuietFolder`, one entry for the whole folder).

- An entry holds from the tick that found its schedule quiet (``checked``) until the
  schedule's next slot (``until``).
- An entry's key digests everything that decision read: the file's blob id, the
  cursor's blob id, ``orchestrator.json``, the shared calendars, the time zone data
  and this package's version.
- A schedule may go unread when its entry holds now, its key matches and it has no
  open run. The tick then only takes the slot as its next due moment.
- The folder entry lets a tick read no schedule file at all. Its key covers git's
  listing of the folder and every cursor's blob id (:mod:`orchestrator.tick.worktree`).
- It holds when the folder is exactly git's listing, the key matches, none of its
  schedules has an open run and its soonest slot is still ahead.
- In doubt, everything is parsed: no trusted index of open runs, an index rebuilt, a
  left-out schedule with an open run, or a lost compare-and-swap race (:func:`select`).
- Never quiet: a schedule with an open run, a pause, an ``after``, a one-shot that has
  not fired, or a cursor not settled up to the moment.
- Quiet until its file or cursor changes (``until`` is ``None``): a disabled schedule,
  and a one-shot that fired.
- A file that does not parse gets no entry, so it is reported on every tick.
- Both files are written only beside other changes (:mod:`.memowrite`), never in a
  commit of their own.
- The folder entry is written only when the bytes the tick parsed are the blobs git
  listed, so an edit racing the tick costs only the shortcut.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zoneinfo
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import AwareDatetime, Field

from .. import __version__
from ..cadence.wake import (
    Wake,
    due_moments,
    earliest,
)
from ..config.calendars import Calendars
from ..config.fieldtypes import ID_RE, Frozen
from ..config.files import SCHEMA_FILE, LoadResult, load_all
from ..config.repository import Cadence
from ..state import codec, layout
from ..state import index as state_index
from ..state import model as state_model
from ..store import StateFiles, as_state_files, blob_id
from ..support.times import iso_minute
from . import worktree

if TYPE_CHECKING:
    from ..config.models import Schedule

QUIET = layout.QUIET
FOLDER = layout.QUIET_FOLDER
CURSORS = layout.SCHEDULES
FORMAT = 2
"""Of the keys (in every key): 2 when a file's bytes became its git blob id."""


class Quiet(Frozen):
    """One schedule with nothing to do from ``checked`` until ``until``."""

    # AwareDatetime, checked by pydantic's core: a tick parses one entry per schedule,
    # and UTCDateTime's Python validator made that most of reading the memo.
    key: str
    checked: AwareDatetime
    """The tick that found it quiet."""
    until: AwareDatetime | None
    """Its next slot after ``checked``: the first moment a tick must parse it again;
    ``None``: no moment, only a change of its file or cursor (see :mod:`.memowrite`)."""
    lingers: bool
    """Whether that slot is worth a waiting runner (:func:`~.wake.lingers_before`)."""


class Soonest(Frozen):
    schedule: str
    until: AwareDatetime
    lingers: bool


class QuietFolder(Frozen):
    """``state/quiet-folder.json``: every schedule file of the folder quiet at once (see
    the module's text). A file of its own, so that a tick it vouches for reads a few
    hundred bytes of memo, not an entry per schedule."""

    format: Literal[1] = 1
    key: str
    """Of git's listing of the folder and the cursor of each of its schedules."""
    checked: AwareDatetime
    """The latest ``checked`` of the folder's entries."""
    soonest: list[Soonest] = Field(max_length=2)
    """What :meth:`Memo.wakes` takes from the entries: the first slot, and the first
    worth a waiting runner when that is another."""


class QuietFile(Frozen):
    format: Literal[1] = 1
    schedules: dict[str, Quiet] = Field(default_factory=dict)


def _cursor_ids(files: StateFiles) -> dict[str, str]:
    """Schedule id -> the blob id of its cursor, without reading the cursors from git."""
    listed = files.listdirs([CURSORS])[CURSORS]
    return {name[:-5]: sha for name, is_dir in listed.items()
            if not is_dir and name.endswith(".json")
            and (sha := files.object_id(layout.unchecked_cursor_path(name[:-5]))) is not None}


def _tz_version() -> str:
    """Which time zone data slots are computed with: a new release may move them."""
    for folder in zoneinfo.TZPATH:
        try:
            with open(os.path.join(folder, "tzdata.zi"), "rb") as fh:
                return fh.readline(200).decode("utf-8", "replace").strip()
        except OSError:
            continue
    try:
        import tzdata  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:
        return ""
    return f"tzdata {getattr(tzdata, 'IANA_VERSION', '')}"


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()


def schedule_ids(listing: worktree.Clean) -> frozenset[str] | None:
    """The ids of the schedule files in ``listing``, or ``None`` when a name the loader
    would take for a schedule is not a plain ``<id>.json`` file (it would report it)."""
    ids = set()
    for name in listing.names:
        if name[-5:].lower() != ".json" or name == SCHEMA_FILE:
            continue
        if name not in listing.blobs or not name.endswith(".json") \
                or not ID_RE.fullmatch(name[:-5]):
            return None
        ids.add(name[:-5])
    return frozenset(ids)


@dataclass
class Memo:
    """The memo as the tick read it, and what this tick saw of each schedule."""

    repo: Path
    now: datetime
    state: Mapping[str, bytes] | None
    """The state branch's files, with ``state/quiet.json`` (read on first use:
    :attr:`entries`); ``None`` when the memo cannot be trusted (no index of open runs)."""
    cursors: dict[str, str]
    """Schedule id -> its cursor's blob id on the tip read."""
    busy: set[str]
    """Schedules with an open run (from the index of open runs): always parsed."""
    common: str
    """The digest of what every entry's key shares (version, zones, repository config)."""
    listing: worktree.Clean | None = None
    """git's listing of the schedule folder, when the folder is exactly that."""
    folder: QuietFolder | None = None
    """The entry for the whole folder, when it holds this tick."""
    files: dict[str, str] = field(default_factory=dict)
    """Schedule id -> the blob id of its file's bytes, for every file this tick read."""
    skipped: dict[str, Quiet] = field(default_factory=dict)
    """The schedules this tick did not parse, with the entry that let it (one by one)."""
    whole: frozenset[str] | None = None
    """The schedules left unread because :attr:`folder` holds: every one."""
    read_all_clean: bool = False
    """Whether every schedule file this tick parsed was valid (:func:`select`)."""
    _entries: dict[str, Quiet] | None = None

    @classmethod
    def read(cls, files: Mapping[str, bytes], repo: Path, now: datetime,
             config_key: bytes, calendars: Calendars | None = None) -> Memo:
        """The memo as ``files`` hold it. ``config_key`` is
        :attr:`~orchestrator.config.repository.RepoSettings.key`; ``calendars`` the calendar
        folder the tick parses the schedules with (default: ``repo``'s, read here)."""
        files = as_state_files(files)
        # one git process for the folders the tick lists anyway; state/runs only if need be
        files.listdirs([layout.ROOT, CURSORS, layout.DLQ, layout.QUEUES])
        listing = worktree.clean(repo / "schedules")
        # exactly these: state/ also holds the index page. The entries only when the
        # folder's cannot hold: a tick it holds for never reads them.
        files.prefetch([state_index.OPEN_INDEX, FOLDER, layout.TICKS, layout.HEALTH,
                        *([QUIET] if listing is None else []),
                        *state_index.queue_summaries(files)])
        index = _open_index(files)
        common = _digest(str(FORMAT), __version__, _tz_version(), config_key,
                         (calendars or Calendars(repo)).key())
        if index is None:  # without it, no way to tell the open runs
            return cls(repo, now, None, {}, set(), common, listing)
        memo = cls(repo, now, files, _cursor_ids(files) if QUIET in files else {},
                   {run.schedule_id for run in index.runs.values()}, common, listing)
        memo._take_folder(files)
        return memo

    def _take_folder(self, files: StateFiles) -> None:
        """Trust the folder's stored entry, when there is one and it holds this tick."""
        folder = _stored_folder(files) if self.listing is not None else None
        if folder is not None:
            self.whole = self._holds(folder)
            self.folder = folder if self.whole is not None else None

    @property
    def entries(self) -> dict[str, Quiet]:
        """The memo's entries, one per schedule (parsed on first use)."""
        if self._entries is None:
            self._entries = {}
            data = self.state.get(QUIET) if self.state is not None else None
            if data is not None:
                with contextlib.suppress(codec.CorruptState):  # rewritten with the next commit
                    self._entries = codec.parse_record(QuietFile, QUIET, data).schedules
        return self._entries

    @property
    def left_out(self) -> Collection[str]:
        """The schedules this tick neither parses nor plans."""
        return self.whole if self.whole is not None else self.skipped.keys()

    def forget(self) -> None:
        """Leave nothing out after all: every schedule is parsed."""
        self.skipped.clear()
        self.whole = self.folder = None

    def key(self, schedule_id: str, digest: str, cursor: str) -> str:
        return _digest(self.common, schedule_id, digest, cursor)

    def folder_key(self, listing: worktree.Clean, cursors: Mapping[str, str]) -> str:
        return _digest(self.common, "folder", listing.digest,
                       "\n".join(f"{sid} {cursor}" for sid, cursor in sorted(cursors.items())))

    def _holds(self, folder: QuietFolder) -> frozenset[str] | None:
        """The folder's schedules when ``folder`` vouches for them all this tick."""
        if self.listing is None:
            return None
        # not checked name by name: the key covers the listing, and the tick that wrote
        # it checked every name (:func:`schedule_ids`)
        ids = self.listing.stems(".json") - {SCHEMA_FILE[:-5]}
        if ids & self.busy or not self._folder_holds(folder, self.listing, ids):
            return None
        return ids

    def _folder_holds(self, folder: QuietFolder, listing: worktree.Clean,
                      ids: frozenset[str]) -> bool:
        """Whether ``folder`` holds now, every one of ``ids`` has a cursor, and its key
        is that of ``listing`` and those cursors."""
        until = folder.soonest[0].until if folder.soonest else None
        if not _holds_at(self.now, folder.checked, until) or any(
                sid not in self.cursors for sid in ids):
            return False
        return folder.key == self.folder_key(listing, {sid: self.cursors[sid] for sid in ids})

    def knows(self, schedule_id: str, raw: bytes) -> bool:
        """Whether the file ``raw`` of ``schedule_id`` may go unparsed this tick."""
        digest = self.files[schedule_id] = blob_id(raw)
        entry = self.entries.get(schedule_id)
        cursor = self.cursors.get(schedule_id)
        if (entry is None or cursor is None or schedule_id in self.busy
                or not _holds_at(self.now, entry.checked, entry.until)
                or entry.key != self.key(schedule_id, digest, cursor)):
            return False
        self.skipped[schedule_id] = entry
        return True

    def record(self, schedule_id: str, raw: bytes) -> bool:
        """Note the file ``raw`` of ``schedule_id``, to be parsed."""
        self.files[schedule_id] = blob_id(raw)
        return False

    def wakes(self) -> list[Wake]:
        """The next slot of the schedules left unread, as :mod:`.wake` would say it:
        only the first, and the first worth a waiting runner, which is all
        :func:`next_wake` takes from them (a Wake orders by time, then by reason, which
        starts with the schedule id)."""
        if self.folder is not None:
            soonest = [(s.schedule, s.until, s.lingers) for s in self.folder.soonest]
        else:
            soonest = [(sid, q.until, q.lingers) for sid, q in soonest_entries(self.skipped)
                       if q.until is not None]
        return [Wake(until, f"{sid}: slot {iso_minute(until)}", lingers, slot=True)
                for sid, until, lingers in soonest]


def _open_index(files: StateFiles) -> state_index.OpenIndex | None:
    """The index of open runs, or ``None`` when the state has none to trust."""
    index, _ = state_index.read(files)
    if index is None and QUIET in files and not state_index.run_folders(files):
        return state_index.OpenIndex()  # no run yet, so none open: it needs no index
    return index


def _stored_folder(files: StateFiles) -> QuietFolder | None:
    """The folder's entry as the state holds it, if it parses."""
    data = files.get(FOLDER)
    if data is None:
        return None
    with contextlib.suppress(codec.CorruptState):  # rewritten with the next commit
        return codec.parse_record(QuietFolder, FOLDER, data)
    return None


def _holds_at(now: datetime, checked: datetime, until: datetime | None) -> bool:
    return checked <= now and (until is None or now < until)


def soonest_entries(entries: Mapping[str, Quiet]) -> list[tuple[str, Quiet]]:
    """The entry with the first slot, and the first worth a waiting runner when that is
    another (by time, then schedule id)."""
    timed = [(q.until, sid, q) for sid, q in entries.items() if q.until is not None]
    first = min(timed, default=None)
    waited = min((e for e in timed if e[2].lingers), default=None)
    picked = [e for e in (first, waited) if e is not None]
    return list({sid: q for _, sid, q in picked}.items())


def select(memo: Memo | None, directory: Path, files: Mapping[str, bytes], *,
           everything: bool = False, calendars: Calendars | None = None
           ) -> tuple[LoadResult, state_index.Loaded]:
    """The schedules to parse and the state to plan on, leaving out what ``memo``
    vouches for; everything when in doubt (``memo`` is ``None``, the index of open runs
    was rebuilt, a schedule left out has an open run after all, or ``everything``: the
    compare-and-swap lost a race to a tip the memo was not checked against).
    ``calendars``: the calendar folder as the tick read it."""
    if memo is None:
        return load_all(directory, calendars=calendars), state_index.load(files)
    if not everything:
        trusted = _trusting(memo, directory, files, calendars)
        if trusted is not None:
            return trusted
    memo.forget()
    # for the entries this tick writes
    result = load_all(directory, known=memo.record, calendars=calendars)
    memo.read_all_clean = not result.errors
    return result, state_index.load(files)


def _trusting(memo: Memo, directory: Path, files: Mapping[str, bytes],
              calendars: Calendars | None) -> tuple[LoadResult, state_index.Loaded] | None:
    """What :func:`select` returns when the memo can be trusted: the folder's entry
    first, then the entries one by one; ``None`` when in doubt after all."""
    if memo.whole is not None:
        loaded = state_index.load(files, skip_cursors=memo.whole)
        if _none_open(loaded, memo.whole):
            memo.read_all_clean = True  # as the tick that wrote the entry found them
            return LoadResult(), loaded
        memo.forget()
    result = load_all(directory, known=memo.knows, calendars=calendars)
    memo.read_all_clean = not result.errors
    if not memo.skipped:
        return result, state_index.load(files)
    loaded = state_index.load(files, skip_cursors=memo.skipped)
    return (result, loaded) if _none_open(loaded, memo.skipped) else None


def _none_open(loaded: state_index.Loaded, left_out: Collection[str]) -> bool:
    """Whether ``loaded`` trusted its index and no schedule ``left_out`` has an open run."""
    return loaded.note is None and not any(run.schedule_id in left_out
                                           for run in loaded.state.runs.values())


def next_wake(memo: Memo | None, schedules: Iterable[Schedule], state: state_model.State,
              now: datetime, cadence: Cadence) -> Wake | None:
    """:func:`.wake.next_wake`, with the slots of the schedules left unread."""
    return earliest(sorted([*due_moments(schedules, state, now, cadence),
                            *(memo.wakes() if memo else [])]))
