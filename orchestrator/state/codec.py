"""State records as bytes and back.

- JSON is written with sorted keys, two-space indent and a trailing newline, so the
  history of the state branch stays small and readable.
- Every record is read through :mod:`orchestrator.support.safejson` first: a hostile
  file is a :class:`CorruptState` naming it, never an exception from a parser.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import EXIT_USER, InvalidId, OrchestratorError
from ..support import safejson
from ..support.text import error_location
from ..support.times import parse_utc
from .layout import (
    TICKS,
    specs_path,
)

if TYPE_CHECKING:
    from .records import DeadLetter, Track

TICKS_KEEP = 500
"""Lines kept in ``ticks.jsonl``; older ones are dropped when a tick appends."""
POLLS_MAX_BYTES = 256 * 1024
"""Most of a run's ``polls.jsonl`` kept (about 2,000 lines): a run polled for weeks, or
a log blown up by hand, must not make every tick and brief read megabytes."""


MAX_RECORD_BYTES = 4 * 1024 * 1024
"""A state record larger than this is quarantined rather than parsed."""

SAFE_YEARS = (1900, 9000)
"""Years a timestamp in a record may name (see :func:`parse_record`)."""


class CorruptState(OrchestratorError):
    """A state file could not be parsed."""

    # A record someone broke, not a bug: one line naming it, like any bad input.
    exit_code = EXIT_USER


def to_json(model: BaseModel | Mapping[str, Any]) -> bytes:
    """Stable JSON: sorted keys, 2-space indent, trailing newline."""
    data = model.model_dump(mode="json", by_alias=True) if isinstance(model, BaseModel) else model
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def json_line(data: Mapping[str, Any]) -> bytes:
    return (json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            + "\n").encode()


def cut_lines(data: bytes, limit: int) -> bytes:
    """The newest whole lines of the JSON-lines log ``data`` within about ``limit`` bytes,
    after a first line saying how many older lines were cut."""
    if len(data) <= limit:
        return data
    start = data.find(b"\n", len(data) - limit) + 1 or len(data)
    cut = data.count(b"\n", 0, start)
    note = json_line({"at": "", "changes": [f"{cut} older lines cut (log kept under "
                                            f"{limit // 1024} KiB)"]})
    return note + data[start:]


RecordT = TypeVar("RecordT", bound=BaseModel)


def parse_record(model: type[RecordT], path: str, data: bytes) -> RecordT:
    """The record of type ``model`` in the file ``path``, or :class:`CorruptState` naming
    the file and the first field at fault (invalid JSON is reported at the root).

    The bytes pass :func:`orchestrator.support.safejson.loads` first, so a record nested
    100,000 deep, an integer of 5,000 digits or a lone surrogate is a
    :class:`CorruptState` like any other, never a ``RecursionError`` or a
    ``ValueError`` from the depths of a parser.
    """
    try:
        safejson.loads(data, max_bytes=MAX_RECORD_BYTES)
    except safejson.UnsafeJSON as exc:
        raise CorruptState(f"{path}: (root): {exc}") from None
    return _validate(model, path, data)


def first_error(path: str, exc: ValidationError) -> str:
    """One line naming ``path``, the field at fault and what is wrong with it."""
    first = exc.errors()[0]
    return f"{path}: {error_location(first['loc'])}: {first['msg']}"


def _validate(model: type[RecordT], path: str, data: bytes) -> RecordT:
    """``data`` (already through :func:`orchestrator.support.safejson.loads`) as a ``model``."""
    try:
        record = model.model_validate_json(data)
    except ValidationError as exc:
        raise CorruptState(first_error(path, exc)) from exc
    for name in type(record).model_fields:
        value = getattr(record, name)
        # Instants far from datetime's edges keep every deadline and window sum total.
        if isinstance(value, datetime) and not SAFE_YEARS[0] <= value.year <= SAFE_YEARS[1]:
            raise CorruptState(f"{path}: {name}: {value.isoformat()} is out of range "
                               f"(years {SAFE_YEARS[0]}-{SAFE_YEARS[1]})")
    return record


def record_bytes(record: Track | DeadLetter, specs: Mapping[str, Any]) -> bytes:
    """A track record or dead letter, without the track's spec when ``specs`` (the run's
    ``specs.json``) holds the same one: a 64 KiB command is then stored once per run,
    not once per track record and dead letter."""
    from .records import Track  # loaded by now: ``record`` is one of its models

    data = record.model_dump(mode="json", by_alias=True)
    field, name = ("spec", record.name) if isinstance(record, Track) else ("payload",
                                                                           record.track)
    if name in specs and specs[name] == data[field]:
        del data[field]
    return to_json(data)


def read_specs(files: Mapping[str, bytes], run_id: str) -> dict[str, Any]:
    """The run's ``specs.json`` (track name -> spec as JSON); empty when there is none or
    it is unreadable (records that need it are then quarantined)."""
    try:
        data = safejson.loads(files[specs_path(run_id)], max_bytes=MAX_RECORD_BYTES)
    except (KeyError, ValueError, InvalidId):
        return {}
    return data if isinstance(data, dict) else {}


def parse_with_spec(model: type[RecordT], path: str, data: bytes,
                    specs: Mapping[str, Any]) -> RecordT:
    """:func:`parse_record` of a track record or dead letter, taking its spec from the
    run's ``specs`` when the record leaves it out (records written before specs.json
    carry their own)."""
    from .records import Track

    field, key = ("spec", "name") if model is Track else ("payload", "track")
    try:
        raw = safejson.loads(data, max_bytes=MAX_RECORD_BYTES)
    except safejson.UnsafeJSON as exc:
        raise CorruptState(f"{path}: (root): {exc}") from None
    if isinstance(raw, dict) and field not in raw:
        spec = specs.get(str(raw.get(key)))
        if spec is None:
            raise CorruptState(f"{path}: {field}: not in the record nor in the run's "
                               "specs.json")
        data = json.dumps({**raw, field: spec}).encode()
    return _validate(model, path, data)


CLOCK_MACHINE = "machine"
"""A heartbeat line's ``clock`` when the tick ran on the machine's clock."""
CLOCK_GIVEN = "given"
"""A heartbeat line's ``clock`` when the tick was told its now (``tick --now``)."""


