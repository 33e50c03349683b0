"""What work queues cost, against baselines measured in the same run.

Four tables, the real CLI in a subprocess against a bare origin on this machine
(Python's start and git's processes included, as a runner pays them), each cell a
median of ``--reps`` samples taken in turns with its baseline:

1. **enqueue** ``queue add --file`` of 10,000 items, against ``queue add --payload`` of
   one item: time, files written and the bytes its commit adds to the origin (the pack
   of its new objects, what a push sends).
2. **a fire** that sizes a drain track and claims 100 items (4 workers of 25) from a
   queue of 100,000, against the same fire of a schedule with 4 ordinary tracks on a
   branch without a queue: time of the tick and the bytes of its mark commit.
3. **a no-op tick** (nothing due, nothing open) with a backlog of 100,000 items,
   against the same tick with no queue; and the same in a fresh shallow clone, as on
   a runner, with what that clone downloaded.
4. **pushes per drained batch**, from the firing tick to the run's brief, for
   batches of 1 to 16 workers and 25 to 400 items (in-process ticks, local workers).

    python bench/queue.py [--reps 5] [--items 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench/scale.py

from scale import ENV, size_mib

from orchestrator.state import queueops
from orchestrator.state.items import NewItem
from orchestrator.state.queue import QueueBook
from orchestrator.store import GitStateStore

BRANCH = "orchestrator-state"
SLOT = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


def git(*args: str, cwd: Path, stdin: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          env=ENV, input=stdin).stdout.decode().strip()


def cli(repo: Path, *args: str, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=repo, check=True,
                   capture_output=True, env=env or ENV)
    return time.perf_counter() - start


def pack_bytes(repo: Path, new: str, old: str | None) -> int:
    """The bytes of the objects ``new`` adds over ``old``, packed as a push sends them:
    with the items commits their links name, which the same push sends."""
    revs = "".join(f"{sha}\n" for sha in [new, *linked(repo, new).values()])
    if old:
        revs += "".join(f"^{sha}\n" for sha in [old, *linked(repo, old).values()])
    proc = subprocess.run(["git", "pack-objects", "--revs", "--stdout", "-q"], cwd=repo,
                          input=revs.encode(), capture_output=True, check=True, env=ENV)
    return len(proc.stdout)


def linked(repo: Path, commit: str) -> dict[str, str]:
    """Link path -> the items commit it names, for the queues' links in ``commit``."""
    queues = git("ls-tree", "-d", "--name-only", commit, "--", "state/queues/", cwd=repo)
    found = {}
    for queue in queues.split():
        entry = git("ls-tree", commit, "--", f"{queue}/items", cwd=repo)
        if entry.startswith("120000 "):
            found[f"{queue}/items"] = git("cat-file", "blob", entry.split()[2], cwd=repo)
    return found


def changed_files(repo: Path, old: str | None, new: str) -> int:
    """How many files ``new`` writes or deletes over ``old``, in the items commits too."""
    span = [old, new] if old else ["--root", new]
    names = git("diff-tree", "-r", "--name-only", "--no-commit-id", *span, cwd=repo).split()
    before, after = linked(repo, old) if old else {}, linked(repo, new)
    count = len(set(names) - set(after) - set(before))
    for link, items in after.items():
        was = [before[link]] if link in before else ["--root"]
        if was != [items]:
            count += len(git("diff-tree", "-r", "--name-only", "--no-commit-id", *was, items,
                             cwd=repo).split())
    return count


def tip(repo: Path) -> str | None:
    """The state branch's tip on the origin (``None``: no branch yet)."""
    found = git("ls-remote", "origin", BRANCH, cwd=repo).split()
    return found[0] if found else None


def workspace(root: Path, schedules: dict[str, Any]) -> tuple[Path, Path]:
    origin, repo = root / "origin.git", root / "repo"
    root.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "--bare", "--initial-branch=main", str(origin), cwd=root)
    git("config", "uploadpack.allowFilter", "true", cwd=origin)  # as GitHub serves
    git("clone", "-q", str(origin), str(repo), cwd=root)
    (repo / "schedules").mkdir()
    for sid, spec in schedules.items():
        (repo / "schedules" / f"{sid}.json").write_text(json.dumps(spec) + "\n")
    git("add", ".", cwd=repo)
    git("commit", "-qm", "schedules", cwd=repo)
    git("push", "-q", "origin", "HEAD:main", cwd=repo)
    return origin, repo


