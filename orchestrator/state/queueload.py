"""Every work queue of the state branch loaded from its summary, and a queue made again
from its items when its summary cannot be trusted.

- Loading reads the summaries only, never an item.
- A summary that is missing, unreadable, names another queue or was written for
  another tree of the queue's folder is rebuilt from every item, with one line saying
  why (:attr:`~.queue.QueueBook.note`); the old blocks and chunks are replaced.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..store import StateFiles, as_state_files
from . import codec, layout
from .items import Item
from .layout import ITEM_ID_RE
from .queue import QueueBook
from .queueformat import QueueSummary, all_item_paths, file_stems, queue_names


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


def rebuild(name: str, files: StateFiles, why: str) -> QueueBook:
    """The queue's summary, backlog and done chunks made again from every item; the
    old blocks and chunks are replaced."""
    book = QueueBook.empty(name, files)
    items = _every_item(book)
    _replace_blocks_and_chunks(book)
    for item in sorted(items, key=lambda i: (i.finished_at or i.created_at, i.seq)):
        book.put(item, None, item.updated_at)
        book._dirty_items.discard(item.id)  # the record itself is as it was
    book.updated_at = max((i.updated_at for i in items), default=None)
    book._dirty = True
    book.note = f"{why}: rebuilt from {len(items)} item(s)"
    return book


def _every_item(book: QueueBook) -> list[Item]:
    """Every readable item of ``book``'s queue; a file that is no item's, or a record
    that cannot be read, is named in :attr:`QueueBook.problems`."""
    paths = list(all_item_paths(book.name, book.files))
    book.files.prefetch(paths)
    items: list[Item] = []
    for path in paths:
        stem = path.rpartition("/")[2].removesuffix(".json")
        if not path.endswith(".json") or not ITEM_ID_RE.fullmatch(stem):
            book.problems[path] = f"{path}: not an item file; left alone"
            continue
        item = book._read(path, stem)
        if item is not None:
            items.append(item)
    return items


def _replace_blocks_and_chunks(book: QueueBook) -> None:
    """Mark every backlog block and done chunk on the branch to be written again (as
    deleted, unless a put fills it): a rebuild trusts none of them."""
    blocks = layout.backlog_dir(book.name)
    for stem in file_stems(book.files, blocks, layout.BLOCK_RE):
        book._entries[stem] = {}
        book._dirty_blocks.add(stem)
    chunks = layout.done_dir(book.name)
    for stem in file_stems(book.files, chunks, layout.CHUNK_RE):
        book._chunks[stem] = []
        book._dirty_chunks.add(stem)
