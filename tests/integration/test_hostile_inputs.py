"""A bad input costs only itself: beside each hostile file, record or track output, an
every-minute schedule still fires, and the tick's output names the culprit.

Every test runs the real command line (``python -m orchestrator``) against real git,
with a bare origin in a temporary folder, and the local executor.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.builders import spec_data
from tests.gitrepo import clone, make_origin

NOW = "2026-12-01T07:00:30Z"
EVERY = spec_data("* * * * *", run="true", overlap="allow")
BRANCH = "orchestrator-state"


def run_cli(repo: Path, work: Path, *args: str, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", "--repo", str(repo), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "ORCHESTRATOR_WORK_DIR": str(work), **(env or {})})


def tick(repo: Path, work: Path, now: str = NOW, **kw: Any) -> subprocess.CompletedProcess[str]:
    return run_cli(repo, work, "tick", "--now", now, **kw)


def assert_fired(proc: subprocess.CompletedProcess[str], slot: str = "20261201T0700Z") -> None:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"every--{slot}" in proc.stdout, proc.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return clone(make_origin(tmp_path, {"every": EVERY}), tmp_path / "repo")


# --------------------------------------------------------------------- schedule files

TRACK = [{"name": "a", "run": "true"}]


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data)


BAD_SCHEDULES: dict[str, tuple[str, str]] = {
    # name: (file text, what the error line says)
    "old": (_json({"at": "0999-01-01T00:00:00Z", "tracks": TRACK}), "at: "),
    "edge-new-york": (_json({"at": "9999-12-31T23:59:00", "timezone": "America/New_York",
                             "tracks": TRACK}), "out of range"),
    "edge-tokyo": (_json({"at": "0001-01-01T00:00:00", "timezone": "Asia/Tokyo",
                          "tracks": TRACK}), "out of range"),
    "edge-offset": (_json({"at": "9999-12-31T23:59:00+14:00", "tracks": TRACK}),
                    "out of range"),
    "huge-int": ('{"cron": "* * * * *", "jitter_seconds": ' + "9" * 5000
                 + ', "tracks": [{"name": "a", "run": "true"}]}', "an integer of 5000 digits"),
    "deep": ("[" * 100_000 + "]" * 100_000, "nested deeper than"),
    "long-run": (_json({"cron": "* * * * *", "tracks": [{"name": "a", "run": "x" * 1_000_000}]}),
                 "tracks.0.run: a command of 1000000 bytes"),
}


@pytest.mark.parametrize("name", sorted(BAD_SCHEDULES))
def test_a_bad_schedule_file_is_named_and_the_others_fire(repo: Path, tmp_path: Path,
                                                          name: str) -> None:
    text, problem = BAD_SCHEDULES[name]
    (repo / "schedules" / f"{name}.json").write_text(text)
    proc = tick(repo, tmp_path / "work")
    assert_fired(proc)
    line = next(x for x in proc.stdout.splitlines() if f"schedules/{name}.json" in x)
    assert problem in line
    assert len(line) < 400  # one line, not the whole input echoed back
    again = tick(repo, tmp_path / "work", now="2026-12-01T07:01:30Z")
    assert_fired(again, "20261201T0701Z")
    check = run_cli(repo, tmp_path / "work", "validate")
    assert check.returncode == 1
    assert f"schedules/{name}.json" in check.stdout + check.stderr
    assert "every" in check.stdout  # the valid file is still previewed


def _loop(path: Path) -> None:
    path.symlink_to(path.name)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _directory(path: Path) -> None:
    path.mkdir()


def _link_to_directory(path: Path) -> None:
    path.symlink_to(path.parent)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _outside(path: Path) -> None:
    target = path.parent.parent.parent / "outside.json"
    target.write_text(_json({"cron": "* * * * *", "tracks": TRACK}))
    path.symlink_to(target)


ODD_FILES = {
    "loop": (_loop, "a symlink loop"),
    "zero": (_dev_zero, "a symlink out of the repository"),
    "dir": (_directory, "not a regular file (a directory)"),
    "dirlink": (_link_to_directory, "not a regular file (a directory)"),
    "fifo": (_fifo, "not a regular file (a FIFO)"),
    "outside": (_outside, "a symlink out of the repository"),
}


@pytest.mark.parametrize("name", sorted(ODD_FILES))
def test_a_schedule_that_is_not_a_regular_file_is_named_and_the_others_fire(
        repo: Path, tmp_path: Path, name: str) -> None:
    make, problem = ODD_FILES[name]
    make(repo / "schedules" / f"{name}.json")
    proc = tick(repo, tmp_path / "work", timeout=30)
    assert_fired(proc)
    line = next(x for x in proc.stdout.splitlines() if f"schedules/{name}.json" in x)
    assert problem in line
