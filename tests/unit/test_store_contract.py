"""The store contract against the in-memory store (the git store's half is in
tests/integration/test_git_store_contract.py)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.store import InMemoryStateStore
from tests.store_contract import Backend, BackendFactory, StoreContract


def memory_backend(**kwargs: Any) -> Backend:
    # One store shared by both writers: its lock is the only place a race is decided.
    store = InMemoryStateStore(**kwargs)
    return Backend(store, lambda: store, lambda: len(store.log))


class TestInMemoryStore(StoreContract):
    @pytest.fixture
    def backend_factory(self) -> BackendFactory:
        return memory_backend
