"""The store contract against the git store: real git, a bare origin in a temp folder,
and a rival writer in a second clone (the in-memory half is in tests/unit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.store import GitStateStore
from tests.gitrepo import git
from tests.store_contract import Backend, BackendFactory, StoreContract


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
