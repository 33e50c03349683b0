"""The index of open runs: what a tick reads instead of every run record.

A state branch keeps every finished run until ``compact`` archives it (an
every-minute schedule leaves 10,000 runs in a week), but a tick needs only the open
ones: overlap policies look at a schedule's open runs, hygiene and fan-in at their
tracks, daily caps at the cursors. ``state/open.json`` lists the open runs with what
those policies need (schedule, status, slot), and the number and a digest of the run
folders, so a tick reads the index, the cursors, the dead letters and the open runs'
records, and lists one folder (``state/runs``) to know which run ids exist: its cost
does not grow with the history.

The index is never the only truth. Every writer that changes a ``run.json`` updates
it in the same compare-and-swap commit (:func:`refresh`); :func:`load` checks it
against what it reads anyway (the run folders, the records of the runs it lists) and,
when it is missing, unreadable or disagrees, rebuilds it from the records and says
so in one line, which the tick logs and commits with the rebuilt index.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from . import state as st
from .machine import RUN_OPEN
from .models import RUN_ID_RE, Frozen, Run, RunStatus, UTCDateTime
from .store import Change

OPEN_INDEX = f"{st.ROOT}/open.json"
RUNS = f"{st.ROOT}/runs"


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

    def by_schedule(self, schedule_id: str) -> list[str]:
        """The open runs of one schedule, by slot (what overlap policies look at)."""
        return sorted((r for r, o in self.runs.items() if o.schedule_id == schedule_id),
                      key=lambda r: (self.runs[r].slot, r))


@dataclass(frozen=True)
class Loaded:
    """The state a tick plans on, and the index as it must stand on the tip."""

    state: st.State
    """Cursors, dead letters, health and the open runs with their tracks."""
    index: OpenIndex
    note: str | None = None
    """Why the index was rebuilt (missing, unreadable, disagreeing), or ``None``."""


def digest(names: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()


def listdirs(files: Mapping[str, bytes], folders: Iterable[str]) -> dict[str, dict[str, bool]]:
    """``folder -> name -> is a folder`` for each of ``folders``.

    The git store lists exactly these folders (one ``ls-tree``); any other mapping,
    such as the in-memory store's, is scanned.
    """
    wanted = sorted(set(folders))
    lister = getattr(files, "listdirs", None)
    if lister is not None:
        listed = lister(wanted)
        return {f: {name: entry[0] for name, entry in listed[f].items()} for f in wanted}
    out: dict[str, dict[str, bool]] = {f: {} for f in wanted}
    for path in files:
        for folder in wanted:
            if path.startswith(folder + "/"):
                head, sep, _ = path[len(folder) + 1:].partition("/")
                out[folder][head] = out[folder].get(head, False) or bool(sep)
    return out


def run_folders(files: Mapping[str, bytes]) -> set[str]:
    """The run ids that have a folder under ``state/runs/``."""
    return {name for name, is_dir in listdirs(files, [RUNS])[RUNS].items() if is_dir}


def build(runs: Iterable[Run], folders: set[str]) -> OpenIndex:
    """The index the records ``runs`` and the run ``folders`` call for."""
    return OpenIndex(
        runs={r.run_id: OpenRun(schedule_id=r.schedule_id, status=r.status, slot=r.slot)
              for r in sorted(runs, key=lambda r: r.run_id) if r.status in RUN_OPEN},
        run_folders=len(folders), digest=digest(folders))


def read(files: Mapping[str, bytes]) -> tuple[OpenIndex | None, str | None]:
    """The committed index, or ``None`` and what is wrong with it."""
    data = files.get(OPEN_INDEX)
    if data is None:
        return None, "is missing"
    try:
        return st.parse_record(OpenIndex, OPEN_INDEX, data), None
    except st.CorruptState as exc:
        return None, f"is unreadable ({exc.message})"


def _disagreement(index: OpenIndex, folders: set[str], state: st.State) -> str | None:
    if index.run_folders != len(folders) or index.digest != digest(folders):
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

    Reads the index, lists ``state/``, its ``schedules``, ``dlq`` and ``runs`` folders
    and the open runs' folders, and parses only those records: never a finished run.
    ``state.known_runs`` is every run id with a folder, so a slot whose run finished
    long ago is still never fired twice. The cursors of ``skip_cursors`` are not read
    (schedules the tick does not plan: :mod:`orchestrator.quiet`), unless the index
    has to be rebuilt.
    """
    skip = {st.cursor_path(sid) for sid in skip_cursors}
    top = listdirs(files, [st.ROOT, f"{st.ROOT}/schedules", f"{st.ROOT}/dlq", RUNS])
    folders = {name for name, is_dir in top[RUNS].items() if is_dir}
    prefetch = getattr(files, "prefetch", None)
    if prefetch is not None:  # exactly these: state/ also holds the index page of every run
        prefetch(p for p in (OPEN_INDEX, st.TICKS, st.HEALTH)
                 if p.rpartition("/")[2] in top[st.ROOT])
    index, problem = read(files)
    state: st.State | None = None
    if index is not None:
        # the open runs, and the runs of records quarantined before: read again, they
        # are reported again, or they load (mended) and the index takes them back
        held = {p.split("/")[2] for p in index.quarantined
                if p.startswith(f"{RUNS}/") and p.count("/") >= 3}
        open_dirs = [st.run_dir(r) for r in sorted({*index.runs, *held} & folders)
                     if RUN_ID_RE.fullmatch(r)]
        listed = {**top, **listdirs(files, [*open_dirs, *(f"{d}/{sub}" for d in open_dirs
                                                         for sub in ("tracks", "undo"))])}
        wanted = [f"{folder}/{name}" for folder, names in listed.items() if folder != st.ROOT
                  and folder != RUNS for name, is_dir in names.items()
                  if not is_dir and name.endswith(".json") and f"{folder}/{name}" not in skip]
        if st.HEALTH.rpartition("/")[2] in top[st.ROOT]:
            wanted.append(st.HEALTH)
        # A dead letter keeps its track's spec in its run's specs.json, and its run is
        # usually finished: that one file of it is read too.
        parked = {name[:-5].rpartition("--")[0] for name in top[f"{st.ROOT}/dlq"]
                  if name.endswith(".json")}
        wanted += [path for path in (st.specs_path(r) for r in sorted(parked & folders))
                   if path not in wanted and path in files]
        if prefetch is not None:
            prefetch(wanted)
        state = st.load({p: files[p] for p in wanted})
        problem = _disagreement(index, folders, state)
    note = None
    if problem is not None or index is None or state is None:
        state = st.load(files)
        index = build(state.runs.values(), folders)
        if folders or OPEN_INDEX in files:  # a branch without runs needs no index yet
            note = (f"{OPEN_INDEX} {problem}: rebuilt from {len(state.runs)} run "
                    f"record(s), {len(index.runs)} open")
    for name in sorted(top[RUNS]):  # an entry that is no run id is never read, only named
        if not RUN_ID_RE.fullmatch(name):
            state.quarantined.setdefault(
                f"{RUNS}/{name}", f"{RUNS}/{name!r}: not a run id; that folder is left alone")
    index = index.model_copy(update={"quarantined": dict(sorted(state.quarantined.items()))})
    state.known_runs = frozenset(folders)
    return Loaded(state, index, note)


