"""Atomic file writes: readers see the old content or the new, never half of it.

The one writer for files the orchestrator writes in a checkout (schedule files, the
schema, a rendered brief): a temp file in the same folder (so ``os.replace`` stays on
one file system), flushed and fsynced (so a crash right after the rename cannot leave
an empty file behind), given the mode of the file it replaces, then renamed over it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

DEFAULT_MODE = 0o644
"""The mode of a new file: a temp file is created ``0600``, too strict for files that
are committed or served."""


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8, ``\\n`` line ends), creating its folder.

    An existing file keeps its permission bits; a new one gets :data:`DEFAULT_MODE`.
    Raises :class:`OSError` as the file system reports it.
    """
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``, as :func:`write_text` does (a wheel, an archive)."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = DEFAULT_MODE
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