def real_clock_ticks(files: Mapping[str, bytes]) -> bool:
    """Whether a line of ``state/ticks.jsonl`` says a tick ran on the machine's clock:
    real ticks use this branch, so a tick far in the future would freeze them."""
    data = files.get(TICKS)
    if not data:
        return False
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            entry = safejson.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("clock") == CLOCK_MACHINE:
            return True
    return False


GIVEN_AHEAD = timedelta(minutes=5)
"""A ``tick --now`` line this far ahead of the clock it ran on is a simulated future:
the heartbeat shows it, so ``status`` can say the branch is ahead."""


def heartbeat_at(files: Mapping[str, bytes]) -> datetime | None:
    """When a tick last ran, for whoever asks whether ticks still run (``status``, the
    watchdog, the dashboard): the newest line on the machine's clock. A ``tick --now``
    line moves it only ahead (a simulated future) or on a branch with no real tick,
    and then by when it ran (``ran_at``), never by the instant it simulated."""
    fallback = None
    for entry, moment in _tick_lines(files):
        if entry.get("clock") != CLOCK_GIVEN:
            return moment
        ran = parse_utc(entry.get("ran_at")) or moment
        if moment - ran > GIVEN_AHEAD:
            return moment
        fallback = fallback or ran
    return fallback


def _tick_lines(files: Mapping[str, bytes]) -> Iterator[tuple[dict[str, Any], datetime]]:
    """The readable lines of ``state/ticks.jsonl``, newest first, with their ``at``."""
    data = files.get(TICKS)
    for line in reversed(data.decode("utf-8", "replace").splitlines() if data else []):
        try:
            entry = safejson.loads(line)
        except ValueError:
            continue  # one bad line must not hide the heartbeat before it
        moment = parse_utc(entry.get("at")) if isinstance(entry, dict) else None
        if moment is not None:
            yield entry, moment


def last_tick_at(files: Mapping[str, bytes]) -> datetime | None:
    """The ``at`` of the newest readable line of ``state/ticks.jsonl``, if any."""
    return next((moment for _, moment in _tick_lines(files)), None)