def _run_of(path: str) -> str | None:
    parts = path.split("/")
    return parts[2] if len(parts) >= 4 and parts[:2] == [st.ROOT, "runs"] else None


def refresh(files: Mapping[str, bytes], change: Mapping[str, bytes | None],
            index: OpenIndex | None = None) -> Change:
    """``change`` plus the index it calls for, so both land in one commit.

    ``index`` is the index as it stands on ``files`` (a rebuilt one); by default the
    committed one is read. A writer that finds no readable index leaves it alone: the
    next tick rebuilds it and says so.
    """
    out: Change = dict(change)
    touched = {r for r in map(_run_of, change) if r is not None}
    if index is None:
        if not touched:
            return out
        index, _ = read(files)
        if index is None:
            return out
    runs = dict(index.runs)
    folders: set[str] | None = None
    if touched:
        folders = run_folders(files)
        # once, not per run: a compaction deletes thousands of runs in one change
        written = {_run_of(p) for p, data in change.items() if data is not None}
        for run_id in sorted(touched):
            record = st.run_path(run_id)
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
            run = st.parse_record(Run, record, data)
            if run.status in RUN_OPEN:
                runs[run_id] = OpenRun(schedule_id=run.schedule_id, status=run.status,
                                       slot=run.slot)
            else:
                runs.pop(run_id, None)
    new = index.model_copy(update={"runs": dict(sorted(runs.items()))})
    if folders is not None:
        new = new.model_copy(update={"run_folders": len(folders), "digest": digest(folders)})
    data = st.to_json(new)
    # A branch without runs gets its index with its first run, not on an idle tick.
    if files.get(OPEN_INDEX) != data and (OPEN_INDEX in files or new.run_folders):
        out[OPEN_INDEX] = data
    return out


def all_runs(files: Mapping[str, bytes]) -> dict[str, Run]:
    """Every run record, finished ones included (for the index page of every run)."""
    folders = run_folders(files)
    paths = [st.run_path(r) for r in sorted(folders)]
    prefetch = getattr(files, "prefetch", None)
    if prefetch is not None:
        prefetch(paths)
    return {run.run_id: run for run in (st.parse_record(Run, p, files[p])
                                        for p in paths if p in files)}
