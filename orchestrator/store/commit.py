"""One commit built from a change with git's plumbing, never a checkout.

- Blobs are written, then staged in a temporary index on top of the tip's tree; a
  large change writes its blobs in one pack (``fast-import``).
- A :class:`~.base.Stamped` file is filled in last, with the ids of folders the rest
  of the change already staged.
- Every commit carries a nonce, so two identical changes never build one commit.
- Writes inside a linked folder (:mod:`.links`) go to that folder's own commit, built
  in an index of its own; the state tree gets the link to it.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import links
from .base import Change, Stamped, blob_id
from .plumbing import Git

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""The id git gives a tree with no entries."""


@dataclass(frozen=True)
class Built:
    """A commit of the state branch, with the linked folders' commits it points to."""

    commit: str
    links: dict[str, str] = field(default_factory=dict)
    """Linked folder -> its new commit (empty when the commit removed the folder)."""

    def refs(self, branch: str) -> list[tuple[str, str]]:
        """``(commit, ref)`` of each linked folder's new commit, for state ``branch``."""
        # An emptied folder keeps its ref: the remote may lack it, and deleting a
        # missing ref would fail the whole atomic push.
        return [(sha, links.side_ref(branch, link)) for link, sha in self.links.items()
                if sha]

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


def build_commit(git: Git, tip: str | None, change: Change, message: str, *, root: bool,
                 resolve_link: Callable[[str, str], str | None] | None = None) -> Built:
    """The commit of ``change`` on ``tip`` (a root commit when ``root``), built in a
    temporary index: the checkout's own index and work tree are never touched.
    ``resolve_link(blob, folder)`` is the commit a link names, brought with its trees."""
    with tempfile.TemporaryDirectory(prefix="orchestrator-commit-") as tmp:
        linked = _build_links(git, Path(tmp), tip, change, resolve_link)
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        if tip is not None:
            git.read_tree(tip, env)
        _stage_links(git, linked, env)
        rest = {p: d for p, d in change.items() if _outside(p, linked)}
        _stage_files(git, Path(tmp), rest, env)
        _stage_stamped(git, Path(tmp), rest, env)
        # --missing-ok: in a partial clone the blobs of untouched records are not
        # here, and checking them would make git fetch each one.
        tree = git.out("write-tree", "--missing-ok", env=env)
    parents = ["-p", tip] if tip is not None and not root else []
    # Two writers applying the same change to the same tip within one second would
    # otherwise build byte-identical commits, and the second push would report
    # "up to date": two increments, one landed. A nonce makes every commit unique.
    body = f"{message.rstrip()}\n\nOrchestrator-Nonce: {uuid.uuid4().hex[:16]}\n"
    return Built(git.out("commit-tree", "--no-gpg-sign", tree, *parents, "-F", "-",
                         input=body.encode()), linked)


def _outside(path: str, linked: Mapping[str, str]) -> bool:
    """Whether ``path`` is in none of the folders ``linked``."""
    parts = links.split(path)
    return parts is None or parts[0] not in linked


def _stage_links(git: Git, linked: Mapping[str, str], env: Mapping[str, str]) -> None:
    """Stage each folder of ``linked`` as a link to its commit, or remove it."""
    info = [f"0 {'0' * 40}\t{path}" for path, sha in linked.items() if not sha]
    for path, sha in linked.items():
        if sha:
            blob = git.out("hash-object", "-w", "--stdin", input=f"{sha}\n".encode())
            info.append(f"{links.LINK_MODE} {blob}\t{path}")
    if info:
        # --replace drops the entries of a folder that was a plain tree until now.
        git.run("update-index", "-z", "--replace", "--index-info",
                input="".join(f"{line}\0" for line in info).encode(), env=env)


def _build_links(git: Git, tmp: Path, tip: str | None, change: Change,
                 resolve_link: Callable[[str, str], str | None] | None) -> dict[str, str]:
    """The new commit of each linked folder ``change`` writes in (empty: it has no file
    left); a folder kept as a plain tree is not in it."""
    grouped = links.by_link(change)
    if not grouped:
        return {}
    current, dedicated = _link_entries(git, tip, list(grouped))
    built: dict[str, str] = {}
    for n, (link, inner) in enumerate(sorted(grouped.items())):
        mode, sha = current.get(link, ("", ""))
        if mode != links.LINK_MODE and not dedicated:
            continue  # the project's own branch: its checkouts show the files
        parent = ""
        if mode == links.LINK_MODE:
            parent = (resolve_link(sha, link) if resolve_link else None) or ""
        base = parent or (sha if mode == "040000" else "")
        made = _side_commit(git, tmp / f"link{n}", inner, base, parent)
        if made or mode == links.LINK_MODE:  # a plain folder emptied stays plain
            built[link] = made
    return built


def _link_entries(git: Git, tip: str | None, folders: list[str]
                  ) -> tuple[dict[str, tuple[str, str]], bool]:
    """``folder -> (mode, id)`` of those of ``folders`` in ``tip``, and whether ``tip``
    holds nothing but ``state/`` (a dedicated state branch)."""
    if tip is None:
        return {}, True
    top = git.run("ls-tree", "-z", "--name-only", "--full-tree", tip).stdout.split(b"\0")
    raw = git.run("ls-tree", "-z", "--full-tree", tip, "--", *folders,
                  env={"GIT_LITERAL_PATHSPECS": "1"}).stdout
    entries: dict[str, tuple[str, str]] = {}
    for record in raw.split(b"\0"):
        if record:
            meta, _, path = record.partition(b"\t")
            mode, _kind, sha = meta.decode().split(" ")
            entries[path.decode("utf-8", "surrogateescape")] = (mode, sha)
    return entries, [name for name in top if name] == [b"state"]


def _side_commit(git: Git, tmp: Path, inner: Mapping[str, bytes | None], base: str,
                 parent: str) -> str:
    """The commit of a linked folder: the tree of ``base`` (a commit or a tree, or
    nothing) with ``inner`` applied, as a child of ``parent`` when there is one; empty
    when no file is left."""
    tmp.mkdir()
    env = {"GIT_INDEX_FILE": str(tmp / "index")}
    if base:
        git.run("read-tree", base, env=env)
    writes = [(p, d) for p, d in inner.items() if d is not None]
    deletes = [f"0 {'0' * 40}\t{p}" for p, d in inner.items() if d is None]
    _stage(git, tmp, writes, deletes, env)
    tree = git.out("write-tree", "--missing-ok", env=env)
    if tree == EMPTY_TREE:
        return ""
    parents = ["-p", parent] if parent else []
    return git.out("commit-tree", "--no-gpg-sign", tree, *parents, "-m", "items")
