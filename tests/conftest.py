"""Shared fixtures: a pinned git identity, a guard against touching real remotes, and
the session's own temporary folder, which must be empty at the end."""

from __future__ import annotations

import compileall
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# The fake GitHub server and its `fake_github` fixture (tests/fakes/github.py), and the
# webhook receiver's `receiver` fixture (tests/receiver.py).
pytest_plugins = ["tests.fakes.github", "tests.receiver"]


def pytest_configure(config: pytest.Config) -> None:
    """Compile the package's bytecode before any test starts a CLI process.

    Python reads ``__pycache__`` even under ``PYTHONDONTWRITEBYTECODE=1`` but never
    writes it then, so on such a machine every ``orchestrator`` subprocess of the suite
    would compile the whole package from source again (a quarter of a second each).
    """
    compileall.compile_dir(REPO_ROOT / "orchestrator", quiet=2)


@pytest.fixture(scope="session", autouse=True)
def _no_temporary_leftovers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Give the session a temporary folder of its own, and fail the run if anything is
    left in it at the end.

    ``TMPDIR`` (for every process the tests start) and ``tempfile.tempdir`` (for this
    one) name a new folder under pytest's basetemp, which is this session's alone (each
    xdist worker has its own), so nothing another worker or program makes can appear in
    it, and whatever appears is this session's: a leftover, not a guess by name.
    """
    folder = tmp_path_factory.mktemp("tmpdir", numbered=False)
    saved_env, saved_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = str(folder)
    try:
        yield
    finally:
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        tempfile.tempdir = saved_tempdir
    # A process a test left running may be between making a temporary file and
    # removing it: only what is still there a few seconds later is left over.
    deadline = time.monotonic() + 5
    while (left := sorted(p.name for p in folder.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        pytest.fail(f"the tests left {', '.join(left)} in the temporary folder {folder}: "
                    "a test that makes them must remove them or point TMPDIR at its "
                    "tmp_path", pytrace=False)


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
                  ) -> Iterator[None]:
    """Pin git's identity and config so tests never read or write the user's."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "author@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "committer@example.invalid")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")
    # every tick found idle is planned too, and fails if the plan would do anything
    monkeypatch.setenv("ORCHESTRATOR_VERIFY_IDLE", "1")
    for var in ("GITHUB_TOKEN", "GH_TOKEN", "ORCHESTRATOR_REPO", "ORCHESTRATOR_REMOTE",
                "ORCHESTRATOR_STATE_BRANCH", "GITHUB_STEP_SUMMARY", "GITHUB_REPOSITORY",
                "GITHUB_RUN_ID", "ORCHESTRATOR_TOKEN", "SLACK_WEBHOOK"):
        monkeypatch.delenv(var, raising=False)
    real_state = REPO_ROOT / "state"
    before = sorted(p.name for p in real_state.iterdir()) if real_state.exists() else []
    yield
    after = sorted(p.name for p in real_state.iterdir()) if real_state.exists() else []
    assert before == after, "a test wrote into the project's own state/ folder"
    assert os.environ.get("GITHUB_TOKEN") is None
