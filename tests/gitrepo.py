"""Real git repositories for tests: a bare origin in a temp folder and clones of it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any


def git(*args: str, cwd: Path | None = None, timeout: float = 60) -> str:
    """``git ARGS`` in ``cwd``; its stdout, stripped. Fails the test on a non-zero exit."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True, timeout=timeout).stdout.strip()


def bare_origin(tmp: Path, name: str = "origin.git", branch: str | None = "main") -> Path:
    """An empty bare repository ``tmp/name`` (``branch=None``: git's default branch)."""
    path = tmp / name
    initial = [f"--initial-branch={branch}"] if branch else []
    git("init", "--quiet", "--bare", *initial, str(path), cwd=tmp)
    return path


def empty_clone(path: Path) -> Path:
    """A new repository at ``path`` with no history, as a runner's checkout of a state
    branch starts: the store fetches and pushes by URL, so it needs no remote."""
    git("init", "--quiet", str(path))
    return path


def make_origin(tmp: Path, schedules: dict[str, dict[str, Any]]) -> Path:
    """A bare origin whose main holds ``schedules/<id>.json``."""
    origin = bare_origin(tmp)
    seed = tmp / "seed"
    git("clone", "--quiet", str(origin), str(seed), cwd=tmp)
    (seed / "schedules").mkdir()
    for sid, spec in schedules.items():
        (seed / "schedules" / f"{sid}.json").write_text(json.dumps(spec, indent=2) + "\n")
    git("add", ".", cwd=seed)
    git("commit", "--quiet", "-m", "schedules", cwd=seed)
    git("push", "--quiet", "origin", "HEAD:main", cwd=seed)
    return origin


def clone(origin: Path, dest: Path) -> Path:
    git("clone", "--quiet", str(origin), str(dest), cwd=origin.parent)
    return dest
