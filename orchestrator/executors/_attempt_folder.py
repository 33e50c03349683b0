"""An attempt folder's files, states and primitives: what the supervisor and its observers share.

- Standard library only: the supervisor loads this module by path, under ``python -I``.
- ``status.json`` is written atomically (:func:`write_json_atomic`) and read as hostile
  input (:func:`read_json`): the track runs beside it and may replace it.
- ``supervisor.lock`` is held by the live supervisor; an observer that takes it
  (:func:`try_lock`) knows the supervisor is gone.
- Times are recorded on the dispatching tick's clock (:func:`set_clock_offset`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import signal
import stat
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

LAUNCH = "launch.json"
STATUS = "status.json"
RESULT = "result.json"
RESULTS = "results.json"
STDOUT = "stdout.log"
STDERR = "stderr.log"
CANCEL = "cancel"
LOCK = "supervisor.lock"
SUPERVISOR_LOG = "supervisor.log"
LAUNCHES = "launches.log"
SLOTS = "slots"
ITEMS = "items"
"""A drain worker's folder of payloads, ``items/<id>.json``."""
ITEM_RESULTS = "item-results"
"""Each item's ``ORCHESTRATOR_RESULT``, ``item-results/<id>.json``."""
ITEMS_LOG = "items.jsonl"
"""A drain worker's account: a line when an item starts and one when it ends."""
ENQUEUE = "enqueue.jsonl"
"""``ORCHESTRATOR_ENQUEUE``: items the track asks to enqueue, one JSON object a line."""
EX_TEMPFAIL = 75

POLL_SECONDS = 0.1
"""How often the supervisor looks at its track, the clock and the cancel marker."""

# States written to status.json. Only the supervisor writes the first three and
# `exited`/`timed_out`; `cancelled` and `lost` may also be written by an observer
# that holds the supervisor lock (i.e. after the supervisor died).
QUEUED = "queued"
RUNNING = "running"
EXITED = "exited"
TIMED_OUT = "timed_out"
CANCELLED = "cancelled"
ERROR = "error"
LOST = "lost"
FINAL_STATES = frozenset({EXITED, TIMED_OUT, CANCELLED, ERROR, LOST})


_clock_offset = timedelta(0)
"""The run's clock minus this machine's (``launch.json``'s ``clock_offset_seconds``)."""


def utc_now() -> str:
    """Now on the run's clock: a tick's ``--now`` plus the time since that tick began,
    so the times this supervisor records compare with the tick's own."""
    return (datetime.now(UTC) + _clock_offset).isoformat()


def set_clock_offset(seconds: object) -> None:
    """Record times on the dispatching tick's clock from here on; a value that is not
    a finite number of seconds (a hand-edited ``launch.json``) leaves the machine's."""
    global _clock_offset
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return
    if abs(seconds) < 1e10:  # about 300 years either way; False for NaN
        _clock_offset = timedelta(seconds=seconds)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder and ``os.replace``,
    so a reader sees the old or the new content, never half of it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


MAX_STATUS_BYTES = 1024 * 1024


def read_json(path: Path) -> Any:
    """The parsed content of ``path``, or ``None`` when it does not exist."""
    # The track runs beside these files and may replace them: a regular file only,
    # opened without blocking (a FIFO), read within a bound (/dev/zero).
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path.name} is not a regular file")
        data = os.read(fd, MAX_STATUS_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_STATUS_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_STATUS_BYTES} bytes")
    return json.loads(data)


def append_line(path: Path, data: dict[str, Any]) -> None:
    """Append one JSON line with a single ``write`` on an ``O_APPEND`` descriptor, so
    lines from concurrent writers never interleave."""
    line = (json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def kill_group(pgid: int | None, sig: signal.Signals) -> None:
    """Signal a whole process group; a group that is already gone is fine."""
    if not pgid or pgid <= 1:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


GONE_WAIT_SECONDS = 5.0
"""How long an observer that killed an orphaned group waits for it to die."""


def kill_group_and_wait(pgid: int | None, timeout: float = GONE_WAIT_SECONDS) -> bool:
    """SIGKILL a whole group and wait until none of it is left; ``False`` if some of it
    still exists after ``timeout`` seconds (unreaped zombies where nothing reaps them).

    A signal is delivered asynchronously: ``killpg`` returns before its targets die,
    and on a loaded machine a killed process may run on for a while. Whoever reports
    an orphaned group killed waits for it, so a retry never runs beside it."""
    if not pgid or pgid <= 1:
        return True
    kill_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return True  # not ours (any more): nothing of this attempt is left
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def try_lock(path: Path, shared: bool = False) -> int | None:
    """Open ``path`` and take a non-blocking ``flock``; the descriptor, or ``None`` when
    someone else holds it. Closing the descriptor releases the lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    return fd
