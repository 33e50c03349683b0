"""Real git repositories for tests: a bare origin in a temp folder and clones of it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_origin(tmp: Path, schedules: dict[str, dict[str, Any]]) -> Path:
    """A bare origin whose main holds ``schedules/<id>.json``."""
    origin = tmp / "origin.git"
    git("init", "--quiet", "--bare", "--initial-branch=main", str(origin), cwd=tmp)
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
