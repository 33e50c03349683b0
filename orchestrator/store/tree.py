"""The files of one commit of the state branch, as a mapping read lazily and in bulk.

Listed folder by folder (``ls-tree``), contents loaded many at a time (``cat-file
--batch``), cached by blob id across snapshots; in a partial clone the missing blobs
are fetched first, in one request. :class:`~.git.GitStateStore` hands one to each
snapshot.

A linked folder (:mod:`.links`) is read through its link: the commit it names is
fetched the first time a path inside it is listed, and its files are named as if it
were a plain folder.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

from ..errors import OrchestratorError
from . import links
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
    git never fetches them one by one. ``resolve_link(blob, folder)`` is the commit a
    linked folder's link names, brought before anything inside it is listed.
    """

    def __init__(self, git: Git, tip: str, cache: dict[str, bytes] | None = None,
                 fetch_blobs: Callable[[list[str]], None] | None = None,
                 resolve_link: Callable[[str, str], str | None] | None = None) -> None:
        self._git = git
        self._tip = tip
        self._lock = threading.Lock()
        self._index: dict[str, str] | None = None
        self._dirs: dict[str, dict[str, tuple[bool, str]]] = {}
        """folder -> name -> (is a folder, object id), for the folders listed so far."""
        self._cache: dict[str, bytes] = {} if cache is None else cache
        self._fetch_blobs = fetch_blobs
        self._resolve_link = resolve_link
        self._links: dict[str, str] = {}
        """linked folder -> its link's blob id, for the links listed so far."""
        self._commits: dict[str, str | None] = {}
        """linked folder -> the commit its link names, once resolved."""

    def _entries(self) -> dict[str, str]:
        with self._lock:
            if self._index is None:
                raw = self._git.run("ls-tree", "-r", "-z", "--full-tree", self._tip).stdout
                index: dict[str, str] = {}
                for kind, sha, path in _records(raw):
                    if kind == "blob":  # submodules (commit entries) carry no content
                        index[path] = sha
                    elif kind == "link":
                        self._links[path] = sha
                        index.update(self._linked_files(path))
                self._index = index
            return self._index

    def _linked_files(self, link: str) -> dict[str, str]:
        """path -> blob id of every file in the linked folder ``link``."""
        commit = self._link(link)
        if commit is None:
            return {}
        raw = self._git.run("ls-tree", "-r", "-z", "--full-tree", commit).stdout
        return {f"{link}/{path}": sha for kind, sha, path in _records(raw) if kind == "blob"}

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
        inside: dict[str, list[str]] = {}
        for folder in folders:
            parts = links.split(folder)
            if parts is not None:
                inside.setdefault(parts[0], []).append(folder)
        self._list_plain([f for f in folders if links.split(f) is None])
        for link, under in sorted(inside.items()):
            commit = self._link(link)
            if commit is None:
                self._list_plain(under)  # a plain folder, or none at all
            else:
                self._list_linked(link, commit, under)

    def _list_plain(self, folders: list[str]) -> None:
        """List ``folders``, none inside a linked folder, from the tip's tree."""
        single, whole = _by_anchor(folders)
        for anchor in whole:
            self._dirs.setdefault(anchor, {})
        if single or whole:
            self._take(_records(self._ls_tree(single, whole)), whole)

    def _link(self, folder: str) -> str | None:
        """The commit the link at ``folder`` names, or ``None`` when there is none."""
        if folder not in self._links:
            parent = folder.rpartition("/")[0]
            if parent not in self._dirs:
                self._dirs[parent] = {}
                self._list_plain([parent])
        blob = self._links.get(folder)
        if blob is not None and folder not in self._commits:
            self._commits[folder] = (
                self._resolve_link(blob, folder) if self._resolve_link is not None
                else links.target(self._git.run("cat-file", "blob", blob).stdout))
        return self._commits.get(folder)

    def _list_linked(self, link: str, commit: str, folders: list[str]) -> None:
        """List ``folders``, inside the linked folder ``link``, from its ``commit``: one
        recursive listing when they are many (every folder in it is then known)."""
        inner = [f[len(link) + 1:] for f in folders if f != link]
        if len(folders) >= RECURSE_AT:
            raw = self._git.run("ls-tree", "-z", "-r", "-t", "--full-tree", commit).stdout
            self._dirs.setdefault(link, {})
            self._take(_records(raw, link), [link])
            return
        raw = b""
        if link in folders:
            raw += self._git.run("ls-tree", "-z", "--full-tree", commit).stdout
        if inner:
            raw += self._git.run("ls-tree", "-z", "-t", "--full-tree", commit, "--",
                                 *(f"{f}/" for f in inner),
                                 env={"GIT_LITERAL_PATHSPECS": "1"}).stdout
        self._take(_records(raw, link), [])

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

    def _take(self, records: Iterable[tuple[str, str, str]], whole: list[str]) -> None:
        """The entries ``records`` (kind, id, path) into the folders being listed; every
        folder under an anchor of ``whole`` is listed with them."""
        for kind, sha, path in records:
            folder, _, name = path.rpartition("/")
            if kind == "link":
                self._links[path] = sha  # read as a folder, listed from its commit
            if folder in self._dirs and kind in ("blob", "tree", "link"):
                self._dirs[folder][name] = (kind != "blob", sha)
                if kind == "tree" and _under_any(path, whole):
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


def _records(raw: bytes, prefix: str = "") -> Iterator[tuple[str, str, str]]:
    """``(kind, id, path)`` of each of the ``ls-tree -z`` records ``raw``, each path
    under ``prefix`` when one is given; a linked folder's link is of kind ``link``."""
    for record in raw.split(b"\0"):
        if record:
            meta, _, path = record.partition(b"\t")
            mode, kind, sha = meta.decode().split(" ")
            name = path.decode("utf-8", "surrogateescape")
            if prefix:
                yield kind, sha, f"{prefix}/{name}"
            else:
                yield ("link" if links.is_link(mode, name) else kind), sha, name


def _files_in(index: dict[str, str], folder: str) -> list[str]:
    """The blob ids of the files right inside ``folder``, from the whole tree's
    ``index`` (path -> blob id)."""
    prefix = folder + "/"
    return [s for p, s in index.items() if p.startswith(prefix) and "/" not in p[len(prefix):]]
