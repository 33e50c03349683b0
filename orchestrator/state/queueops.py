"""What happens to items: the item state machine, and every operation on a
:class:`~.queue.QueueBook` built from its moves.

Item::

    ready ──> claimed ──> done
      ^   ^      │  └───> failed ──(retry_at passed)──> claimed
      │   └──────┤  └───> dead ──(dlq requeue)──> ready
      │          └──> ready (exit 75, or released: no attempt used)
      └── (dlq requeue) dead

- Only a claim moves an item into ``claimed``, and only the mark commit of a tick that
  dispatches the worker claims (:mod:`orchestrator.planner.drain`).
- Only the worker named in ``claimed_by`` may end a claim with a report; a report for
  an item it does not hold is refused (:func:`settle` returns why).
- An attempt is used by a run of the command that ended (``done``, ``failed``), or that
  a dead worker was in the middle of; never by a release or an exit 75.
- Every move appends ``{from, to, at, by, reason}`` to the item's ``state_history``
  (the newest :data:`~.items.HISTORY_KEEP` are kept); an illegal one raises.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeGuard

from ..errors import IllegalTransition
from .items import (
    ERROR_LOG_KEEP,
    HISTORY_KEEP,
    Item,
    ItemReport,
    ItemStatus,
    ItemTransition,
    NewItem,
    item_id,
    key_id,
)
from .machine import revise
from .queue import QueueBook

MAX_RETRIES_EXCEEDED = "max_retries_exceeded"
"""The reason of an item that failed its last attempt."""

ITEM_TRANSITIONS: dict[ItemStatus, frozenset[ItemStatus]] = {
    ItemStatus.READY: frozenset({ItemStatus.CLAIMED}),
    ItemStatus.FAILED: frozenset({ItemStatus.CLAIMED}),
    ItemStatus.CLAIMED: frozenset({ItemStatus.DONE, ItemStatus.FAILED, ItemStatus.DEAD,
                                   ItemStatus.READY}),
    ItemStatus.DEAD: frozenset({ItemStatus.READY, ItemStatus.DEAD}),
    ItemStatus.DONE: frozenset(),
}
"""Allowed moves; ``dead -> dead`` is a discard (marked, kept)."""


def move(item: Item, to: ItemStatus, at: datetime, by: str, reason: str,
         **changes: Any) -> Item:
    """``item`` moved to ``to`` with the move in its history, or
    :class:`~orchestrator.errors.IllegalTransition`."""
    if to not in ITEM_TRANSITIONS[item.status]:
        raise IllegalTransition(f"item {item.queue}/{item.id}: illegal transition "
                                f"{item.status.value} -> {to.value}")
    history = [*item.state_history, ItemTransition(from_=item.status.value, to=to.value,
                                                   at=at, by=by, reason=reason)]
    return revise(item, **changes, status=to, state_history=history[-HISTORY_KEEP:],
                  updated_at=at)


def _logged(item: Item, line: str) -> list[str]:
    return [*item.error_log, line][-ERROR_LOG_KEEP:]


# --------------------------------------------------------------------------- enqueue


@dataclass(frozen=True)
class Enqueued:
    """What one enqueue did: the items added, and the keys that named an item already."""

    added: tuple[Item, ...]
    existing: tuple[str, ...]
    """The ids of the items whose key was taken already (nothing added for them)."""


def enqueue(book: QueueBook, new: Iterable[NewItem], now: datetime, by: str) -> Enqueued:
    """Add ``new`` to ``book`` in order. An item whose key names an item of the queue
    already (or an earlier one of ``new``) adds nothing: a retried enqueue never
    duplicates."""
    new = list(new)
    keyed = [key_id(book.name, n.key) for n in new if n.key is not None]
    book.list_folders(keyed)
    added: list[Item] = []
    existing: list[str] = []
    for entry in new:
        if entry.key is not None:
            ident = key_id(book.name, entry.key)
            if book.exists(ident):
                existing.append(ident)
                continue
        else:
            ident = item_id(book.name, None, book.next_seq, now)
        item = Item(id=ident, queue=book.name, seq=book.next_seq, payload=entry.payload,
                    priority=entry.priority, not_before=entry.not_before,
                    idempotency_key=entry.key, created_at=now, updated_at=now,
                    state_history=[ItemTransition(from_="", to=ItemStatus.READY.value,
                                                  at=now, by=by, reason="enqueued")])
        book.put(item, None, now)
        added.append(item)
    return Enqueued(tuple(added), tuple(existing))


# --------------------------------------------------------------------------- claims


def claim(book: QueueBook, items: Iterable[Item], key: str, until: datetime,
          max_attempts: int, now: datetime, by: str) -> list[Item]:
    """``items`` (all in the backlog) claimed by the worker ``key`` until ``until``."""
    out = []
    for item in items:
        moved = move(item, ItemStatus.CLAIMED, now, by, f"claimed by {key}",
                     claimed_by=key, locked_until=until, max_attempts=max_attempts)
        book.put(moved, item, now)
        out.append(moved)
    return out


def release(book: QueueBook, item: Item, now: datetime, by: str, why: str, *,
            counted: bool = False, backoff: timedelta = timedelta(0)) -> Item:
    """End ``item``'s claim without a report from its worker: back to the backlog, or,
    when ``counted`` (the worker had started it and died), a failed attempt."""
    if counted:
        return _failed(book, item, now, by, f"{why} (its worker stopped while working it)",
                       backoff, attempt=item.attempt + 1)
    moved = move(item, ItemStatus.READY, now, by, why, claimed_by=None, locked_until=None)
    book.put(moved, item, now)
    return moved


def _failed(book: QueueBook, item: Item, now: datetime, by: str, error: str,
            backoff: timedelta, attempt: int, **changes: Any) -> Item:
    log = _logged(item, f"{now:%Y-%m-%dT%H:%M:%SZ} attempt {attempt}: {error}")
    common: dict[str, Any] = {"claimed_by": None, "locked_until": None, "attempt": attempt,
                              "error_log": log, **changes}
    if attempt >= (item.max_attempts or 1):
        moved = move(item, ItemStatus.DEAD, now, by,
                     f"{MAX_RETRIES_EXCEEDED} after {attempt} attempt(s)",
                     dead_reason=MAX_RETRIES_EXCEEDED, finished_at=now, retry_at=None,
                     **common)
    else:
        moved = move(item, ItemStatus.FAILED, now, by,
                     f"attempt {attempt} of {item.max_attempts} failed",
                     retry_at=now + backoff, **common)
    book.put(moved, item, now)
    return moved


def settle(book: QueueBook, item: Item | None, report: ItemReport, key: str,
           now: datetime, backoff: timedelta) -> str | None:
    """Apply a worker's report on one item; why it was refused, or ``None``. The item's
    current claim wins: a report from a worker that does not hold it changes nothing."""
    if item is None:
        return f"no readable item {report.id} in queue {book.name}"
    if item.status is not ItemStatus.CLAIMED or item.claimed_by != key:
        holder = f"claimed by {item.claimed_by}" if item.claimed_by else item.status.value
        return f"item {item.id} is {holder}, not held by {key}"
    at = min(report.finished_at or now, now)
    if report.outcome == "done":
        moved = move(item, ItemStatus.DONE, at, key, "done", claimed_by=None,
                     locked_until=None, retry_at=None, attempt=item.attempt + 1,
                     result=report.result, finished_at=at)
        book.put(moved, item, now)
    elif report.outcome in ("failed", "started"):
        error = report.error or (f"exit code {report.exit_code}"
                                 if report.exit_code is not None else "failed")
        if report.outcome == "started":
            error = "its worker stopped while working it"
        _failed(book, item, at, key, error, backoff, attempt=item.attempt + 1,
                result=report.result)
    else:
        why = ("not now (exit 75): back in the queue" if report.outcome == "back"
               else "released: its worker's wall clock came first")
        moved = move(item, ItemStatus.READY, at, key, why, claimed_by=None,
                     locked_until=None)
        book.put(moved, item, now)
    return None


# --------------------------------------------------------------------------- people


def requeue(book: QueueBook, item: Item, now: datetime, by: str, reason: str) -> Item:
    """A dead item back to ``ready`` with a fresh attempt budget."""
    why = f"requeued by {by}" + (f": {reason}" if reason else "")
    moved = move(item, ItemStatus.READY, now, by, why, attempt=0, retry_at=None,
                 dead_reason=None, finished_at=None, discarded=False, discarded_by=None,
                 discarded_reason=None)
    book.put(moved, item, now)
    return moved


def discard(book: QueueBook, item: Item, now: datetime, by: str, reason: str) -> Item:
    """A dead item given up: it stays ``dead``, marked with who and why."""
    moved = move(item, ItemStatus.DEAD, now, by, f"discarded by {by}: {reason}",
                 discarded=True, discarded_by=by, discarded_reason=reason)
    book.put(moved, item, now)
    return moved


def purge_done(book: QueueBook, before: datetime, now: datetime,
               chunks: Iterable[str] | None = None) -> list[str]:
    """Remove the items done before ``before``; their ids. A done chunk of an earlier day
    goes whole; the chunk of ``before``'s own day loses the items done before it and
    keeps the rest (``--older-than-days 0`` purges what is done by now)."""
    day = f"{before:%Y%m%d}"
    names = sorted(c for c in (book.done if chunks is None else chunks) if c[:8] <= day)
    return [ident for name in names
            for ident in _purge_chunk(book, name, None if name[:8] < day else before, now)]


def _is_done(item: Item | None) -> TypeGuard[Item]:
    return item is not None and item.status is ItemStatus.DONE


def _done_before(item: Item, before: datetime | None) -> bool:
    """Done before ``before`` (``None``: a chunk of an earlier day, done before it)."""
    return before is None or (item.finished_at is not None and item.finished_at < before)


def _purge_chunk(book: QueueBook, name: str, before: datetime | None, now: datetime
                 ) -> list[str]:
    """Delete the done items of chunk ``name`` (those done before ``before``, when
    given); ids that stay keep the chunk. The ids deleted."""
    ids = list(book.chunk(name))
    book.prefetch(ids)
    done = [i for i in map(book.item, ids) if _is_done(i)]  # others do not belong here
    gone = [i for i in done if _done_before(i, before)]
    for item in gone:
        book.delete(item, now)
    book.set_chunk(name, [i.id for i in done if i not in gone], now)
    return _ids(gone)


def _ids(items: list[Item]) -> list[str]:
    return [i.id for i in items]
