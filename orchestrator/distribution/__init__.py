"""The orchestrator as a user's repository installs it: a wheel of the running code and
a hash-pinned lock of its dependencies, committed under ``.github/orchestrator/``.

Owns: the distribution's name and metadata, the reproducible wheel (:mod:`.wheel`),
the dependency lock shipped in the package data (:mod:`.lock`), the files ``init``
and ``upgrade`` write (:mod:`.install`) and the workflows' pin of the GitHub Action
(:mod:`.action`).

Invariants:

- the same code gives the same wheel bytes, so its pinned hash changes only with the
  code (two ``init`` runs of one version write identical files);
- every line of the requirements file carries a ``--hash``, so the workflows install
  with ``pip install --require-hashes --no-deps`` and nothing unpinned gets in;
- the orchestrator never shares a Python with the tracks: it runs from a virtual
  environment of its own, and only its command is on ``PATH``;
- the lock is generated at development time (``python3 -m orchestrator.distribution.lock``)
  and a test keeps it current with ``pyproject.toml``.

May import: :mod:`orchestrator.errors`, :mod:`orchestrator.support` and the standard
library only.
"""

from __future__ import annotations

from .. import __version__

NAME = "git-orchestrator"
"""The name on the package index (``orchestrator`` there is an unrelated project)."""
WHEEL_NAME = NAME.replace("-", "_")
"""The name as it is spelled in wheel file names and the ``.dist-info`` folder."""
SUMMARY = "Scheduled, multi-track work on CI runners with a git repository as the database"
REQUIRES_PYTHON = ">=3.11"
DEPENDENCIES: tuple[str, ...] = (
    "click>=8.1",
    "httpx>=0.27",
    "jinja2>=3.1",
    "pydantic>=2.6",
    "tzdata>=2024.1",
)
"""The runtime dependencies, as ``pyproject.toml`` lists them (a test keeps them equal)."""
ENTRY_POINTS = {"orchestrator": "orchestrator.cli:run"}
INSTALL_DIR = ".github/orchestrator"
"""Where ``init`` and ``upgrade`` put the wheel and the requirements file."""
REQUIREMENTS = f"{INSTALL_DIR}/requirements.txt"
INSTALL_SCRIPT = f"{INSTALL_DIR}/install.sh"
"""Installs from :data:`REQUIREMENTS` into a virtual environment under ``$RUNNER_TEMP``
and puts only the ``orchestrator`` command on ``PATH``, so a track's packages never
reach it."""
INSTALL_COMMAND = f"bash {INSTALL_SCRIPT}"
"""What every workflow runs to install the orchestrator (a test checks they do), and
``action.yml`` too, in a folder it writes the same files into."""


def wheel_filename(version: str = __version__) -> str:
    return f"{WHEEL_NAME}-{version}-py3-none-any.whl"
