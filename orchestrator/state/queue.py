"""One work queue on the state branch, read lazily and changed in memory: :class:`QueueBook`.

On the branch a queue is::

    state/queues/<queue>.json                   the summary (QueueSummary)
    state/queues/<queue>/items/<ab>/<c>/<id>.json   one record per item
    state/queues/<queue>/backlog/<rank>.json    the claimable items, in claim order
    state/queues/<queue>/done/<YYYYMMDD>-<n>.json   ids done that day (retention, purge)

Invariants:

- The items are the truth. The summary and the backlog blocks spare a reader listing
  them: counts by status, the claims by worker, the dead letters, which blocks and
  done chunks exist.
- The summary names the tree id of ``state/queues/<queue>/`` as of its own commit
  (:class:`~orchestrator.store.Stamped`). A reader that finds another id (someone
  changed the folder behind the summary's back), or a summary it cannot read, rebuilds
  it from every item and says so in one line (:attr:`QueueBook.note`).
- A backlog block holds the ``ready`` and ``failed`` items of one priority and one
  span of 500 enqueue positions; block names sort in claim order (highest priority,
  then oldest), so sizing a drain reads the first few blocks and no item beyond.
- Every change of an item goes through :meth:`QueueBook.put`, which keeps counts,
  blocks, claims, dead letters and done chunks in step, in the same commit.
- An item record that cannot be read is named in one line and left alone: it is never
  claimed or rewritten, and everything else of the queue is served.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, field_validator

from ..errors import InvalidId
from ..spec.fields import ID_RE, Frozen, Id, UTCDateTime
from ..spec.queues import MAX_PRIORITY
from ..store import Stamped, StateFiles, as_state_files
from ..support import safejson
from ..support.times import parse_utc
from . import codec, layout
from .items import BACKLOG, Item, ItemStatus
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
    claims: dict[str, Claim] = Field(default_factory=dict)
    """Worker dispatch key -> its claim."""
    dead: dict[str, DeadEntry] = Field(default_factory=dict)
    done: dict[str, int] = Field(default_factory=dict)
    """Done chunk -> how many ids it holds."""
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


@dataclass
class QueueBook:
    """One queue of one snapshot, with what a writer changed on top.

    Reads are lazy and cached (the snapshot never changes); :meth:`dump` gives the files
    of what changed. :meth:`copy` gives a book to change while this one stays as read.
    """

    name: str
    files: StateFiles
    next_seq: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    blocks: dict[str, int] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)
    dead: dict[str, DeadEntry] = field(default_factory=dict)
    done: dict[str, int] = field(default_factory=dict)
    updated_at: datetime | None = None
    note: str | None = None
    """Why the summary was rebuilt from the items, or ``None``."""
    problems: dict[str, str] = field(default_factory=dict)
    """Path -> what is wrong, for each record of the queue that could not be read."""
    _items: dict[str, Item | None] = field(default_factory=dict)
    _entries: dict[str, dict[str, Entry]] = field(default_factory=dict)
    _chunks: dict[str, list[str]] = field(default_factory=dict)
    _dirty_items: set[str] = field(default_factory=set)
    _dirty_blocks: set[str] = field(default_factory=set)
    _dirty_chunks: set[str] = field(default_factory=set)
    _dirty: bool = False

    # ---------------------------------------------------------------- building

    @classmethod
    def empty(cls, name: str, files: Mapping[str, bytes]) -> QueueBook:
        layout.check_queue(name)
        return cls(name, as_state_files(files))

    @classmethod
    def of(cls, summary: QueueSummary, files: Mapping[str, bytes]) -> QueueBook:
        return cls(summary.queue, as_state_files(files), next_seq=summary.next_seq,
                   counts=dict(summary.counts), blocks=dict(summary.blocks),
                   claims=dict(summary.claims), dead=dict(summary.dead),
                   done=dict(summary.done), updated_at=summary.updated_at)

    def copy(self) -> QueueBook:
        return QueueBook(
            self.name, self.files, self.next_seq, dict(self.counts), dict(self.blocks),
            dict(self.claims), dict(self.dead), dict(self.done), self.updated_at, self.note,
            dict(self.problems), dict(self._items),
            {r: dict(e) for r, e in self._entries.items()},
            {c: list(ids) for c, ids in self._chunks.items()}, set(self._dirty_items),
            set(self._dirty_blocks), set(self._dirty_chunks), self._dirty)

    @property
    def changed(self) -> bool:
        return self._dirty

    # ---------------------------------------------------------------- reading

    def item(self, item_id: str) -> Item | None:
        """The item ``item_id`` (``None``: there is none, or it cannot be read)."""
        if item_id not in self._items:
            self.prefetch([item_id])
        return self._items.get(item_id)

    def prefetch(self, ids: Iterable[str]) -> None:
        """Read the items ``ids`` that are not read yet, in one bulk read."""
        todo = [i for i in dict.fromkeys(ids) if i not in self._items]
        if not todo:
            return
        paths = {}
        for item_id in todo:
            try:
                paths[item_id] = layout.item_path(self.name, item_id)
            except InvalidId:
                self._items[item_id] = None
        self.files.prefetch(paths.values())
        for item_id, path in paths.items():
            self._items[item_id] = self._read(path, item_id)

    def _read(self, path: str, item_id: str) -> Item | None:
        try:
            data = self.files.get(path)
        except (KeyError, OSError) as exc:
            self.problems[path] = f"{path}: cannot be read: {exc}"
            return None
        if data is None:
            return None
        try:
            item = codec.parse_record(Item, path, data)
        except codec.CorruptState as exc:
            self.problems[path] = exc.message
            return None
        if item.id != item_id or item.queue != self.name:
            self.problems[path] = (f"{path}: names item {item.queue}/{item.id}, not the one "
                                   "its path says")
            return None
        return item

    def list_folders(self, ids: Iterable[str]) -> None:
        """List the folders of ``ids`` in one go, so :meth:`exists` reads no file."""
        folders = {layout.item_folder(self.name, i) for i in ids}
        if folders:
            self.files.listdirs(folders)

    def exists(self, item_id: str) -> bool:
        """Whether an item (readable or not) has this id."""
        if item_id in self._dirty_items:
            return self._items.get(item_id) is not None
        return layout.item_path(self.name, item_id) in self.files

    def entries(self, block: str) -> dict[str, Entry]:
        """The entries of one backlog block (id -> place, claimable from)."""
        if block not in self._entries:
            self._entries[block] = self._read_block(block)
        return self._entries[block]

    def _read_block(self, block: str) -> dict[str, Entry]:
        path = layout.backlog_path(self.name, block)
        data = self.files.get(path)
        if data is None:
            return {}
        try:
            return parse_block(data)
        except ValueError as exc:
            self.problems[path] = f"{path}: {exc}"
            return {}

    def chunk(self, name: str) -> list[str]:
        if name not in self._chunks:
            path = layout.done_path(self.name, name)
            data = self.files.get(path)
            try:
                ids = parse_chunk(data) if data is not None else []
            except ValueError as exc:
                self.problems[path] = f"{path}: {exc}"
                ids = []
            self._chunks[name] = ids
        return self._chunks[name]

    def claimable(self, now: datetime, want: int) -> list[Item]:
        """Up to ``want`` items that may be claimed at ``now``: highest priority first,
        then oldest. Reads backlog blocks in order, at most :data:`SCAN_BLOCKS` of them,
        and the items it returns."""
        if want <= 0:
            return []
        found: list[str] = []
        for block in sorted(self.blocks)[:SCAN_BLOCKS]:
            entries = self.entries(block)
            for item_id, (_, at) in sorted(entries.items(), key=lambda e: e[1][0]):
                if at is None or at <= now:
                    found.append(item_id)
            if len(found) >= want:
                break
        picked: list[Item] = []
        start = 0
        while len(picked) < want and start < len(found):
            # read as many as are still wanted; an unreadable one costs another read
            batch = found[start:start + want - len(picked)]
            start += len(batch)
            self.prefetch(batch)
            picked += [i for i in map(self.item, batch)
                       if i is not None and i.status in BACKLOG]
        return picked

    @property
    def backlog(self) -> int:
        """Items ready or waiting for a retry (claimable now or later)."""
        return sum(self.counts.get(s.value, 0) for s in BACKLOG)

    def remaining(self) -> int:
        """Items not finished: the backlog and what workers hold."""
        return self.backlog + self.counts.get(ItemStatus.CLAIMED.value, 0)

    # ---------------------------------------------------------------- changing

    def put(self, new: Item, old: Item | None, now: datetime) -> None:
        """Write ``new`` (the item ``old`` was, or a new one), keeping the summary, the
        backlog, the claims, the dead letters and the done chunks in step."""
        assert old is None or old.id == new.id
        self._forget(old)
        self._count(new.status, +1)
        if new.status in BACKLOG:
            self._block_add(new)
        elif new.status is ItemStatus.CLAIMED and new.claimed_by:
            claim = self.claims.get(new.claimed_by)
            ids = [*(claim.items if claim else []), new.id]
            until = new.locked_until or now
            self.claims[new.claimed_by] = Claim(
                run_id=new.claimed_by.rpartition("--")[0].rpartition("--")[0],
                until=max(until, claim.until) if claim else until, items=ids)
        elif new.status is ItemStatus.DEAD:
            self.dead[new.id] = DeadEntry(reason=new.dead_reason or "dead",
                                          at=new.finished_at or now,
                                          discarded=new.discarded)
        elif new.status is ItemStatus.DONE and (old is None
                                                or old.status is not ItemStatus.DONE):
            self._chunk_add(new.id, new.finished_at or now)
        self.next_seq = max(self.next_seq, new.seq + 1)
        self._items[new.id] = new
        self._dirty_items.add(new.id)
        self._touch(now)

    def delete(self, old: Item, now: datetime) -> None:
        """Remove ``old`` from the queue (a purge). Its done chunk is the caller's."""
        self._forget(old)
        self._items[old.id] = None
        self._dirty_items.add(old.id)
        self._touch(now)

    def drop_claim(self, key: str, now: datetime) -> None:
        """Forget the claim of ``key`` (its items were released, or cannot be read)."""
        if self.claims.pop(key, None) is not None:
            self._touch(now)

    def drop_chunk(self, name: str, now: datetime) -> None:
        self.done.pop(name, None)
        self._chunks[name] = []
        self._dirty_chunks.add(name)
        self._touch(now)

    def _forget(self, old: Item | None) -> None:
        if old is None:
            return
        self._count(old.status, -1)
        if old.status in BACKLOG:
            self._block_remove(old)
        elif old.status is ItemStatus.CLAIMED and old.claimed_by in self.claims:
            claim = self.claims[old.claimed_by]
            ids = [i for i in claim.items if i != old.id]
            if ids:
                self.claims[old.claimed_by] = claim.model_copy(update={"items": ids})
            else:
                del self.claims[old.claimed_by]
        elif old.status is ItemStatus.DEAD:
            self.dead.pop(old.id, None)

    def _count(self, status: ItemStatus, delta: int) -> None:
        left = self.counts.get(status.value, 0) + delta
        if left > 0:
            self.counts[status.value] = left
        else:
            self.counts.pop(status.value, None)

    def _block_add(self, item: Item) -> None:
        block = rank(item)
        entries = self.entries(block)
        entries[item.id] = (item.seq, item.available_at)
        self.blocks[block] = len(entries)
        self._dirty_blocks.add(block)

    def _block_remove(self, item: Item) -> None:
        block = rank(item)
        entries = self.entries(block)
        if entries.pop(item.id, None) is None:
            return
        if entries:
            self.blocks[block] = len(entries)
        else:
            self.blocks.pop(block, None)
        self._dirty_blocks.add(block)

    def _chunk_add(self, item_id: str, at: datetime) -> None:
        day = f"{at:%Y%m%d}"
        today = sorted(c for c in self.done if chunk_day(c) == day)
        name = today[-1] if today and self.done[today[-1]] < CHUNK_SIZE else (
            f"{day}-{len(today):04d}")
        ids = self.chunk(name)
        ids.append(item_id)
        self.done[name] = len(ids)
        self._dirty_chunks.add(name)

    def _touch(self, now: datetime) -> None:
        self._dirty = True
        self.updated_at = now

    # ---------------------------------------------------------------- writing

    def summary(self, tree: str | None = None) -> QueueSummary:
        return QueueSummary(queue=self.name, next_seq=self.next_seq,
                            counts=dict(sorted(self.counts.items())),
                            blocks=dict(sorted(self.blocks.items())),
                            claims=dict(sorted(self.claims.items())),
                            dead=dict(sorted(self.dead.items())),
                            done=dict(sorted(self.done.items())), tree=tree,
                            updated_at=self.updated_at)

    def dump(self) -> dict[str, bytes | None]:
        """The files of what changed (none when nothing did); the summary is stamped
        with the tree its commit gives the queue's folder."""
        if not self._dirty:
            return {}
        files: dict[str, bytes | None] = {}
        for item_id in sorted(self._dirty_items):
            item = self._items.get(item_id)
            files[layout.item_path(self.name, item_id)] = (
                codec.to_json(item) if item is not None else None)
        for block in sorted(self._dirty_blocks):
            entries = self._entries.get(block, {})
            files[layout.backlog_path(self.name, block)] = (
                block_bytes(entries) if entries else None)
        for chunk in sorted(self._dirty_chunks):
            ids = self._chunks.get(chunk, [])
            files[layout.done_path(self.name, chunk)] = chunk_bytes(ids) if ids else None

        def fill(tree: str | None) -> bytes:
            return codec.to_json(self.summary(tree))

        files[layout.queue_summary_path(self.name)] = Stamped.of(
            layout.queue_dir(self.name), fill)
        return files


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
        if (not isinstance(row, list) or len(row) != 3 or not isinstance(row[0], int)
                or isinstance(row[0], bool) or not isinstance(row[1], str)
                or not ITEM_ID_RE.fullmatch(row[1])):
            raise ValueError(f"not a backlog entry: {str(row)[:80]}")
        at = parse_utc(row[2]) if row[2] is not None else None
        if row[2] is not None and at is None:
            raise ValueError(f"not a time: {str(row[2])[:40]}")
        out[row[1]] = (row[0], at)
    return out