def seed_queue(repo: Path, count: int) -> None:
    """``count`` ready items in queue ``pages``, committed in one go (built in memory)."""
    store = GitStateStore(repo, "origin", BRANCH)

    def change(snap: Any) -> dict[str, bytes | None]:
        book = QueueBook.empty("pages", snap.files)
        queueops.enqueue(book, (NewItem(payload={"url": f"https://example.org/{n}"},
                                        key=f"page-{n}") for n in range(count)),
                         SLOT - timedelta(days=1), "bench")
        return book.dump()

    store.transact(change, f"bench: {count} items")


def items_file(path: Path, count: int, prefix: str) -> Path:
    path.write_text("".join(json.dumps({"payload": {"url": f"https://example.org/{n}"},
                                        "key": f"{prefix}-{n}"}) + "\n"
                            for n in range(count)))
    return path


def interleaved(reps: int, *fns: Callable[[int], float]) -> list[float]:
    """The median of each of ``fns`` over ``reps`` turns, each called with the turn."""
    samples: list[list[float]] = [[] for _ in fns]
    for rep in range(reps):
        for fn, taken in zip(fns, samples, strict=True):
            taken.append(fn(rep))
    return [statistics.median(s) for s in samples]


# --------------------------------------------------------------------------- tables


def enqueue_table(reps: int, root: Path) -> list[str]:
    _, repo = workspace(root / "enqueue", {"crawl": drain()})
    files = [items_file(root / f"items{r}.jsonl", 10_000, f"r{r}") for r in range(reps)]
    sizes: list[list[tuple[int, int]]] = [[], []]

    def measured(case: int, args: Callable[[int], list[str]]) -> Callable[[int], float]:
        def run(rep: int) -> float:
            before = tip(repo)
            seconds = cli(repo, "queue", "add", "pages", *args(rep))
            after = tip(repo)
            assert after is not None
            git("fetch", "-q", "origin", BRANCH, cwd=repo)
            sizes[case].append((pack_bytes(repo, after, before),
                                changed_files(repo, before, after)))
            return seconds

        return run

    big = measured(0, lambda rep: ["--file", str(files[rep])])
    one = measured(1, lambda rep: ["--payload", str(rep)])
    big_s, one_s = interleaved(reps, big, one)
    (big_kib, big_files), (one_kib, one_files) = (
        (statistics.median(b for b, _ in taken) / 1024, statistics.median(n for _, n in taken))
        for taken in sizes)
    return ["| enqueue | s | files in the commit | commit's pack KiB |",
            "|---|---:|---:|---:|",
            f"| 10,000 items from one file | {big_s:.2f} | {big_files:,.0f} | {big_kib:,.0f} |",
            f"| one item (baseline) | {one_s:.2f} | {one_files:,.0f} | {one_kib:,.1f} |",
            f"| ratio | {big_s / one_s:.1f} | | {big_kib / one_kib:,.0f} |"]


def drain(run: str = "true") -> dict[str, Any]:
    return {"cron": "0 7 * * *", "tracks": [{
        "name": "pages", "run": run,
        "drain": {"queue": "pages", "task_cap": 25, "max_workers": 4}}]}


PLAIN = {"cron": "0 7 * * *", "tracks": [{"name": f"t{i}", "run": "true"} for i in range(4)]}


def fire_table(reps: int, root: Path, count: int) -> list[str]:
    cases = []
    for name, schedule, seeded in (("queue", drain(), count), ("plain", PLAIN, 0)):
        base = root / f"fire-{name}"
        origin, repo = workspace(base, {"crawl": schedule})
        if seeded:
            seed_queue(repo, seeded)
        cases.append((origin, repo, base))
    marks: list[list[int]] = [[], []]

    def fire(case: int) -> Callable[[int], float]:
        origin, _, base = cases[case]

        def run(rep: int) -> float:
            # a copy of the same origin each time: the same commit is made again
            copy = base / f"origin{rep}.git"
            shutil.copytree(origin, copy)
            clone = base / f"c{rep}"
            git("clone", "-q", str(copy), str(clone), cwd=base)
            before = tip(clone)
            env = {**ENV, "ORCHESTRATOR_WORK_DIR": str(base / f"work{rep}")}
            seconds = cli(clone, "tick", "--now", SLOT.isoformat(), env=env)
            git("fetch", "-q", "origin", BRANCH, cwd=clone)
            span = f"{before}..FETCH_HEAD" if before else "FETCH_HEAD"
            mark = git("rev-list", "--reverse", span, cwd=clone).split()[0]
            marks[case].append(pack_bytes(clone, mark, before))
            return seconds

        return run

    queue_s, plain_s = interleaved(reps, fire(0), fire(1))
    q_bytes, p_bytes = (statistics.median(m) for m in marks)
    return ["| fire | tick s | mark commit's pack KiB |",
            "|---|---:|---:|",
            f"| drain sized, 100 items claimed of {count:,} | {queue_s:.2f} | "
            f"{q_bytes / 1024:.1f} |",
            f"| 4 ordinary tracks, no queue (baseline) | {plain_s:.2f} | {p_bytes / 1024:.1f} |",
            f"| ratio | {queue_s / plain_s:.2f} | {q_bytes / p_bytes:.1f} |"]


