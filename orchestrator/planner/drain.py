"""Drain tracks: sized by the decider when they are dispatched, worked by capped,
disposable workers, settled item by item when the workers end.

- **Sizing** (:func:`size`, at dispatch): the backlog of claimable items (ready, or
  failed past its back-off, ``not_before`` passed; highest priority first, then
  oldest) gives ``min(max_workers, ceil(backlog / task_cap))`` workers, each owning at
  most ``task_cap`` items. Each worker is a track of the run, ``<drain>-w<n>``, with
  the items it claimed in its record (:class:`~orchestrator.state.records.Work`).
  An empty backlog dispatches nothing: the drain track completes at once, "queue
  empty".
- **Claims** are part of the same decision, so they land in the tick's one mark
  commit: a racing tick loses the push, re-reads and never claims an item twice, and
  claiming costs no push of its own. Each claim holds until ``now + lease``.
- **Settling** (:func:`settle_workers`): once a worker is terminal, its report on
  each item it holds is applied (done, failed, back, released); a report on an item
  it does not hold is refused with one line; the items it did not report go back to
  the backlog (no attempt used). A worker whose backend has no account of its items
  (an artifact that never came) is held open until its lease ends.
- **Hygiene** (:func:`release_stranded`): a claim whose lease has passed and whose
  worker is not known to be alive goes back to the backlog.
- **Finishing** (:func:`finish_drains`): a drain track whose workers are all terminal
  and settled completes with one rolled-up result (drained, failed, dead, released,
  the slowest items and the failures, what remains in the queue).
- **Enqueue** (:func:`take_enqueue`): the items a completed track asked for join their
  queues in the commit that records it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..config.models import TrackSpec
from ..config.queuing import worker_name
from ..executors.base import Observation, WorkItem
from ..state import machine, queueops
from ..state.items import Item, ItemReport, ItemStatus
from ..state.phases import TrackPhase
from ..state.queue import QueueBook
from ..state.records import Run, Track, Work
from ..support.text import one_line
from .context import Context

WORKER_MARGIN_MINUTES = 5.0
"""A worker's hard limit beyond its wall clock: time to release the item in flight and
write its account."""
LEASE_MARGIN_MINUTES = 10.0
"""The default lease beyond the wall clock (a runner's set-up, the fan-in job)."""
SLOWEST = 5
FAILURES = 10
"""The slowest items and the failures a rolled-up result names."""
REFUSALS_NAMED = 10
"""Refused reports of one worker named one line each; the rest are counted."""


def _by(ctx: Context) -> str:
    return f"tick ({ctx.executor})"


def is_drain(track: Track) -> bool:
    """A drain track itself (not one of its workers)."""
    return track.spec.drain is not None and track.work is None


def item_backoff(spec: TrackSpec, attempt: int) -> timedelta:
    """Delay before an item's attempt ``attempt + 1``: doubles with each failure."""
    base = spec.retry_backoff_seconds
    return timedelta(seconds=min(base * 2 ** max(attempt - 1, 0), 24 * 3600))


# --------------------------------------------------------------------------- sizing


def size(ctx: Context, run: Run, track: Track) -> list[Track]:
    """Size the pending drain ``track``: claim its items and create its workers
    (returned, to be dispatched), or complete it when the queue has nothing to claim."""
    drain = track.spec.drain
    assert drain is not None
    book = ctx.state.queue(drain.queue)
    found = book.claimable(ctx.now, drain.max_workers * drain.task_cap)
    _log_problems(ctx, book)
    if not found:
        moved = ctx.move(track, TrackPhase.DISPATCHED, f"queue {drain.queue}: nothing to claim",
                         dispatched_at=ctx.now, not_before=None)
        ctx.move(moved, TrackPhase.COMPLETE, "queue empty", finished_at=ctx.now,
                 result={"summary": f"queue {drain.queue} empty: no worker dispatched",
                         "queue": drain.queue, "workers": 0, "drained": 0,
                         "remaining": book.remaining()})
        return []
    count = min(drain.max_workers, math.ceil(len(found) / drain.task_cap))
    lease = drain.lease_minutes or track.spec.timeout_minutes + LEASE_MARGIN_MINUTES
    until = ctx.now + timedelta(minutes=lease)
    ctx.move(track, TrackPhase.DISPATCHED,
             f"{count} worker(s) for {len(found)} item(s) of queue {drain.queue}",
             dispatched_at=ctx.now, not_before=None, executor=ctx.executor)
    workers = []
    start = 0
    for index in range(1, count + 1):
        share = len(found) // count + (1 if index <= len(found) % count else 0)
        chunk = found[start:start + share]
        start += share
        workers.append(_worker(ctx, run, track, index, [i.id for i in chunk], until))
        queueops.claim(book, chunk, workers[-1].key, until, track.spec.max_attempts,
                       ctx.now, _by(ctx))
    names = [w.name for w in workers]
    run = ctx.state.runs[run.run_id]
    ctx.state.runs[run.run_id] = run.model_copy(
        update={"tracks": [*run.tracks, *(n for n in names if n not in run.tracks)]})
    return workers


def _worker(ctx: Context, run: Run, track: Track, index: int, ids: list[str],
            until: Any) -> Track:
    drain = track.spec.drain
    assert drain is not None
    name = worker_name(track.name, index)
    spec = track.spec.model_copy(update={
        "name": name, "drain": None, "needs": [], "max_attempts": 1,
        "timeout_minutes": track.spec.timeout_minutes + WORKER_MARGIN_MINUTES})
    # the drain's attempt is part of the worker's key: a retried drain's workers never
    # take the dispatch keys (and so the attempts) of the workers before them
    worker = Track(run_id=run.run_id, name=name, spec=spec, attempt=track.attempt,
                   max_attempts=track.attempt,
                   work=Work(drain=track.name, queue=drain.queue, items=ids,
                             wall_minutes=track.spec.timeout_minutes, lease_until=until))
    ctx.set_track(worker)
    return worker


def work_items(ctx: Context, worker: Track, key: str) -> tuple[WorkItem, ...]:
    """The items ``worker`` (dispatched under ``key``) still holds, with their payloads."""
    assert worker.work is not None
    book = ctx.state.queues.get(worker.work.queue)
    if book is None:
        return ()
    book.prefetch(worker.work.items)
    out = []
    for item_id in worker.work.items:
        item = book.item(item_id)
        if item is not None and item.status is ItemStatus.CLAIMED and item.claimed_by == key:
            out.append(WorkItem(id=item.id, attempt=item.attempt + 1, payload=item.payload))
    return tuple(out)


# --------------------------------------------------------------------------- observing


def hold(ctx: Context, track: Track, seen: Observation) -> bool:
    """Whether a worker's end is not taken yet: its backend has no account of its items
    (e.g. its outcome artifact is missing) and its lease still holds."""
    return (track.work is not None and seen.items is None
            and seen.phase in machine.TRACK_TERMINAL and ctx.now < track.work.lease_until)


def settle_workers(ctx: Context) -> bool:
    """Apply the reports of every worker that ended, and release what it did not report;
    say whether any worker was settled."""
    changed = False
    for run in ctx.open_runs():
        tracks = ctx.state.tracks.get(run.run_id, {})
        for name in sorted(tracks):
            worker = tracks[name]
            if worker.work is None or worker.phase not in machine.TRACK_TERMINAL:
                continue
            book = ctx.state.queues.get(worker.work.queue)
            key = worker.dispatch_key or ""
            seen = ctx.obs.seen.get(key)
            reports = seen.items if seen is not None and seen.items else ()
            if book is None or key in ctx.settled or (key not in book.claims
                                                       and not reports):
                continue
            ctx.settled.add(key)
            _settle(ctx, run, worker, book, key, reports)
            changed = True
    return changed


@dataclass
class _Account:
    """What one worker's applied reports come to: counts by where the items went, the
    slowest items, the failures."""

    tally: Counter[str] = field(default_factory=Counter)
    slowest: list[tuple[float, str]] = field(default_factory=list)
    failures: list[list[str]] = field(default_factory=list)

    def add(self, report: ItemReport, status: ItemStatus | None) -> None:
        self.tally[_tally_key(status, report)] += 1
        if report.started_at and report.finished_at:
            seconds = (report.finished_at - report.started_at).total_seconds()
            self.slowest.append((seconds, report.id))
        if report.outcome in ("failed", "started"):
            self.failures.append([report.id, one_line(report.error or "failed")[:300]])

    def result(self, queue: str) -> dict[str, Any]:
        slowest = sorted(self.slowest, reverse=True)
        return {"summary": _words(self.tally), "queue": queue,
                **{k: self.tally.get(k, 0) for k in _TALLY},
                "slowest": [[i, round(s, 3)] for s, i in slowest[:SLOWEST]],
                "failures": self.failures[:FAILURES]}


def _apply(ctx: Context, worker: Track, owned: set[str], book: QueueBook, key: str,
           report: ItemReport) -> str | None:
    """Apply one report of ``worker`` to its queue; why it was refused (``None``: it
    was applied)."""
    if report.id not in owned:
        return f"item {report.id} is not one it was given"
    item = book.item(report.id)
    return queueops.settle(book, item, report, key, ctx.now,
                           item_backoff(worker.spec, item.attempt + 1 if item else 1))


def _note_dead(ctx: Context, book: QueueBook, item: Item | None) -> None:
    if item is not None and item.status is ItemStatus.DEAD:
        ctx.decision.dead_items[f"{book.name}/{item.id}"] = item.dead_reason or "dead"


def _release_unreported(ctx: Context, worker: Track, book: QueueBook, key: str) -> int:
    """Put back the items ``worker`` still holds (no attempt used); how many."""
    held = book.claims.get(key)
    released = 0
    for item_id in list(held.items if held is not None else []):
        item = book.item(item_id)
        if item is not None:
            queueops.release(book, item, ctx.now, _by(ctx),
                             f"its worker {worker.name} ended ({worker.phase.value}) "
                             "without reporting it")
            released += 1
    return released


def _settle(ctx: Context, run: Run, worker: Track, book: QueueBook, key: str,
            reports: Iterable[ItemReport]) -> None:
    assert worker.work is not None
    owned = set(worker.work.items)
    account = _Account()
    latest = {r.id: r for r in reports}  # the last word on each item
    book.prefetch(latest)
    for report in latest.values():
        why = _apply(ctx, worker, owned, book, key, report)
        if why is not None:
            account.tally["refused"] += 1
            if account.tally["refused"] <= REFUSALS_NAMED:  # a forged account of 1,000 lines: 10
                ctx.decision.note(run.run_id, f"{worker.name}: report refused: {why}")
            continue
        after = book.item(report.id)
        account.add(report, after.status if after else None)
        _note_dead(ctx, book, after)
    if account.tally["refused"] > REFUSALS_NAMED:
        ctx.decision.note(run.run_id, f"{worker.name}: "
                          f"{account.tally['refused'] - REFUSALS_NAMED} more report(s) refused")
    account.tally["released"] += _release_unreported(ctx, worker, book, key)
    book.drop_claim(key, ctx.now)
    _log_problems(ctx, book)
    result = account.result(book.name)
    ctx.set_track(worker.model_copy(update={"result": result}))
    ctx.decision.note(run.run_id, f"{worker.name}: {result['summary']}")


_TALLY = ("done", "failed", "dead", "back", "released", "refused")


def _tally_key(status: ItemStatus | None, report: ItemReport) -> str:
    """How a settled report counts: by where the item went."""
    if status is ItemStatus.READY:
        return "back" if report.outcome == "back" else "released"
    return status.value if status is not None else report.outcome


def _words(tally: Counter[str]) -> str:
    parts = [f"{tally[k]} {'drained' if k == 'done' else k}" for k in _TALLY if tally.get(k)]
    return ", ".join(parts) or "no item worked"


def release_stranded(ctx: Context) -> None:
    """Release every claim whose lease has passed and whose worker is not known to be
    alive (its run finished or gone, its record ended); no attempt is used."""
    for book in ctx.state.queues.values():
        for key, claim in sorted(book.claims.items()):
            if claim.until > ctx.now or (ctx.only_run and claim.run_id != ctx.only_run):
                continue
            if _alive(ctx, key, claim.run_id):
                continue
            book.prefetch(claim.items)
            for item_id in list(claim.items):
                item = book.item(item_id)
                if item is not None and item.status is ItemStatus.CLAIMED:
                    queueops.release(book, item, ctx.now, _by(ctx),
                                     f"lease of {key} passed; its worker is not alive")
            # an unreadable item's claim goes too; its record is left alone
            book.drop_claim(key, ctx.now)
            ctx.decision.log.append(f"queue {book.name}: released {len(claim.items)} "
                                    f"item(s) of {key}: its lease passed")
            _log_problems(ctx, book)


def _alive(ctx: Context, key: str, run_id: str) -> bool:
    run = ctx.state.runs.get(run_id)
    if run is None or run.status not in machine.RUN_OPEN:
        return False
    return any(t.dispatch_key == key and t.phase in machine.TRACK_OPEN
               for t in ctx.state.tracks.get(run_id, {}).values())


# --------------------------------------------------------------------------- finishing


def _drain_book(ctx: Context, track: Track) -> QueueBook | None:
    return ctx.state.queues.get(track.spec.drain.queue) if track.spec.drain else None


def _all_settled(workers: list[Track], book: QueueBook | None) -> bool:
    """Every worker ended, and none still holds a claim (its reports not applied yet)."""
    if any(w.phase not in machine.TRACK_TERMINAL for w in workers):
        return False
    return book is None or not any(w.dispatch_key in book.claims for w in workers)


def _workers(tracks: dict[str, Track], drain: str) -> list[Track]:
    return [t for t in tracks.values() if t.work is not None and t.work.drain == drain]


def finish_drains(ctx: Context) -> bool:
    """Complete every dispatched drain track whose workers have all ended and settled;
    say whether any was completed."""
    changed = False
    for run in ctx.open_runs():
        tracks = ctx.state.tracks.get(run.run_id, {})
        for name in sorted(tracks):
            track = tracks[name]
            if not is_drain(track) or track.phase is not TrackPhase.DISPATCHED:
                continue
            workers = _workers(tracks, name)
            book = _drain_book(ctx, track)
            if _all_settled(workers, book):
                _finish(ctx, track, workers, book)
                changed = True
    return changed


def _seconds(row: list[Any]) -> float:
    value = row[1] if len(row) > 1 else 0
    return float(value) if isinstance(value, int | float) else 0.0


def _count(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _rolled_up(workers: list[Track]) -> tuple[Counter[str], list[list[Any]], list[Any]]:
    """The workers' tallies summed, their slowest items (slowest first), their failures."""
    totals: Counter[str] = Counter()
    slowest: list[list[Any]] = []
    failures: list[Any] = []
    for worker in workers:
        result = worker.result or {}
        totals.update({key: _count(result.get(key)) for key in _TALLY})
        slowest += [s for s in result.get("slowest") or [] if isinstance(s, list)]
        failures += list(result.get("failures") or [])
    slowest.sort(key=_seconds, reverse=True)
    return totals, slowest, failures


def _finish(ctx: Context, track: Track, workers: list[Track], book: QueueBook | None) -> None:
    totals, slowest, failures = _rolled_up(workers)
    remaining = book.remaining() if book is not None else 0
    ended = Counter(w.phase.value for w in workers)
    summary = f"{_words(totals)} by {len(workers)} worker(s); {remaining} remain in the queue"
    result = {"summary": summary, "queue": track.spec.drain.queue if track.spec.drain else "",
              "workers": len(workers), "drained": totals["done"],
              **{k: totals[k] for k in _TALLY if k != "done"}, "remaining": remaining,
              "workers_ended": dict(sorted(ended.items())),
              "slowest": slowest[:SLOWEST], "failures": failures[:FAILURES]}
    good = any(w.phase is TrackPhase.COMPLETE for w in workers)
    phase = TrackPhase.COMPLETE if good else TrackPhase.FAILED
    why = "every worker ended" if good else "no worker completed"
    ctx.move(track, phase, why, finished_at=ctx.now, result=result,
             error_log=track.error_log if good else [*track.error_log, why])


# --------------------------------------------------------------------------- enqueue


def take_enqueue(ctx: Context, track: Track, seen: Observation) -> None:
    """Add the items a completed track asked for to their queues (same commit)."""
    if seen.enqueue_error:
        ctx.decision.note(track.run_id, f"{track.name}: enqueue file refused: "
                          f"{one_line(seen.enqueue_error)}")
    by_queue: dict[str, list[Any]] = {}
    for entry in seen.enqueue:
        if entry.queue is not None:
            by_queue.setdefault(entry.queue, []).append(entry)
    for queue, entries in sorted(by_queue.items()):
        done = queueops.enqueue(ctx.state.queue(queue), entries, ctx.now,
                                f"{track.run_id}/{track.name}")
        ctx.decision.note(track.run_id, f"{track.name}: enqueued {len(done.added)} item(s) "
                          f"to {queue}" + (f", {len(done.existing)} already there"
                                           if done.existing else ""))


def log_notes(ctx: Context) -> None:
    """One line per queue whose summary was rebuilt, and per record it cannot read."""
    for book in ctx.state.queues.values():
        if book.note is not None and book.note not in ctx.decision.log:
            ctx.decision.log.append(f"queue {book.name}: {book.note}")
        _log_problems(ctx, book)


def _log_problems(ctx: Context, book: QueueBook) -> None:
    for _, why in sorted(book.problems.items()):
        line = f"quarantined {why}"
        if line not in ctx.decision.log:
            ctx.decision.log.append(line)
