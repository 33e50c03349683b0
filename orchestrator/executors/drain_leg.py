"""A drain worker on a CI runner (``orchestrator queue work``, run by ``track.yml``'s
drain legs): its items read from the state branch, worked one by one, and its account
written into its outcome file.

- The leg carries its items' ids and attempts only (workflow inputs are too small for
  payloads); the payloads come from the state branch, read without a push (the leg
  has ``contents: read``).
- Only the items whose record says they are claimed by this worker's dispatch key are
  worked: an item released since (its lease passed) belongs to someone else.
- The loop is the local supervisor's (:class:`~._supervise.Drainer`), with the same
  environment a track gets and none of the orchestrator's credentials.
- The outcome is written whatever happens: a worker that cannot read its items says
  so and reports none (the tick releases them, no attempt used).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..config.fieldtypes import check_id, check_run_id
from ..config.queuing import MAX_TASK_CAP
from ..errors import OrchestratorError, UserError
from ..state import layout, queueload
from ..state.items import ItemStatus
from ..state.layout import ITEM_ID_RE
from ..store import StateStore
from ..support.credentials import track_environment
from . import _attempt_folder as files
from . import _supervise as supervisor
from .local_outcome import read_enqueue, read_reports
from .outcomes import build, write

KILL_GRACE_SECONDS = 30.0
"""As an ordinary leg's command gets between SIGTERM and SIGKILL (:mod:`.leg_command`)."""


def parse_items(text: str) -> list[tuple[str, int]]:
    """The leg's ``[[id, attempt], ...]``, checked (ids become file names)."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise UserError(f"--items: not JSON: {exc}") from None
    if not isinstance(raw, list) or len(raw) > MAX_TASK_CAP:
        raise UserError(f"--items: a list of at most {MAX_TASK_CAP} [id, attempt] pairs "
                        "is expected")
    out = []
    for entry in raw:
        if (not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str)
                or not ITEM_ID_RE.fullmatch(entry[0]) or not isinstance(entry[1], int)
                or entry[1] < 1):
            raise UserError(f"--items: not an [id, attempt] pair: {str(entry)[:80]}")
        out.append((entry[0], entry[1]))
    return out


def _payloads(store: StateStore, queue: str, key: str, wanted: list[tuple[str, int]],
              folder: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Write the payload of each item this worker holds; the items to work, and one
    line per item it does not hold."""
    books, _ = queueload.load(store.read().files)
    book = books.get(queue)
    if book is None:
        raise UserError(f"no queue {queue!r} on the state branch")
    book.prefetch(i for i, _ in wanted)
    (folder / files.ITEMS).mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    skipped: list[str] = []
    for item_id, attempt in wanted:
        item = book.item(item_id)
        if item is None or item.status is not ItemStatus.CLAIMED or item.claimed_by != key:
            skipped.append(f"item {item_id}: not held by {key}; left alone")
            continue
        files.write_json_atomic(folder / files.ITEMS / f"{item_id}.json",
                                     item.payload)
        entries.append({"id": item_id, "attempt": attempt})
    return entries, skipped


def work(store: StateStore, *, run_id: str, track: str, attempt: int, queue: str,
         items_json: str, wall_minutes: float, command: str, output: Path,
         work_dir: Path | None, cwd: Path) -> Path:
    """Work the items, write the outcome file into ``output``, return its path."""
    check_run_id(run_id)
    check_id(track, "track name")
    layout.check_queue(queue)
    key = f"{run_id}--{track}--{attempt}"
    started = datetime.now(UTC)
    folder = (work_dir or output.parent / "orchestrator-worker").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    wanted = parse_items(items_json)
    stop: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop.append(f"stopped by {signal.Signals(signum).name}")

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        entries, skipped = _payloads(store, queue, key, wanted, folder)
    except OrchestratorError as exc:
        outcome = build(run_id=run_id, track=track, attempt=attempt, exit_code=1,
                        started_at=started, finished_at=datetime.now(UTC),
                        message=f"the worker could not read its items: {exc.message}",
                        items=[])
        return write(output, outcome)
    for line in skipped:
        print(f"orchestrator: {line}", file=sys.stderr)
    env = track_environment(dict(os.environ))
    env.pop("ORCHESTRATOR_RESULT", None)
    env["ORCHESTRATOR_ENQUEUE"] = str(folder / files.ENQUEUE)
    supervisor.Drainer(folder, command, env, str(cwd), entries, wall_minutes * 60,
                       KILL_GRACE_SECONDS, lambda: stop[0] if stop else None).work()
    reports = read_reports(folder)
    enqueue, enqueue_error = read_enqueue(folder)
    for report in reports:
        print(f"item {report.id}: {report.outcome}" + (f" ({report.error.splitlines()[0]})"
                                                      if report.error else ""),
              file=sys.stderr)
    outcome = build(run_id=run_id, track=track, attempt=attempt, exit_code=0,
                    started_at=started, finished_at=datetime.now(UTC), items=list(reports),
                    enqueue=list(enqueue), enqueue_error=enqueue_error)
    return write(output, outcome)
