"""Queue items: the records of a work queue on the state branch, and what may enter one.

- :class:`Item` is the job table's row (``state/queues/<queue>/items/...``): status,
  payload, retries, error log, state history, idempotency key, lock expiry.
- An item's id is a hash: of its idempotency key when it has one (so a key names one
  item, found by its path alone), else of its queue position and enqueue time.
- :class:`NewItem` is one item to enqueue, checked against the limits of
  :mod:`orchestrator.config.queuing`; :func:`parse_lines` reads a JSON-lines file of them
  (``queue add --file``, a track's ``ORCHESTRATOR_ENQUEUE``): a bad line is named with
  its number and nothing of the file is taken.
- :class:`ItemReport` is what a worker says about one item it worked.
- Records are strict and frozen like the other state records; datetimes are aware UTC.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from ..config.fieldtypes import Frozen, Id, UTCDateTime, check_id
from ..config.queuing import MAX_KEY_CHARS, MAX_PAYLOAD_BYTES, MAX_PRIORITY
from ..support import safejson
from ..support.text import error_location
from ..support.times import parse_utc
from .layout import ITEM_ID_RE

"""An item id: 24 hex digits of a hash (safe as a file name)."""

MAX_ITEM_RESULT_BYTES = 8 * 1024
"""Largest result a worker may report for one item (a summary, as for tracks)."""
MAX_LINES = 100_000
"""Most items one enqueue file may hold."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""Largest enqueue file read (``queue add --file``)."""
MAX_TRACK_FILE_BYTES = 1024 * 1024
"""Largest ``ORCHESTRATOR_ENQUEUE`` file a track may leave: it travels in its outcome."""
ERROR_LOG_KEEP = 20
HISTORY_KEEP = 100


class ItemStatus(StrEnum):
    """Where an item stands. ``ready`` and ``failed`` items are the backlog."""

    READY = "ready"
    """Waiting to be claimed (once its ``not_before`` has passed)."""
    CLAIMED = "claimed"
    """Owned by one worker (``claimed_by``) until it reports or its lease is released."""
    DONE = "done"
    """Worked, exit 0. Terminal."""
    FAILED = "failed"
    """Its last attempt failed; claimed again once ``retry_at`` has passed."""
    DEAD = "dead"
    """Failed ``max_attempts`` times: a dead letter until a person requeues or
    discards it (``orchestrator dlq``)."""


BACKLOG = frozenset({ItemStatus.READY, ItemStatus.FAILED})


class ItemTransition(Frozen):
    """One entry of an item's ``state_history``: a move, when, by whom and why."""

    model_config = ConfigDict(populate_by_name=True)

    from_: str = Field(alias="from")
    to: str
    at: UTCDateTime
    by: str
    reason: str = ""


class Item(Frozen):
    """``state/queues/<queue>/items/<h>/<h>/<id>.json``: one item of a work queue."""

    id: str = Field(pattern=f"^{ITEM_ID_RE.pattern}$")
    queue: Id
    seq: int = Field(ge=0)
    """Its place in the queue (enqueue order): the tie-break after ``priority``."""
    status: ItemStatus = ItemStatus.READY
    payload: Any = None
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    not_before: UTCDateTime | None = None
    retry_at: UTCDateTime | None = None
    """A failed item is claimed again only after this (its back-off)."""
    attempt: int = Field(0, ge=0)
    """Attempts used: a failed or completed run of the command, or one a dead worker
    was in the middle of."""
    max_attempts: int | None = Field(None, ge=1)
    """From the drain track that last claimed it."""
    error_log: list[str] = Field(default_factory=list)
    state_history: list[ItemTransition] = Field(default_factory=list)
    idempotency_key: str | None = Field(None, max_length=MAX_KEY_CHARS)
    claimed_by: str | None = None
    """The dispatch key of the worker that owns it, while ``claimed``."""
    locked_until: UTCDateTime | None = None
    """While ``claimed``: once past, and its worker not known to be alive, the claim
    is released."""
    result: dict[str, Any] | None = None
    created_at: UTCDateTime
    updated_at: UTCDateTime
    finished_at: UTCDateTime | None = None
    """When it became ``done`` or ``dead``."""
    dead_reason: str | None = None
    discarded: bool = False
    discarded_by: str | None = None
    discarded_reason: str | None = None

    @property
    def available_at(self) -> datetime | None:
        """When a backlog item may be claimed (``None``: at once)."""
        times = [t for t in (self.not_before, self.retry_at) if t is not None]
        return max(times) if times else None


def item_id(queue: str, key: str | None, seq: int, created_at: datetime) -> str:
    """The id of a new item: from its key when it has one, else from its place and time."""
    if key is not None:
        text = f"{queue}\0key\0{key}"
    else:
        text = f"{queue}\0seq\0{seq}\0{created_at.isoformat()}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def key_id(queue: str, key: str) -> str:
    """The id the item with idempotency key ``key`` has (or would have)."""
    return item_id(queue, key, 0, datetime.min)


# --------------------------------------------------------------------------- enqueue


class NewItem(Frozen):
    """One item to enqueue, within every limit."""

    queue: Id | None = None
    """Named by a track's enqueue file; ``queue add`` gives it instead."""
    payload: Any = None
    key: str | None = Field(None, min_length=1, max_length=MAX_KEY_CHARS)
    priority: int = Field(0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    not_before: UTCDateTime | None = None


class BadEnqueue(ValueError):
    """An enqueue file or item that cannot be taken; the message names where and why."""


def payload_size(payload: Any) -> int:
    return len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
               .encode("utf-8", "surrogatepass"))


