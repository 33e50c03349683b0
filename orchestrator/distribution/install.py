"""The files ``init`` and ``upgrade`` write into a repository under ``.github/orchestrator/``.

- the wheel of the running version (:mod:`.wheel`);
- ``requirements.txt``: that wheel by its path and hash, then every dependency of the
  lock (:mod:`.lock`), so the workflows' install step takes nothing unpinned;
- ``install.sh``: what the workflows' install step runs (a virtual environment of its
  own under ``$RUNNER_TEMP``, only ``orchestrator`` on ``PATH``);
- any older ``git_orchestrator-*.whl`` beside them is removed, so one wheel is there.

``python -m orchestrator.distribution.install FOLDER`` writes the same files under
``FOLDER``: ``action.yml`` installs its own checkout that way.

The wheel's path is relative to the repository's root, where the workflows' steps run
(pip reads a path in a requirements file from the working directory).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..support.atomic import write_bytes
from . import INSTALL_COMMAND, INSTALL_DIR, INSTALL_SCRIPT, NAME, REQUIREMENTS, WHEEL_NAME
from . import lock as locking
from . import wheel as wheels

SCRIPT = Path(__file__).resolve().parents[1] / "data" / "install.sh"


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
                REQUIREMENTS: self.requirements.encode("utf-8"),
                INSTALL_SCRIPT: SCRIPT.read_bytes()}


def requirements_text(wheel: wheels.Wheel, lock: locking.Lock) -> str:
    return (
        f"# {NAME} {__version__}, written by `orchestrator init` or `orchestrator upgrade`:\n"
        "# the wheel beside this file and every dependency, each pinned by its hash.\n"
        "# The workflows install exactly this, from the repository's root:\n"
        f"#   {INSTALL_COMMAND}\n"
        "# Refresh them with `orchestrator upgrade` (docs/how-to/upgrade.md).\n"
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


UNIGNORE = f"!/{INSTALL_DIR}/*"
"""The ``.gitignore`` line that takes the install folder back from a broader pattern
(``*.whl``, ``.github/*``): a later negation wins over an earlier match."""


def ignored(root: Path, rels: list[str]) -> dict[str, str]:
    """Path -> the ``.gitignore`` rule that ignores it, for the ``rels`` git would leave
    out of a ``git add`` in ``root`` (none when ``root`` is no git work tree)."""
    proc = subprocess.run(["git", "check-ignore", "--verbose", "--non-matching", "--", *rels],
                          cwd=root, capture_output=True, text=True, check=False)
    found = {}
    for line in proc.stdout.splitlines():  # <source>:<line>:<pattern> TAB <path>
        rule, _, path = line.partition("\t")
        source, _line, pattern = [*rule.split(":", 2), "", ""][:3]
        if pattern and not pattern.startswith("!"):  # "::" matches nothing
            found[path] = f"{source}: {pattern}"
    return found


def keep_tracked(root: Path, rels: list[str]) -> list[str]:
    """Make sure git would commit ``rels``: a wheel that a ``*.whl`` line ignores is
    left out of every commit, and each workflow's install step then fails. Adds
    :data:`UNIGNORE` to ``.gitignore`` when a rule ignores one; one line per thing done
    or still wrong."""
    caught = ignored(root, rels)
    if not caught:
        return []
    gitignore = root / ".gitignore"
    old = gitignore.read_text(encoding="utf-8") if gitignore.is_file() else ""
    if UNIGNORE not in old.splitlines():
        sep = "" if not old or old.endswith("\n") else "\n"
        gitignore.write_text(f"{old}{sep}{UNIGNORE}\n", encoding="utf-8")
    lines = [f"added {UNIGNORE} to .gitignore: {path} was ignored ({rule})"
             for path, rule in sorted(caught.items())]
    for path, rule in sorted(ignored(root, rels).items()):
        lines.append(f"warning: {path} is still ignored ({rule}): the workflows install it, "
                     f"so commit it with `git add -f {path}`")
    return lines


def main(argv: list[str]) -> int:
    """Write the install files of this checkout under the folder ``argv[0]``."""
    if len(argv) != 1:
        print("usage: python -m orchestrator.distribution.install FOLDER", file=sys.stderr)
        return 2
    for rel, data in current().files().items():
        write_bytes(Path(argv[0]) / rel, data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
