"""Schedules a tick may leave unread until their next slot: ``state/quiet.json``.

Most ticks decide nothing for most schedules: a daily schedule needs a tick's attention
once a day. Parsing its file, its cursor and asking cron for its next slot on every
tick made the tick's cost grow with the number of schedules. So each commit a tick
makes anyway also writes, per schedule it found quiet, the next moment it needs
attention (its next slot), keyed by a digest of everything that decision read: the
schedule file's bytes, its cursor's blob, ``orchestrator.json``, the time zone data
and this package's version. A later tick before that moment, that finds the same key
and no open run of the schedule, neither parses the file nor reads the cursor; it
only takes the slot as its next due moment.

The memo never stands alone: a schedule it does not name, with another key, with an
open run, a pause, a one-shot or a cursor that is not settled up to the moment the
memo was taken, is parsed as before; so is every schedule when the index of open runs
had to be rebuilt, or when the compare-and-swap lost a race (:func:`select`). A file
that does not parse never gets an entry, so it is named on every tick. The file is
only ever written beside other changes (:func:`changes`), never in a commit of its
own.
"""

from __future__ import annotations

import hashlib
import os
import zoneinfo
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, Field

from . import __version__, state_index
from . import state as st
from .errors import OrchestratorError
from .machine import RUN_OPEN
from .models import Frozen, Schedule
from .repo_config import Cadence, read_config_bytes
from .schedules import LoadResult, load_all
from .times import iso_minute
from .triggers import for_spec
from .wake import Wake, due_moments, earliest, lingers_before, next_slot

QUIET = f"{st.ROOT}/quiet.json"
CURSORS = f"{st.ROOT}/schedules"
FORMAT = 1


class Quiet(Frozen):
    """One schedule with nothing to do from ``checked`` until ``until``."""

    # AwareDatetime, checked by pydantic's core: a tick parses one entry per schedule,
    # and UTCDateTime's Python validator made that most of reading the memo.
    key: str
    checked: AwareDatetime
    """The tick that found it quiet."""
    until: AwareDatetime
    """Its next slot after ``checked``: the first moment a tick must parse it again."""
    lingers: bool
    """Whether that slot is worth a waiting runner (:func:`~.wake.lingers_before`)."""


class QuietFile(Frozen):
    format: Literal[1] = 1
    schedules: dict[str, Quiet] = Field(default_factory=dict)


def blob_id(data: bytes) -> str:
    """git's object id of a file with these bytes (what ``ls-tree`` lists)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _cursor_ids(files: Mapping[str, bytes]) -> dict[str, str]:
    """Schedule id -> the blob id of its cursor, without reading the cursors from git."""
    lister = getattr(files, "listdirs", None)
    if lister is not None:
        listed = lister([CURSORS])[CURSORS]
        return {name[:-5]: sha for name, (is_dir, sha) in listed.items()
                if not is_dir and name.endswith(".json")}
    prefix = CURSORS + "/"
    return {path[len(prefix):-5]: blob_id(files[path]) for path in files
            if path.startswith(prefix) and path.endswith(".json") and "/" not in
            path[len(prefix):]}


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


@dataclass
class Memo:
    """The memo as the tick read it, and what this tick saw of each schedule."""

    repo: Path
    now: datetime
    entries: dict[str, Quiet]
    cursors: dict[str, str]
    """Schedule id -> its cursor's blob id on the tip read."""
    busy: set[str]
    """Schedules with an open run (from the index of open runs): always parsed."""
    common: str
    """The digest of what every entry's key shares (version, zones, repository config)."""
    files: dict[str, str] = field(default_factory=dict)
    """Schedule id -> digest of its file's bytes, for every file this tick read."""
    skipped: dict[str, Quiet] = field(default_factory=dict)
    """The schedules this tick did not parse, with the entry that let it."""

    @classmethod
    def read(cls, files: Mapping[str, bytes], repo: Path, now: datetime) -> Memo:
        entries: dict[str, Quiet] = {}
        busy: set[str] = set()
        lister = getattr(files, "listdirs", None)
        if lister is not None:  # one git process for the folders the tick lists anyway
            lister([st.ROOT, CURSORS, f"{st.ROOT}/dlq"])  # state/runs: only if need be
        prefetch = getattr(files, "prefetch", None)
        if prefetch is not None:  # exactly these: state/ also holds the index page
            prefetch([state_index.OPEN_INDEX, QUIET, st.TICKS, st.HEALTH])
        index, _ = state_index.read(files)
        if index is None and QUIET in files and not state_index.run_folders(files):
            index = state_index.OpenIndex()  # no run yet, so none open: it needs no index
        data = files.get(QUIET)
        if data is not None and index is not None:  # no index, no way to tell open runs
            try:
                entries = st.parse_record(QuietFile, QUIET, data).schedules
            except st.CorruptState:
                entries = {}  # rewritten with the next commit
            busy = {run.schedule_id for run in index.runs.values()}
        try:
            config = read_config_bytes(repo)
        except FileNotFoundError:
            config = b"(none)"
        except OrchestratorError:  # reported by the tick; its defaults apply
            config = b"(unreadable)"
        common = _digest(str(FORMAT), __version__, _tz_version(), config)
        return cls(repo, now, entries, _cursor_ids(files) if entries else {}, busy, common)

    def key(self, schedule_id: str, digest: str, cursor: str) -> str:
        return _digest(self.common, schedule_id, digest, cursor)

    def knows(self, schedule_id: str, raw: bytes) -> bool:
        """Whether the file ``raw`` of ``schedule_id`` may go unparsed this tick."""
        digest = self.files[schedule_id] = _digest(raw)
        entry = self.entries.get(schedule_id)
        cursor = self.cursors.get(schedule_id)
        if (entry is None or cursor is None or schedule_id in self.busy
                or not entry.checked <= self.now < entry.until
                or entry.key != self.key(schedule_id, digest, cursor)):
            return False
        self.skipped[schedule_id] = entry
        return True

    def wakes(self) -> list[Wake]:
        """The next slot of the schedules left unread, as :mod:`.wake` would say it:
        only the first, and the first worth a waiting runner, which is all
        :func:`next_wake` takes from them (a Wake orders by time, then by reason, which
        starts with the schedule id)."""
        first = min(self.skipped.items(), key=lambda e: (e[1].until, e[0]), default=None)
        waited = min(((sid, q) for sid, q in self.skipped.items() if q.lingers),
                     key=lambda e: (e[1].until, e[0]), default=None)
        picked = dict(e for e in (first, waited) if e is not None)
        return [Wake(q.until, f"{sid}: slot {iso_minute(q.until)}", q.lingers)
                for sid, q in picked.items()]


