"""One work queue on the state branch, read lazily and changed in memory: :class:`QueueBook`.

The files it reads and writes are :mod:`~.queueformat`'s. Invariants:

- The items are the truth. The summary and the backlog blocks spare a reader listing
  them: counts by status, the claims by worker, the dead letters, which blocks and
  done chunks exist.
- The summary names the tree id of ``state/queues/<queue>/`` as of its own commit
  (:class:`~orchestrator.store.Stamped`). A reader that finds another id (someone
  changed the folder behind the summary's back), or a summary it cannot read, rebuilds
  it from every item and says so in one line (:attr:`QueueBook.note`).
- Sizing a drain reads the first few backlog blocks (they sort in claim order) and no
  item beyond.
- The summary's ``oldest_ready`` is a lower bound of the oldest ready item's enqueue
  time, kept by :meth:`QueueBook.put` from the items it writes: ``on_queue`` reads it
  and no item.
- Every change of an item goes through :meth:`QueueBook.put`, which keeps counts,
  blocks, claims, dead letters and done chunks in step, in the same commit.
- An item record that cannot be read is named in one line and left alone: it is never
  claimed or rewritten, and everything else of the queue is served.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeGuard

from ..errors import InvalidId
from ..store import Stamped, StateFiles, as_state_files
from . import codec, layout
from .items import BACKLOG, Item, ItemStatus
from .queueformat import (
    CHUNK_SIZE,
    SCAN_BLOCKS,
    Claim,
    DeadEntry,
    Entry,
    QueueSummary,
    block_bytes,
    chunk_bytes,
    chunk_day,
    parse_block,
    parse_chunk,
    rank,
)


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
    waits: dict[str, datetime] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)
    dead: dict[str, DeadEntry] = field(default_factory=dict)
    done: dict[str, int] = field(default_factory=dict)
    updated_at: datetime | None = None
    oldest_ready: datetime | None = None
    """When the oldest ready item was enqueued, at the latest (:class:`QueueSummary`)."""
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
                   waits=dict(summary.waits), claims=dict(summary.claims),
                   dead=dict(summary.dead),
                   done=dict(summary.done), updated_at=summary.updated_at,
                   oldest_ready=summary.oldest_ready)

    def copy(self) -> QueueBook:
        return QueueBook(
            self.name, self.files, self.next_seq, dict(self.counts), dict(self.blocks),
            dict(self.waits), dict(self.claims), dict(self.dead), dict(self.done),
            self.updated_at, self.oldest_ready, self.note,
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
        found = self._due_ids(now, want)
        picked: list[Item] = []
        start = 0
        while len(picked) < want and start < len(found):
            # read as many as are still wanted; an unreadable one costs another read
            batch = found[start:start + want - len(picked)]
            start += len(batch)
            self.prefetch(batch)
            picked += [i for i in map(self.item, batch) if _in_backlog(i)]
        return picked

    def _due_ids(self, now: datetime, want: int) -> list[str]:
        """The ids of the backlog entries claimable at ``now``, in claim order, from the
        first blocks until ``want`` are found (the items themselves are not read)."""
        found: list[str] = []
        due = [b for b in sorted(self.blocks) if _due(self.waits.get(b), now)]
        for block in due[:SCAN_BLOCKS]:  # a block whose every item waits is not read
            entries = sorted(self.entries(block).items(), key=lambda e: e[1][0])
            found += [item_id for item_id, (_, at) in entries if _due(at, now)]
            if len(found) >= want:
                break
        return found

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
        self._enter(new, old, now)
        if new.status is ItemStatus.READY:
            held = self.oldest_ready
            self.oldest_ready = new.created_at if held is None else min(held, new.created_at)
        self.next_seq = max(self.next_seq, new.seq + 1)
        self._items[new.id] = new
        self._dirty_items.add(new.id)
        self._touch(now)

    def _enter(self, new: Item, old: Item | None, now: datetime) -> None:
        """File ``new`` where its status keeps it: a backlog block, its worker's claim,
        the dead letters, or (done just now) a done chunk."""
        if new.status in BACKLOG:
            self._block_add(new)
        elif new.status is ItemStatus.CLAIMED and new.claimed_by:
            self._claim_add(new, new.claimed_by, now)
        elif new.status is ItemStatus.DEAD:
            self.dead[new.id] = DeadEntry(reason=new.dead_reason or "dead",
                                          at=new.finished_at or now,
                                          discarded=new.discarded)
        elif new.status is ItemStatus.DONE and not _was_done(old):
            self._chunk_add(new.id, new.finished_at or now)

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

    def set_chunk(self, name: str, ids: list[str], now: datetime) -> None:
        """Done chunk ``name`` holds ``ids`` from now on (none: the chunk goes)."""
        if ids:
            self.done[name] = len(ids)
        else:
            self.done.pop(name, None)
        self._chunks[name] = ids
        self._dirty_chunks.add(name)
        self._touch(now)

    def _forget(self, old: Item | None) -> None:
        if old is None:
            return
        self._count(old.status, -1)
        if old.status in BACKLOG:
            self._block_remove(old)
        elif old.status is ItemStatus.CLAIMED and old.claimed_by in self.claims:
            self._claim_remove(old, old.claimed_by)
        elif old.status is ItemStatus.DEAD:
            self.dead.pop(old.id, None)

    def _claim_add(self, item: Item, key: str, now: datetime) -> None:
        """``item`` joins the claim of the worker ``key``, which holds until the later of
        the two locks."""
        claim = self.claims.get(key)
        until = item.locked_until or now
        held: list[str] = []
        if claim is not None:
            held, until = claim.items, max(until, claim.until)
        self.claims[key] = Claim(run_id=key.rpartition("--")[0].rpartition("--")[0],
                                 until=until, items=[*held, item.id])

    def _claim_remove(self, item: Item, key: str) -> None:
        """``item`` leaves the claim of ``key``; a claim left empty goes."""
        claim = self.claims[key]
        ids = [i for i in claim.items if i != item.id]
        if ids:
            self.claims[key] = claim.model_copy(update={"items": ids})
        else:
            del self.claims[key]

    def _count(self, status: ItemStatus, delta: int) -> None:
        left = self.counts.get(status.value, 0) + delta
        if left > 0:
            self.counts[status.value] = left
        else:
            self.counts.pop(status.value, None)
            if status is ItemStatus.READY:  # the bound is exact again: nothing is ready
                self.oldest_ready = None

    def _block_add(self, item: Item) -> None:
        block = rank(item)
        entries = self.entries(block)
        first = not entries
        entries[item.id] = (item.seq, item.available_at)
        self.blocks[block] = len(entries)
        self._dirty_blocks.add(block)
        self._wait_add(block, item.available_at, first)

    def _wait_add(self, block: str, at: datetime | None, first: bool) -> None:
        """Keep :attr:`waits` a lower bound of when ``block``'s items may be claimed:
        an item claimable now (``at`` is ``None``) ends the block's wait, and a block
        that is not named stays unnamed (it may hold such an item)."""
        if at is None:
            self.waits.pop(block, None)
        elif first:
            self.waits[block] = at
        elif block in self.waits:
            self.waits[block] = min(self.waits[block], at)

    def _block_remove(self, item: Item) -> None:
        block = rank(item)
        entries = self.entries(block)
        if entries.pop(item.id, None) is None:
            return
        if entries:
            self.blocks[block] = len(entries)
        else:
            self.blocks.pop(block, None)
            self.waits.pop(block, None)
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
                            waits=dict(sorted(self.waits.items())),
                            claims=dict(sorted(self.claims.items())),
                            dead=dict(sorted(self.dead.items())),
                            done=dict(sorted(self.done.items())), tree=tree,
                            updated_at=self.updated_at, oldest_ready=self.oldest_ready)

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


# --------------------------------------------------------------------------- loading


def _due(at: datetime | None, now: datetime) -> bool:
    """Whether a backlog entry claimable from ``at`` (``None``: now) may be claimed."""
    return at is None or at <= now


def _in_backlog(item: Item | None) -> TypeGuard[Item]:
    """Whether ``item`` was read and still waits in the backlog."""
    return item is not None and item.status in BACKLOG


def _was_done(old: Item | None) -> bool:
    """Whether the item was done already (its id is in a done chunk)."""
    return old is not None and old.status is ItemStatus.DONE


def describe(book: QueueBook) -> dict[str, Any]:
    """What ``status`` and ``queue stats`` say without reading an item. A discarded
    item is counted as ``discarded``, not ``dead``: nobody waits on it any more."""
    counts = dict(book.counts)
    discarded = sum(1 for d in book.dead.values() if d.discarded)
    if discarded:
        counts["dead"] = counts.get("dead", 0) - discarded
        counts = {k: n for k, n in counts.items() if n} | {"discarded": discarded}
    return {"queue": book.name, "counts": dict(sorted(counts.items())),
            "backlog": book.backlog, "claimed_by": {k: len(c.items) for k, c
                                                   in sorted(book.claims.items())},
            "dead": counts.get("dead", 0)}
