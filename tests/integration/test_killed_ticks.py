"""Ticks killed with SIGKILL, with their whole process group, while git works: the
checkout and the remote recover by themselves.

Real ticks (``python -m orchestrator``) in their own sessions and a real bare origin in
a temporary folder. Between ticks another writer moves the state branch by a commit of
its own (as a tick elsewhere would, at the cost of a git command), so the next tick in
the checkout has to fetch.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.executors.local import LocalExecutor
from orchestrator.support.checkpoints import POINTS
from tests.builders import spec_data
from tests.drive import STATE_BRANCH, cli_tick, launches, read_state
from tests.gitrepo import clone, git, make_origin

EVERY = spec_data("* * * * *", run="true", overlap="allow")
LOCK_LINE = "removed the stale lock"
GIT_POINTS = ("fetch", "push")
"""The points where the kill comes while a git process runs (:mod:`tests.crashpoint`)."""


def at(minute: int) -> str:
    return f"2026-12-01T{7 + minute // 60:02d}:{minute % 60:02d}:30Z"


def leftovers(work: Path) -> dict[str, str]:
    """The environment of a tick that is killed: its temporary files (a commit's index)
    go to a folder beside ``work``, where a kill may leave them, not the session's."""
    folder = work.parent / "tmp"
    folder.mkdir(exist_ok=True)
    return {"TMPDIR": str(folder)}


def start(repo: Path, minute: int, work: Path) -> subprocess.Popen[str]:
    """A tick of ``repo`` at ``minute``, in its own session (so it can be killed with
    every process it started, and nothing else)."""
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "--repo", str(repo), "tick", "--now",
         at(minute)], env={**os.environ, "ORCHESTRATOR_WORK_DIR": str(work),
                           **leftovers(work)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the tick's whole process group (its git children too), and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)


def checkout(tmp_path: Path) -> tuple[Path, Path]:
    """(the origin, the checkout whose ticks are killed)."""
    origin = make_origin(tmp_path, {"every": EVERY})
    return origin, clone(origin, tmp_path / "repo")


def clear_server_locks(origin: Path) -> None:
    """Remove the ref locks a killed push left in ``origin``, for the other writer:
    a tick killed while it pushes can take its local ``receive-pack`` with it, holding
    the branch's lock. The ticks clear such a lock themselves (the test above); the
    other writer is plain ``git update-ref``, which stops at it."""
    for lock in (origin / "refs").rglob("*.lock"):
        lock.unlink(missing_ok=True)


def another_writer(origin: Path) -> None:
    """Move the state branch on ``origin`` by one commit, as another machine's tick
    would: the checkout's next tick has a new tip to fetch."""
    clear_server_locks(origin)
    tip = git("rev-parse", f"refs/heads/{STATE_BRANCH}", cwd=origin)
    commit = git("commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", "elsewhere", cwd=origin)
    git("update-ref", f"refs/heads/{STATE_BRANCH}", commit, tip, cwd=origin)


@pytest.mark.slow
def test_ticks_killed_during_their_fetch_leave_locks_the_next_tick_clears(
        tmp_path: Path) -> None:
    origin, repo = checkout(tmp_path)
    work = tmp_path / "work"
    lock = repo / ".git" / "shallow.lock"
    assert cli_tick(repo, at(0), work=work).returncode == 0
    left = 0
    for i in range(1, 4):
        another_writer(origin)  # the victim must fetch
        victim = start(repo, 2 * i, work)
        while victim.poll() is None and not lock.exists():
            pass  # the fetch holds shallow.lock: kill it then
        kill(victim)
        stuck = lock.exists()
        left += stuck
        # The kill may come after the fetch took the new tip and before it dropped its
        # lock: the next tick must fetch too, or it would never meet the lock.
        another_writer(origin)
        after = cli_tick(repo, at(2 * i), work=work)
        assert after.returncode == 0, after.stderr
        assert f"every--20261201T07{2 * i:02d}Z" in after.stdout  # fires what is due
        assert (f"{LOCK_LINE} {lock}" in after.stderr) == stuck, after.stderr
        assert not lock.exists()
    assert left >= 1, "no kill landed while the fetch held its lock"


@contextlib.contextmanager
def held_lock(tmp_path: Path) -> Iterator[tuple[Path, Path, subprocess.Popen[bytes], Path]]:
    """A checkout one tick behind its origin, and its shallow.lock taken while a git
    process works in it (started before the lock, so it may hold it): (checkout, work
    folder, that process, the lock). The process ends with the block, if not before."""
    origin, repo = checkout(tmp_path)
    work = tmp_path / "work"
    assert cli_tick(repo, at(0), work=work).returncode == 0
    another_writer(origin)
    holder = subprocess.Popen(["git", "-C", str(repo), "cat-file", "--batch"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        time.sleep(1.5)  # its start, rounded to the clock's ticks, is before the lock
        lock = repo / ".git" / "shallow.lock"
        lock.write_text("held\n")
        yield repo, work, holder, lock
    finally:
        if holder.poll() is None:
            holder.communicate(input=b"", timeout=30)


@pytest.mark.slow
def test_a_lock_a_live_git_process_may_hold_is_left_alone(tmp_path: Path) -> None:
    with held_lock(tmp_path) as (repo, work, _, lock):
        refused = cli_tick(repo, at(2), work=work)
        assert refused.returncode == 3
        assert "shallow.lock': File exists" in refused.stderr
        assert lock.exists() and LOCK_LINE not in refused.stderr
    served = cli_tick(repo, at(2), work=work)
    assert served.returncode == 0, served.stderr
    assert f"{LOCK_LINE} {lock}" in served.stderr
    assert served.stderr.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("release", ["holder ends", "holder releases it"])
def test_a_lock_a_live_git_process_holds_is_waited_for(tmp_path: Path, release: str) -> None:
    """A fetch of the same checkout still running (a tick killed without its git child,
    a second process) holds shallow.lock for a moment: the tick waits for it instead of
    failing. Once the holder ends, the lock it left is stale and cleared; one it
    releases is simply gone."""
    with held_lock(tmp_path) as (repo, work, holder, lock):

        def let_go() -> None:
            time.sleep(0.5)
            if release == "holder ends":
                holder.communicate(input=b"", timeout=30)
            else:
                lock.unlink()

        releaser = threading.Thread(target=let_go)
        releaser.start()
        try:
            served = cli_tick(repo, at(2), work=work)
        finally:
            releaser.join(30)
    assert served.returncode == 0, served.stderr
    assert (f"{LOCK_LINE} {lock}" in served.stderr) == (release == "holder ends")
    assert not lock.exists()


def test_a_ref_lock_a_killed_push_left_in_the_remote_folder_is_cleared(
        tmp_path: Path) -> None:
    origin, repo = checkout(tmp_path)
    work = tmp_path / "work"
    assert cli_tick(repo, at(0), work=work).returncode == 0
    lock = origin / "refs" / "heads" / f"{STATE_BRANCH}.lock"
    lock.write_text("0" * 40 + "\n")  # as receive-pack leaves it when killed mid-update
    proc = cli_tick(repo, at(1), work=work)
    assert proc.returncode == 0, proc.stderr
    assert "every--20261201T0701Z: fired" in proc.stdout
    assert f"{LOCK_LINE} {lock}" in proc.stderr and not lock.exists()


@pytest.mark.slow
def test_ticks_killed_at_every_checkpoint_and_at_random_moments_then_ordinary_ticks_succeed(
        tmp_path: Path) -> None:
    """The acceptance loop: ticks of one checkout SIGKILLed (another writer moves the
    branch before each, so each fetches), then 3 ordinary ticks: each succeeds and
    fires its slot. Each point of no return (:data:`POINTS`: before and after the mark,
    after dispatching, notifying and recording, while git fetches, while it pushes) is
    killed once, in a shuffled order, and the git ones once more, a random moment into
    git's work; then 8 ticks are killed at random moments of their life. A moment is
    counted in the processes the tick has started (``process-K``, :mod:`tests.crashpoint`),
    not in seconds, so every kill lands while the tick works, however fast the machine."""
    origin, repo = checkout(tmp_path)
    work = tmp_path / "work"
    assert cli_tick(repo, at(0), work=work).returncode == 0
    rng = random.Random(25)
    points = [*POINTS, *GIT_POINTS]
    rng.shuffle(points)
    minute = 0
    for point in points:
        minute += 1
        another_writer(origin)
        # the second kill at fetch and push comes at a random moment of git's work
        again = points.index(point) < minute - 1
        env = {"CRASH_DELAY": f"{rng.uniform(0.0, 0.05):.3f}"} if again else {}
        proc = cli_tick(repo, at(minute), work=work, crash_at=point,
                        env={**env, **leftovers(work)})
        assert proc.returncode == -9, (point, proc.stderr)  # it reached the point, and died
    for band in range(8):
        minute += 1
        another_writer(origin)
        # such a tick starts about 50 processes (git's, and its run's supervisor): one
        # kill in each five of the first 40, so they spread from the read to the record
        moment = f"process-{5 * band + rng.randint(1, 5)}"
        env = {"CRASH_DELAY": f"{rng.uniform(0.0, 0.05):.3f}", **leftovers(work)}
        proc = cli_tick(repo, at(minute), work=work, crash_at=moment, env=env)
        assert proc.returncode == -9, (moment, proc.stderr)  # it got there, and died
    assert minute < 51
    # A tick killed between writing an attempt's launch.json and starting its
    # supervisor leaves it to be adopted once it is adopt_after_seconds old, on the
    # machine's clock: give the ordinary ticks below an attempt that old to adopt.
    time.sleep(LocalExecutor.adopt_after_seconds)
    for minute in (51, 52, 53):
        proc = cli_tick(repo, at(minute), work=work)
        assert proc.returncode == 0, proc.stderr
        assert f"every--20261201T07{minute}Z: fired" in proc.stdout
    state, _ = read_state(repo)  # the index of open runs agrees with the records
    assert {f"every--20261201T07{m}Z" for m in (51, 52, 53)} <= set(state.runs)
    # nothing ran twice, and every run on the branch was launched: none was lost
    keys = launches(work)
    assert len(keys) == len(set(keys)), keys
    assert {key.rsplit("--", 2)[0] for key in keys} == set(state.runs), (keys, state.runs)
