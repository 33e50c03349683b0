"""What a local attempt's folder says once its command ran: ``status.json`` as an
observation, with the tail of stderr and the result file read as hostile input (the
track may leave a FIFO, a symlink to ``/dev/zero`` or 100,000 brackets there). A tail
is cleaned and redacted (with this process's credentials) before it is cut."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..state.items import (
    MAX_ITEM_RESULT_BYTES,
    MAX_TRACK_FILE_BYTES,
    BadEnqueue,
    ItemReport,
    NewItem,
    parse_lines,
    report_from,
)
from ..state.phases import TrackPhase
from ..support import safejson
from ..support.credentials import redactor
from ..support.safejson import tail_bytes
from ..support.text import last_lines
from ..support.times import parse_utc
from . import _attempt_folder as files
from .base import Observation

EX_TEMPFAIL = 75
"""Exit code of a poll that answers "not yet" (``sysexits.h``): the track waits."""

MAX_RESULT_BYTES = 64 * 1024
"""Largest ``result.json`` taken into the state (it ends up in a git commit)."""

STDERR_TAIL_LINES = 20


def stderr_tail(path: Path, lines: int = STDERR_TAIL_LINES, max_bytes: int = 16 * 1024) -> str:
    """The last ``lines`` lines of ``path``, cleaned and redacted before they are cut."""
    return _tail(tail_bytes(path, max_bytes), lines, max_bytes)


def _tail(data: bytes, lines: int, max_bytes: int) -> str:
    return last_lines(data, lines, max_bytes, redactor(os.environ), whole=len(data) < max_bytes)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def to_observation(key: str, folder: Path, url: str, status: dict[str, Any]
                   ) -> Observation:
    """What an attempt's ``status.json`` (and its stderr and result) say; for a drain
    worker, its account of each item; for any track that completed, what it asked to
    enqueue."""
    seen = _observation(key, folder, url, status)
    if seen.phase is None or seen.phase is TrackPhase.RUNNING:
        return seen
    changes: dict[str, Any] = {}
    if (folder / files.ITEMS).is_dir():
        changes["items"] = read_reports(folder)
    if seen.phase is TrackPhase.COMPLETE:
        changes["enqueue"], changes["enqueue_error"] = read_enqueue(folder)
    return dataclasses.replace(seen, **changes) if changes else seen


def _observation(key: str, folder: Path, url: str, status: dict[str, Any]) -> Observation:
    state = status.get("state")
    common = _common(key, folder, url, status)
    if state in (files.QUEUED, files.RUNNING):
        return Observation(phase=TrackPhase.RUNNING if state == files.RUNNING else None,
                           **common)
    common["finished_at"] = parse_utc(status.get("finished_at"))
    result, result_error = read_result(folder)
    if state == files.EXITED and status.get("exit_code") == 0:
        return Observation(phase=TrackPhase.COMPLETE, result=result, error=result_error,
                           **common)
    if state == files.EXITED and status.get("exit_code") == EX_TEMPFAIL:
        return Observation(phase=TrackPhase.WAITING, result=result, **common)
    if state == files.CANCELLED:
        return Observation(phase=TrackPhase.CANCELLED, result=result,
                           error=status.get("error") or "cancelled", **common)
    phase, error = _failure(state, status)
    tail = stderr_tail(folder / files.STDERR)
    if tail:
        error = f"{error}; stderr ends with:\n{tail}"
    return Observation(phase=phase, result=result, error=error, **common)


def _common(key: str, folder: Path, url: str, status: dict[str, Any]) -> dict[str, Any]:
    """What every observation of the attempt says, finished or not."""
    details = {
        "state": status.get("state"),
        "pid": status.get("pid"),
        "exit_code": status.get("exit_code"),
        "signal": status.get("signal"),
        "stdout": str(folder / files.STDOUT),
        "stderr": str(folder / files.STDERR),
    }
    return {"key": key, "url": url, "started_at": parse_utc(status.get("started_at")),
            "details": details}


def _failure(state: Any, status: dict[str, Any]) -> tuple[TrackPhase, str]:
    """The phase and error of an attempt that ended neither well nor cancelled."""
    if state == files.TIMED_OUT:
        return TrackPhase.TAPPED_OUT, str(status.get("error") or "timed out")
    if state == files.EXITED:
        code, sig = status.get("exit_code"), status.get("signal")
        return TrackPhase.FAILED, (f"exit code {code}" if code is not None else (
            f"killed by {signal_name(int(sig))}" if sig is not None else "exited"))
    # error, lost, or something this version does not know
    return TrackPhase.FAILED, str(status.get("error") or f"unknown state {state!r}")


def read_result(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The attempt's result, or ``{"error": why}`` and why: the track may have left a
    FIFO, a symlink to ``/dev/zero`` or 100,000 brackets (see :mod:`..safejson`)."""
    try:
        data = safejson.load_file(folder / files.RESULT, max_bytes=MAX_RESULT_BYTES)
    except FileNotFoundError:
        return None, None
    except safejson.UnsafeJSON as exc:
        why = f"result.json ignored: {exc}"
        return {"error": why}, why
    if not isinstance(data, dict):
        why = f"result.json ignored: a JSON object is expected, not {type(data).__name__}"
        return {"error": why}, why
    return data, None


