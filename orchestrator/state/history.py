"""The finished runs the pages show, read by their ids: never the whole history.

- A run id names its schedule and slot, so the newest runs (of the branch, or of
  one schedule) are picked from the listing of ``state/runs`` before any record is
  read; only the picked records are read, in one bulk read.
- Records the caller holds (the open runs, what a writer changes) are taken over
  the branch's.
- A record that cannot be read is left out: the tick quarantines and reports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..store import StateFiles, as_state_files
from . import codec, layout
from .index import run_folders
from .machine import RUN_OPEN

if TYPE_CHECKING:
    from .records import Run

INDEX_PAGE_RUNS = 200
"""How many of the newest runs ``state/index.html`` lists (and every open run): the
page is rendered whenever a run starts or ends, so it must not read the history."""


def page_runs(files: Mapping[str, bytes], also: Mapping[str, Run],
              limit: int = INDEX_PAGE_RUNS) -> tuple[dict[str, Run], int]:
    """The runs ``state/index.html`` lists: the records of the ``limit`` newest runs
    (by slot, which ends a run id) with ``also`` over them (the open runs and what the
    writer changes), and how many run folders are left out.

    Of ``also``, only the open runs, the new ones and the newest are listed: a state
    rebuilt without ``state/open.json`` holds every record, and the page stays bounded."""
    files = as_state_files(files)
    folders = run_folders(files)
    newest = _newest(filter(layout.is_run_id, folders), limit)
    paths = [layout.run_path(r) for r in newest]
    files.prefetch(paths)
    runs = {run.run_id: run for run in _readable_runs(files, paths)}
    shown = set(newest)
    runs.update((r, run) for r, run in also.items()
                if _listed_too(r, run, shown, folders))
    return runs, len(folders | set(runs)) - len(runs)


def _listed_too(run_id: str, run: Run, shown: set[str], folders: set[str]) -> bool:
    """Whether the page lists a run the caller holds: it is among the newest, new (no
    folder yet), or open."""
    return run_id in shown or run_id not in folders or run.status in RUN_OPEN


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
    for the schedules ``schedule_ids`` (the dashboard's strips)."""
    files = as_state_files(files)
    by_schedule = _by_schedule({*run_folders(files), *also}, schedule_ids)
    newest = {sid: _newest(ids, per_schedule) for sid, ids in by_schedule.items()}
    paths = [layout.run_path(r) for ids in newest.values() for r in ids if r not in also]
    files.prefetch(paths)
    return {sid: _records(files, ids, also) for sid, ids in newest.items()}


def _by_schedule(run_ids: Iterable[str], schedule_ids: Iterable[str]) -> dict[str, list[str]]:
    """Schedule id -> its runs among ``run_ids``, for each of ``schedule_ids``."""
    by_schedule: dict[str, list[str]] = {sid: [] for sid in schedule_ids}
    for run_id in filter(layout.is_run_id, run_ids):
        sid = run_id.rpartition("--")[0]  # the form is checked: no parse needed
        if sid in by_schedule:
            by_schedule[sid].append(run_id)
    return by_schedule


def _newest(run_ids: Iterable[str], limit: int) -> list[str]:
    """The ``limit`` newest of ``run_ids`` by slot, newest first."""
    return sorted(run_ids, key=lambda r: (layout.slot_text(r), r), reverse=True)[:limit]


def _records(files: StateFiles, run_ids: Iterable[str], also: Mapping[str, Run]) -> list[Run]:
    """The records of ``run_ids`` that can be read, those of ``also`` first."""
    found = (also.get(r) or _readable(files, layout.run_path(r)) for r in run_ids)
    return [run for run in found if run is not None]


def _readable_runs(files: StateFiles, paths: Iterable[str]) -> list[Run]:
    """The records at ``paths`` that can be read."""
    return [run for run in (_readable(files, p) for p in paths) if run is not None]


def _readable(files: StateFiles, path: str) -> Run | None:
    from .records import Run

    data = files.get(path)
    if data is None:
        return None
    try:
        return codec.parse_record(Run, path, data)
    except codec.CorruptState:
        return None
