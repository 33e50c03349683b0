"""What a work queue's files hold on the state branch, their bytes, and their listing.

On the branch a queue is::

    state/queues/<queue>.json                   the summary (QueueSummary)
    state/queues/<queue>/items/<ab>/<c>/<id>.json   one record per item
    state/queues/<queue>/backlog/<rank>.json    the claimable items, in claim order
    state/queues/<queue>/done/<YYYYMMDD>-<n>.json   ids done that day (retention, purge)

- A backlog block holds the ``ready`` and ``failed`` items of one priority and one
  span of :data:`BLOCK_SIZE` enqueue positions; block names sort in claim order
  (highest priority, then oldest).
- A done chunk holds at most :data:`CHUNK_SIZE` ids of one UTC day; its name starts
  with that day.
- Blocks and chunks are read as hostile input: a malformed one raises
  :class:`ValueError` naming what is wrong, never anything else.
- Listing every item of a queue costs three listings, whatever its size; an entry of
  ``state/queues`` that is no queue's is named, never read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Literal

from pydantic import Field, field_validator

from ..config.fieldtypes import ID_RE, Frozen, Id, UTCDateTime
from ..config.queuing import MAX_PRIORITY
from ..store import StateFiles
from ..support import safejson
from ..support.times import parse_utc
from . import codec, layout
from .items import Item
from .layout import ITEM_ID_RE

BLOCK_SIZE = 500
"""Enqueue positions per backlog block."""
CHUNK_SIZE = 1000
"""Ids per done chunk."""
SCAN_BLOCKS = 64
"""Most backlog blocks one look for claimable items reads (32,000 entries)."""


class Claim(Frozen):
    """The items one worker owns, and until when its claim holds without it."""

    run_id: str
    until: UTCDateTime
    items: list[str]


class DeadEntry(Frozen):
    """A dead item, as ``dlq list`` shows it without reading the item."""

    reason: str
    at: UTCDateTime
    discarded: bool = False


class QueueSummary(Frozen):
    """``state/queues/<queue>.json``."""

    format: Literal[1] = 1
    queue: Id
    next_seq: int = Field(0, ge=0)
    counts: dict[str, int] = Field(default_factory=dict)
    blocks: dict[str, int] = Field(default_factory=dict)
    """Backlog block -> how many items it holds."""
    waits: dict[str, UTCDateTime] = Field(default_factory=dict)
    """Backlog block -> no item of it may be claimed before this moment. Only blocks
    whose every item waits are named; the moment may be earlier than the truth (an
    item that left does not move it), never later."""
    claims: dict[str, Claim] = Field(default_factory=dict)
    """Worker dispatch key -> its claim."""
    dead: dict[str, DeadEntry] = Field(default_factory=dict)
    done: dict[str, int] = Field(default_factory=dict)
    """Done chunk -> how many ids it holds."""
    oldest_ready: UTCDateTime | None = None
    """When the oldest ``ready`` item was enqueued (``None``: none is ready). It may be
    earlier than the truth (an item that left does not move it), never later; it is
    exact again once no item is ready."""
    tree: str | None = None
    """The id of ``state/queues/<queue>/``'s tree in the commit that wrote this."""
    updated_at: UTCDateTime | None = None

    @field_validator("blocks")
    @classmethod
    def _block_names(cls, blocks: dict[str, int]) -> dict[str, int]:
        """A block name is part of a path: one that is not a block's makes the summary bad
        (rebuilt from the items), never an error of a later read."""
        bad = [name for name in blocks if not layout.BLOCK_RE.fullmatch(name)]
        if bad:
            raise ValueError(f"invalid backlog block {bad[0][:40]!r}")
        return blocks

    @field_validator("done")
    @classmethod
    def _chunk_names(cls, done: dict[str, int]) -> dict[str, int]:
        bad = [name for name in done if not layout.CHUNK_RE.fullmatch(name)]
        if bad:
            raise ValueError(f"invalid done chunk {bad[0][:40]!r}")
        return done


Entry = tuple[int, datetime | None]
"""A backlog entry: the item's place and when it may be claimed (``None``: now)."""


def rank(item: Item) -> str:
    """The backlog block of ``item``: names sort as claims go (priority, then place)."""
    return f"{MAX_PRIORITY - item.priority:07d}-{item.seq // BLOCK_SIZE:08d}"