def chunk_bytes(ids: list[str]) -> bytes:
    return ("[\n" + ",\n".join(json.dumps(i) for i in ids) + "\n]\n").encode()


def parse_chunk(data: bytes) -> list[str]:
    raw = safejson.loads(data, max_bytes=codec.MAX_RECORD_BYTES)
    if not isinstance(raw, list) or not all(
            isinstance(i, str) and ITEM_ID_RE.fullmatch(i) for i in raw):
        raise ValueError("a JSON list of item ids is expected")
    return list(raw)


# --------------------------------------------------------------------------- loading


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


def load(files: Mapping[str, bytes]) -> tuple[dict[str, QueueBook], list[str]]:
    """Every queue of ``files`` by name, from its summary (rebuilt from the items when
    it cannot be trusted), and one line per entry of ``state/queues`` that is no
    queue's. Reads the summaries only."""
    state_files = as_state_files(files)
    names, stray = queue_names(state_files)
    if not names:
        return {}, stray
    listed = state_files.listdirs([layout.QUEUES])[layout.QUEUES]
    paths = [layout.queue_summary_path(n) for n in names]
    state_files.prefetch(p for p in paths if p in state_files)
    books: dict[str, QueueBook] = {}
    for name in names:
        tree = state_files.object_id(layout.queue_dir(name)) if listed.get(name) else None
        books[name] = _book(name, state_files, tree)
    return books, stray


