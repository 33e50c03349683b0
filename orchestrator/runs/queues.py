"""Work queues between ticks: enqueue, the views of ``queue list | show | stats``,
``queue purge``, and the dead items that ``dlq`` lists, requeues and discards.

The changes here are pure functions of one snapshot's files; the commands run them
through the same compare-and-swap as the tick, so a racing tick or enqueue never loses
an item (the loser computes its change again on the new tip). The views read the
summary, and only the items they show: a status is listed from its index (the backlog
blocks for ``ready`` and ``failed``, the claims, the dead letters, the done chunks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from ..errors import NotFound, UserError
from ..state import layout, queueformat, queueload, queueops
from ..state import queue as queue_state
from ..state.items import Item, ItemStatus, NewItem, key_id
from ..state.layout import ITEM_ID_RE
from ..state.queue import QueueBook
from ..store import Change
from ..support.times import iso


def books(files: Mapping[str, bytes]) -> dict[str, QueueBook]:
    """Every queue of the branch, from its summary."""
    return queueload.load(files)[0]


def book(files: Mapping[str, bytes], queue: str, *, must_exist: bool = False) -> QueueBook:
    """The queue ``queue`` (an empty one when it has nothing yet)."""
    layout.check_queue(queue)
    found = books(files).get(queue)
    if found is None:
        if must_exist:
            raise NotFound(f"no queue {queue!r}")
        return QueueBook.empty(queue, files)
    return found


# --------------------------------------------------------------------------- enqueue


def add(files: Mapping[str, bytes], queue: str, items: Iterable[NewItem], now: datetime,
        by: str) -> tuple[Change | None, queueops.Enqueued]:
    """The change that adds ``items`` to ``queue`` (``None``: every key existed)."""
    target = book(files, queue)
    done = queueops.enqueue(target, items, now, by)
    return (target.dump() or None), done


# --------------------------------------------------------------------------- views


def listed(files: Mapping[str, bytes], queue: str,
           status: ItemStatus | None = None) -> list[Item]:
    """The items of ``queue`` (of ``status`` only, read through its index), in queue
    order."""
    target = book(files, queue, must_exist=True)
    ids = _ids(target, status)
    target.prefetch(ids)
    items = [i for i in (target.item(x) for x in ids) if i is not None]
    return sorted((i for i in items if status is None or i.status is status),
                  key=lambda i: i.seq)


def _backlog_ids(target: QueueBook) -> list[str]:
    return [i for b in target.blocks for i in target.entries(b)]


def _claimed_ids(target: QueueBook) -> list[str]:
    return [i for c in target.claims.values() for i in c.items]


def _dead_ids(target: QueueBook) -> list[str]:
    return list(target.dead)


def _done_ids(target: QueueBook) -> list[str]:
    return [i for c in target.done for i in target.chunk(c)]


def _all_ids(target: QueueBook) -> list[str]:
    return [path.rpartition("/")[2].removesuffix(".json")
            for path in queueformat.all_item_paths(target.name, target.files)
            if path.endswith(".json")]


_IDS: dict[ItemStatus | None, Callable[[QueueBook], list[str]]] = {
    ItemStatus.READY: _backlog_ids,
    ItemStatus.FAILED: _backlog_ids,
    ItemStatus.CLAIMED: _claimed_ids,
    ItemStatus.DEAD: _dead_ids,
    ItemStatus.DONE: _done_ids,
}
"""Where the ids of items of a status are listed; any other status reads every item's path."""


def _ids(target: QueueBook, status: ItemStatus | None) -> list[str]:
    return _IDS.get(status, _all_ids)(target)


def find(files: Mapping[str, bytes], queue: str, ident: str) -> Item:
    """The item ``ident`` of ``queue``: an item id, or an idempotency key."""
    target = book(files, queue, must_exist=True)
    candidates = [ident] if ITEM_ID_RE.fullmatch(ident) else []
    for item_id in [*candidates, key_id(queue, ident)]:
        item = target.item(item_id)
        if item is not None:
            return item
    problem = next(iter(target.problems.values()), None)
    raise NotFound(problem or f"no item {ident!r} in queue {queue}")


def row(item: Item) -> dict[str, Any]:
    return {"id": item.id, "status": item.status.value, "priority": item.priority,
            "attempt": item.attempt, "key": item.idempotency_key,
            "claimed_by": item.claimed_by, "created_at": iso(item.created_at),
            "updated_at": iso(item.updated_at)}