def chunk_day(chunk: str) -> str:
    """The UTC day (``YYYYMMDD``) of a done chunk."""
    return chunk[:8]


# --------------------------------------------------------------------------- bytes


def block_bytes(entries: Mapping[str, Entry]) -> bytes:
    """A backlog block: one ``[place, id, claimable from]`` per line, in place order."""
    rows = sorted(((seq, item_id, at) for item_id, (seq, at) in entries.items()))
    lines = [json.dumps([seq, item_id, at.strftime("%Y-%m-%dT%H:%M:%SZ") if at else None])
             for seq, item_id, at in rows]
    return ("[\n" + ",\n".join(lines) + "\n]\n").encode()


def parse_block(data: bytes) -> dict[str, Entry]:
    raw = safejson.loads(data, max_bytes=codec.MAX_RECORD_BYTES)
    if not isinstance(raw, list):
        raise ValueError("a JSON list is expected")
    out: dict[str, Entry] = {}
    for row in raw:
        if not _is_entry(row):
            raise ValueError(f"not a backlog entry: {str(row)[:80]}")
        at = parse_utc(row[2]) if row[2] is not None else None
        if row[2] is not None and at is None:
            raise ValueError(f"not a time: {str(row[2])[:40]}")
        out[row[1]] = (row[0], at)
    return out


def _is_entry(row: object) -> bool:
    """Whether ``row`` is ``[place, item id, time or null]`` (the time checked apart)."""
    return (isinstance(row, list) and len(row) == 3 and _is_place(row[0])
            and isinstance(row[1], str) and ITEM_ID_RE.fullmatch(row[1]) is not None)


def _is_place(value: object) -> bool:
    """Whether ``value`` is an int (JSON's ``true`` is no place)."""
    return isinstance(value, int) and not isinstance(value, bool)


def chunk_bytes(ids: list[str]) -> bytes:
    return ("[\n" + ",\n".join(json.dumps(i) for i in ids) + "\n]\n").encode()


def parse_chunk(data: bytes) -> list[str]:
    raw = safejson.loads(data, max_bytes=codec.MAX_RECORD_BYTES)
    if not isinstance(raw, list) or not all(
            isinstance(i, str) and ITEM_ID_RE.fullmatch(i) for i in raw):
        raise ValueError("a JSON list of item ids is expected")
    return list(raw)


# --------------------------------------------------------------------------- listing


def queue_names(files: StateFiles) -> tuple[list[str], list[str]]:
    """The queues of ``state/queues`` (a summary or a folder), and the entries that are
    no queue's (named, never read)."""
    listed = files.listdirs([layout.QUEUES])[layout.QUEUES]
    names: set[str] = set()
    stray: list[str] = []
    for entry, is_dir in sorted(listed.items()):
        name = entry if is_dir else entry.removesuffix(".json")
        if (is_dir or entry.endswith(".json")) and ID_RE.fullmatch(name):
            names.add(name)
        else:
            stray.append(f"{layout.QUEUES}/{entry!r}: not a queue; left alone")
    return sorted(names), stray


def all_item_paths(name: str, files: StateFiles) -> Iterator[str]:
    """Every file under the queue's ``items/`` (three listings, whatever its size)."""
    seconds = _subfolders(files, _subfolders(files, [layout.items_dir(name)]))
    for folder, entries in sorted(files.listdirs(seconds).items()):
        for entry, is_dir in sorted(entries.items()):
            if not is_dir:
                yield f"{folder}/{entry}"


def _subfolders(files: StateFiles, folders: list[str]) -> list[str]:
    """The folders inside ``folders``, listed in one call."""
    return [f"{f}/{d}" for f, entries in files.listdirs(folders).items()
            for d, is_dir in entries.items() if is_dir]


def file_stems(files: StateFiles, folder: str, pattern: re.Pattern[str]) -> list[str]:
    """The names, without ``.json``, of the files in ``folder`` that ``pattern`` matches."""
    stems = (entry.removesuffix(".json") for entry, is_dir
             in files.listdirs([folder])[folder].items() if not is_dir)
    return [stem for stem in stems if pattern.fullmatch(stem)]