def _book(name: str, files: StateFiles, tree: str | None) -> QueueBook:
    path = layout.queue_summary_path(name)
    data = files.get(path)
    problem: str | None
    if data is None:
        if tree is None:
            return QueueBook.empty(name, files)
        problem = "is missing"
    else:
        try:
            summary = codec.parse_record(QueueSummary, path, data)
        except codec.CorruptState as exc:
            problem = f"is unreadable ({exc.message})"
        else:
            if summary.queue != name:
                problem = f"names the queue {summary.queue!r}"
            elif summary.tree != tree:
                problem = "was written for other items (the folder changed since)"
            else:
                return QueueBook.of(summary, files)
    return rebuild(name, files, f"{path} {problem}")


def all_item_paths(name: str, files: StateFiles) -> Iterator[str]:
    """Every file under the queue's ``items/`` (three listings, whatever its size)."""
    top = layout.items_dir(name)
    firsts = [f"{top}/{d}" for d, is_dir in files.listdirs([top])[top].items() if is_dir]
    seconds = [f"{f}/{d}" for f, entries in files.listdirs(firsts).items()
               for d, is_dir in entries.items() if is_dir]
    for folder, entries in sorted(files.listdirs(seconds).items()):
        for entry, is_dir in sorted(entries.items()):
            if not is_dir:
                yield f"{folder}/{entry}"