def rows_text(items: list[Item]) -> list[str]:
    if not items:
        return ["no items"]
    return [f"{i.id}  {i.status.value:<7}  p{i.priority:<4} attempt {i.attempt}"
            + (f"  key {i.idempotency_key}" if i.idempotency_key else "")
            + (f"  {i.claimed_by}" if i.claimed_by else "") for i in items]


def _item_header(item: Item) -> list[str]:
    of = f" of {item.max_attempts}" if item.max_attempts else ""
    key = f", key {item.idempotency_key}" if item.idempotency_key else ""
    return [f"{item.queue}/{item.id}: {item.status.value} (attempt {item.attempt}{of})",
            f"  priority {item.priority}, enqueued {iso(item.created_at)}{key}"]


def _claim_line(item: Item) -> str:
    until = iso(item.locked_until) if item.locked_until else "-"
    return f"  claimed by {item.claimed_by} until {until}"


def _dead_line(item: Item) -> str:
    discarded = (f"; discarded by {item.discarded_by}: {item.discarded_reason}"
                 if item.discarded else "")
    return f"  dead: {item.dead_reason}{discarded}"


def item_text(item: Item) -> list[str]:
    lines = _item_header(item) + _item_state(item)
    lines += [f"  ! {entry}" for entry in item.error_log]
    lines += [f"  {iso(h.at)}  {h.from_ or '-'} -> {h.to}  {h.by}: {h.reason}"
              for h in item.state_history]
    return lines


def _item_state(item: Item) -> list[str]:
    """Where the item stands: its wait, its retry, its claim, its death, its result."""
    lines = []
    if item.not_before:
        lines.append(f"  not before {iso(item.not_before)}")
    if item.retry_at and item.status is ItemStatus.FAILED:
        lines.append(f"  retried after {iso(item.retry_at)}")
    if item.claimed_by:
        lines.append(_claim_line(item))
    if item.dead_reason:
        lines.append(_dead_line(item))
    if item.result is not None:
        lines.append(f"  result: {item.result}")
    return lines


def stats(files: Mapping[str, bytes], queue: str | None, now: datetime) -> list[dict[str, Any]]:
    """Per queue: counts by status, the backlog, the oldest ready item's age, who holds
    claims. Reads the summaries, and one item per queue (its oldest in the backlog)."""
    found = books(files)
    if queue is not None and queue not in found:
        raise NotFound(f"no queue {queue!r}")
    out = []
    for name in sorted(found) if queue is None else [queue]:
        target = found[name]
        data = queue_state.describe(target)
        oldest = _oldest(target)
        data["oldest_ready_at"] = iso(oldest.created_at) if oldest else None
        data["oldest_ready_age_seconds"] = (
            int((now - oldest.created_at).total_seconds()) if oldest else None)
        out.append(data)
    return out


def _oldest(target: QueueBook) -> Item | None:
    """The backlog item enqueued first (lowest place across the priority lanes)."""
    lanes: dict[str, str] = {}
    for block in sorted(target.blocks):
        lanes.setdefault(block[:7], block)  # each lane's first block
    best: tuple[int, str] | None = None
    for block in lanes.values():
        for item_id, (seq, _) in target.entries(block).items():
            if best is None or seq < best[0]:
                best = (seq, item_id)
    return target.item(best[1]) if best else None


