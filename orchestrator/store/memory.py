"""The in-memory store: the contract of :class:`~.base.StateStore` without git.

Tests of everything above the store (the tick, ``report``, ``compact``) run against it
without a repository; its contention hook makes lost races happen on demand.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType

from ..errors import CASExhausted
from .base import Change, ChangeFn, Snapshot, TransactResult, effective


class InMemoryStateStore:
    """The fake: same contract as :class:`~.git.GitStateStore`, in memory, thread-safe.

    ``contention`` injects rival writers for tests: it is called with the attempt
    number after ``change_fn`` and before the compare-and-swap; a change it returns is
    committed first, as if another writer had won the race.
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
        self._files: Mapping[str, bytes] = MappingProxyType({})
        self.max_attempts = max_attempts
        self.contention = contention
        self.log: list[tuple[str, str, tuple[str, ...]]] = []
        """Every commit: ``(sha, message, changed paths)``, oldest first."""
        self.rewound: str | None = None
        """Never set: the branch of an in-memory store cannot be rewound."""
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
            else:
                files[path] = data
        sha = hashlib.sha1(f"{parent}:{len(self.log)}:{message}".encode()).hexdigest()
        self._tip, self._files = sha, MappingProxyType(files)
        self.log.append((sha, message, tuple(sorted(change))))
        return sha