def noop_table(reps: int, root: Path, count: int) -> list[str]:
    quiet = {"cron": "0 3 * * *", "tracks": [{"name": "t", "run": "true"}]}
    cases = []
    for name, seeded in (("queue", count), ("none", 0)):
        base = root / f"noop-{name}"
        origin, repo = workspace(base, {"crawl": quiet})
        if seeded:
            seed_queue(repo, seeded)
        env = {**ENV, "ORCHESTRATOR_WORK_DIR": str(base / "work")}
        cli(repo, "tick", "--now", SLOT.isoformat(), env=env)  # cursors and memo written
        cases.append((origin, repo, base, env, tip(repo)))

    def warm(case: int) -> Callable[[int], float]:
        return lambda _: cli(cases[case][1], "tick", "--now", SLOT.isoformat(),
                             env=cases[case][3])

    fetched: list[list[float]] = [[], []]

    def cold(case: int) -> Callable[[int], float]:
        origin, _, base, env, _ = cases[case]

        def run(rep: int) -> float:
            runner = base / f"cold{rep}"
            git("clone", "-q", "--depth=1", f"file://{origin}", str(runner), cwd=base)
            before = size_mib(runner / ".git")
            seconds = cli(runner, "tick", "--now", SLOT.isoformat(), env=env)
            fetched[case].append(size_mib(runner / ".git") - before)
            return seconds

        return run

    q_warm, n_warm, q_cold, n_cold = interleaved(reps, warm(0), warm(1), cold(0), cold(1))
    for _, repo, *_rest, before in cases:
        assert tip(repo) == before, "a no-op tick pushed"
    q_mib, n_mib = (statistics.median(f) for f in fetched)
    return ["| no-op tick | tick s | baseline s (no queue) | ratio | fresh clone downloaded MiB |",
            "|---|---:|---:|---:|---:|",
            f"| {count:,} items ready | {q_warm:.3f} | {n_warm:.3f} | {q_warm / n_warm:.2f} | - |",
            f"| the same, in a fresh shallow clone | {q_cold:.3f} | {n_cold:.3f} | "
            f"{q_cold / n_cold:.2f} | {q_mib:.2f} (baseline {n_mib:.2f}) |"]


def pushes_table(root: Path) -> list[str]:
    from tests.drive import tick
    from tests.integration.test_queue_local import settle

    rows = ["| workers | items | pushes from the fire to the brief |", "|---:|---:|---:|"]
    for workers, items in ((1, 25), (4, 100), (16, 400)):
        base = root / f"pushes-{workers}"
        spec = drain()
        spec["tracks"][0]["drain"].update(max_workers=workers)
        _, repo = workspace(base, {"crawl": spec})
        seed_queue(repo, items)
        before = int(_count(repo))
        work = base / "work"
        result = tick(repo, SLOT, work)
        settle(work, result.dispatched, timeout=300)
        tick(repo, SLOT + timedelta(minutes=1), work)
        rows.append(f"| {workers} | {items} | {int(_count(repo)) - before} |")
    return rows


def _count(repo: Path) -> str:
    git("fetch", "-q", "origin", BRANCH, cwd=repo)
    return git("rev-list", "--count", "FETCH_HEAD", cwd=repo)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--only", choices=["enqueue", "fire", "noop", "pushes"])
    args = parser.parse_args()
    os.environ.update(ENV)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        tables = {"enqueue": lambda: enqueue_table(args.reps, root),
                  "fire": lambda: fire_table(args.reps, root, args.items),
                  "noop": lambda: noop_table(args.reps, root, args.items),
                  "pushes": lambda: pushes_table(root)}
        for name, make in tables.items():
            if args.only in (None, name):
                started = time.perf_counter()
                print("\n".join(make()))
                print(f"({name}: {time.perf_counter() - started:.0f} s; "
                      f"{os.getloadavg()[0]:.1f} load)\n", flush=True)


if __name__ == "__main__":
    main()