def rebuild(name: str, files: StateFiles, why: str) -> QueueBook:
    """The queue's summary, backlog and done chunks made again from every item; the
    old blocks and chunks are replaced."""
    book = QueueBook.empty(name, files)
    paths = list(all_item_paths(name, files))
    files.prefetch(paths)
    items: list[Item] = []
    for path in paths:
        stem = path.rpartition("/")[2].removesuffix(".json")
        if not path.endswith(".json") or not ITEM_ID_RE.fullmatch(stem):
            book.problems[path] = f"{path}: not an item file; left alone"
            continue
        item = book._read(path, stem)
        if item is not None:
            items.append(item)
    for folder in (layout.backlog_dir(name), layout.done_dir(name)):
        for entry, is_dir in files.listdirs([folder])[folder].items():
            stem = entry.removesuffix(".json")
            if is_dir:
                continue
            if folder.endswith("backlog") and layout.BLOCK_RE.fullmatch(stem):
                book._entries[stem] = {}
                book._dirty_blocks.add(stem)
            elif folder.endswith("done") and layout.CHUNK_RE.fullmatch(stem):
                book._chunks[stem] = []
                book._dirty_chunks.add(stem)
    for item in sorted(items, key=lambda i: (i.finished_at or i.created_at, i.seq)):
        book.put(item, None, item.updated_at)
        book._dirty_items.discard(item.id)  # the record itself is as it was
    book.updated_at = max((i.updated_at for i in items), default=None)
    book._dirty = True
    book.note = f"{why}: rebuilt from {len(items)} item(s)"
    return book


def describe(book: QueueBook) -> dict[str, Any]:
    """What ``status`` and ``queue stats`` say without reading an item."""
    return {"queue": book.name, "counts": dict(sorted(book.counts.items())),
            "backlog": book.backlog, "claimed_by": {k: len(c.items) for k, c
                                                   in sorted(book.claims.items())},
            "dead": sum(1 for d in book.dead.values() if not d.discarded)}
