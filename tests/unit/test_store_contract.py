"""The store contract against the in-memory store (the git store's half is in
tests/integration/test_git_store_contract.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from orchestrator.store import InMemoryStateStore, MemoryFiles, as_state_files, blob_id
from tests.store_contract import TREE, TREE_IDS, Backend, BackendFactory, StoreContract


def memory_backend(**kwargs: Any) -> Backend:
    # One store shared by both writers: its lock is the only place a race is decided.
    store = InMemoryStateStore(**kwargs)
    return Backend(store, lambda: store, lambda: len(store.log))


class TestInMemoryStore(StoreContract):
    @pytest.fixture
    def backend_factory(self) -> BackendFactory:
        return memory_backend


class Reads(Mapping[str, bytes]):
    """Files that remember which were read."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.read: list[str] = []

    def __getitem__(self, path: str) -> bytes:
        self.read.append(path)
        return self.files[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


def test_a_plain_mapping_answers_as_a_store_without_reading_to_list() -> None:
    plain = Reads(dict(TREE))
    files = as_state_files(plain)
    assert files.listdirs(["state"])["state"]["runs"] is True
    files.prefetch(TREE)
    assert plain.read == []  # listing and prefetching read no file, as with git
    assert files.object_id("state/health.json") == blob_id(TREE["state/health.json"])
    assert plain.read == ["state/health.json"]
    assert files.object_id("state/runs") == TREE_IDS["state/runs"]


def test_a_plain_mapping_is_looked_at_afresh_and_a_stores_files_are_passed_through() -> None:
    plain = dict(TREE)
    files = as_state_files(plain)
    before = files.object_id("state/runs")
    plain["state/runs/new--20261203T0700Z/run.json"] = b"{}"
    assert files.object_id("state/runs") != before  # a test may edit its dict between reads
    assert "new--20261203T0700Z" in files.listdirs(["state/runs"])["state/runs"]
    snapshot = InMemoryStateStore(TREE).read().files
    assert isinstance(snapshot, MemoryFiles) and as_state_files(snapshot) is snapshot
