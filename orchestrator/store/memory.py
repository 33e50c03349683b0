"""The in-memory store: the contract of :class:`~.base.StateStore` without git.

- Tests of everything above the store (the tick, ``report``, ``compact``) run against
  it without a repository; its contention hook makes lost races happen on demand.
- Its files (:class:`MemoryFiles`) answer listings and object ids as git would, so
  the readers' fast paths run in the unit tier too.
- :func:`as_state_files` gives any plain mapping the same answers.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType

from ..errors import CASExhausted
from .base import (
    ArchiveFn,
    Change,
    ChangeFn,
    Snapshot,
    Stamped,
    StateFiles,
    TransactResult,
    blob_id,
    effective,
)


class MemoryFiles(StateFiles):
    """A mapping of files as :class:`~.base.StateFiles`: listings from its keys, git's
    ids from its bytes.

    - :meth:`prefetch` does nothing, and a listing reads no file: a test that counts
      reads sees what the git store would load.
    - An id is computed when asked, from the bytes under the path. It is the id git
      gives the same files, so the open-runs index's tree shortcut is exercised here
      too: taken while ``state/runs`` is unchanged, declined once it moved.
    - ``frozen``: the mapping never changes (a snapshot of :class:`InMemoryStateStore`),
      so listings and ids are cached. Otherwise each call looks at the mapping afresh,
      since a test may edit a dict between two reads.
    """

    def __init__(self, files: Mapping[str, bytes], *, frozen: bool = False) -> None:
        self._files = files
        self._frozen = frozen
        self._tree: dict[str, dict[str, bool]] | None = None
        self._ids: dict[str, str | None] = {}

    def __getitem__(self, path: str) -> bytes:
        return self._files[path]

    def __contains__(self, path: object) -> bool:
        return path in self._files

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def __repr__(self) -> str:
        return f"<{len(self._files)} files in memory>"

    def prefetch(self, paths: Iterable[str]) -> None:
        """Nothing to load: every file is in memory already."""

    def listdirs(self, folders: Iterable[str]) -> dict[str, dict[str, bool]]:
        tree = self._folders()
        return {f: dict(tree.get(f, {})) for f in sorted({f.strip("/") for f in folders})}

    def object_id(self, path: str) -> str | None:
        if self._frozen and path in self._ids:
            return self._ids[path]
        tree = self._folders()
        parent, _, name = path.rpartition("/")
        is_dir = tree.get(parent, {}).get(name) if path else None
        oid = None if is_dir is None else (self._tree_id(path, tree) if is_dir
                                           else blob_id(self._files[path]))
        if self._frozen:
            self._ids[path] = oid
        return oid

    def _folders(self) -> dict[str, dict[str, bool]]:
        """``folder -> name -> is a folder`` for every folder, from the keys alone."""
        if self._tree is not None:
            return self._tree
        tree: dict[str, dict[str, bool]] = {}
        for path in self._files:
            parts = path.split("/")
            for depth, name in enumerate(parts):
                entries = tree.setdefault("/".join(parts[:depth]), {})
                # a name that is a file and also holds files is a folder, as git lists it
                entries[name] = entries.get(name, False) or depth < len(parts) - 1
        if self._frozen:
            self._tree = tree
        return tree

    def _tree_id(self, folder: str, tree: Mapping[str, Mapping[str, bool]]) -> str:
        """The id of the tree git writes for ``folder`` (entries sorted by name, a
        folder's name compared as if it ended with ``/``)."""
        entries = []
        for name, is_dir in tree.get(folder, {}).items():
            path = f"{folder}/{name}" if folder else name
            raw = name.encode("utf-8", "surrogateescape")
            entries.append((raw + b"/" if is_dir else raw, b"40000" if is_dir else b"100644",
                            raw, self._entry_id(path, is_dir, tree)))
        body = b"".join(b"%s %s\0" % (mode, raw) + bytes.fromhex(oid or "")
                        for _, mode, raw, oid in sorted(entries))
        return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()

    def _entry_id(self, path: str, is_dir: bool, tree: Mapping[str, Mapping[str, bool]]
                  ) -> str | None:
        """The object id of the file or folder at ``path``, as git would write it."""
        if self._frozen:
            return self.object_id(path)
        return self._tree_id(path, tree) if is_dir else blob_id(self._files[path])


def as_state_files(files: Mapping[str, bytes]) -> StateFiles:
    """``files`` itself when a store made it, else a :class:`MemoryFiles` view of it.

    The readers of the state take any mapping, because the tests (and a few callers
    that pick some files out of a snapshot) hand them plain dicts; each reader wraps
    its argument once, here, and asks the result what it asks a store's files.
    """
    return files if isinstance(files, StateFiles) else MemoryFiles(files)


class InMemoryStateStore:
    """The fake: same contract as :class:`~.git.GitStateStore`, in memory, thread-safe.

    ``contention`` injects rival writers for tests: it is called with the attempt
    number after ``change_fn`` and before the compare-and-swap; a change it returns is
    committed first, as if another writer had won the race.

    A :class:`~.base.Stamped` file is written with the id its folder has in the new
    commit, as the git store writes it: the index of open runs then vouches for
    ``state/runs`` here too.
    """

    def __init__(
        self,
        files: Mapping[str, bytes] | None = None,
        *,
        max_attempts: int = 30,
        contention: Callable[[int], Change | None] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._tip: str | None = None
        self._files = MemoryFiles(MappingProxyType({}), frozen=True)
        self.max_attempts = max_attempts
        self.contention = contention
        self.log: list[tuple[str, str, tuple[str, ...]]] = []
        """Every commit: ``(sha, message, changed paths)``, oldest first."""
        self.rewound: str | None = None
        """Never set: the branch of an in-memory store cannot be rewound."""
        self.archive: ArchiveFn | None = None
        """No history to archive into: compaction does not run on this store."""
        if files:
            self._commit(self._tip, effective(self._files, dict(files)), "initial state")

    def read(self) -> Snapshot:
        with self._lock:
            return Snapshot(self._tip, self._files)

    def transact(self, change_fn: ChangeFn, message: str, *,
                 snapshot: Snapshot | None = None) -> TransactResult:
        for attempt in range(1, self.max_attempts + 1):
            snap = snapshot if attempt == 1 and snapshot is not None else self.read()
            change = effective(snap.files, change_fn(snap))
            if not change:
                return TransactResult(False, snap.tip, attempt)
            if self.contention is not None:
                rival = self.contention(attempt)
                if rival:
                    with self._lock:
                        self._commit(self._tip, effective(self._files, rival), "rival")
            with self._lock:
                if self._tip != snap.tip:
                    continue  # lost the race: re-read and re-apply
                tip = self._commit(snap.tip, change, message)
            return TransactResult(True, tip, attempt, tuple(sorted(change)))
        raise CASExhausted(f"gave up after {self.max_attempts} lost races (in-memory store)")

    def _commit(self, parent: str | None, change: Change, message: str) -> str:
        # Caller holds the lock (or is the constructor). Copy on write: snapshots
        # already handed out keep their own mapping.
        files = dict(self._files)
        for path, data in change.items():
            if data is None:
                files.pop(path, None)
            elif not isinstance(data, Stamped):
                files[path] = data
        stamps = {p: d for p, d in change.items() if isinstance(d, Stamped)}
        if stamps:  # the rest of the commit is in place: name its folders' ids
            built = MemoryFiles(files, frozen=True)
            files.update({p: d.fill(built.object_id(d.folder)) for p, d in stamps.items()})
        sha = hashlib.sha1(f"{parent}:{len(self.log)}:{message}".encode()).hexdigest()
        self._tip, self._files = sha, MemoryFiles(MappingProxyType(files), frozen=True)
        self.log.append((sha, message, tuple(sorted(change))))
        return sha
