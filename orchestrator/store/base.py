"""The store's contract: :class:`StateStore`, its small types and its path rules.

Both stores (:mod:`.memory` and :mod:`.git`) implement this contract and one contract
test suite runs against both. Nothing here knows what the files mean: the domain
(:mod:`orchestrator.state`) decides which files to write, the store only guarantees how
they land.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

STATE_PREFIX = "state/"
"""Every path a store writes starts with this; in single-branch mode everything else in
the tip is carried over untouched."""

Change = dict[str, bytes | None]
"""Files to write (bytes) or delete (``None``), by path relative to the repository root."""


class StateFiles(Mapping[str, bytes]):
    """The files of one snapshot (path -> content), and what a reader may ask of them.

    A reader of a large branch needs more than a mapping: it lists folders without
    reading their files, and loads many files at once. Both stores answer these
    questions (:class:`~.tree.TreeFiles` with git, :class:`~.memory.MemoryFiles` from
    its keys), so the same code runs over both. It is an abstract base class rather
    than a :class:`typing.Protocol` because a protocol cannot extend ``Mapping``.

    **prefetch(paths).** A hint: the caller is about to read ``paths``. Afterwards every
    one of them that exists reads without another round trip; paths that do not exist
    are ignored. It never changes what a read returns.

    **listdirs(folders).** ``folder -> name -> is a folder`` for each of ``folders``
    (paths from the repository root, slashes around them dropped; ``""`` is the root).
    A folder that does not exist lists as empty. Folders listed together list as they
    would alone, a folder and its subfolder too. No file's content is read.

    **object_id(path).** The id git gives the file or folder at ``path`` (its blob or
    tree id, 40 hex digits), or ``None`` when nothing is there (nor for the root).
    Equal ids mean equal contents, for a folder everything under it. A file's id is
    :func:`blob_id` of its bytes. A folder's is the tree git holds;
    :class:`~.memory.MemoryFiles` computes the same, taking every file as a plain
    (``100644``) file, as both stores write them. Ids are a question of their own so
    that a listing never has to read a file to name them.
    """

    @abstractmethod
    def prefetch(self, paths: Iterable[str]) -> None: ...

    @abstractmethod
    def listdirs(self, folders: Iterable[str]) -> dict[str, dict[str, bool]]: ...

    @abstractmethod
    def object_id(self, path: str) -> str | None: ...


def blob_id(data: bytes) -> str:
    """git's object id of a file with these bytes (what ``ls-tree`` lists)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class Snapshot:
    """The state branch as one writer saw it.

    ``tip`` is the commit sha (``None`` while the branch does not exist yet); ``files``
    maps every file of the tip's tree (paths relative to the repository root, e.g.
    ``state/runs/x--20261201T0700Z/run.json``) to its content. For the git store the
    mapping lists the tree once and loads contents lazily, in bulk, cached per snapshot.
    """

    tip: str | None
    files: StateFiles


ChangeFn = Callable[[Snapshot], Change | None]
ArchiveFn = Callable[[ChangeFn, str, str], "TransactResult"]
"""``archive(change_fn, message, tag)``: a transaction whose commit starts the branch's
history afresh, the old tip kept under ``tag`` (:meth:`GitStateStore.archive`)."""
"""Computes a writer's change from one snapshot, and from nothing else."""


class Stamped(bytes):
    """File content that names the id git gives ``folder``'s tree in the same commit.

    A reader that finds a folder's tree id equal to the one a file names knows that
    nothing under the folder changed since that file was written, without listing the
    folder: the index of open runs vouches for ``state/runs`` this way (see
    :mod:`orchestrator.state.index`). The bytes are what ``fill(None)`` renders (no id
    known). Both stores write ``fill(tree_id)`` instead, with the folder's id in the
    new commit (:meth:`StateFiles.object_id`), once the rest of the commit is built;
    a folder that is not there fills ``None``.

    A change made of stamps alone changes nothing (:func:`changes`): a stamp only
    describes the rest of its commit.
    """

    folder: str
    fill: Callable[[str | None], bytes]

    @classmethod
    def of(cls, folder: str, fill: Callable[[str | None], bytes]) -> Stamped:
        stamped = cls(fill(None))
        stamped.folder = folder.strip("/")
        stamped.fill = fill
        return stamped


@dataclass(frozen=True)
class TransactResult:
    """What :meth:`StateStore.transact` did.

    ``landed`` is false when the change function asked for nothing (or for what was
    already there): then ``tip`` is the tip it saw and nothing was committed. When it
    landed, ``tip`` is the new commit and ``changed`` the paths it wrote or deleted.
    """

    landed: bool
    tip: str | None
    attempts: int
    changed: tuple[str, ...] = ()


