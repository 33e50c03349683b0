"""What a load names in ``state/runs`` but does not serve: lost runs and stray entries.

- A lost run is one the index listed as open whose run record the tree lost (its
  folder deleted, or a file now). It is named on every load, under its record's path,
  until the record is back or a person deletes its entry under ``lost``.
- A stray entry is one that is no run folder: a name that is no run id, or a file.
  It is never read, only named; unlisted, strays are as the index last saw them.
- A stray that no commit can carry (``..``) is told apart (:func:`uncarried`): the
  index that names it cannot vouch for the folder's tree.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .. import store
from ..support.times import iso
from . import layout
from . import model as state_model
from .openindex import OpenIndex


def stray(path: str) -> bool:
    """Whether ``path`` is an entry of ``state/runs`` itself (not inside a run folder)."""
    return layout.runs_entry(path) is not None and layout.run_of(path) is None


def uncarried(path: str) -> bool:
    """Whether ``path`` is a stray entry that no commit carries over (see
    :func:`~orchestrator.store.committable`)."""
    name = layout.runs_entry(path)
    return name is not None and stray(path) and not store.committable(name)


def lost_runs(old: OpenIndex | None, state: state_model.State,
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
        where = _WHERE_LOST[names.get(run_id)]
        lost[run_id] = (f"the open run ({entry.status.value}, slot {iso(entry.slot)}) lost "
                        f"its records: {where}")
    return {r: why for r, why in sorted(lost.items()) if r not in named}


_WHERE_LOST: dict[bool | None, str] = {
    None: "its folder is gone", True: "its folder has no run.json",
    False: "its folder is a file now"}
"""What the listing of ``state/runs`` says became of a lost run's folder: its entry
there is missing (``None``), a folder, or a file."""


def name_lost(state: state_model.State, lost: Mapping[str, str]) -> None:
    """Name each lost run, as a quarantined record is named, on every load (under its
    run record's path: it is no stray entry, and its records are looked for again)."""
    for run_id, why in lost.items():
        state.quarantined[f"{layout.runs_entry_path(run_id)}/run.json"] = (
            f"{layout.runs_entry_path(run_id)}: {why}; its tracks are not served: restore "
            f"it from the branch's history, or delete its entry under 'lost' in "
            f"{layout.OPEN_INDEX} to let it go")


def name_stray_entries(state: state_model.State, index: OpenIndex,
                        names: Mapping[str, bool] | None, lost: Collection[str]) -> None:
    """Quarantine each entry of ``state/runs`` that is no run folder (a name that is no
    run id, or a file that is not a ``lost`` run's): it is never read, only named.
    Unlisted (``names`` is ``None``), they are as the index last saw them."""
    if names is None:
        for path, why in index.quarantined.items():
            if stray(path):
                state.quarantined.setdefault(path, why)
        return
    for name, is_dir in sorted(names.items()):
        if not layout.is_run_id(name):
            state_model.quarantine_folder(state, name)
        elif not is_dir and name not in lost:
            state.quarantined.setdefault(
                layout.runs_entry_path(name),
                f"{layout.runs_entry_path(name)}: a file, not a run folder; left alone")
