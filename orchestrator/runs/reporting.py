"""A track reports its phase by committing its own status file.

The change touches exactly one file, ``state/runs/<run>/tracks/<track>.json``, so
reporters of one run never conflict: a lost push race is resolved by re-reading and
re-applying the same small change (see :class:`~orchestrator.store.GitStateStore`).
:func:`apply` is the pure change; :func:`report` runs it through a store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from ..config.fieldtypes import check_id, check_run_id
from ..errors import NotFound, UserError
from ..state.codec import parse_with_spec, read_specs, record_bytes
from ..state.layout import run_path, track_path
from ..state.machine import move_track
from ..state.phases import TrackPhase
from ..state.records import Track
from ..store import Change, Snapshot, StateStore
from ..support import safejson

PHASES = {"running": TrackPhase.RUNNING, "complete": TrackPhase.COMPLETE,
          "failed": TrackPhase.FAILED}
MAX_RESULT_BYTES = 1 << 20
"""A result is committed to the state branch: keep it a summary, not a log."""


@dataclass(frozen=True)
class Report:
    """What a track says about itself."""

    run_id: str
    track: str
    phase: TrackPhase
    at: datetime
    result: dict[str, Any] | None = None
    message: str | None = None
    attempt: int | None = None
    """The attempt the reporter belongs to; ``None``: whatever the current one is."""


Verdict = Literal["recorded", "unchanged", "stale_attempt"]


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    track: Track
    """The track as it stands after the report (or as it was, if nothing changed)."""
    landed: bool = False


def load_result(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``, or a :class:`UserError` naming the file.

    Read as the tick reads a local track's result (:mod:`orchestrator.support.safejson`): a
    regular file only, without blocking, within the size and depth limits, and
    without lone surrogates, which could never be committed.
    """
    try:
        data = safejson.read_file(path, max_bytes=MAX_RESULT_BYTES)
    except FileNotFoundError:
        raise UserError(f"cannot read result file {path}: No such file or directory"
                        ) from None
    except safejson.UnsafeJSON as exc:
        raise UserError(f"result file {_shown(path)} is refused: {exc}") from None
    return parse_result(data, path)


def parse_result(data: bytes, path: Path) -> dict[str, Any]:
    """The JSON object in ``data``, read from ``path``, or a :class:`UserError` naming
    the file; a caller that read the bytes itself parses them here, once."""
    try:
        value = safejson.loads(data, max_bytes=MAX_RESULT_BYTES)
    except safejson.UnsafeJSON as exc:
        raise UserError(f"result file {_shown(path)} is refused: {exc}") from None
    if not isinstance(value, dict):
        raise UserError(f"result file {_shown(path)} must hold a JSON object, "
                        f"not {type(value).__name__}")
    return value


def check_message(message: str) -> str:
    """``message``, or a :class:`UserError` when it cannot be committed as UTF-8 (a lone
    surrogate, or bytes that were not UTF-8 on the command line)."""
    try:
        message.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserError(f"--message: not valid UTF-8 text (character {exc.start}: "
                        f"{message[exc.start:exc.end]!r})") from None
    return message


def _shown(path: Path) -> str:
    """``path`` printable on one line, whatever bytes its name holds."""
    return ascii(str(path))[1:-1]


def apply(files: Mapping[str, bytes], report: Report) -> tuple[Verdict, Track, Change | None]:
    """The change ``report`` makes to the state in ``files`` (pure).

    Raises :class:`NotFound` for an unknown run or track and
    :class:`~orchestrator.errors.IllegalTransition` for a move the track state machine
    forbids. A report for another attempt than the track's current one, or for the
    phase the track is already in, changes nothing.
    """
    path = track_path(report.run_id, report.track)
    if run_path(report.run_id) not in files:
        raise NotFound(f"unknown run {report.run_id!r}: it is not on the state branch")
    if path not in files:
        raise NotFound(f"run {report.run_id} has no track {report.track!r}")
    specs = read_specs(files, report.run_id)
    track = parse_with_spec(Track, path, files[path], specs)
    if report.attempt is not None and report.attempt != track.attempt:
        return "stale_attempt", track, None
    if track.phase is report.phase:
        return "unchanged", track, None
    moved = move_track(track, report.phase, report.at, "reported by the track",
                       **_changes(report, track))
    return "recorded", moved, {path: record_bytes(moved, specs)}


def _changes(report: Report, track: Track) -> dict[str, Any]:
    """The fields ``report`` sets on ``track``: its time, its result, and its message
    (a failure's in the error log, else a completion's summary)."""
    changes: dict[str, Any] = {}
    if report.phase is TrackPhase.RUNNING:
        changes["started_at"] = report.at
    else:
        changes["finished_at"] = report.at
    if report.result is not None:
        changes["result"] = report.result
    if report.message:
        if report.phase is TrackPhase.FAILED:
            changes["error_log"] = [*track.error_log, f"attempt {track.attempt}: "
                                    f"{report.message}"]
        elif report.phase is TrackPhase.COMPLETE and report.result is None:
            changes["result"] = {"summary": report.message}
    return changes


def report(store: StateStore, rep: Report) -> Outcome:
    """Commit ``rep`` through ``store`` (re-applied on the new tip after a lost race)."""
    check_run_id(rep.run_id)
    check_id(rep.track, "track name")
    seen: tuple[Verdict, Track] | None = None

    def change(snap: Snapshot) -> Change | None:
        nonlocal seen
        verdict, track, files = apply(snap.files, rep)
        seen = (verdict, track)
        return files

    attempt = f" attempt {rep.attempt}" if rep.attempt else ""
    result = store.transact(change, f"report {rep.run_id}/{rep.track}{attempt}: "
                                    f"{rep.phase.value}")
    assert seen is not None  # transact calls change at least once, or raises
    verdict, track = seen
    return Outcome(verdict, track, result.landed)
