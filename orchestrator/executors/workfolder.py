"""The local executor's work folder on disk: its layout, its machine, its dispatch keys.

Layout (default ``<repo>/.orchestrator/work``)::

    machine-id                   this folder's machine: what its ticks dispatch, they claim
    launches.log                 one JSON line per real launch of a track command
    slots/<i>.lock               task-cap slots (``max_concurrent``), held with flock
    <run_id>--<track>--<attempt>/
        launch.json              what to run; its creation *is* the dispatch
        status.json              written by the supervisor: queued, running, exited, ...
        stdout.log, stderr.log   the track's output
        result.json              $ORCHESTRATOR_RESULT: the track's own JSON result
        supervisor.lock          held by the live supervisor for its whole life
        supervisor.log           the supervisor's own stderr (normally empty)
        cancel                   marker asking the supervisor to stop the track

- A folder is one machine, named by ``machine-id``: made once, exclusively, and kept.
- An attempt folder's name is a dispatch key (:data:`KEY_RE`), a safe path segment.
- A file made by :func:`create_exclusive` appears whole or not at all, and only once.
- :func:`ended` and :func:`forget` never raise: what they cannot read, they leave.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..config.fieldtypes import ID_RE, RUN_ID_RE
from ..errors import CheckoutReadOnly, InvalidId, UserError
from ..support import safejson
from . import _attempt_folder as files

KEY_RE = re.compile(
    rf"(?P<run_id>{RUN_ID_RE.pattern})--(?P<track>{ID_RE.pattern})(?:--undo)?"
    rf"--(?P<attempt>[1-9]\d{{0,5}})"
    r"(?:\.(?P<poll>[1-9]\d{0,5}))?"
)
"""A dispatch key, ``<run_id>--<track>--<attempt>[.<poll>]``: also a safe single path
segment."""

MACHINE_ID = "machine-id"
"""The file of the work folder that names its machine (made by the first tick)."""
_MACHINE_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")


def machine_id(work_dir: Path) -> str:
    """The id of the machine whose work folder is ``work_dir``, from its ``machine-id``
    file, made on first use: the host's name and a random part, so that two work
    folders on one host are two machines, and one folder keeps its id for good."""
    path = work_dir / MACHINE_ID
    for _ in range(2):
        try:
            raw = safejson.read_file(path, max_bytes=256)
        except FileNotFoundError:
            _make_machine_id(work_dir, path)
            continue
        except safejson.UnsafeJSON as exc:
            raise UserError(f"{path}: {exc}; delete it and the next tick makes a new one"
                            ) from None
        text = raw.decode("utf-8", "replace").strip()
        if not _MACHINE_RE.fullmatch(text):
            raise UserError(f"{path}: {text[:80]!r} is not a machine id (a-z, 0-9 and '-'); "
                            "delete it and the next tick makes a new one")
        return text
    raise UserError(f"{path}: vanished while being read")


def _make_machine_id(work_dir: Path, path: Path) -> None:
    host = re.sub(r"[^a-z0-9]+", "-", socket.gethostname().lower()).strip("-")[:40]
    made = f"{host or 'machine'}-{secrets.token_hex(4)}"
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
        # exclusively, whole: of two first ticks at once, both read the one that won
        create_exclusive_text(path, made + "\n")
    except OSError as exc:
        raise CheckoutReadOnly(f"cannot write the work folder {work_dir}: "
                               f"{exc.strerror or exc}") from None


def check_key(key: str) -> str:
    """Return ``key`` if it is a valid dispatch key, else raise :class:`InvalidId`."""
    if not isinstance(key, str) or not KEY_RE.fullmatch(key):
        raise InvalidId(
            f"invalid dispatch key {key!r}: expected <run_id>--<track>--<attempt>"
        )
    return key


def ended(work_dir: Path, keys: Iterable[str]) -> set[str]:
    """The attempts of ``keys`` in ``work_dir`` whose command has ended (a final
    ``status.json``): what ``serve`` watches to tick as soon as a track ends. Cheap,
    and never raises: an unreadable attempt is one the next tick looks at anyway."""
    done = set()
    for key in keys:
        try:
            status = files.read_json(Path(work_dir) / check_key(key) / files.STATUS)
        except (OSError, ValueError, InvalidId):
            continue
        if isinstance(status, dict) and status.get("state") in files.FINAL_STATES:
            done.add(key)
    return done


def forget(work_dir: Path, run_ids: Iterable[str]) -> list[str]:
    """Remove the work folders of ``run_ids`` (archived runs: the retention of runs is
    that of their local output too). An attempt whose command has not ended is kept;
    never raises. Returns the folders removed."""
    wanted = set(run_ids)
    removed: list[str] = []
    try:
        folders = sorted(Path(work_dir).iterdir())
    except OSError:
        return removed
    for folder in folders:
        match = KEY_RE.fullmatch(folder.name)
        if match is None or match["run_id"] not in wanted or folder.is_symlink():
            continue
        if not ended(work_dir, [folder.name]):
            continue  # still running (or unreadable): the next compaction's business
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    return removed


def create_exclusive(path: Path, data: dict[str, Any]) -> bool:
    """Create ``path`` with ``data`` unless it exists; ``True`` if this call made it.

    ``os.link`` fails with ``EEXIST`` exactly like ``O_CREAT|O_EXCL``, but the file
    appears with its whole content, so a racing reader never sees it empty.
    """
    return create_exclusive_text(
        path, json.dumps(data, sort_keys=True, indent=2) + "\n")

def create_exclusive_text(path: Path, text: str) -> bool:
    """:func:`create_exclusive` of the text ``text``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def age(launch: Path) -> float | None:
    """Seconds since ``launch.json`` was written, on the clock of the process that wrote
    it (``created_unix``): a file's time comes from the file system's clock, which a
    network share or a faked process clock may not share. The file's time is the
    fallback for a launch written before ``created_unix``; ``None`` when it is gone."""
    try:
        data = files.read_json(launch)
        created = data.get("created_unix") if isinstance(data, dict) else None
        if isinstance(created, int | float) and math.isfinite(created):
            return time.time() - float(created)
        return time.time() - launch.stat().st_mtime
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return 0.0  # unreadable now: treated as young, looked at again next time
