"""A new user at a shell: the installed ``orchestrator`` console script, run as a
subprocess in the user's checkout, plus the git commands such a user types.

Every test in this folder drives the CLI through :meth:`User.run` or
:meth:`User.start` with the command words first (``user.run("dlq", "list")``):
``test_command_coverage.py`` reads those calls to check every command is exercised.
A process :meth:`User.start` started runs inside :func:`reaped`, and :func:`terminate`
stops it as a service manager does.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests import inprocess
from tests.gitrepo import bare_origin, git

STATE_BRANCH = "orchestrator-state"


def orchestrator() -> str:
    """The console script installed beside this interpreter (``pip install -e .``)."""
    beside = Path(sys.executable).with_name("orchestrator")
    found = str(beside) if beside.exists() else shutil.which("orchestrator")
    assert found, "the orchestrator console script is not installed (pip install -e .)"
    return found


class User:
    """Runs ``orchestrator`` in ``cwd`` (the checkout), as someone at a terminal would.

    ``process``: each command in a process of its own, the console script installed
    beside this interpreter. Otherwise the console script's entry point runs in this
    process, with the environment, folder and streams a process would have
    (:mod:`tests.inprocess`): the same code from the entry point down, without an
    interpreter's start for each command. ``start`` always starts a process."""

    def __init__(self, cwd: Path, *, process: bool = False) -> None:
        self.cwd = cwd
        self.process = process

    def run(self, *args: str, expect: int | None = 0, cwd: Path | None = None,
            timeout: float = 180, env: dict[str, str] | None = None,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        """``env`` is added to this process's environment; ``input`` is typed on stdin;
        ``timeout`` bounds the command (in this process: :func:`tests.inprocess.run`)."""
        environ = {**os.environ, **(env or {})}
        if self.process:
            proc = subprocess.run([orchestrator(), *args], cwd=cwd or self.cwd,
                                  capture_output=True, text=True, timeout=timeout,
                                  check=False, env=environ, input=input)
        else:
            proc = inprocess.run(args, env=environ, cwd=cwd or self.cwd, input=input,
                                 timeout=timeout)
        if expect is not None and proc.returncode != expect:
            raise AssertionError(f"orchestrator {' '.join(args)}: exit {proc.returncode}, "
                                 f"expected {expect}\nstdout:\n{proc.stdout}\n"
                                 f"stderr:\n{proc.stderr}")
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args).stdout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([orchestrator(), *args], cwd=self.cwd, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    # ---------------------------------------------------------------- conveniences

    def tick(self, now: str) -> dict[str, Any]:
        """One tick at ``now`` (local executor); waits until the tracks it started exit,
        as a user would before the next tick, by the work folder's ``status.json``."""
        result: dict[str, Any] = self.json("tick", "--now", now, "--json")
        work = self.cwd / ".orchestrator" / "work"
        wait(lambda: all(_exited(work / key) for key in result["dispatched"]),
             f"tracks {result['dispatched']} did not finish")
        return result

    def state_file(self, path: str) -> str:
        """A file of the state branch, read as a user would: fetch, then ``git show``."""
        git("fetch", "--quiet", "origin", STATE_BRANCH, cwd=self.cwd)
        return git("show", f"FETCH_HEAD:{path}", cwd=self.cwd)


def _exited(folder: Path) -> bool:
    try:
        status = json.loads((folder / "status.json").read_text())
    except (FileNotFoundError, ValueError):
        return False
    return status.get("state") not in ("queued", "running")


@contextlib.contextmanager
def reaped(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc`` for the block; killed and waited for if the block leaves it running
    (an assert that failed), so no test leaves a process behind."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def terminate(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """Stop ``proc`` as a service manager does (SIGTERM), and its stderr once it ended;
    one still running ``timeout`` seconds later is killed, and its stderr shown."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        err = proc.communicate()[1]
        raise AssertionError(f"still running {timeout:g} s after SIGTERM; it said:\n{err}"
                             ) from None


def wait(predicate: Callable[[], bool], message: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(message)


def new_repository(tmp: Path) -> tuple[User, Path]:
    """``orchestrator init`` into a new folder, a bare ``origin``, first commit pushed."""
    origin = bare_origin(tmp)
    user = User(tmp / "repo")
    out = user.run("init", str(tmp / "repo"), cwd=tmp).stdout
    assert "created schedules/nightly.json" in out
    git("remote", "add", "origin", str(origin), cwd=user.cwd)
    git("add", ".", cwd=user.cwd)
    git("commit", "--quiet", "-m", "Scaffold from orchestrator init", cwd=user.cwd)
    git("push", "--quiet", "origin", "HEAD:main", cwd=user.cwd)
    return user, origin
