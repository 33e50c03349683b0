"""The check every test of the open-runs index makes: it says what the records say."""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.state import index as state_index
from orchestrator.state.history import all_runs


def assert_index_agrees(files: Mapping[str, bytes]) -> None:
    """``state/open.json`` is present (once there is a run), readable, and exactly what
    the run records and the run folders of ``files`` call for (every record read,
    finished ones included)."""
    index, problem = state_index.read(files)
    folders = state_index.run_folders(files)
    if index is None and not folders:
        return  # a branch without runs gets its index with its first run
    assert index is not None, f"{state_index.OPEN_INDEX} {problem}"
    expected = state_index.build(all_runs(files).values(), folders)
    # The tree it names is the one it was written with; a writer of track records
    # alone (a report) moves the tree on without writing the index: that id then
    # matches nothing, and the next load lists the runs.
    assert index.model_copy(update={"runs_tree": None}) == expected
