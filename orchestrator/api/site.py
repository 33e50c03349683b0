"""The API's tree: every file as bytes (pure), and its writing into a folder.

- Every file passes the redactor after it is built: a token a track printed, or one
  written into a record by hand, leaves in no file.
- :func:`write` rewrites only the files whose bytes changed and removes the files
  of ``api/v1`` and ``badges`` that the tree no longer has (a compacted run's).
- A file is replaced whole (a reader never sees half of one) but not synced: the
  folder is a build output, made again from the branch after a crash.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..cadence import lateness
from ..config.models import Schedule
from ..runs.queues import books
from ..state import layout
from ..state import model as state_model
from ..support.credentials import Redactor, redact_value
from . import models as m
from .badges import badges
from .documents import ROOT, Inputs, documents

LATENESS_DAYS = 7
OWNED = (ROOT, "badges")
"""The folders :func:`write` owns under the site: it removes what it did not write."""


def encode(data: Any) -> bytes:
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def inputs_from_files(files: Mapping[str, bytes], schedules: Sequence[Schedule],
                      invalid: Sequence[str], now: datetime, last_tick: datetime | None,
                      max_staleness: timedelta, tick_lines: Sequence[str] = ()) -> Inputs:
    """The inputs of the branch ``files``: every run with its tracks, every queue, the
    cron lateness of the last 7 days against ``tick.yml``'s ``tick_lines``."""
    late = lateness.report(files.get(layout.LATENESS), tick_lines, now, LATENESS_DAYS)
    return Inputs(state=state_model.load(files, all_tracks=True), schedules=schedules,
                  invalid=invalid, queues=books(files), now=now, last_tick=last_tick,
                  max_staleness=max_staleness, cron_lateness=late)


def tree(inputs: Inputs, redact: Redactor) -> dict[str, bytes]:
    """Path (relative to the site) -> bytes of every file: documents, schemas, badges."""
    docs = documents(inputs)
    found = {path: encode(redact_value(doc.model_dump(mode="json", by_alias=True), redact))
             for path, doc in docs.items()}
    found.update((f"{ROOT}/schemas/{kind}.schema.json", encode(m.json_schema(kind)))
                 for kind in m.KINDS)
    index = docs[f"{ROOT}/index.json"]
    assert isinstance(index, m.Index)
    found.update((path, redact(text).encode())
                 for path, text in badges(index, inputs.now).items())
    return found


def _existing(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for owned in OWNED
            for p in (folder / owned).rglob("*") if p.is_file()}


def _replace(path: Path, data: bytes) -> None:
    """``path`` holds ``data``, replaced in one rename; no fsync (see the module)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(data)
    os.replace(temp, path)


def write(folder: Path, files: Mapping[str, bytes]) -> tuple[int, int]:
    """Write ``files`` under ``folder``; how many were written and removed (a file
    whose bytes are already there is left alone)."""
    written = 0
    for rel, data in sorted(files.items()):
        path = folder / rel
        if path.is_file() and path.read_bytes() == data:
            continue
        _replace(path, data)
        written += 1
    gone = sorted(_existing(folder) - set(files))
    for rel in gone:
        (folder / rel).unlink()
    return written, len(gone)