def select(memo: Memo | None, directory: Path, files: Mapping[str, bytes]
           ) -> tuple[LoadResult, state_index.Loaded]:
    """The schedules to parse and the state to plan on, leaving out what ``memo``
    vouches for; everything when in doubt (``memo`` is ``None``, the index of open runs
    was rebuilt, or a schedule left out has an open run after all)."""
    if memo is not None:
        result = load_all(directory, known=memo.knows)
        if not memo.skipped:
            return result, state_index.load(files)
        loaded = state_index.load(files, skip_cursors=memo.skipped)
        if loaded.note is None and not any(run.schedule_id in memo.skipped
                                           for run in loaded.state.runs.values()):
            return result, loaded
        memo.skipped.clear()
    return load_all(directory), state_index.load(files)


def changes(memo: Memo, schedules: Iterable[Schedule], state: st.State,
            files: Mapping[str, bytes], change: Mapping[str, bytes | None],
            cadence: Callable[[], Cadence]) -> dict[str, bytes]:
    """``state/quiet.json`` as it stands after ``change`` (empty when it is unchanged or
    ``change`` is): the entries of the schedules left unread, and one for each parsed
    schedule that is quiet in ``state``, the state this change commits."""
    if not change:
        return {}
    open_schedules = {run.schedule_id for run in state.runs.values()
                      if run.status in RUN_OPEN}
    entries = dict(memo.skipped)
    policy: Cadence | None = None
    for schedule in schedules:
        sid, spec = schedule.id, schedule.spec
        cursor = state.cursors.get(sid)
        path = st.cursor_path(sid)
        data = change.get(path) if path in change else files.get(path)
        digest = memo.files.get(sid)
        if (cursor is None or data is None or digest is None or sid in open_schedules
                or not spec.enabled or not cursor.enabled or cursor.paused is not None
                or spec.at_utc() is not None or (
                    spec.pause_after_failures is not None
                    and cursor.failures_in_a_row >= spec.pause_after_failures)):
            continue
        try:
            if for_spec(spec).slots(cursor.since, memo.now):
                continue  # not settled up to now: a later tick has to look again
            until = next_slot(spec, memo.now)
        except ValueError:
            continue
        if until is None:
            continue
        policy = policy or cadence()
        entries[sid] = Quiet(key=memo.key(sid, digest, blob_id(data)), checked=memo.now,
                             until=until, lingers=lingers_before(schedule, until, policy))
    new = st.to_json(QuietFile(schedules=dict(sorted(entries.items()))))
    return {} if files.get(QUIET) == new else {QUIET: new}


def next_wake(memo: Memo | None, schedules: Iterable[Schedule], state: st.State,
              now: datetime, cadence: Cadence) -> Wake | None:
    """:func:`.wake.next_wake`, with the slots of the schedules left unread."""
    return earliest(sorted([*due_moments(schedules, state, now, cadence),
                            *(memo.wakes() if memo else [])]))
