"""The files of one commit of the state branch, as a mapping read lazily and in bulk.

Listed folder by folder (``ls-tree``), contents loaded many at a time (``cat-file
--batch``), cached by blob id across snapshots; in a partial clone the missing blobs
are fetched first, in one request. :class:`~.git.GitStateStore` hands one to each
snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

from ..errors import OrchestratorError
from .base import StateFiles
from .plumbing import Git

RECURSE_AT = 64
"""Folders under one anchor (``state/runs``) from which the anchor is listed whole."""


def _by_anchor(folders: list[str]) -> tuple[list[str], list[str]]:
    """``folders`` split into those listed one by one and the anchors (their first two
    levels) listed whole instead: those with :data:`RECURSE_AT` folders under them."""
    # Many folders under one anchor (a rebuild of the index lists every run's three
    # folders: 30,000 at 10,000 runs) are one recursive listing of the anchor, which
    # git answers in one pass, not one pathspec each, which it matches entry by
    # entry. Every folder under it is then known; other anchors (the queues, with
    # items by the 100,000) are never listed in full for that.
    anchors: dict[str, list[str]] = {}
    for folder in folders:
        parts = folder.split("/")
        if len(parts) > 2:
            anchors.setdefault("/".join(parts[:2]), []).append(folder)
    whole = sorted(a for a, under in anchors.items() if len(under) >= RECURSE_AT)
    single = [f for f in folders if not _under_any(f, whole)]
    return single, whole


def _under_any(path: str, anchors: list[str]) -> bool:
    """Whether ``path`` is one of ``anchors`` or inside one."""
    return any(path == a or path.startswith(a + "/") for a in anchors)


class TreeFiles(StateFiles):
    """Files of one commit, listed folder by folder and loaded in bulk on demand.

    A lookup lists only the file's folder (one ``git ls-tree`` of that tree), so a
    reader that knows where to look never pays for the size of the whole tree: the
    tick reads a few folders of a state branch that may hold tens of thousands of
    finished runs. Iterating lists the whole tree once (``ls-tree -r``), as the
    commands that show every run need.

    A miss loads the requested file together with its not yet loaded siblings (same
    folder) in one ``git cat-file --batch``; :meth:`prefetch` loads an exact set in
    one call (the state parser asks for every record it needs at once).
    :meth:`listdirs` lists several folders in one call, and :meth:`object_id` answers
    from the listing of the path's folder. Contents are cached by blob
    id in a cache shared by the store's snapshots, so reading the same tip twice (the
    tick reads, then its compare-and-swap reads again) loads nothing the second time.

    In a partial clone (``fetch_blobs`` given: the tip was fetched without blobs) the
    blobs a read needs are fetched in one request before ``cat-file`` reads them, so
    git never fetches them one by one.
    """

    def __init__(self, git: Git, tip: str, cache: dict[str, bytes] | None = None,
                 fetch_blobs: Callable[[list[str]], None] | None = None) -> None:
        self._git = git
        self._tip = tip
        self._lock = threading.Lock()
        self._index: dict[str, str] | None = None
        self._dirs: dict[str, dict[str, tuple[bool, str]]] = {}
        """folder -> name -> (is a folder, object id), for the folders listed so far."""
        self._cache: dict[str, bytes] = {} if cache is None else cache
        self._fetch_blobs = fetch_blobs

    def _entries(self) -> dict[str, str]:
        with self._lock:
            if self._index is None:
                raw = self._git.run("ls-tree", "-r", "-z", "--full-tree", self._tip).stdout
                index: dict[str, str] = {}
                for record in raw.split(b"\0"):
                    if not record:
                        continue
                    meta, _, path = record.partition(b"\t")
                    _mode, kind, sha = meta.split(b" ")
                    if kind == b"blob":  # submodules (commit entries) carry no content
                        index[path.decode("utf-8", "surrogateescape")] = sha.decode()
                self._index = index
            return self._index

    def listdirs(self, folders: Iterable[str]) -> dict[str, dict[str, bool]]:
        """See :class:`~.base.StateFiles`; one ``ls-tree`` for all folders not listed
        before."""
        return {folder: {name: entry[0] for name, entry in entries.items()}
                for folder, entries in self._listed(folders).items()}

    def object_id(self, path: str) -> str | None:
        if not path:
            return None  # the root tree is the commit's: no listing names it
        folder, _, name = path.rpartition("/")
        entry = self._listed([folder])[folder].get(name)
        return entry[1] if entry is not None else None

    def _listed(self, folders: Iterable[str]) -> dict[str, dict[str, tuple[bool, str]]]:
        """``folder -> name -> (is a folder, object id)`` for each of ``folders``, listed
        with one ``ls-tree`` for all that are not cached."""
        wanted = sorted({f.strip("/") for f in folders})
        with self._lock:
            todo = [f for f in wanted if f not in self._dirs]
            if todo:
                self._list(todo)
            return {f: self._dirs[f] for f in wanted}

    def _list(self, folders: list[str]) -> None:
        for folder in folders:
            self._dirs[folder] = {}
        single, whole = _by_anchor(folders)
        for anchor in whole:
            self._dirs.setdefault(anchor, {})
        self._take(self._ls_tree(single, whole), whole)

    def _ls_tree(self, single: list[str], whole: list[str]) -> bytes:
        """The ``ls-tree -z`` records of the folders ``single`` and, recursively, of the
        anchors ``whole``."""
        # Literal pathspecs: a folder name is never a glob. A trailing slash lists the
        # folder's entries rather than the folder itself; the root needs no pathspec.
        # -t: a folder listed with one of its subfolders still shows that subfolder's
        # entry (without it, git recurses into it and drops the entry).
        raw = b""
        if "" in single:
            raw += self._git.run("ls-tree", "-z", "--full-tree", self._tip).stdout
        if any(single):
            raw += self._git.run("ls-tree", "-z", "-t", "--full-tree", self._tip, "--",
                                 *(f"{f}/" for f in single if f),
                                 env={"GIT_LITERAL_PATHSPECS": "1"}).stdout
        if whole:
            raw += self._git.run("ls-tree", "-z", "-r", "-t", "--full-tree", self._tip, "--",
                                 *(f"{a}/" for a in whole),
                                 env={"GIT_LITERAL_PATHSPECS": "1"}).stdout
        return raw

    def _take(self, raw: bytes, whole: list[str]) -> None:
        """The entries of ``raw`` (``ls-tree -z`` records) into the folders being
        listed; every folder under an anchor of ``whole`` is listed with them."""
        for record in raw.split(b"\0"):
            if not record:
                continue
            meta, _, path_b = record.partition(b"\t")
            _mode, kind, sha = meta.split(b" ")
            path = path_b.decode("utf-8", "surrogateescape")
            folder, _, name = path.rpartition("/")
            if folder in self._dirs and kind in (b"blob", b"tree"):
                self._dirs[folder][name] = (kind == b"tree", sha.decode())
                if kind == b"tree" and _under_any(path, whole):
                    self._dirs.setdefault(path, {})  # listed in full: its entries follow

    def _sha(self, path: str) -> str | None:
        if self._index is not None:
            return self._index.get(path)
        folder, _, name = path.rpartition("/")
        entry = self._listed([folder])[folder].get(name)
        return entry[1] if entry is not None and not entry[0] else None

    def __getitem__(self, path: str) -> bytes:
        sha = self._sha(path)
        if sha is None:
            raise KeyError(path)
        with self._lock:
            if sha not in self._cache:
                self._load([sha, *self._sibling_blobs(path.rpartition("/")[0])])
            return self._cache[sha]

    def _sibling_blobs(self, folder: str) -> list[str]:
        """The blob ids of the files in ``folder``, loaded with the one asked for: from
        the folder's listing, else from the whole tree's when there is one."""
        siblings = self._dirs.get(folder)
        if siblings is None and self._index is not None:
            return _files_in(self._index, folder)
        return [s for is_dir, s in (siblings or {}).values() if not is_dir]

    def prefetch(self, paths: Iterable[str]) -> None:
        """Load the contents of ``paths`` (those in the tree) with one git call."""
        paths = list(paths)
        if self._index is None:
            self._listed(p.rpartition("/")[0] for p in paths)
        shas = [s for s in map(self._sha, paths) if s is not None]
        with self._lock:
            self._load(shas)

    def _load(self, shas: Iterable[str]) -> None:
        wanted = sorted({s for s in shas if s not in self._cache})
        if not wanted:
            return
        if self._fetch_blobs is not None:
            self._fetch_blobs(wanted)
        out = self._git.run("cat-file", "--batch", input="".join(f"{s}\n" for s in wanted)
                            .encode()).stdout
        pos = 0
        while pos < len(out):
            end = out.index(b"\n", pos)
            header = out[pos:end].decode().split(" ")
            if len(header) != 3:  # "<sha> missing": the fetch did not bring it
                raise OrchestratorError(f"git object {header[0]} of {self._tip[:12]} is "
                                        "missing from the local clone")
            sha, _kind, size = header
            start = end + 1
            self._cache[sha] = out[start:start + int(size)]
            pos = start + int(size) + 1

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self._sha(path) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def __len__(self) -> int:
        return len(self._entries())

    def __repr__(self) -> str:
        return f"<files of {self._tip[:12]}>"


def _files_in(index: dict[str, str], folder: str) -> list[str]:
    """The blob ids of the files right inside ``folder``, from the whole tree's
    ``index`` (path -> blob id)."""
    prefix = folder + "/"
    return [s for p, s in index.items() if p.startswith(prefix) and "/" not in p[len(prefix):]]