def stats_text(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["no queues"]
    lines = []
    for data in rows:
        counts = ", ".join(f"{n} {s}" for s, n in data["counts"].items()) or "empty"
        age = data["oldest_ready_age_seconds"]
        lines.append(f"{data['queue']}: {counts}; backlog {data['backlog']}"
                     + (f", oldest ready {timedelta(seconds=age)} old" if age is not None
                        else ""))
        lines += [f"  claimed by {key}: {n}" for key, n in data["claimed_by"].items()]
    return lines


def purge(files: Mapping[str, bytes], queue: str, older_than_days: float,
          now: datetime) -> tuple[Change | None, list[str]]:
    """The change that removes the items of ``queue`` done more than ``older_than_days``
    ago, and their ids (the branch's history keeps them)."""
    target = book(files, queue, must_exist=True)
    removed = queueops.purge_done(target, now - timedelta(days=older_than_days), now)
    return (target.dump() or None) if removed or target.changed else None, removed


# --------------------------------------------------------------------------- dead items


def dead_letters(files: Mapping[str, bytes], *, show_all: bool = False) -> list[Item]:
    """The dead items of every queue, oldest first; discarded ones with ``show_all``."""
    out = [item for target in books(files).values() for item in _dead_of(target, show_all)]
    return sorted(out, key=lambda i: (i.finished_at or i.updated_at, i.queue, i.id))


def _dead_of(target: QueueBook, show_all: bool) -> list[Item]:
    """The dead items of one queue; discarded ones with ``show_all``."""
    ids = [i for i, d in target.dead.items() if show_all or not d.discarded]
    target.prefetch(ids)
    return [i for i in (target.item(x) for x in ids) if i is not None]


def letter_lines(items: list[Item]) -> list[str]:
    return [f"{i.queue}/{i.id}  {iso(i.finished_at or i.updated_at)}  {i.dead_reason}"
            f" (attempt {i.attempt})" + ("  (discarded)" if i.discarded else "")
            for i in items]


def _dead(files: Mapping[str, bytes], key: str) -> tuple[QueueBook, Item]:
    parsed = layout.parse_item_letter_key(key)
    if parsed is None:
        raise UserError(f"invalid item dead letter {key!r}: expected <queue>/<item-id>")
    queue, item_id = parsed
    target = book(files, queue, must_exist=True)
    item = target.item(item_id)
    if item is None or item.status is not ItemStatus.DEAD:
        raise NotFound(f"no dead item {key!r}")
    return target, item


def find_letter(files: Mapping[str, bytes], key: str) -> Item:
    return _dead(files, key)[1]


def requeue(files: Mapping[str, bytes], key: str, who: str, reason: str,
            now: datetime) -> Change:
    """The dead item ``key`` back to ``ready`` with a fresh attempt budget."""
    target, item = _dead(files, key)
    if item.discarded:
        raise UserError(f"dead letter {key!r} was discarded; it cannot be requeued")
    queueops.requeue(target, item, now, who, reason)
    return target.dump()


def discard(files: Mapping[str, bytes], key: str, who: str, reason: str,
            now: datetime) -> Change | None:
    """The dead item ``key`` marked discarded by ``who``; ``None`` if it already is."""
    target, item = _dead(files, key)
    if item.discarded:
        return None
    queueops.discard(target, item, now, who, reason)
    return target.dump()


def queue_letters(files: Mapping[str, bytes], queue: str) -> list[str] | None:
    """The ids of ``queue``'s dead items waiting (not discarded), oldest first, read from
    its summary alone; ``None`` when there is no such queue."""
    target = books(files).get(layout.check_queue(queue))
    if target is None:
        return None
    return sorted((i for i, d in target.dead.items() if not d.discarded),
                  key=lambda i: (target.dead[i].at, i))


def requeue_queue(files: Mapping[str, bytes], queue: str, ids: Iterable[str], who: str,
                  reason: str, now: datetime) -> Change:
    """The dead items ``ids`` of ``queue`` back to ``ready``, on one read of the queue:
    a bulk requeue costs one change, however many items it names."""
    target, items = _dead_items(files, queue, ids)
    for item in items:
        if item.discarded:
            raise UserError(f"dead letter {queue}/{item.id} was discarded; it cannot be "
                            "requeued")
        queueops.requeue(target, item, now, who, reason)
    return target.dump()


def discard_queue(files: Mapping[str, bytes], queue: str, ids: Iterable[str], who: str,
                  reason: str, now: datetime) -> Change:
    """The dead items ``ids`` of ``queue`` marked discarded, those not already, on one
    read of the queue."""
    target, items = _dead_items(files, queue, ids)
    for item in items:
        if not item.discarded:
            queueops.discard(target, item, now, who, reason)
    return target.dump()


def _dead_items(files: Mapping[str, bytes], queue: str,
                ids: Iterable[str]) -> tuple[QueueBook, list[Item]]:
    """``queue`` and its items ``ids``, read in one bulk read; each must still be dead."""
    target = book(files, queue, must_exist=True)
    ids = list(dict.fromkeys(ids))
    target.prefetch(ids)
    items = []
    for ident in ids:
        item = target.item(ident)
        if item is None or item.status is not ItemStatus.DEAD:
            raise NotFound(f"no dead item '{queue}/{ident}'")
        items.append(item)
    return target, items
