"""The files ``init`` and ``upgrade`` write into a repository under ``.github/orchestrator/``.

- the wheel of the running version (:mod:`.wheel`);
- ``requirements.txt``: that wheel by its path and hash, then every dependency of the
  lock (:mod:`.lock`), so the workflows' install step takes nothing unpinned;
- any older ``git_orchestrator-*.whl`` beside them is removed, so one wheel is there.

The wheel's path is relative to the repository's root, where the workflows' steps run
(pip reads a path in a requirements file from the working directory).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from . import INSTALL_COMMAND, INSTALL_DIR, NAME, REQUIREMENTS, WHEEL_NAME
from . import lock as locking
from . import wheel as wheels


@dataclass(frozen=True)
class InstallFiles:
    wheel: wheels.Wheel
    requirements: str

    @property
    def wheel_path(self) -> str:
        return f"{INSTALL_DIR}/{self.wheel.filename}"

    def files(self) -> dict[str, bytes]:
        """Path relative to the repository's root -> content."""
        return {self.wheel_path: self.wheel.data,
                REQUIREMENTS: self.requirements.encode("utf-8")}


def requirements_text(wheel: wheels.Wheel, lock: locking.Lock) -> str:
    return (
        f"# {NAME} {__version__}, written by `orchestrator init` or `orchestrator upgrade`:\n"
        "# the wheel beside this file and every dependency, each pinned by its hash.\n"
        "# The workflows install exactly this, from the repository's root:\n"
        f"#   {INSTALL_COMMAND}\n"
        f"# Refresh both with `orchestrator upgrade` (README, \"Set up on GitHub\").\n"
        f"./{INSTALL_DIR}/{wheel.filename} \\\n"
        f"    --hash=sha256:{wheel.sha256}\n"
        + lock.body)


def current() -> InstallFiles:
    """The install files of the running version."""
    built = wheels.build()
    return InstallFiles(built, requirements_text(built, locking.load()))


def stale_wheels(root: Path, keep: str) -> list[Path]:
    """Wheels of the orchestrator under ``root/.github/orchestrator`` but ``keep``."""
    folder = root / INSTALL_DIR
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(f"{WHEEL_NAME}-*.whl")
                  if p.name != keep and (p.is_file() or p.is_symlink()))
