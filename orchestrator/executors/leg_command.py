"""A leg's track command on a CI runner (``orchestrator outcome --command``), timed and
stopped at its limit by the orchestrator: a leg needs no GNU ``date`` or ``timeout``,
which macOS runners lack.

- The command runs as the local executor runs it, ``sh -c <run>``, in a process group
  of its own, with no stdin.
- At its limit the group gets SIGTERM, and SIGKILL :data:`KILL_GRACE_SECONDS` later;
  the code is then 124 or 137, as GNU ``timeout`` gives, which the outcome reads as a
  tap-out. A command killed by a signal gets ``128 + signal``, as a shell says.
- stdout and stderr stream to the leg's own (the job's log) and each into its file.
- A SIGTERM or SIGINT to the leg (the runner cancelling the job) goes on to the group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

from .drain_leg import KILL_GRACE_SECONDS

TIMED_OUT = 124
"""GNU ``timeout``'s code for a command it stopped with SIGTERM."""
KILLED = 128 + signal.SIGKILL
"""The code of a command that needed SIGKILL (``timeout --kill-after``: 137)."""
DRAIN_SECONDS = 5.0
"""How long the copying of output may go on after the command ended: a process it left
in the background may hold the pipes open."""


@dataclass(frozen=True)
class Ran:
    """The command's exit code (``None``: it never ran) and when it started and ended."""

    code: int | None
    started: datetime
    finished: datetime


def run(command: str, limit: timedelta | None, stdout: Path, stderr: Path, *,
        grace: float = KILL_GRACE_SECONDS) -> Ran:
    """Run ``command`` to its end or its ``limit``; its output copied to both places."""
    started = datetime.now(UTC)
    with stdout.open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen(["sh", "-c", command], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                process_group=0)
        assert proc.stdout is not None and proc.stderr is not None
        copies = [_copy(proc.stdout, out, sys.stdout.buffer),
                  _copy(proc.stderr, err, sys.stderr.buffer)]
        with _forwarding(proc):
            code = _wait(proc, limit, grace)
        for copy in copies:
            copy.join(DRAIN_SECONDS)
    return Ran(code, started, datetime.now(UTC))


def _wait(proc: subprocess.Popen[bytes], limit: timedelta | None, grace: float) -> int:
    try:
        return _code(proc.wait(limit.total_seconds() if limit is not None else None))
    except subprocess.TimeoutExpired:
        _signal(proc, signal.SIGTERM)
    try:
        proc.wait(grace)
        return TIMED_OUT
    except subprocess.TimeoutExpired:
        _signal(proc, signal.SIGKILL)
        proc.wait()
        return KILLED


def _code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


@contextlib.contextmanager
def _forwarding(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """The runner signals the step's process, this one: the command gets SIGTERM."""
    def forward(_signum: int, _frame: object) -> None:
        _signal(proc, signal.SIGTERM)

    before = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _copy(source: IO[bytes], file: IO[bytes], echo: IO[bytes]) -> threading.Thread:
    def pump() -> None:
        for chunk in iter(lambda: source.read1(65536), b""):  # type: ignore[attr-defined]
            with contextlib.suppress(OSError, ValueError):  # closed once the wait ended
                file.write(chunk)
                echo.write(chunk)
                echo.flush()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread
