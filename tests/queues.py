"""Work-queue helpers for tests, written once: the acceptance backlog, a worker command
that logs every item it works, and reading a queue back from the state branch.

The backlog of the acceptance scenario (:func:`backlog_lines`): 499 lines of which 20
repeat an earlier key (479 unique items), 5 that always fail; then one item of
priority 10 is added last (:data:`PRIORITY_KEY`), 480 unique items in all.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.state import queueload
from orchestrator.state.items import key_id
from orchestrator.state.queue import QueueBook

QUEUE = "pages"
PRIORITY_KEY = "urgent"
FAILING = 5
DUPLICATES = 20
LINES = 499


def worker_command(log: Path) -> str:
    """``run`` of a drain track: log the item's id (one short append, atomic), then
    exit 3 for a payload that says ``fail``, else 0."""
    return (f'echo "$ORCHESTRATOR_ITEM_ID $ORCHESTRATOR_ITEM_ATTEMPT" >> {log}; '
            'if grep -q \'"fail"\' "$ORCHESTRATOR_ITEM"; then echo "no such page" >&2; '
            'exit 3; fi')


def backlog_lines() -> list[dict[str, Any]]:
    """The 499 lines of the enqueue file (keys ``page-<n>``; every 24th line from the
    24th repeats the key of the line 20 before it, 20 times; five pages always fail)."""
    lines: list[dict[str, Any]] = []
    unique = 0
    for n in range(LINES):
        if n % 24 == 23 and len([x for x in lines if x.get("dup")]) < DUPLICATES:
            lines.append({"payload": {"url": "dup"}, "key": lines[n - 20]["key"], "dup": True})
            continue
        kind = "fail" if unique % 97 == 50 and unique < 97 * FAILING else "ok"
        lines.append({"payload": {"url": f"https://example.org/{unique}", "kind": kind},
                      "key": f"page-{unique}"})
        unique += 1
    for line in lines:
        line.pop("dup", None)
    return lines


def write_backlog(path: Path) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in backlog_lines()))
    return path


def unique_keys() -> list[str]:
    return [*dict.fromkeys(line["key"] for line in backlog_lines()), PRIORITY_KEY]


def failing_keys() -> list[str]:
    return [line["key"] for line in backlog_lines()
            if isinstance(line["payload"], dict) and line["payload"].get("kind") == "fail"]


def ids(keys: list[str]) -> list[str]:
    return [key_id(QUEUE, k) for k in keys]


def worked(log: Path) -> Counter[str]:
    """How often each item id was worked (by the worker command's log)."""
    if not log.exists():
        return Counter()
    return Counter(line.split()[0] for line in log.read_text().splitlines() if line.strip())


def book_of(files: Mapping[str, bytes], queue: str = QUEUE) -> QueueBook:
    books, _ = queueload.load(files)
    return books[queue]
