"""A bad input to a work queue costs only itself: a corrupt item record, an item's
result file that is huge, binary or a symlink, a worker's account naming an item it
does not own, an enqueue file that breaks a limit. Each is named in one line; every
other item, and a schedule beside it, keeps going. Real git, real processes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.state import layout
from orchestrator.state.items import ItemStatus, key_id
from orchestrator.store import GitStateStore
from tests import queues
from tests.drive import STATE_BRANCH, cli, read_state, tick
from tests.gitrepo import clone, make_origin
from tests.integration.test_queue_local import settle

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)

# Each item's payload names what its command leaves as its result file.
RESULTS = ('kind=$(python3 -c \'import json, os; '
           'print(json.load(open(os.environ["ORCHESTRATOR_ITEM"])))\'); '
           'case "$kind" in '
           'huge) head -c 100000 /dev/zero | tr "\\0" a > "$ORCHESTRATOR_RESULT" ;; '
           'binary) printf "\\377\\376{" > "$ORCHESTRATOR_RESULT" ;; '
           'link) ln -s /etc/passwd "$ORCHESTRATOR_RESULT" ;; '
           'fifo) mkfifo "$ORCHESTRATOR_RESULT" ;; '
           'forge) echo \'{"id": "' + "0" * 24 + '", "outcome": "done", "attempt": 1}\' '
           '>> "$(dirname "$ORCHESTRATOR_RESULT")/../items.jsonl" ;; '
           '*) printf \'{"summary": "fine"}\' > "$ORCHESTRATOR_RESULT" ;; esac')


def _repo(tmp_path: Path) -> Path:
    origin = make_origin(tmp_path, {
        "crawl": {"cron": "*/10 * * * *", "tracks": [{
            "name": "pages", "run": RESULTS,
            "drain": {"queue": queues.QUEUE, "task_cap": 10, "max_workers": 1}}]},
        "every": {"cron": "* * * * *", "overlap": "allow",
                  "tracks": [{"name": "a", "run": "true"}]}})
    return clone(origin, tmp_path / "repo")


def _add(repo: Path, kinds: list[str]) -> None:
    lines = repo.parent / "items.jsonl"
    lines.write_text("".join(json.dumps({"payload": k, "key": k}) + "\n" for k in kinds))
    cli(repo, "queue", "add", queues.QUEUE, "--file", str(lines),
        "--now", "2026-12-01T06:00:00Z", check=True)


@pytest.mark.slow
def test_hostile_result_files_and_a_forged_account_cost_only_their_items(
        tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    kinds = ["huge", "binary", "link", "fifo", "forge", "ok"]
    _add(repo, kinds)
    work = tmp_path / "work"
    first = tick(repo, T0, work)
    settle(work, first.dispatched)
    second = tick(repo, T0 + timedelta(minutes=1), work)
    assert "every--20261201T0701Z" in second.decision.state.runs  # the other fired
    refused = [line for line in second.decision.log if "refused:" in line]
    assert len(refused) == 1 and "0" * 24 in refused[0]  # the forged line, named once
    _, files = read_state(repo)
    book = queues.book_of(files)
    assert book.counts == {"done": len(kinds)}  # every item counts: only results differ
    results = {k: book.item(key_id(queues.QUEUE, k)).result for k in kinds}  # type: ignore[union-attr]
    assert results["ok"] == {"summary": "fine"}
    assert "larger than" in results["huge"]["error"]  # type: ignore[index]
    assert "UTF-8" in results["binary"]["error"]  # type: ignore[index]
    assert "symlink" in results["link"]["error"]  # type: ignore[index]
    assert "FIFO" in results["fifo"]["error"]  # type: ignore[index]


def test_a_corrupt_item_record_is_named_and_the_rest_is_drained(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _add(repo, ["a", "b", "c"])
    bad = layout.item_path(queues.QUEUE, key_id(queues.QUEUE, "b"))
    store = GitStateStore(repo, "origin", STATE_BRANCH)
    store.transact(lambda snap: {bad: b'{"id": "nonsense", "payload": ' + b"[" * 100 + b"}"},
                   "a bad hand edit")
    work = tmp_path / "work"
    first = tick(repo, T0, work)
    quarantined = [line for line in first.decision.log if line.startswith("quarantined")]
    assert any(bad in line for line in quarantined)
    assert all("\n" not in line for line in quarantined)
    assert any(r.startswith("every--") for r in first.decision.state.runs)  # it fired
    settle(work, first.dispatched)
    tick(repo, T0 + timedelta(minutes=1), work)
    _, files = read_state(repo)
    book = queues.book_of(files)
    statuses = {k: (i.status if (i := book.item(key_id(queues.QUEUE, k))) else None)
                for k in "abc"}
    assert statuses == {"a": ItemStatus.DONE, "b": None, "c": ItemStatus.DONE}
    assert files[bad].startswith(b'{"id": "nonsense"')  # left alone, never rewritten
