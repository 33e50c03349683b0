"""Rendering the API into a folder that holds an earlier rendering: only what changed.

- The folder's manifest (:data:`MANIFEST`, a hidden file, which Pages does not publish)
  records each file's fingerprint, the renderer, and what the last render wrote.
- A run's file is fingerprinted by its folder's tree id on the state branch; a page of
  runs by its runs' folders; a schedule's by its definition, state, next slots, dead
  letters and newest runs' folders. Each is built only when that changed. The index,
  the queues', the badges and the schemas are few: built every time, fingerprinted
  by their bytes.
- A manifest that is missing, unreadable, of another version or of another renderer
  (orchestrator's version and source, the credentials the redactor knows) means a full
  render.
- A file is written only when its bytes differ from the folder's; files of
  ``api/v1`` and ``badges`` the tree no longer has (a compacted run's) are removed.
- Whichever render, every file's bytes are those of :func:`.site.tree`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..support.credentials import Redactor
from . import models as m
from . import site
from .documents import Inputs

MANIFEST = ".orchestrator-api.json"
VERSION = 1
"""The manifest's own format; another means a full render."""


@dataclass(frozen=True)
class Rendered:
    """What one render did: the paths written and removed, and why it was full (``None``:
    it was incremental)."""

    written: tuple[str, ...]
    removed: tuple[str, ...]
    full: str | None


def renderer(credential_names: list[str]) -> str:
    """What the bytes depend on beyond the branch: the code, and which credentials the
    redactor removes (their names only: the folder is published)."""
    names = hashlib.sha256("\n".join(sorted(credential_names)).encode()).hexdigest()
    return (f"orchestrator {__version__} ({_source_digest()[:16]}), api v{m.API_VERSION}, "
            f"credentials {names[:16]}")


@functools.cache
def _source_digest() -> str:
    """A digest of the package's Python source: a build of the same version with other
    code (a checkout being worked on) renders in full too."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def read_manifest(folder: Path, renderer_id: str) -> tuple[dict[str, str], str | None]:
    """The fingerprints of the folder's files, or none and why the render must be full."""
    try:
        data = json.loads((folder / MANIFEST).read_bytes())
    except FileNotFoundError:
        return {}, "no manifest"
    except (OSError, ValueError):
        return {}, "its manifest is unreadable"
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return {}, "its manifest is of another version"
    if data.get("renderer") != renderer_id:
        return {}, "another orchestrator or other credentials rendered it"
    documents = data.get("documents")
    if not isinstance(documents, dict):
        return {}, "its manifest is unreadable"
    return {str(k): str(v) for k, v in documents.items()}, None


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _put(folder: Path, rel: str, data: bytes, written: list[str]) -> None:
    """Write ``data`` unless the folder already holds exactly it."""
    path = folder / rel
    if path.is_file() and path.read_bytes() == data:
        return
    site.replace(path, data)
    written.append(rel)


@dataclass
class _Plan:
    """One render under way: the folder, what it held, what is written."""

    folder: Path
    old: Mapping[str, str]
    existing: set[str]
    fingerprints: dict[str, str]
    written: list[str]

    def fresh(self, rel: str, fingerprint: str | None) -> bool:
        """Whether the folder holds ``rel`` as built from the same inputs."""
        return (fingerprint is not None and self.old.get(rel) == fingerprint
                and rel in self.existing)

    def take(self, rel: str, fingerprint: str | None, build: Callable[[], bytes]) -> None:
        """Build ``rel`` and write it where its bytes changed, unless it is fresh."""
        if self.fresh(rel, fingerprint):
            self.fingerprints[rel] = str(fingerprint)
            return
        data = build()
        self.fingerprints[rel] = fingerprint or _digest(data)
        _put(self.folder, rel, data, self.written)


def render(folder: Path, inputs: Inputs, redact: Redactor, renderer_id: str,
           folder_id: site.FolderId, load_tracks: Callable[[set[str]], site.Tracks]
           ) -> Rendered:
    """The API of ``inputs`` into ``folder``, building only what changed since the
    rendering its manifest describes. ``folder_id``: a run's folder's tree id;
    ``load_tracks``: the tracks of the runs a file to build reads, in one call."""
    old, full = read_manifest(folder, renderer_id)
    plan = _Plan(folder, old, site.existing(folder), {}, [])
    eager, deferred = site.site_files(inputs, redact, folder_id)
    for rel, data in eager.items():
        plan.take(rel, _digest(data), functools.partial(bytes, data))
    todo = {rel: file for rel, file in deferred.items()
            if not plan.fresh(rel, file.fingerprint)}
    plan.fingerprints.update((rel, str(file.fingerprint)) for rel, file in deferred.items()
                             if rel not in todo)
    tracks = load_tracks({run for file in todo.values() for run in file.runs})
    for rel, file in todo.items():
        plan.take(rel, file.fingerprint, functools.partial(file.build, tracks))
    removed = sorted(plan.existing - set(plan.fingerprints))
    for rel in removed:
        (folder / rel).unlink()
    _write_manifest(folder, renderer_id, plan.fingerprints, sorted(plan.written), removed)
    return Rendered(tuple(sorted(plan.written)), tuple(removed), full)


def _write_manifest(folder: Path, renderer_id: str, fingerprints: Mapping[str, str],
                    written: list[str], removed: list[str]) -> None:
    data: dict[str, Any] = {"version": VERSION, "renderer": renderer_id,
                            "written": written, "removed": removed,
                            "documents": dict(sorted(fingerprints.items()))}
    site.replace(folder / MANIFEST, json.dumps(data, indent=0).encode())
