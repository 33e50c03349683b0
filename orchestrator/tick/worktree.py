"""What git knows of a folder of the work tree: whether it is exactly what git's index
holds, and if so the blob id of each file, without reading a file.

A tick on a CI runner starts from a fresh checkout, and a local one from a working
copy that rarely changes between ticks: either way git has already hashed the files
and knows, from their ``stat`` data (and their bytes where that is not enough), which
changed since. One ``git ls-files`` asks it. The answer is an id of the folder's
contents (:attr:`Clean.digest`) that is the same on every machine checking out the
same commit, so a memo keyed by it (:mod:`orchestrator.tick.memo`) holds from one runner
to the next.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..errors import OrchestratorError
from ..store.plumbing import Git
from ..support.credentials import Redactor

# One entry of `ls-files -z -v --stage`: the tag H (cached: not assume-unchanged, not
# skip-worktree, not modified or deleted, which -m and -d would list again as C and
# R), a plain file's mode, the blob id, stage 0 (no conflict), the path.
_CLEAN = re.compile(rb"(?:H 100(?:644|755) [0-9a-f]{40,64} 0\t[^\0]+\0)*")
_TOP = re.compile(rb"\t([^/\0]+)")
_FILE = re.compile(rb"H 100(?:644|755) ([0-9a-f]{40,64}) 0\t([^/\0]+)\0")


@dataclass(frozen=True)
class Clean:
    """A folder whose every entry is a file git's index holds, unchanged."""

    listing: bytes
    """git's listing of every path under the folder, with its mode and blob id."""

    @cached_property
    def digest(self) -> str:
        """Of :attr:`listing`: the same for the same files, on any machine."""
        return hashlib.sha256(self.listing).hexdigest()

    @cached_property
    def blobs(self) -> dict[str, str]:
        """Name -> blob id, for the files directly in the folder."""
        return {name.decode("utf-8", "surrogateescape"): blob.decode("ascii")
                for blob, name in _FILE.findall(self.listing)}

    def stems(self, suffix: str) -> frozenset[str]:
        """The names of the files directly in the folder that end with ``suffix``,
        without it."""
        found = re.findall(rb"\t([^/\0]+)" + re.escape(suffix.encode()) + rb"\0", self.listing)
        return frozenset(n.decode("utf-8", "surrogateescape") for n in found)

    @cached_property
    def names(self) -> frozenset[str]:
        """Every name directly in the folder (files and folders)."""
        return frozenset(n.decode("utf-8", "surrogateescape")
                         for n in _TOP.findall(self.listing))


def clean(folder: Path) -> Clean | None:
    """``folder`` as git's index holds it, or ``None`` when anything under it differs
    from the index or cannot be vouched for: a file modified, deleted, added (ignored
    or not), marked assume-unchanged or skip-worktree, in conflict, or anything but a
    plain file (a symlink, a submodule), or a name in the folder git does not track
    (a FIFO, an empty folder); and when the folder is not in a git work tree, or git
    cannot run."""
    try:
        proc = Git(folder, Redactor()).run("ls-files", "-z", "-v", "--stage", "--modified",
                                           "--deleted", check=False)
        on_disk = {entry.name for entry in os.scandir(folder)}
    except (OrchestratorError, OSError):
        return None
    found = parse(proc.stdout) if proc.returncode == 0 else None
    # untracked and ignored names, and what git never lists (FIFOs, empty folders)
    return found if found is not None and found.names == on_disk else None


def parse(listing: bytes) -> Clean | None:
    """The output of ``git ls-files -z -v --stage --modified --deleted``, when every
    entry in it is a plain file the index holds, unchanged; else ``None``."""
    return Clean(listing) if _CLEAN.fullmatch(listing) else None
