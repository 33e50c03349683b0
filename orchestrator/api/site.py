"""The API's tree: every file as bytes (pure), and its writing into a folder.

- Every file passes the redactor after it is built: a token a track printed, or one
  written into a record by hand, leaves in no file.
- The index, the queues', the schemas and the badges are built at once; a schedule's,
  a run's and a page's are deferred, each with the fingerprint of what it is built
  from and the runs whose tracks it reads (:func:`load_tracks` reads those alone).
- A file is replaced whole (a reader never sees half of one) but not synced: the
  folder is a build output, made again from the branch after a crash.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..cadence import lateness
from ..config.models import Schedule
from ..runs.queues import books
from ..state import layout
from ..state import model as state_model
from ..state.records import Run, Track
from ..store import as_state_files
from ..support.credentials import Redactor, redact_value
from . import models as m
from .badges import badges
from .documents import (
    DEAD_LETTERS,
    ROOT,
    SCHEDULE_RUNS,
    Inputs,
    Page,
    ScheduleView,
    fitted_run_doc,
    page_doc,
    pages,
    run_file,
    schedule_doc,
    summaries,
)

LATENESS_DAYS = 7
RUNS_PREFIX = layout.RUNS + "/"
OWNED = (ROOT, "badges")
"""The folders a render owns under the site: it removes what it did not write."""


def encode(data: Any) -> bytes:
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def inputs_from_files(files: Mapping[str, bytes], schedules: Sequence[Schedule],
                      invalid: Sequence[str], now: datetime, last_tick: datetime | None,
                      max_staleness: timedelta, tick_lines: Sequence[str] = (), *,
                      all_tracks: bool = True) -> Inputs:
    """The inputs of the branch ``files``: every run with its tracks (only the open
    runs' unless ``all_tracks``: :func:`load_tracks` reads the others), every queue,
    the cron lateness of the last 7 days against ``tick.yml``'s ``tick_lines``."""
    late = lateness.report(files.get(layout.LATENESS), tick_lines, now, LATENESS_DAYS)
    return Inputs(state=state_model.load(files, all_tracks=all_tracks), schedules=schedules,
                  invalid=invalid, queues=books(files), now=now, last_tick=last_tick,
                  max_staleness=max_staleness, cron_lateness=late)


def _bytes(doc: m.Document, redact: Redactor) -> bytes:
    return encode(redact_value(doc.model_dump(mode="json", by_alias=True), redact))


Tracks = Mapping[str, Mapping[str, Track]]
"""Run id -> track name -> track: what a deferred file reads of the runs' tracks."""


@dataclass(frozen=True)
class Deferred:
    """A file built only when asked: from the tracks of ``runs`` (given to ``build``),
    with the fingerprint of everything it is built from (``None``: not known)."""

    fingerprint: str | None
    runs: tuple[str, ...]
    build: Callable[[Tracks], bytes]


FolderId = Callable[[str], "str | None"]
"""A run's id -> the tree id of its folder on the branch (``None``: not known)."""


def site_files(inputs: Inputs, redact: Redactor, folder_id: FolderId = lambda _: None
               ) -> tuple[dict[str, bytes], dict[str, Deferred]]:
    """Every file of the site: those built whole at every render (the index, the
    queues', the schemas, the badges: a few dozen), and the rest, deferred."""
    docs, views = summaries(inputs)
    eager = {path: _bytes(doc, redact) for path, doc in docs.items()}
    eager.update((f"{ROOT}/schemas/{kind}.schema.json", encode(m.json_schema(kind)))
                 for kind in m.KINDS)
    index = docs[f"{ROOT}/index.json"]
    assert isinstance(index, m.Index)
    eager.update((path, redact(text).encode())
                 for path, text in badges(index, inputs.now).items())
    ids = functools.cache(folder_id)
    deferred = {path: _schedule_file(view, redact, ids) for path, view in views.items()}
    deferred.update(_run_files(inputs, redact, ids))
    return eager, deferred


def _fingerprint(kind: str, facts: Any, runs: Sequence[str], folder_id: FolderId
                 ) -> str | None:
    """A digest of ``facts`` and of ``runs``' folders; ``None`` if a folder is unknown."""
    folders = [(run_id, folder_id(run_id)) for run_id in runs]
    if any(oid is None for _, oid in folders):
        return None
    return f"{kind}:{hashlib.sha256(encode([facts, folders])).hexdigest()}"


def _schedule_file(view: ScheduleView, redact: Redactor, folder_id: FolderId) -> Deferred:
    """Built from the schedule's definition, state, next slots, count of runs, dead
    letters, and its newest runs' folders."""
    runs = tuple(r.run_id for r in view.runs[:SCHEDULE_RUNS])
    facts = [view.schedule.spec.model_dump(mode="json", by_alias=True), view.state,
             list(view.slots), len(view.runs), len(view.letters),
             [d.model_dump(mode="json") for d in view.letters[:DEAD_LETTERS]]]
    return Deferred(_fingerprint("schedule", facts, runs, folder_id), runs,
                    lambda tracks: _bytes(schedule_doc(view, tracks), redact))


def _run_file(run: Run, redact: Redactor, folder_id: FolderId) -> Deferred:
    """Built from the run's folder on the branch alone."""
    return Deferred(folder_id(run.run_id), (run.run_id,), lambda tracks: _bytes(
        fitted_run_doc(run, tracks.get(run.run_id, {})), redact))


def _page_file(page: Page, redact: Redactor, folder_id: FolderId) -> Deferred:
    """Built from the page's number, whether a newer one follows, and its runs' folders."""
    runs = tuple(r.run_id for r in page.runs)
    return Deferred(_fingerprint("page", [page.page, page.newer], runs, folder_id), runs,
                    lambda tracks: _bytes(page_doc(page, tracks), redact))


def _run_files(inputs: Inputs, redact: Redactor, folder_id: FolderId
               ) -> dict[str, Deferred]:
    found = {run_file(run.run_id): _run_file(run, redact, folder_id)
             for run in inputs.state.runs.values()}
    found.update((path, _page_file(page, redact, folder_id))
                 for path, page in pages(inputs).items())
    return found


def load_tracks(files: Mapping[str, bytes], run_ids: Collection[str]
                ) -> dict[str, dict[str, Track]]:
    """The tracks of ``run_ids``, parsed from their folders alone, read in one go."""
    files = as_state_files(files)
    folders = {layout.run_dir(run_id) for run_id in run_ids}
    paths = [p for p in files if p.startswith(RUNS_PREFIX)
             and "/".join(p.split("/", 3)[:3]) in folders]
    files.prefetch(paths)
    return state_model.load({p: files[p] for p in paths}, all_tracks=True).tracks


def tree(inputs: Inputs, redact: Redactor) -> dict[str, bytes]:
    """Path (relative to the site) -> bytes of every file: documents, schemas, badges,
    the tracks read from ``inputs`` (loaded with every run's)."""
    eager, deferred = site_files(inputs, redact)
    tracks = inputs.state.tracks
    return {**eager, **{path: file.build(tracks) for path, file in deferred.items()}}


def existing(folder: Path) -> set[str]:
    """The files of ``api/v1`` and ``badges`` under ``folder``, by path from it."""
    found: set[str] = set()
    for owned in OWNED:
        for top, _dirs, names in os.walk(folder / owned):
            rel = Path(top).relative_to(folder).as_posix()
            found.update(f"{rel}/{name}" for name in names)
    return found


def replace(path: Path, data: bytes) -> None:
    """``path`` holds ``data``, replaced in one rename; no fsync (see the module)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(data)
    os.replace(temp, path)
