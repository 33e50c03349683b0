"""What the dashboard adds to a tick that renders ``state/index.html``, at scale.

Builds a bare origin with 1,000 schedule files (Europe/Berlin, hourly) and a state
branch of 10,000 finished runs (10 a schedule, every 7th failed) and a work queue of
``--items`` items (60% done over the last 14 days, 1% dead), then times, on a fresh
snapshot each time: parsing every schedule file (what the tick does when its memo left
quiet ones unparsed), building the dashboard on the state the tick already holds (its
queue section apart), and rendering the page with the newest 200 runs. A quiet tick
does none of this.

    python bench/dashboard.py [--reps 3] [--items 100000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.brief import dashboard, queueboard, render_index
from orchestrator.config.files import load_all
from orchestrator.state import codec, layout
from orchestrator.state import index as state_index
from orchestrator.state.history import page_runs
from orchestrator.state.items import ItemStatus, NewItem
from orchestrator.state.machine import RUN_OPEN
from orchestrator.state.phases import RunStatus
from orchestrator.state.queue import QueueBook
from orchestrator.state.queueops import enqueue
from orchestrator.state.records import Run
from orchestrator.store import GitStateStore

SCHEDULES, RUNS = 1000, 10_000
T0 = datetime(2026, 11, 20, tzinfo=UTC)


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def seed_queue(repo: Path, count: int, now: datetime) -> None:
    """Queue ``pages`` of ``count`` items: 60% done over 14 days, 1% dead, the rest
    ready, committed in one go (built in memory)."""

    def change(snap: Any) -> dict[str, bytes | None]:
        book = QueueBook.empty("pages", snap.files)
        added = enqueue(book, (NewItem(payload={"n": n}) for n in range(count)),
                        now - timedelta(days=15), "bench").added
        for n, item in enumerate(added):
            if n % 100 < 60 or n % 100 == 99:
                at = now - timedelta(days=n % 14, minutes=1)
                done = n % 100 < 60
                book.put(item.model_copy(update={
                    "status": ItemStatus.DONE if done else ItemStatus.DEAD,
                    "finished_at": at, "dead_reason": None if done else "bench"}),
                    item, at)
        return book.dump()

    GitStateStore(repo, "origin", "orchestrator-state").transact(change, "queue")


def workspace(root: Path) -> Path:
    origin, repo = root / "origin.git", root / "repo"
    git("init", "-q", "--bare", "--initial-branch=main", str(origin), cwd=root)
    git("clone", "-q", str(origin), str(repo), cwd=root)
    (repo / "schedules").mkdir()
    for i in range(SCHEDULES):
        (repo / "schedules" / f"s{i:04d}.json").write_text(json.dumps({
            "cron": f"{i % 60} * * * *", "timezone": "Europe/Berlin",
            "tracks": [{"name": "t", "run": "true"}]}))
    git("add", ".", cwd=repo)
    git("commit", "-qm", "schedules", cwd=repo)
    git("push", "-q", "origin", "HEAD:main", cwd=repo)
    files: dict[str, bytes | None] = {}
    for k in range(RUNS):
        sid, slot = f"s{k % SCHEDULES:04d}", T0 + timedelta(hours=k // SCHEDULES)
        run_id = f"{sid}--{slot:%Y%m%dT%H%MZ}"
        files[layout.run_path(run_id)] = codec.to_json(Run(
            run_id=run_id, schedule_id=sid, slot=slot, fire_at=slot, created_at=slot,
            deadline=slot + timedelta(hours=1), tracks=["t"],
            status=RunStatus.FAILED if k % 7 == 0 else RunStatus.COMPLETED,
            finished_at=slot + timedelta(minutes=1), work_started_at=slot,
            work_finished_at=slot + timedelta(seconds=20 + k % 40)))
    GitStateStore(repo, "origin", "orchestrator-state").transact(lambda snap: files, "runs")
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--items", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = workspace(Path(tmp))
        now = T0 + timedelta(days=1)
        seed_queue(repo, args.items, now)
        print("| rep | parse schedules s | dashboard s | of it queues s | "
              "page runs + render s | page KiB |")
        print("|---:|---:|---:|---:|---:|---:|")
        for rep in range(args.reps):
            snap = GitStateStore(repo, "origin", "orchestrator-state").read()
            state = state_index.load(snap.files).state
            # what a tick holds: the open runs (this branch has no open.json, so the
            # load above read every record; a tick's load reads only the open ones)
            state.runs = {k: v for k, v in state.runs.items() if v.status in RUN_OPEN}
            start = time.perf_counter()
            parsed = load_all(repo / "schedules")
            parsed_at = time.perf_counter()
            board = dashboard.from_files(snap.files, parsed.schedules, [], now, state=state,
                                         last_tick=now)
            built_at = time.perf_counter()
            (row,) = queueboard.rows(state.queues, now)
            assert row.done == args.items * 60 // 100, row  # the queue is on the page
            queues_s = time.perf_counter() - built_at
            built_at = time.perf_counter()
            runs, older = page_runs(snap.files, state.runs)
            page = render_index(list(runs.values()), generated_at=now, board=board,
                                older=older)
            done = time.perf_counter()
            print(f"| {rep} | {parsed_at - start:.2f} | {built_at - parsed_at - queues_s:.2f} "
                  f"| {queues_s:.3f} | "
                  f"{done - built_at:.2f} | {len(page) // 1024} |")


if __name__ == "__main__":
    main()
