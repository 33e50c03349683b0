"""Linked folders: a queue's items kept in a commit of their own, behind a link entry.

A runner's fetch of the state branch brings every tree of its tip; 100,000 items are
thousands of trees that a tick rarely reads. So on a dedicated state branch:

- A linked folder (``state/queues/<name>/items``) is a symbolic link entry (mode
  120000) in the state tree whose target is the id of an items commit, whose tree is
  the folder's. Fetch and clone follow no link target, so the state branch's fetch
  brings no item tree. (A gitlink would do the same, but a checkout of the branch by
  ``actions/checkout`` runs ``git submodule foreach``, which fails on a gitlink with no
  ``.gitmodules``.)
- The link and its commit are fetched by id only when a read or a write first needs
  a path inside the folder.
- Each items commit is the child of the one it replaces and is kept on the remote by
  its own ref, ``refs/orchestrator/items/<branch>/<name>``, pushed in the same atomic
  push as the branch: the branch's lease stays the one lock.
- A folder left with no file loses its link. Its ref stays (a push deleting a ref
  the remote may lack would fail), and is overwritten if the folder comes back.
- A folder still stored as a plain tree is read as before; the first commit writing
  under it moves it behind a link. A branch holding more than ``state/`` (the
  project's own branch) keeps plain trees, so its checkouts show the files.
"""

from __future__ import annotations

import re

from .base import Change

LINKED = re.compile(r"(state/queues/[A-Za-z0-9_-]+/items)(?:/(.+))?")
"""A path inside a linked folder: group 1 the folder, group 2 the path inside it."""

LINK_MODE = "120000"
"""The mode of a link entry (git's symbolic link)."""

ITEMS_REF_PREFIX = "refs/orchestrator/items/"
"""``<prefix><branch>/<name>``: the ref that keeps a linked folder's commit."""

_TARGET = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def split(path: str) -> tuple[str, str] | None:
    """``(linked folder, path inside it)`` of ``path`` (the inner path empty for the
    folder itself), or ``None`` when ``path`` is in no linked folder."""
    found = LINKED.fullmatch(path)
    return None if found is None else (found.group(1), found.group(2) or "")


def is_link(mode: str, path: str) -> bool:
    """Whether an entry of ``mode`` at ``path`` is a linked folder's link."""
    return mode == LINK_MODE and split(path) == (path, "")


def target(content: bytes) -> str | None:
    """The commit a link's ``content`` names, or ``None`` when it names none (a hand
    edit: the folder then reads as empty)."""
    found = _TARGET.fullmatch(content.strip())
    return found.group().decode() if found else None


def side_ref(branch: str, link: str) -> str:
    """The ref keeping the commit of ``link`` on the remote, for state ``branch``."""
    return f"{ITEMS_REF_PREFIX}{branch}/{link.split('/')[2]}"


def by_link(change: Change) -> dict[str, dict[str, bytes | None]]:
    """The entries of ``change`` inside linked folders, by folder, keyed by inner path."""
    grouped: dict[str, dict[str, bytes | None]] = {}
    for path, data in change.items():
        parts = split(path)
        if parts is not None and parts[1]:
            grouped.setdefault(parts[0], {})[parts[1]] = data
    return grouped
