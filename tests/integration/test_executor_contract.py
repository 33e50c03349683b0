"""The executor contract (tests/executor_contract.py) over the local executor, with real
supervisors and processes in a temporary folder, and over the GitHub executor against
the fake GitHub server, whose matrix legs are played as a runner plays track.yml."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.executor_contract import ExecutorContract

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="the contract checks processes through /proc")


class TestExecutors(ExecutorContract):
    pass
