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

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import store
from ..store import Change, Stamped, StateFiles, as_state_files
from . import codec, layout, strays
from . import model as state_model
from .machine import RUN_OPEN
from .openindex import OpenIndex, OpenRun, digest

if TYPE_CHECKING:
    from .records import Run

OPEN_INDEX = layout.OPEN_INDEX
RUNS = layout.RUNS


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
    """What ``index`` says that the run ``folders`` (``None``: not listed) or the
    records of ``state`` do not, or ``None``."""
    if folders is not None and not _counts(index, folders):
        return _miscounted(index, folders)
    unlisted = _unlisted_open(index, state)
    if unlisted:  # a quarantined run that was mended, or a run written behind its back
        return f"does not list the open run {unlisted[0]}"
    for run_id, entry in sorted(index.runs.items()):
        problem = _entry_disagreement(run_id, entry, state.runs.get(run_id))
        if problem is not None:
            return problem
    return None


def _miscounted(index: OpenIndex, folders: set[str]) -> str:
    """What ``index`` says of the run ``folders`` that it does not count exactly."""
    other = " (other ones)" if index.run_folders == len(folders) else ""
    return (f"was written for {index.run_folders} run folder(s), {RUNS} holds "
            f"{len(folders)}{other}")


def _unlisted_open(index: OpenIndex, state: state_model.State) -> list[str]:
    """The open runs of ``state`` that ``index`` does not list, in order."""
    return sorted(r for r, run in state.runs.items()
                  if run.status in RUN_OPEN and r not in index.runs)


def _counts(index: OpenIndex, folders: set[str]) -> bool:
    """Whether ``index`` counts and digests exactly the run ``folders``."""
    return index.run_folders == len(folders) and index.digest == digest(folders)


def _entry_disagreement(run_id: str, entry: OpenRun, run: Run | None) -> str | None:
    """What the index's ``entry`` says that the run's record does not, or ``None``."""
    if run is None:
        return f"lists {run_id}, which has no run record"
    if (run.status, run.schedule_id, run.slot) != (entry.status, entry.schedule_id,
                                                   entry.slot):
        return f"says {run_id} is {entry.status.value}, its record says {run.status.value}"
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
    top = _list_top(files)
    index, problem = read(files)
    tree = tree_id(files, RUNS)
    vouched = _vouched(index, tree)
    names = None if vouched else files.listdirs([RUNS])[RUNS]
    state: state_model.State | None = None
    if index is not None:
        state = _read_open(files, index, _folders(names), top, skip_cursors)
        problem = _disagreement(index, _folders(names), state)
    note = None
    lost = {} if index is None else index.lost
    if index is None or state is None or problem is not None:
        names = _runs_listing(files, names)
        old = index
        state, index, note = _rebuild(files, _folders(names) or set(), problem, top)
        lost = strays.lost_runs(old, state, names)
        vouched = False
    index = _as_checked(state, index, names, lost, tree)
    _attach_listings(state, files, names, top)
    return Loaded(state, index, note, vouched)


def _runs_listing(files: StateFiles, names: dict[str, bool] | None) -> dict[str, bool]:
    """The entries of ``state/runs``: ``names`` if the load listed them, else listed now."""
    return files.listdirs([RUNS])[RUNS] if names is None else names


def _attach_listings(state: state_model.State, files: StateFiles,
                     names: Mapping[str, bool] | None,
                     top: Mapping[str, Mapping[str, bool]]) -> None:
    """The run folders (those listed, or listed on first use) and the queues into
    ``state``."""
    folders = _folders(names)
    state.known_runs = frozenset(folders) if folders is not None else RunFolders(files)
    if "queues" in top[layout.ROOT]:
        attach_queues(state, files)


def _list_top(files: StateFiles) -> dict[str, dict[str, bool]]:
    """The listings a load starts from (``state/``, its ``schedules``, ``dlq`` and
    ``queues`` folders), with the few files of ``state/`` it reads prefetched."""
    # the queues' folder too, listed in the same call whether or not it exists
    top = files.listdirs([layout.ROOT, layout.SCHEDULES, layout.DLQ, layout.QUEUES])
    # exactly these: state/ also holds the index page of every run
    files.prefetch([*(p for p in (OPEN_INDEX, layout.TICKS, layout.HEALTH) if p in files),
                    *queue_summaries(files)])
    return top


def _vouched(index: OpenIndex | None, tree: str | None) -> bool:
    """Whether ``index`` holds for ``state/runs`` without listing it: it names the tree
    ``tree`` the folder has."""
    if index is None or tree is None or index.runs_tree != tree:
        return False
    # A stray entry no commit can carry (a `..` in a hand-made tree) was dropped by the
    # commit that stamped the index, which still names it: list the folder again.
    return not any(map(strays.uncarried, index.quarantined))