ITEM_STDERR_LINES = 5
MAX_ITEMS_LOG_BYTES = 8 * 1024 * 1024


def read_reports(folder: Path) -> tuple[ItemReport, ...]:
    """A drain worker's account of its items (``items.jsonl``), the last word on each:
    its outcome, times, exit code, the tail of what it wrote to stderr, its result. A
    line that cannot be read is left out (its item is then released)."""
    try:
        data = safejson.read_file(folder / files.ITEMS_LOG,
                                  max_bytes=MAX_ITEMS_LOG_BYTES)
    except FileNotFoundError:
        return ()
    except safejson.UnsafeJSON:
        return ()
    latest: dict[str, dict[str, Any]] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            entry = safejson.loads(line)
        except safejson.UnsafeJSON:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            latest[entry["id"]] = entry
    reports = []
    for item_id, entry in latest.items():
        try:
            reports.append(_report(folder, item_id, entry))
        except (ValidationError, ValueError, TypeError):
            continue
    return tuple(reports)


def _report(folder: Path, item_id: str, entry: dict[str, Any]) -> ItemReport:
    outcome = entry.get("outcome")
    error = entry.get("error")
    if outcome == "failed" and not error:
        code, sig = entry.get("exit_code"), entry.get("signal")
        error = (f"exit code {code}" if code is not None else
                 f"killed by {signal_name(int(sig))}" if sig is not None else "failed")
    if outcome in ("failed", "started"):
        tail = _slice_tail(folder / files.STDERR, entry.get("stderr_from"),
                           entry.get("stderr_to"))
        if tail:
            error = f"{error or 'stopped'}; stderr ends with:\n{tail}"
    result = None
    if outcome == "done":
        result = read_item_result(folder / files.ITEM_RESULTS / f"{item_id}.json")
    return report_from({"id": item_id, "outcome": outcome, "attempt": entry.get("attempt"),
                        "started_at": entry.get("started_at"),
                        "finished_at": entry.get("finished_at"),
                        "exit_code": entry.get("exit_code"),
                        "error": _error(error),
                        "result": result})


ITEM_ERROR_CHARS = 2000


def _error(error: Any) -> str | None:
    """A worker's error on an item, redacted and then cut to its end."""
    return redactor(os.environ)(error)[-ITEM_ERROR_CHARS:] if isinstance(error, str) else None


def read_item_result(path: Path) -> dict[str, Any] | None:
    """One item's result file, read as hostile input (a FIFO, a symlink, 1 GB of
    zeros): ``{"error": why}`` when it breaks a rule, so the item still counts."""
    try:
        data = safejson.load_file(path, max_bytes=MAX_ITEM_RESULT_BYTES)
    except FileNotFoundError:
        return None
    except safejson.UnsafeJSON as exc:
        return {"error": f"result ignored: {exc}"}
    if not isinstance(data, dict):
        return {"error": f"result ignored: a JSON object is expected, not "
                         f"{type(data).__name__}"}
    return data


def _slice_tail(path: Path, start: Any, end: Any) -> str:
    """The last lines the command wrote to stderr between two offsets."""
    if not isinstance(start, int):
        return ""
    data = tail_bytes(path, 16 * 1024, start, end if isinstance(end, int) else None)
    return _tail(data, ITEM_STDERR_LINES, 16 * 1024)


def read_enqueue(folder: Path, name: str = files.ENQUEUE
                 ) -> tuple[tuple[NewItem, ...], str | None]:
    """The items a track asked to enqueue (``ORCHESTRATOR_ENQUEUE``), or none and why:
    the file is read as hostile input, and one bad line refuses the whole file."""
    try:
        data = safejson.read_file(folder / name, max_bytes=MAX_TRACK_FILE_BYTES)
    except FileNotFoundError:
        return (), None
    except safejson.UnsafeJSON as exc:
        return (), f"{name} ignored: {exc}"
    try:
        return tuple(parse_lines(data, queue_required=True)), None
    except BadEnqueue as exc:
        return (), f"{name} refused, nothing of it enqueued: {exc}"
