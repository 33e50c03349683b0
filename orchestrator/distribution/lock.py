"""The lock of the orchestrator's dependencies, shipped as ``data/requirements.lock``.

Every dependency, transitive ones too, is pinned with ``==`` and the hash of every
file of that version on the package index, so a runner of any platform (Linux x86_64
or arm64, macOS, Windows) finds its wheel among them. The lock is resolved at
development time for the Python the workflows set up (:data:`PYTHON`), never at
install time::

    python3 -m orchestrator.distribution.lock      # needs uv (pip install uv) and PyPI

Its header names the inputs (the dependencies of ``pyproject.toml`` and the Python),
so a test can tell without the network that the lock is current.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from . import DEPENDENCIES, NAME

LOCK = Path(__file__).resolve().parents[1] / "data" / "requirements.lock"
PYTHON = "3.12"
"""The Python the workflows set up (``actions/setup-python``); a test keeps them equal."""
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")
_HASH = re.compile(r"^\s+--hash=sha256:([0-9a-f]{64})\s*\\?$")


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    marker: str | None
    hashes: tuple[str, ...]


@dataclass(frozen=True)
class Lock:
    python: str
    dependencies: tuple[str, ...]
    pins: tuple[Pin, ...]
    body: str
    """The requirement lines, as the requirements file repeats them."""


def header(python: str = PYTHON, generator: str = "") -> str:
    lines = [f"# The dependencies of {NAME}: every one pinned, with the hash of every file",
             "# of its version, for any platform a runner may have.",
             "# Regenerate: python3 -m orchestrator.distribution.lock",
             f"# python: {python}",
             f"# dependencies: {' '.join(DEPENDENCIES)}"]
    if generator:
        lines.append(f"# generator: {generator}")
    return "\n".join(lines) + "\n"


def parse(text: str) -> Lock:
    """The lock in ``text``; :class:`ValueError` naming the line when it is malformed."""
    python = ""
    deps: tuple[str, ...] = ()
    pins: list[Pin] = []
    body: list[str] = []
    current: tuple[str, str, str | None] | None = None
    hashes: list[str] = []

    def close() -> None:
        if current is not None:
            if not hashes:
                raise ValueError(f"{current[0]}: pinned without a hash")
            pins.append(Pin(*current, hashes=tuple(hashes)))

    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("# python: "):
            python = line.removeprefix("# python: ").strip()
        elif line.startswith("# dependencies: "):
            deps = tuple(line.removeprefix("# dependencies: ").split())
        if not line.strip() or line.startswith("#"):
            continue
        body.append(line)
        found = _HASH.match(line)
        if found and current is not None:
            hashes.append(found.group(1))
            continue
        pin = _PIN.match(line)
        if pin is None:
            raise ValueError(f"line {number}: not a pin with hashes: {line!r}")
        close()
        current, hashes = (pin.group(1).lower(), pin.group(2), pin.group(3)), []
    close()
    return Lock(python, deps, tuple(pins), "\n".join(body) + "\n")


def load() -> Lock:
    return parse(LOCK.read_text(encoding="utf-8"))


def _uv() -> list[str]:
    found = shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def generate(python: str = PYTHON) -> str:
    """A fresh lock from the package index, through ``uv pip compile``."""
    uv = _uv()
    version = subprocess.run([*uv, "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    done = subprocess.run(
        [*uv, "pip", "compile", "--universal", "--generate-hashes", "--python-version",
         python, "--no-header", "--no-annotate", "--quiet", "-"],
        input="\n".join(DEPENDENCIES) + "\n", capture_output=True, text=True, check=True)
    text = header(python, version) + done.stdout
    parse(text)  # refuse to write what the readers would refuse
    return text


def main() -> int:
    LOCK.write_text(generate(), encoding="utf-8")
    print(f"wrote {LOCK}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