def _as_checked(state: state_model.State, index: OpenIndex,
                names: Mapping[str, bool] | None, lost: Mapping[str, str],
                tree: str | None) -> OpenIndex:
    """``index`` as it must stand on the tip after this load; the lost runs and the
    stray entries of ``state/runs`` are named in ``state``."""
    lost = {r: why for r, why in lost.items() if r not in state.runs}  # back: served
    strays.name_lost(state, lost)
    strays.name_stray_entries(state, index, names, lost)
    folders = _folders(names)
    update: dict[str, object] = {"quarantined": dict(sorted(state.quarantined.items())),
                                 "runs_tree": tree, "lost": lost}
    if folders is not None:  # checked against this tree now
        update["oldest_finished"] = oldest_finished(folders, index.runs)
    return index.model_copy(update=update)


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
    from . import queueload

    books, stray = queueload.load(files)
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
    open_dirs = [d for r in _runs_to_read(index, folders, runs)
                 for d in (layout.run_dir(r), layout.tracks_dir(r), layout.undo_dir(r))]
    # A dead letter keeps its track's spec in its run's specs.json, and its run is
    # usually finished: that one file of it is read too (its folder listed with the
    # open ones, in the same call).
    parked = _parked_runs(top[layout.DLQ], folders)
    runs_listed = files.listdirs([*open_dirs, *map(layout.run_dir, parked)])
    listed = {**top, **{f: runs_listed[f] for f in open_dirs}}
    wanted = _wanted(files, listed, skip, parked)
    files.prefetch(wanted)
    return state_model.load({p: files[p] for p in wanted})


def _wanted(files: StateFiles, listed: Mapping[str, Mapping[str, bool]],
            skip: Collection[str], parked: list[str]) -> list[str]:
    """The records a load reads: those of the ``listed`` folders but the cursors to
    ``skip``, the health file, and the specs of the ``parked`` runs."""
    wanted = [path for path in _records_in(listed) if path not in skip]
    if layout.HEALTH in files:
        wanted.append(layout.HEALTH)
    wanted += [path for path in map(layout.specs_path, parked)
               if path not in wanted and path in files]
    return wanted


def _runs_to_read(index: OpenIndex, folders: set[str] | None,
                  runs: Collection[str] | None) -> list[str]:
    """The runs whose records a load reads: ``runs`` when given, else those the index
    names. Of them, those with a folder (when the folders were listed)."""
    # the open runs, and the runs of records quarantined before: read again, they are
    # reported again, or they load (mended) and the index takes them back
    mine = set(runs) if runs is not None else {
        *index.runs, *index.lost,
        *(r for r in map(layout.run_of, index.quarantined) if r is not None)}
    if folders is not None:
        mine &= folders
    return sorted(filter(layout.is_run_id, mine))


def _parked_runs(dlq: Mapping[str, bool], folders: set[str] | None) -> list[str]:
    """The runs of the dead letters ``dlq`` lists, those with a folder (when the
    folders were listed)."""
    runs = (layout.dead_letter_run(name[:-5]) for name in dlq if name.endswith(".json"))
    return sorted(r for r in runs if layout.is_run_id(r) and _has_folder(r, folders))


def _has_folder(run_id: str, folders: set[str] | None) -> bool:
    """Whether ``run_id`` has a folder among ``folders`` (``None``: not listed, so it
    is taken to)."""
    return folders is None or run_id in folders


def _records_in(listed: Mapping[str, Mapping[str, bool]]) -> list[str]:
    """The JSON files of the ``listed`` folders but ``state/`` itself and
    ``state/queues`` (whose files are read apart), in listing order."""
    return [f"{folder}/{name}" for folder, entries in listed.items()
            if folder not in (layout.ROOT, layout.QUEUES)
            for name, is_dir in entries.items() if _is_record(name, is_dir)]


def _is_record(name: str, is_dir: bool) -> bool:
    return not is_dir and name.endswith(".json")


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
    data = _index_file(files, change, index, touched)
    if data is not None:
        out[OPEN_INDEX] = data
    return out


def _index_file(files: StateFiles, change: Mapping[str, bytes | None], index: OpenIndex,
                touched: Collection[str]) -> bytes | Stamped | None:
    """The index file ``change`` calls for, given the ``index`` on ``files`` and the runs
    ``touched``; ``None`` when none is to be written."""
    tree = tree_id(files, RUNS)
    stamp = bool(touched) and tree is not None and index.runs_tree == tree
    new = _with_runs(index, files, change, touched) if touched else index
    # A branch without runs gets its index with its first run, not on an idle tick.
    if not (OPEN_INDEX in files or new.run_folders):
        return None
    return _stamped(new) if stamp else _index_bytes(files, change, new)


def _with_runs(index: OpenIndex, files: StateFiles, change: Mapping[str, bytes | None],
               touched: Collection[str]) -> OpenIndex:
    """``index`` after ``change``, which writes or deletes files of the runs
    ``touched``; it names no tree (the change moves it)."""
    runs = dict(index.runs)
    folders = run_folders(files)
    # once, not per run: a compaction deletes thousands of runs in one change
    written = {layout.run_of(p) for p, data in change.items() if data is not None}
    for run_id in sorted(touched):
        record = layout.run_path(run_id)
        writes = run_id in written
        if writes:
            folders.add(run_id)
        if record in change:
            _take_record(runs, folders, run_id, change[record], writes)
    return index.model_copy(update={
        "runs": dict(sorted(runs.items())), "run_folders": len(folders),
        "digest": digest(folders), "oldest_finished": oldest_finished(folders, runs),
        "runs_tree": None})


def _take_record(runs: dict[str, OpenRun], folders: set[str], run_id: str,
                 data: bytes | None, writes: bool) -> None:
    """The record of ``run_id`` written (``data``) or deleted (``None``) into the
    index's open ``runs`` and the run ``folders``; ``writes``: the change keeps its
    folder."""
    from .records import Run

    if data is None:
        runs.pop(run_id, None)
        if not writes:  # the run's folder goes with its record (compaction)
            folders.discard(run_id)
        return
    run = codec.parse_record(Run, layout.run_path(run_id), data)
    if run.status in RUN_OPEN:
        runs[run_id] = OpenRun(schedule_id=run.schedule_id, status=run.status, slot=run.slot)
    else:
        runs.pop(run_id, None)


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
