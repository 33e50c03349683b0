"""One commit built from a change with git's plumbing, never a checkout.

- Blobs are written, then staged in a temporary index on top of the tip's tree; a
  large change writes its blobs in one pack (``fast-import``).
- A :class:`~.base.Stamped` file is filled in last, with the ids of folders the rest
  of the change already staged.
- Every commit carries a nonce, so two identical changes never build one commit.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path

from .base import Change, Stamped, blob_id
from .plumbing import Git

BULK_BLOBS = 256
"""A commit writing at least this many files writes its blobs in one pack."""


def _stage(git: Git, tmp: Path, writes: list[tuple[str, bytes]], deletes: list[str],
           env: Mapping[str, str]) -> None:
    """Write ``writes`` as blobs and stage them, with ``deletes`` (index-info lines),
    in the index named by ``env``."""
    shas: list[str] = []
    if len(writes) >= BULK_BLOBS:
        shas = _write_blobs(git, [data for _, data in writes])
    elif writes:
        paths = []
        for i, (_, data) in enumerate(writes):
            blob = tmp / f"blob{i}"
            blob.write_bytes(data)
            paths.append(str(blob))
        shas = git.out("hash-object", "-w", "--no-filters", "--stdin-paths",
                       input=("\n".join(paths) + "\n").encode()).split()
    info = [f"100644 {sha}\t{path}" for (path, _), sha in zip(writes, shas, strict=True)]
    info += deletes
    if info:
        git.run("update-index", "-z", "--index-info",
                input="".join(f"{line}\0" for line in info).encode(), env=env)


def _write_blobs(git: Git, blobs: list[bytes]) -> list[str]:
    """Write many blobs in one ``git fast-import`` (one pack, no file per blob: an
    enqueue of 10,000 items would otherwise write and remove 10,000 files); their
    ids, computed here as git computes them."""
    stream = b"".join(b"blob\ndata %d\n%b\n" % (len(data), data) for data in blobs)
    git.run("fast-import", "--quiet", "--done", input=stream + b"done\n")
    return [blob_id(data) for data in blobs]


def _tree_id(git: Git, folder: str, env: Mapping[str, str]) -> str | None:
    """The id of ``folder``'s tree in the index named by ``env`` (``None`` when the
    folder is not there)."""
    proc = git.run("write-tree", "--missing-ok", f"--prefix={folder}/", env=env,
                   check=False)
    if proc.returncode != 0:  # "prefix ... not found"
        return None
    return proc.stdout.decode().strip() or None


def _stage_files(git: Git, tmp: Path, change: Change, env: Mapping[str, str]) -> None:
    """Stage the plain writes and the deletes of ``change`` in the index of ``env``."""
    writes = [(p, d) for p, d in change.items()
              if d is not None and not isinstance(d, Stamped)]
    deletes = [f"0 {'0' * 40}\t{p}" for p, d in change.items() if d is None]
    _stage(git, tmp, writes, deletes, env)


def _stage_stamped(git: Git, tmp: Path, change: Change, env: Mapping[str, str]) -> None:
    """Stage the :class:`Stamped` files of ``change``, once the rest of the tree is
    staged: each names the id of a folder's tree as it now stands."""
    stamped = [(p, d) for p, d in change.items() if isinstance(d, Stamped)]
    if stamped:
        _stage(git, tmp, [(p, d.fill(_tree_id(git, d.folder, env)))
                          for p, d in stamped], [], env)


def build_commit(git: Git, tip: str | None, change: Change, message: str, *, root: bool
                 ) -> str:
    """The commit of ``change`` on ``tip`` (a root commit when ``root``), built in a
    temporary index: the checkout's own index and work tree are never touched."""
    with tempfile.TemporaryDirectory(prefix="orchestrator-commit-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        if tip is not None:
            git.read_tree(tip, env)
        _stage_files(git, Path(tmp), change, env)
        _stage_stamped(git, Path(tmp), change, env)
        # --missing-ok: in a partial clone the blobs of untouched records are not
        # here, and checking them would make git fetch each one.
        tree = git.out("write-tree", "--missing-ok", env=env)
    parents = ["-p", tip] if tip is not None and not root else []
    # Two writers applying the same change to the same tip within one second would
    # otherwise build byte-identical commits, and the second push would report
    # "up to date": two increments, one landed. A nonce makes every commit unique.
    body = f"{message.rstrip()}\n\nOrchestrator-Nonce: {uuid.uuid4().hex[:16]}\n"
    return git.out("commit-tree", "--no-gpg-sign", tree, *parents, "-F", "-",
                   input=body.encode())

