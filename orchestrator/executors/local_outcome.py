"""What a local attempt's folder says once its command ran: ``status.json`` as an
observation, with the tail of stderr and the result file read as hostile input (the
track may leave a FIFO, a symlink to ``/dev/zero`` or 100,000 brackets there)."""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path
from typing import Any

from ..state.records import TrackPhase
from ..support import safejson
from ..support.times import parse_utc
from . import _supervise as supervisor
from .base import Observation

EX_TEMPFAIL = 75
"""Exit code of a poll that answers "not yet" (``sysexits.h``): the track waits."""

MAX_RESULT_BYTES = 64 * 1024
"""Largest ``result.json`` taken into the state (it ends up in a git commit)."""

STDERR_TAIL_LINES = 20


def stderr_tail(path: Path, lines: int = STDERR_TAIL_LINES, max_bytes: int = 16 * 1024) -> str:
    # The track can replace its stderr file with a FIFO or a symlink: read only a
    # regular file, without blocking.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        os.lseek(fd, max(0, info.st_size - max_bytes), os.SEEK_SET)
        data = os.read(fd, max_bytes)
    except OSError:
        return ""
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def to_observation(key: str, folder: Path, url: str, status: dict[str, Any]
                   ) -> Observation:
    """What an attempt's ``status.json`` (and its stderr and result) say."""
    state = status.get("state")
    details = {
        "state": state,
        "pid": status.get("pid"),
        "exit_code": status.get("exit_code"),
        "signal": status.get("signal"),
        "stdout": str(folder / supervisor.STDOUT),
        "stderr": str(folder / supervisor.STDERR),
    }
    common: dict[str, Any] = {
        "key": key,
        "url": url,
        "started_at": parse_utc(status.get("started_at")),
        "details": details,
    }
    if state == supervisor.QUEUED:
        return Observation(phase=None, **common)
    if state == supervisor.RUNNING:
        return Observation(phase=TrackPhase.RUNNING, **common)
    common["finished_at"] = parse_utc(status.get("finished_at"))
    result, result_error = read_result(folder)
    if state == supervisor.EXITED and status.get("exit_code") == 0:
        return Observation(phase=TrackPhase.COMPLETE, result=result, error=result_error,
                           **common)
    if state == supervisor.EXITED and status.get("exit_code") == EX_TEMPFAIL:
        return Observation(phase=TrackPhase.WAITING, result=result, **common)
    if state == supervisor.CANCELLED:
        return Observation(phase=TrackPhase.CANCELLED, result=result,
                           error=status.get("error") or "cancelled", **common)
    if state == supervisor.TIMED_OUT:
        phase = TrackPhase.TAPPED_OUT
        error = str(status.get("error") or "timed out")
    elif state == supervisor.EXITED:
        phase = TrackPhase.FAILED
        code, sig = status.get("exit_code"), status.get("signal")
        error = f"exit code {code}" if code is not None else (
            f"killed by {signal_name(int(sig))}" if sig is not None else "exited")
    else:  # error, lost, or something this version does not know
        phase = TrackPhase.FAILED
        error = str(status.get("error") or f"unknown state {state!r}")
    tail = stderr_tail(folder / supervisor.STDERR)
    if tail:
        error = f"{error}; stderr ends with:\n{tail}"
    return Observation(phase=phase, result=result, error=error, **common)


def read_result(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The attempt's result, or ``{"error": why}`` and why: the track may have left a
    FIFO, a symlink to ``/dev/zero`` or 100,000 brackets (see :mod:`..safejson`)."""
    try:
        data = safejson.load_file(folder / supervisor.RESULT, max_bytes=MAX_RESULT_BYTES)
    except FileNotFoundError:
        return None, None
    except safejson.UnsafeJSON as exc:
        why = f"result.json ignored: {exc}"
        return {"error": why}, why
    if not isinstance(data, dict):
        why = f"result.json ignored: a JSON object is expected, not {type(data).__name__}"
        return {"error": why}, why
    return data, None
