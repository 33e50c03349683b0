"""The index of open runs, ``state/open.json``: what a tick reads instead of every run.

A branch keeps every finished run until ``compact`` archives it (an every-minute
schedule leaves 10,000 in a week). A tick needs only the open ones, so its cost does
not grow with the history.

- The index lists each open run with its schedule, status and slot. It also counts
  the run folders and digests their names.
- A tick reads the index, the cursors, the dead letters and the open runs' records;
  never a finished run's.
- The index is never the only truth: :func:`load` checks it against every record it
  reads, and against the run folders when it lists them.
- When it is missing, unreadable or disagrees, it is rebuilt from every record. One
  line says so (:attr:`Loaded.note`); the tick logs it and commits the new index.
- It is trusted without listing ``state/runs`` while that folder's tree id is the one
  it names (``runs_tree``): nothing under the folder changed since.
- ``state/runs`` is listed when its tree moved, when the index is rebuilt, or when a
  slot is about to fire (``state.known_runs``), so no slot fires twice.
- Records the last load could not read are named in the index and read again by
  every tick until someone mends them.
- Entries of ``state/runs`` that are no run folder (a name that is no run id, a file)
  are named on every load, as the listing shows them; a remembered one that no commit
  can carry (``..``) makes the next load list the folder, so the names follow the tree.
- A run the index listed as open whose run record the tree lost (its folder deleted,
  or a file now) is kept in ``lost`` and named on every load until its record is back
  or a person deletes the entry.
- Every writer of a ``run.json`` updates the index in the same compare-and-swap commit
  (:func:`refresh`).
- A writer that changes ``state/runs`` with an index good for the old tree stamps the
  new tree's id (:class:`~.store.Stamped`). Any other change of the folder leaves the
  id stale, so the next load lists it.
- A branch without runs gets its index with its first run, never on an idle tick. An
  index only checked against the tree again is not worth a commit of its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from .. import store
from ..spec.fields import Frozen, UTCDateTime
from ..store import Change, Stamped, StateFiles, as_state_files
from ..support.times import iso
from . import codec, layout
from . import model as state_model
from .machine import RUN_OPEN
from .phases import RunStatus

if TYPE_CHECKING:
    from .records import Run

OPEN_INDEX = layout.OPEN_INDEX
RUNS = layout.RUNS


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


@dataclass(frozen=True)
class Loaded:
    """The state a tick plans on, and the index as it must stand on the tip."""

    state: state_model.State
    """Cursors, dead letters, health and the open runs with their tracks."""
    index: OpenIndex
    note: str | None = None
    """Why the index was rebuilt (missing, unreadable, disagreeing), or ``None``."""
    vouched: bool = False
    """Whether ``state/runs`` was left unlisted because its tree id is the index's."""


def digest(names: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()


def run_folders(files: Mapping[str, bytes]) -> set[str]:
    """The run ids that have a folder under ``state/runs/``."""
    listed = as_state_files(files).listdirs([RUNS])[RUNS]
    return {name for name, is_dir in listed.items() if is_dir}


def tree_id(files: StateFiles, folder: str) -> str | None:
    """The id of ``folder``'s tree, from its parent's listing (which the tick makes
    anyway); ``None`` when there is no such folder."""
    parent, _, name = folder.rpartition("/")
    return files.object_id(folder) if files.listdirs([parent])[parent].get(name) else None


class RunFolders(Collection[str]):
    """The run ids with a folder under ``state/runs/``, listed on first use: a tick
    that fires nothing never asks (:attr:`~.state.State.known_runs`)."""

    def __init__(self, files: StateFiles) -> None:
        self._files = files
        self._names: frozenset[str] | None = None

    @property
    def listed(self) -> bool:
        return self._names is not None

    def names(self) -> frozenset[str]:
        if self._names is None:
            self._names = frozenset(run_folders(self._files))
        return self._names

    def __contains__(self, run_id: object) -> bool:
        return run_id in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


def oldest_finished(folders: Iterable[str], open_runs: Collection[str]) -> str | None:
    """The run id, among ``folders`` and not open, with the earliest slot."""
    return min((r for r in folders if r not in open_runs and layout.is_run_id(r)),
               key=lambda r: (layout.slot_text(r), r), default=None)


def build(runs: Iterable[Run], folders: set[str]) -> OpenIndex:
    """The index the records ``runs`` and the run ``folders`` call for."""
    open_runs = {r.run_id: OpenRun(schedule_id=r.schedule_id, status=r.status, slot=r.slot)
                 for r in sorted(runs, key=lambda r: r.run_id) if r.status in RUN_OPEN}
    return OpenIndex(runs=open_runs, run_folders=len(folders), digest=digest(folders),
                     oldest_finished=oldest_finished(folders, open_runs))


def read(files: Mapping[str, bytes]) -> tuple[OpenIndex | None, str | None]:
    """The committed index, or ``None`` and what is wrong with it."""
    data = files.get(OPEN_INDEX)
    if data is None:
        return None, "is missing"
    try:
        return codec.parse_record(OpenIndex, OPEN_INDEX, data), None
    except codec.CorruptState as exc:
        return None, f"is unreadable ({exc.message})"


def _disagreement(index: OpenIndex, folders: set[str] | None,
                  state: state_model.State) -> str | None:
    if folders is not None and (index.run_folders != len(folders)
                                or index.digest != digest(folders)):
        return (f"was written for {index.run_folders} run folder(s), {RUNS} holds "
                f"{len(folders)}" + (" (other ones)" if index.run_folders == len(folders)
                                     else ""))
    unlisted = sorted(r for r, run in state.runs.items()
                      if run.status in RUN_OPEN and r not in index.runs)
    if unlisted:  # a quarantined run that was mended, or a run written behind its back
        return f"does not list the open run {unlisted[0]}"
    for run_id, entry in sorted(index.runs.items()):
        run = state.runs.get(run_id)
        if run is None:
            return f"lists {run_id}, which has no run record"
        if (run.status, run.schedule_id, run.slot) != (entry.status, entry.schedule_id,
                                                       entry.slot):
            return (f"says {run_id} is {entry.status.value}, its record says "
                    f"{run.status.value}")
    return None


def load(files: Mapping[str, bytes], skip_cursors: Collection[str] = ()) -> Loaded:
    """The state a tick needs, read through the index (rebuilt when it cannot be trusted).

    Reads the index, lists ``state/``, its ``schedules`` and ``dlq`` folders and the
    open runs' folders, and parses only those records: never a finished run.
    ``state/runs`` itself is listed only when its tree is not the one the index names
    (another writer changed it since: the listing then checks the index);
    ``state.known_runs`` lists it when asked, so a slot whose run finished long ago
    is still never fired twice. The cursors of ``skip_cursors`` are not read
    (schedules the tick does not plan: :mod:`orchestrator.tick.memo`), unless the index
    has to be rebuilt.
    """
    files = as_state_files(files)
    # the queues' folder too, listed in the same call whether or not it exists
    top = files.listdirs([layout.ROOT, layout.SCHEDULES, layout.DLQ, layout.QUEUES])
    # exactly these: state/ also holds the index page of every run
    files.prefetch([*(p for p in (OPEN_INDEX, layout.TICKS, layout.HEALTH) if p in files),
                    *queue_summaries(files)])
    index, problem = read(files)
    tree = tree_id(files, RUNS)
    # A stray entry no commit can carry (a `..` in a hand-made tree) was dropped by the
    # commit that stamped the index, which still names it: list the folder again.
    vouched = (index is not None and tree is not None and index.runs_tree == tree
               and not any(map(_uncarried, index.quarantined)))
    names = None if vouched else files.listdirs([RUNS])[RUNS]
    state: state_model.State | None = None
    if index is not None:
        state = _read_open(files, index, _folders(names), top, skip_cursors)
        problem = _disagreement(index, _folders(names), state)
    note = None
    lost = {} if index is None else index.lost
    if index is None or state is None or problem is not None:
        names = files.listdirs([RUNS])[RUNS] if names is None else names
        old = index
        state, index, note = _rebuild(files, _folders(names) or set(), problem, top)
        lost = _lost(old, state, names)
        vouched = False
    lost = {r: why for r, why in lost.items() if r not in state.runs}  # back: served
    _name_lost(state, lost)
    _name_stray_entries(state, index, names, lost)
    folders = _folders(names)
    update: dict[str, object] = {"quarantined": dict(sorted(state.quarantined.items())),
                                 "runs_tree": tree, "lost": lost}
    if folders is not None:  # checked against this tree now
        update["oldest_finished"] = oldest_finished(folders, index.runs)
    index = index.model_copy(update=update)
    state.known_runs = frozenset(folders) if folders is not None else RunFolders(files)
    if "queues" in top[layout.ROOT]:
        attach_queues(state, files)
    return Loaded(state, index, note, vouched)


def queue_summaries(files: StateFiles) -> list[str]:
    """The paths of the queues' summaries, from the listing of ``state/queues`` (which
    the tick makes with its first listing, so reading them costs no git process of
    their own)."""
    listed = files.listdirs([layout.QUEUES])[layout.QUEUES]
    return [f"{layout.QUEUES}/{name}" for name, is_dir in listed.items()
            if not is_dir and name.endswith(".json")]


def attach_queues(state: state_model.State, files: StateFiles) -> None:
    """The queues' summaries into ``state`` (no item is read); an entry of
    ``state/queues`` that is no queue's is named like a quarantined record. A branch
    without ``state/queues`` never imports the queues' models."""
    if not files.listdirs([layout.QUEUES])[layout.QUEUES]:
        return
    from . import queue

    books, stray = queue.load(files)
    state.queues = books
    for line in stray:
        state.quarantined.setdefault(line.split(":", 1)[0], line)


def _folders(names: Mapping[str, bool] | None) -> set[str] | None:
    """The folders among the entries of ``state/runs`` (``None``: not listed)."""
    return None if names is None else {name for name, is_dir in names.items() if is_dir}


def _read_open(files: StateFiles, index: OpenIndex, folders: set[str] | None,
               top: Mapping[str, Mapping[str, bool]], skip_cursors: Collection[str],
               runs: Collection[str] | None = None) -> state_model.State:
    """The records the index points at: the cursors, the dead letters, the health file
    and the open runs' records (or those of ``runs``), found in the listings ``top``
    and of the runs."""
    # only compared with the paths listed, never read: no need to check each id
    skip = {layout.unchecked_cursor_path(sid) for sid in skip_cursors}
    # the open runs, and the runs of records quarantined before: read again, they are
    # reported again, or they load (mended) and the index takes them back
    mine = set(runs) if runs is not None else {
        *index.runs, *index.lost,
        *(r for r in map(layout.run_of, index.quarantined) if r is not None)}
    open_runs = [r for r in sorted(mine if folders is None else mine & folders)
                 if layout.is_run_id(r)]
    open_dirs = [d for r in open_runs
                 for d in (layout.run_dir(r), layout.tracks_dir(r), layout.undo_dir(r))]
    # A dead letter keeps its track's spec in its run's specs.json, and its run is
    # usually finished: that one file of it is read too (its folder listed with the
    # open ones, in the same call).
    parked = sorted(r for r in (layout.dead_letter_run(name[:-5])
                                for name in top[layout.DLQ] if name.endswith(".json"))
                    if layout.is_run_id(r) and (folders is None or r in folders))
    runs_listed = files.listdirs([*open_dirs, *map(layout.run_dir, parked)])
    listed = {**top, **{f: runs_listed[f] for f in open_dirs}}
    wanted = [path for folder, entries in listed.items()
              if folder not in (layout.ROOT, layout.QUEUES)
              for name, is_dir in entries.items()
              if not is_dir and name.endswith(".json")
              and (path := f"{folder}/{name}") not in skip]
    if layout.HEALTH in files:
        wanted.append(layout.HEALTH)
    wanted += [path for path in map(layout.specs_path, parked)
               if path not in wanted and path in files]
    files.prefetch(wanted)
    return state_model.load({p: files[p] for p in wanted})


def _rebuild(files: StateFiles, folders: set[str], problem: str | None,
             top: Mapping[str, Mapping[str, bool]]
             ) -> tuple[state_model.State, OpenIndex, str | None]:
    """Every record read, the index they call for, and the line that says why. The
    records are found folder by folder (every run's), never by listing the whole tree:
    a work queue of 100,000 items beside them is not listed."""
    state = _read_open(files, OpenIndex(), folders, top, (), runs=folders)
    index = build(state.runs.values(), folders)
    note = None
    if folders or OPEN_INDEX in files:  # a branch without runs needs no index yet
        note = (f"{OPEN_INDEX} {problem}: rebuilt from {len(state.runs)} run "
                f"record(s), {len(index.runs)} open")
    return state, index, note


def _stray(path: str) -> bool:
    """Whether ``path`` is an entry of ``state/runs`` itself (not inside a run folder)."""
    return layout.runs_entry(path) is not None and layout.run_of(path) is None


def _uncarried(path: str) -> bool:
    """Whether ``path`` is a stray entry that no commit carries over (see
    :func:`~orchestrator.store.committable`)."""
    name = layout.runs_entry(path)
    return name is not None and _stray(path) and not store.committable(name)


def _lost(old: OpenIndex | None, state: state_model.State,
          names: Mapping[str, bool]) -> dict[str, str]:
    """The runs ``old`` listed as open (or as lost) that have no run record in
    ``state`` and are not quarantined (a quarantined record is named already), with
    what became of each."""
    if old is None:
        return {}
    named = {layout.run_of(p) for p in state.quarantined}
    lost = dict(old.lost)
    for run_id, entry in old.runs.items():
        if run_id in state.runs or run_id in named:
            continue
        kind = names.get(run_id)
        where = ("its folder is gone" if kind is None else "its folder has no run.json"
                 if kind else "its folder is a file now")
        lost[run_id] = (f"the open run ({entry.status.value}, slot {iso(entry.slot)}) lost "
                        f"its records: {where}")
    return {r: why for r, why in sorted(lost.items()) if r not in named}


def _name_lost(state: state_model.State, lost: Mapping[str, str]) -> None:
    """Name each lost run, as a quarantined record is named, on every load (under its
    run record's path: it is no stray entry, and its records are looked for again)."""
    for run_id, why in lost.items():
        state.quarantined[f"{layout.runs_entry_path(run_id)}/run.json"] = (
            f"{layout.runs_entry_path(run_id)}: {why}; its tracks are not served: restore "
            f"it from the branch's history, or delete its entry under 'lost' in "
            f"{OPEN_INDEX} to let it go")


def _name_stray_entries(state: state_model.State, index: OpenIndex,
                        names: Mapping[str, bool] | None, lost: Collection[str]) -> None:
    """Quarantine each entry of ``state/runs`` that is no run folder (a name that is no
    run id, or a file that is not a ``lost`` run's): it is never read, only named.
    Unlisted (``names`` is ``None``), they are as the index last saw them."""
    if names is None:
        for path, why in index.quarantined.items():
            if _stray(path):
                state.quarantined.setdefault(path, why)
        return
    for name, is_dir in sorted(names.items()):
        if not layout.is_run_id(name):
            state_model.quarantine_folder(state, name)
        elif not is_dir and name not in lost:
            state.quarantined.setdefault(
                layout.runs_entry_path(name),
                f"{layout.runs_entry_path(name)}: a file, not a run folder; left alone")


def refresh(files: Mapping[str, bytes], change: Mapping[str, bytes | None],
            index: OpenIndex | None = None) -> Change:
    """``change`` plus the index it calls for, so both land in one commit.

    ``index`` is the index as it stands on ``files`` (as :func:`load` returned it); by
    default the committed one is read. A writer that finds no readable index leaves
    it alone: the next tick rebuilds it and says so. When the change touches
    ``state/runs`` and the index was good for the tree it changes, the new index is
    :class:`~.store.Stamped` with the new tree's id; otherwise it names no tree, and
    the next load lists the folder and checks it.
    """
    files = as_state_files(files)
    out: Change = dict(change)
    touched = {r for r in map(layout.run_of, change) if r is not None}
    if index is None and touched:
        index, _ = read(files)
    if index is None:
        return out
    tree = tree_id(files, RUNS)
    good = tree is not None and index.runs_tree == tree
    new = _with_runs(index, files, change, touched) if touched else index
    # A branch without runs gets its index with its first run, not on an idle tick.
    if not (OPEN_INDEX in files or new.run_folders):
        return out
    data = _stamped(new) if touched and good else _index_bytes(files, change, new)
    if data is not None:
        out[OPEN_INDEX] = data
    return out


def _with_runs(index: OpenIndex, files: StateFiles, change: Mapping[str, bytes | None],
               touched: Collection[str]) -> OpenIndex:
    """``index`` after ``change``, which writes or deletes files of the runs
    ``touched``; it names no tree (the change moves it)."""
    from .records import Run

    runs = dict(index.runs)
    folders = run_folders(files)
    # once, not per run: a compaction deletes thousands of runs in one change
    written = {layout.run_of(p) for p, data in change.items() if data is not None}
    for run_id in sorted(touched):
        record = layout.run_path(run_id)
        writes = run_id in written
        if writes:
            folders.add(run_id)
        if record not in change:
            continue
        data = change[record]
        if data is None:
            runs.pop(run_id, None)
            if not writes:  # the run's folder goes with its record (compaction)
                folders.discard(run_id)
            continue
        run = codec.parse_record(Run, record, data)
        if run.status in RUN_OPEN:
            runs[run_id] = OpenRun(schedule_id=run.schedule_id, status=run.status,
                                   slot=run.slot)
        else:
            runs.pop(run_id, None)
    return index.model_copy(update={
        "runs": dict(sorted(runs.items())), "run_folders": len(folders),
        "digest": digest(folders), "oldest_finished": oldest_finished(folders, runs),
        "runs_tree": None})


def _stamped(index: OpenIndex) -> Stamped:
    """``index`` naming the tree its commit gives ``state/runs``."""

    def fill(tree_id: str | None) -> bytes:
        return codec.to_json(index.model_copy(update={"runs_tree": tree_id}))

    return Stamped.of(RUNS, fill)


def _index_bytes(files: StateFiles, change: Mapping[str, bytes | None],
                 new: OpenIndex) -> bytes | None:
    """``new`` as the file to write, or ``None`` when the committed one will do."""
    data = codec.to_json(new)
    if files.get(OPEN_INDEX) == data:
        return None
    committed, _ = read(files)  # rarely reached: the index differs from the one committed
    if committed is not None and committed.model_copy(update={
            "runs_tree": new.runs_tree, "oldest_finished": new.oldest_finished}) == new \
            and not store.changes(files, change):
        return None  # only checked against the tree again: not worth a commit of its own
    return data


INDEX_PAGE_RUNS = 200
"""How many of the newest runs ``state/index.html`` lists (and every open run): the
page is rendered whenever a run starts or ends, so it must not read the history."""


def page_runs(files: Mapping[str, bytes], also: Mapping[str, Run],
              limit: int = INDEX_PAGE_RUNS) -> tuple[dict[str, Run], int]:
    """The runs ``state/index.html`` lists: the records of the ``limit`` newest runs
    (by slot, which ends a run id) with ``also`` over them (the open runs and what the
    writer changes), and how many run folders are left out. Only those records are
    read; one that cannot be read is left out (the tick quarantines and reports it).

    Of ``also``, only the open runs, the new ones and the newest are listed: a state
    rebuilt without ``state/open.json`` holds every record, and the page stays bounded."""
    from .records import Run

    files = as_state_files(files)
    folders = run_folders(files)
    newest = sorted((r for r in folders if layout.is_run_id(r)),
                    key=lambda r: (layout.slot_text(r), r), reverse=True)[:limit]
    paths = [layout.run_path(r) for r in newest]
    files.prefetch(paths)
    runs: dict[str, Run] = {}
    for path in paths:
        data = files.get(path)
        if data is None:
            continue
        try:
            run = codec.parse_record(Run, path, data)
        except codec.CorruptState:
            continue
        runs[run.run_id] = run
    shown = set(newest)
    runs.update((r, run) for r, run in also.items()
                if r in shown or r not in folders or run.status in RUN_OPEN)
    return runs, len(folders | set(runs)) - len(runs)


def all_runs(files: Mapping[str, bytes]) -> dict[str, Run]:
    """Every run record, finished ones included (for the index page of every run)."""
    from .records import Run

    files = as_state_files(files)
    folders = run_folders(files)
    paths = [layout.run_path(r) for r in sorted(folders)]
    files.prefetch(paths)
    return {run.run_id: run for run in (codec.parse_record(Run, p, files[p])
                                        for p in paths if p in files)}


def schedule_history(files: Mapping[str, bytes], schedule_ids: Iterable[str],
                     also: Mapping[str, Run], per_schedule: int) -> dict[str, list[Run]]:
    """Schedule id -> the records of its ``per_schedule`` newest runs, newest first,
    for the schedules ``schedule_ids`` (the dashboard's strips). The run ids name
    their schedule and slot, so only those records are read; ``also`` (the open runs
    and what the writer changes) is taken over the branch's. An unreadable record is
    left out (the tick quarantines and reports it)."""
    files = as_state_files(files)
    wanted = set(schedule_ids)
    by_schedule: dict[str, list[str]] = {sid: [] for sid in wanted}
    for run_id in {*run_folders(files), *also}:
        if not layout.is_run_id(run_id):
            continue
        sid = run_id.rpartition("--")[0]  # the form is checked: no parse needed
        if sid in by_schedule:
            by_schedule[sid].append(run_id)
    newest = {sid: sorted(ids, key=lambda r: (layout.slot_text(r), r), reverse=True)
              [:per_schedule] for sid, ids in by_schedule.items()}
    paths = [layout.run_path(r) for ids in newest.values() for r in ids if r not in also]
    files.prefetch(paths)
    out: dict[str, list[Run]] = {}
    for sid, ids in newest.items():
        runs = []
        for run_id in ids:
            run = also.get(run_id) or _readable(files, layout.run_path(run_id))
            if run is not None:
                runs.append(run)
        out[sid] = runs
    return out


def _readable(files: StateFiles, path: str) -> Run | None:
    from .records import Run

    data = files.get(path)
    if data is None:
        return None
    try:
        return codec.parse_record(Run, path, data)
    except codec.CorruptState:
        return None
