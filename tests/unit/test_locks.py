"""Telling a lock file a killed git process left from one a live process holds (pure)."""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.store import locks

REPO = Path("/srv/checkout")
REMOTE = Path("/srv/origin.git")
WRITTEN = 1_000_000.0


def lock(mtime: float = WRITTEN) -> os.stat_result:
    return os.stat_result((0o100644, 1, 1, 1, 0, 0, 41, mtime, mtime, mtime))


def test_a_lock_is_stale_when_every_git_process_here_started_after_it() -> None:
    later = [locks.Process(REPO, WRITTEN + 1), locks.Process(REPO / ".git", WRITTEN + 5)]
    assert locks.stale(lock(), [REPO, REMOTE], later, now=WRITTEN + 10)


def test_a_git_process_that_started_before_the_lock_may_hold_it() -> None:
    for where in (REPO, REPO / "sub", REMOTE):
        holder = [locks.Process(where, WRITTEN - 0.5)]
        assert not locks.stale(lock(), [REPO, REMOTE], holder, now=WRITTEN + 3600)
    # written as it started (the start is read rounded down): it may be the holder
    assert not locks.stale(lock(), [REPO], [locks.Process(REPO, WRITTEN)], now=WRITTEN + 1)


def test_git_processes_working_elsewhere_or_unreadable_hold_none_of_ours() -> None:
    others = [locks.Process(Path("/srv/another"), WRITTEN - 60),
              locks.Process(Path("/srv/checkout-old"), WRITTEN - 60),
              locks.Process(None, WRITTEN - 60)]
    assert locks.stale(lock(), [REPO, REMOTE], others, now=WRITTEN + 1)


def test_where_processes_cannot_be_listed_only_age_tells() -> None:
    assert not locks.stale(lock(), [REPO], None, now=WRITTEN + locks.UNLISTED_AFTER - 1)
    assert locks.stale(lock(), [REPO], None, now=WRITTEN + locks.UNLISTED_AFTER + 1)


def test_the_locks_git_says_it_found_taken() -> None:
    said = ("remote: error: cannot lock ref 'refs/heads/x': Unable to create "
            "'/srv/origin.git/./refs/heads/x.lock': File exists.\n"
            "fatal: Unable to create '/srv/checkout/.git/shallow.lock': File exists.\n"
            "error: Unable to create '/srv/other': Permission denied\n")
    assert locks.named(said) == ["/srv/origin.git/./refs/heads/x.lock",
                                 "/srv/checkout/.git/shallow.lock"]


def test_only_a_lock_inside_the_store_s_folders_is_its_own() -> None:
    """A server names its own lock in a push's error (``remote: ... Unable to create
    '/data/repos/x.git/refs/heads/s.lock'``): that one is the server's to wait for, and
    a command is never run again for it."""
    checkout = Path("/nonexistent/work/repo")
    folders = [checkout, checkout / ".git"]
    assert locks.owned(".git/shallow.lock", folders, checkout) == \
        checkout / ".git" / "shallow.lock"
    assert locks.owned("/data/repos/x.git/refs/heads/s.lock", folders, checkout) is None
    assert locks.owned(".git/config", folders, checkout) is None  # not a lock
    assert locks.owned("../other/.git/index.lock", folders, checkout) is None
