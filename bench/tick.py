"""How much a no-op tick costs, against what any tick must pay anyway.

A no-op tick (nothing due, nothing open) with 10, 100 and 1,000 schedules on a state
branch holding 1,000 finished runs, run as the real CLI in a subprocess against a
bare origin on this machine. The baseline, measured in the same run, is the floor
every tick pays: starting Python and importing the package, plus one ``git fetch`` of
the state branch. The ratio is what the tick adds on top of that floor.

With ``--tree PATH`` (repeatable) it times other checkouts of the package beside this
one (e.g. the commit before a change, ``git worktree add ../before <commit>``): each
builds its own workspace with its own code, and every repetition times the floor and
each checkout's tick once, in turns, so a slow spell of a shared machine falls on all
of them alike. It then prints the median, the fastest and the slowest of each.

    python bench/tick.py [--reps 5] [--runs 1000] [--tree PATH ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench/scale.py

from scale import ENV, NOW, finished_runs

from orchestrator.store import GitStateStore


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=ENV)


def workspace(root: Path, schedules: int, runs: int) -> Path:
    origin = root / "origin.git"
    repo = root / "repo"
    git("init", "-q", "--bare", "--initial-branch=main", str(origin), cwd=root)
    git("clone", "-q", str(origin), str(repo), cwd=root)
    (repo / "schedules").mkdir()
    for i in range(schedules):
        spec = {"cron": f"{i % 60} 3 * * *", "tracks": [{"name": "t", "run": "true"}]}
        (repo / "schedules" / f"s{i:04d}.json").write_text(json.dumps(spec) + "\n")
    git("add", ".", cwd=repo)
    git("commit", "-qm", "schedules", cwd=repo)
    git("push", "-q", "origin", "HEAD:main", cwd=repo)
    GitStateStore(repo, "origin", "orchestrator-state").transact(
        lambda snap: finished_runs(runs), "bench: finished runs")
    return repo


def timed(cmd: list[str], cwd: Path, reps: int, env: dict[str, str] | None = None) -> float:
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, env=env or ENV)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


BUILD = """
import sys
sys.path.insert(0, {tree!r}); sys.path.insert(0, {tree!r} + "/bench")
from pathlib import Path
import tick
print(tick.workspace(Path({root!r}), {schedules}, {runs}))
"""


def tree_env(tree: Path, work: Path) -> dict[str, str]:
    return {**ENV, "PYTHONPATH": str(tree), "ORCHESTRATOR_WORK_DIR": str(work)}


def in_turns(trees: list[Path], reps: int, runs: int) -> None:
    """The no-op tick of each checkout in ``trees`` and the floor, timed in turns."""
    tick = [sys.executable, "-m", "orchestrator", "tick", "--now", NOW.isoformat()]
    print(f"no-op tick in turns, {reps} repetitions, {runs} finished runs; floor: "
          "python -c 'import orchestrator' plus one git fetch of the state branch")
    print("| schedules | checkout | median s | fastest s | slowest s | median / floor |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in (10, 100, 1000):
        with tempfile.TemporaryDirectory() as tmp:
            cases = []
            for i, tree in enumerate(trees):
                root = Path(tmp) / str(i)
                root.mkdir()
                env = tree_env(tree, root / "work")
                built = subprocess.run([sys.executable, "-c", BUILD.format(
                    tree=str(tree), root=str(root), schedules=n, runs=runs)],
                    cwd=tree, env=env, check=True, capture_output=True, text=True)
                repo = Path(built.stdout.strip().splitlines()[-1])
                for _ in range(2):  # the cursors and the memo, then a quiet tick
                    subprocess.run(tick, cwd=repo, check=True, capture_output=True, env=env)
                cases.append((tree, repo, env, []))
            floors: list[float] = []
            for _ in range(reps):
                repo = cases[0][1]
                floors.append(timed([sys.executable, "-c", "import orchestrator"], repo, 1)
                              + timed(["git", "fetch", "-q", "origin", "orchestrator-state"],
                                      repo, 1))
                for _, repo, env, samples in cases:
                    samples.append(timed(tick, repo, 1, env))
            floor = statistics.median(floors)
            for tree, _, _, samples in cases:
                median = statistics.median(samples)
                print(f"| {n} | {os.path.basename(tree)} | {median:.3f} | {min(samples):.3f} "
                      f"| {max(samples):.3f} | {median / floor:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="another checkout to time beside this one, in turns")
    args = parser.parse_args()
    if args.tree:
        here = Path(__file__).resolve().parent.parent
        in_turns([t.resolve() for t in args.tree] + [here], args.reps, args.runs)
        return
    rows = []
    for n in (10, 100, 1000):
        with tempfile.TemporaryDirectory() as tmp:
            repo = workspace(Path(tmp), n, args.runs)
            tick = [sys.executable, "-m", "orchestrator", "tick", "--now", NOW.isoformat()]
            env = {**ENV, "ORCHESTRATOR_WORK_DIR": str(Path(tmp) / "work")}
            subprocess.run(tick, cwd=repo, check=True, capture_output=True, env=env)  # cursors
            base_import = timed([sys.executable, "-c", "import orchestrator"], repo, args.reps)
            base_fetch = timed(["git", "fetch", "-q", "origin", "orchestrator-state"], repo,
                               args.reps)
            noop = timed(tick, repo, args.reps, env)
            tip_before = subprocess.run(["git", "ls-remote", "origin", "orchestrator-state"],
                                        cwd=repo, capture_output=True, text=True).stdout
            subprocess.run(tick, cwd=repo, check=True, capture_output=True, env=env)
            tip_after = subprocess.run(["git", "ls-remote", "origin", "orchestrator-state"],
                                       cwd=repo, capture_output=True, text=True).stdout
            assert tip_before == tip_after, "a no-op tick pushed"
            baseline = base_import + base_fetch
            rows.append((n, args.runs, noop, baseline, noop / baseline))
    print(f"no-op tick, median of {args.reps}, {args.runs} finished runs on the state branch")
    print("| schedules | finished runs | no-op tick (s) | import + fetch (s) | ratio |")
    print("|---:|---:|---:|---:|---:|")
    for n, runs, noop, baseline, ratio in rows:
        print(f"| {n} | {runs} | {noop:.3f} | {baseline:.3f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
