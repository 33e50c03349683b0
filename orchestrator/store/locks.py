"""Lock files that a killed git process left behind: told from live ones, and removed.

git takes a lock by creating ``<file>.lock`` exclusively, and renames or deletes it
when it is done. A git process killed in between (a tick killed with its process
group while it fetched, an OOM kill, a command past its timeout) leaves the lock, and
every later command that needs it fails with ``Unable to create '<file>.lock': File
exists`` until someone deletes it. ``serve`` after a laptop was closed is this case.

Invariants:

- Only a lock that git named in such a message is looked at, and only when it is a
  regular file ending in ``.lock`` inside a folder the store owns: the checkout (its
  git folder included) and the remote when it is a folder on this machine.
- A lock is stale when no live git process could hold it: none whose working folder
  is inside that folder started before the lock was last written (a process can hold
  only a lock it created after it started). Where processes cannot be listed (no
  ``/proc``), a lock older than :data:`UNLISTED_AFTER` is stale instead.
- Removal is serialised by an ``flock`` on the folder, and removes only the very file
  that was examined (same inode and time), so two ticks clearing one lock at once never
  remove the fresh lock a third one took meanwhile.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

UNLISTED_AFTER = 360.0
"""Seconds after which a lock is stale where processes cannot be listed: longer than
any git command of the store may run (:data:`~.plumbing.GIT_TIMEOUT`)."""

_NAMED = re.compile(r"Unable to create '([^'\n]+\.lock)': File exists")


def named(stderr: str) -> list[str]:
    """The lock files a git command's ``stderr`` says it found taken."""
    return _NAMED.findall(stderr)


@dataclass(frozen=True)
class Process:
    """A live git process: where it works, and when it started (seconds since the epoch,
    never later than the real start)."""

    cwd: Path | None
    """Its working folder; ``None`` when it cannot be read (another user's process)."""
    started: float


def git_processes(proc: Path = Path("/proc")) -> list[Process] | None:
    """The live git processes of this machine, or ``None`` when it cannot list them."""
    try:
        boot = _boot_time(proc)
        ticks = os.sysconf("SC_CLK_TCK")
        entries = [e for e in os.scandir(proc) if e.name.isdigit()]
    except (OSError, StopIteration, ValueError):
        return None
    found = (_git_process(proc / entry.name, boot, ticks) for entry in entries)
    return [process for process in found if process is not None]


def _boot_time(proc: Path) -> float:
    """When the machine booted, in seconds since the epoch (``btime`` of ``/proc/stat``);
    :class:`StopIteration` when it says not."""
    return next(float(line.split()[1]) for line in
                (proc / "stat").read_text().splitlines() if line.startswith("btime "))


def _git_process(folder: Path, boot: float, ticks: int) -> Process | None:
    """The process of ``/proc/<pid>`` when it is a live git process, else ``None``."""
    try:
        raw = (folder / "stat").read_text()
    except OSError:
        return None  # it ended meanwhile
    comm, _, rest = raw.partition(" (")[2].rpartition(")")
    fields = rest.split()
    # after the name: the state (field 3), ..., the start time in ticks (field 22)
    if not comm.startswith("git") or len(fields) < 20 or fields[0] == "Z":
        return None
    try:
        cwd: Path | None = Path(os.readlink(folder / "cwd"))
    except OSError:
        cwd = None
    # btime is whole seconds, rounded down: the start is never later than the truth
    return Process(cwd, boot + int(fields[19]) / ticks)


def _inside(path: Path, folders: Iterable[Path]) -> bool:
    return any(path == folder or folder in path.parents for folder in folders)


def stale(lock: os.stat_result, folders: list[Path],
          processes: list[Process] | None, now: float) -> bool:
    """Whether no live git process working in ``folders`` could hold a lock with the
    status ``lock`` (pure: the processes and the time are given)."""
    if processes is None:
        return now - lock.st_mtime > UNLISTED_AFTER
    return not any(p.started <= lock.st_mtime for p in processes
                   if p.cwd is not None and _inside(p.cwd, folders))


@contextlib.contextmanager
def _serialised(folder: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``folder`` (a directory) for the block."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def owned(path: str, folders: list[Path], cwd: Path) -> Path | None:
    """The lock file ``path`` (as git named it, relative to ``cwd``) when it lies in one
    of ``folders``, resolved; ``None`` for any other (a path on a remote server)."""
    lock = Path(os.path.abspath(cwd / path))
    try:
        where = Path(os.path.realpath(lock.parent))
    except OSError:
        return None
    owners = [Path(os.path.realpath(f)) for f in folders]
    if not lock.name.endswith(".lock") or not _inside(where, owners):
        return None
    return where / lock.name


def clear(path: str, folders: list[Path], cwd: Path) -> str | None:
    """Remove the lock file ``path`` (as git named it, relative to ``cwd``) when it is
    stale; the line that says so, or ``None`` when it was left alone."""
    lock = owned(path, folders, cwd)
    if lock is None:
        return None
    owners = [Path(os.path.realpath(f)) for f in folders]
    owner = next(f for f in owners if _inside(lock.parent, [f]))
    with _serialised(owner):
        seen = _remove_if_stale(lock, owners)
    if seen is None:
        return None
    age = max(0.0, time.time() - seen.st_mtime)
    return (f"removed the stale lock {lock} ({age:.0f} s old): a git process killed "
            "mid-way left it, and no live one could hold it")


def _remove_if_stale(lock: Path, owners: list[Path]) -> os.stat_result | None:
    """Remove ``lock`` when it is a file no live git process in ``owners`` could hold;
    its status as seen, or ``None`` when it was left alone. The caller holds the
    owner's ``flock``."""
    try:
        seen = os.lstat(lock)
    except OSError:
        return None  # gone already: whoever held it is done
    if not stat.S_ISREG(seen.st_mode) or not stale(seen, owners, git_processes(), time.time()):
        return None
    # Its holder may have ended meanwhile, putting the lock in place or removing it;
    # then another may have taken the lock afresh: only the very file seen goes.
    try:
        now = os.lstat(lock)
    except FileNotFoundError:
        return None
    if (now.st_ino, now.st_mtime_ns) != (seen.st_ino, seen.st_mtime_ns):
        return None
    try:
        os.unlink(lock)
    except FileNotFoundError:
        return None
    return seen
