"""Unit tier: the pure core and the in-memory store, without I/O.

A guard fails any unit test that starts a subprocess, opens or listens on a socket, or
asks for a temporary folder: such a test belongs in ``tests/integration``. The shared
schedule, spec and track builders are plain functions in :mod:`tests.builders`.

The tick shell's fixtures: ``memory_store``, ``memory_executor`` and ``shell``, a
:class:`~tests.memory_tick.MemoryShell` that makes ticks of them.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store import InMemoryStateStore
from tests.memory_executor import MemoryExecutor
from tests.memory_tick import MemoryShell

IO_STILL_IN_UNIT: frozenset[str] = frozenset()
"""Unit test files the guard lets do I/O today; the list only ever shrinks."""


def _refuse(what: str) -> Callable[..., Any]:
    def fail(*_args: Any, **_kwargs: Any) -> Any:
        # pytest.fail raises a BaseException, so no `except Exception` in the code
        # under test can swallow it.
        pytest.fail(f"a unit test {what}; it belongs in tests/integration", pytrace=False)
    return fail


def _exempt(request: pytest.FixtureRequest) -> bool:
    return Path(request.node.path).relative_to(Path(request.config.rootpath)).as_posix() \
        in IO_STILL_IN_UNIT


@pytest.fixture(autouse=True)
def _no_io(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if _exempt(request):
        return
    # subprocess.run, call, check_output and Popen all start their child in
    # Popen._execute_child; socket clients connect and servers bind.
    monkeypatch.setattr(subprocess.Popen, "_execute_child", _refuse("started a subprocess"))
    monkeypatch.setattr(socket.socket, "connect", _refuse("opened a connection"))
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse("opened a connection"))
    monkeypatch.setattr(socket.socket, "bind", _refuse("listened on a socket"))


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Unit tests get no folder to write in (except the files still being moved)."""
    if not _exempt(request):
        _refuse("asked for a temporary folder")()
    return tmp_path_factory.mktemp("unit")



# --------------------------------------------------------------------------- the tick shell


@pytest.fixture
def memory_store() -> InMemoryStateStore:
    """An empty in-memory state branch."""
    return InMemoryStateStore()


@pytest.fixture
def memory_executor() -> MemoryExecutor:
    """A backend in memory (:mod:`tests.memory_executor`): nothing runs until a test
    starts or finishes an attempt."""
    return MemoryExecutor()


@pytest.fixture
def shell(memory_store: InMemoryStateStore, memory_executor: MemoryExecutor) -> MemoryShell:
    """The store and the executor above, and ticks of the schedules a test puts in
    ``shell.schedules`` (:mod:`tests.memory_tick`)."""
    return MemoryShell(memory_store, memory_executor)
