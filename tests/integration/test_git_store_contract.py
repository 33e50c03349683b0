"""The store contract against the git store: real git, a bare origin in a temp folder,
and a rival writer in a second clone (the in-memory half is in tests/unit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.store import GitStateStore, InMemoryStateStore, StateFiles
from tests.gitrepo import git
from tests.store_contract import TREE, Backend, BackendFactory, StoreContract


def git_backend(tmp_path: Path, **kwargs: Any) -> Backend:
    origin = tmp_path / "origin.git"
    git("init", "--quiet", "--bare", str(origin), cwd=tmp_path)
    mine, rival = tmp_path / "mine", tmp_path / "rival"
    for clone in (mine, rival):
        git("init", "--quiet", str(clone), cwd=tmp_path)

    def make(clone: Path, **kw: Any) -> GitStateStore:
        return GitStateStore(clone, str(origin), sleep=lambda _: None, **kw)

    def commits() -> int:
        if not git("ls-remote", str(origin), "refs/heads/orchestrator-state", cwd=tmp_path):
            return 0
        return int(git("rev-list", "--count", "orchestrator-state", cwd=origin))

    return Backend(make(mine, **kwargs), lambda: make(rival), commits)


class TestGitStore(StoreContract):
    @pytest.fixture
    def backend_factory(self, tmp_path: Path) -> BackendFactory:
        return lambda **kwargs: git_backend(tmp_path, **kwargs)


def every_folder(files: StateFiles) -> dict[str, dict[str, bool]]:
    """Every folder's listing, walked from the root through ``listdirs`` alone."""
    out: dict[str, dict[str, bool]] = {}
    todo = [""]
    while todo:
        listed = files.listdirs(todo)
        out.update(listed)
        todo = [f"{folder}/{name}".lstrip("/") for folder, entries in listed.items()
                for name, is_dir in entries.items() if is_dir]
    return out


def test_both_stores_list_and_name_the_same_files_alike(tmp_path: Path) -> None:
    """The in-memory store answers as git does, so the readers' fast paths that the unit
    tier runs on it are the ones production runs."""
    change = {**TREE, **{f"state/runs/n{i:03d}--20261201T0700Z/tracks/t{i % 7}.json":
                         f"{i}".encode() for i in range(120)}}
    mine = git_backend(tmp_path).store
    mine.transact(lambda _: change, "seed")
    memory = InMemoryStateStore(change)
    on_git, in_memory = mine.read().files, memory.read().files
    listing = every_folder(on_git)
    assert every_folder(in_memory) == listing
    paths = [f"{folder}/{name}".lstrip("/") for folder, entries in listing.items()
             for name in entries]
    assert {p: in_memory.object_id(p) for p in paths} == {p: on_git.object_id(p)
                                                         for p in paths}