class StateStore(Protocol):
    """Where the state lives: one branch, written by optimistic compare-and-swap.

    ``read()`` returns a consistent snapshot of the branch: its tip and the files of
    exactly that tip. A snapshot never changes afterwards, whatever is written later.

    ``transact(change_fn, message)`` reads, calls ``change_fn(snapshot)`` and commits
    the files it returns on top of exactly that snapshot's tip.

    **What is compared.** The tip, and only the tip: the commit lands only if the
    branch still points at the tip ``change_fn`` saw. Two writers touching different
    files still conflict; there is no per-file merge, so a change is always computed
    from a complete, current view of the state.

    **A lost race.** When another writer moved the branch first, nothing of ours is
    written. The store reads again and calls ``change_fn`` again with the newer
    snapshot, so ``change_fn`` must compute its change from the snapshot alone (it may
    be called several times; never accumulate outside state in it). A change that is
    empty, ``None`` or equal to what is already there commits nothing and ends the
    transaction (``landed`` false).

    **When a retry is allowed.** After a lost race, always, until the bounds run out
    (then :class:`~orchestrator.errors.CASExhausted`). After a failure that may or may
    not have written (a connection lost during the push), only once the store has
    made sure its commit did not land; if it did land, the transaction is done and the
    change is never applied twice. Never after a refusal that retrying cannot fix (a
    permission, a protected branch: :class:`~orchestrator.errors.PushRejected`), and
    never after an exception raised by ``change_fn``: it propagates and nothing is
    written.

    ``snapshot``, when given, is used for the first attempt instead of reading again (a
    caller that has just read saves a round trip); if it is stale the commit loses the
    race and the next attempt reads afresh, so correctness never depends on it.

    One store may be shared by threads; writers in other processes (or on other
    machines) are just other racers.

    ``rewound`` says why the branch, as of the last :meth:`read`, is behind the
    high-water mark of the commits this store has seen land (``None``: it is not; a
    store without history is never rewound). Nothing may fire from a rewound branch.
    """

    rewound: str | None

    @property
    def archive(self) -> ArchiveFn | None:
        """The store's capability to archive (:data:`ArchiveFn`); ``None``: it keeps no
        history to archive into (the in-memory store), and compaction does not run."""

    def read(self) -> Snapshot: ...

    def transact(self, change_fn: ChangeFn, message: str, *,
                 snapshot: Snapshot | None = None) -> TransactResult: ...


def check_path(path: str) -> str:
    """Return ``path`` if a store may write it: under ``state/``, relative, normalised."""
    if (
        not isinstance(path, str)
        or not path.startswith(STATE_PREFIX)
        or "\\" in path
        or "\0" in path
        or "\n" in path
        or any(part in ("", ".", "..", ".git") for part in path.split("/"))
    ):
        raise ValueError(f"invalid state path {path!r}: must be a normalised path under "
                         f"{STATE_PREFIX!r}")
    return path


def committable(name: str) -> bool:
    """Whether a tree entry called ``name`` survives a commit of the git store.

    git's index refuses an empty name, ``.``, ``..`` and ``.git`` (in any case); a
    hand-made tree may hold them, and the commit built on it leaves them out.
    """
    return name not in ("", ".", "..") and name.lower() != ".git"


def changes(old: Mapping[str, bytes], new: Mapping[str, bytes | None]) -> dict[str, bytes | None]:
    """The entries of ``new`` that differ from ``old`` (``None`` deletes a file); none
    when only :class:`Stamped` files would remain (a stamp describes the rest of its
    commit: alone, it changes nothing)."""
    out: dict[str, bytes | None] = {}
    for path, data in new.items():
        if data is None:
            if path in old:
                out[path] = None
        elif old.get(path) != data:
            out[path] = data
    return out if any(not isinstance(d, Stamped) for d in out.values()) else {}


def effective(files: Mapping[str, bytes], change: Change | None) -> Change:
    """The part of ``change`` that really changes ``files`` (paths validated)."""
    if not change:
        return {}
    for path, data in change.items():
        check_path(path)
        if data is not None and not isinstance(data, bytes):
            raise TypeError(f"content of {path} must be bytes, not {type(data).__name__}")
        if isinstance(data, Stamped) and path.startswith(data.folder + "/"):
            raise ValueError(f"{path} cannot name the tree of {data.folder}, which holds it")
    return changes(files, change)