def new_item(data: Any, *, queue_required: bool = False) -> NewItem:
    """One item from a parsed JSON object (a line of an enqueue file, a payload given
    on the command line); :class:`BadEnqueue` with the field at fault."""
    if not isinstance(data, dict):
        raise BadEnqueue(f"a JSON object is expected, not {type(data).__name__}")
    _check_fields(data, queue_required)
    fields = dict(data)
    when = data.get("not_before")
    if when is not None:
        fields["not_before"] = _not_before(when)
    if isinstance(fields.get("queue"), str):
        try:
            check_id(fields["queue"], "queue")
        except Exception as exc:  # InvalidId: a message of its own
            raise BadEnqueue(f"queue: {exc}") from None
    size = payload_size(data.get("payload"))
    if size > MAX_PAYLOAD_BYTES:
        raise BadEnqueue(f"payload: {size} bytes; the limit is {MAX_PAYLOAD_BYTES}")
    try:
        return NewItem.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = error_location(first["loc"])
        raise BadEnqueue(f"{where}: {first['msg']}") from None


def _check_fields(data: dict[str, Any], queue_required: bool) -> None:
    """Refuse a field an item does not have, and a missing ``queue`` when required."""
    unknown = sorted(set(data) - {"queue", "payload", "key", "priority", "not_before"})
    if unknown:
        # a key of the line may hold a line break or a megabyte: quoted, cut
        raise BadEnqueue(f"{error_location((unknown[0],))}: unknown field (give payload, "
                         "key, priority, not_before" + (", queue)" if queue_required else ")"))
    if queue_required and "queue" not in data:
        raise BadEnqueue("queue: required (the queue the item goes to)")


def _not_before(when: Any) -> datetime:
    """``not_before`` as an aware UTC time, or :class:`BadEnqueue`."""
    moment = parse_utc(when)
    if moment is None or not 1970 <= moment.year <= 9000:
        shown = repr(when) if len(repr(when)) <= 80 else repr(when)[:77] + "..."
        raise BadEnqueue(f"not_before: {shown} is no ISO time with an offset")
    return moment


def parse_array(value: Any, *, queue_required: bool = False,
                max_lines: int = MAX_LINES) -> list[NewItem]:
    """Every item of a JSON array of items (``client_payload.items`` of an ``enqueue``
    event), or :class:`BadEnqueue` naming the first at fault (``item 3: ...``)."""
    if not isinstance(value, list):
        raise BadEnqueue(f"a JSON array of items is expected, not {type(value).__name__}")
    if len(value) > max_lines:
        raise BadEnqueue(f"more than {max_lines} items")
    items = []
    for number, entry in enumerate(value, start=1):
        try:
            items.append(new_item(entry, queue_required=queue_required))
        except BadEnqueue as exc:
            raise BadEnqueue(f"item {number}: {exc}") from None
    return items


def parse_lines(data: bytes, *, queue_required: bool = False,
                max_lines: int = MAX_LINES) -> list[NewItem]:
    """Every item of a JSON-lines enqueue file, or :class:`BadEnqueue` naming the first
    line at fault (``line 3: ...``): nothing of a bad file is taken. Blank lines are
    skipped. A file that is one JSON array of items is read as such."""
    try:
        text = safejson.decode(data)
    except safejson.UnsafeJSON as exc:
        raise BadEnqueue(str(exc)) from None
    if text.lstrip().startswith("["):  # never a line of objects: a JSON array
        try:
            value = safejson.loads(text, max_bytes=MAX_FILE_BYTES)
        except safejson.UnsafeJSON as exc:
            raise BadEnqueue(str(exc)) from None
        return parse_array(value, queue_required=queue_required, max_lines=max_lines)
    items: list[NewItem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(items) >= max_lines:
            raise BadEnqueue(f"line {number}: more than {max_lines} items in one file")
        value = _line_value(number, line)
        try:
            items.append(new_item(value, queue_required=queue_required))
        except BadEnqueue as exc:
            raise BadEnqueue(f"line {number}: {exc}") from None
    return items


def _line_value(number: int, line: str) -> Any:
    """The JSON value of line ``number`` of an enqueue file, or :class:`BadEnqueue`
    naming the line and the column at fault."""
    try:
        return safejson.loads(line, max_bytes=MAX_PAYLOAD_BYTES * 2)
    except safejson.UnsafeJSON as exc:
        # the parser saw one line: its "line 1 column N" is column N of this one
        where = exc.where.replace("line 1 column", "column") if exc.where else ""
        raise BadEnqueue(f"line {number}{' ' + where if where else ''}: "
                         f"{exc.problem}") from None


# --------------------------------------------------------------------------- reports


ItemOutcome = Literal["done", "failed", "back", "released", "started"]
"""What a worker says of one item: ``done`` (exit 0), ``failed`` (another exit),
``back`` (exit 75: not now, no attempt used), ``released`` (its wall clock came
first: never started, or stopped in flight), ``started`` (it began and no end was
recorded: the worker died working it)."""


class ItemReport(Frozen):
    """One line of a worker's account of its items."""

    id: str = Field(pattern=f"^{ITEM_ID_RE.pattern}$")
    outcome: ItemOutcome
    attempt: int = Field(ge=1)
    started_at: UTCDateTime | None = None
    finished_at: UTCDateTime | None = None
    exit_code: int | None = None
    error: str | None = Field(None, max_length=8000)
    result: dict[str, Any] | None = None


def report_from(data: Any) -> ItemReport:
    """An :class:`ItemReport` from JSON a worker wrote (strictness of the wire:
    timestamps as text)."""
    return ItemReport.model_validate(data, strict=False)
