"""Compare-and-swap over git push, under contention.

N writer processes (each with its own clone, as CI matrix legs are) start at the same
moment and each adds its own file to the state branch of one bare origin:

- ``cas``: ``GitStateStore.transact`` (lease-guarded push, re-read and re-apply on a
  lost race, jittered exponential back-off);
- ``naive``: what popular commit actions do: ``git pull --rebase``, commit, one
  ``git push``; a rejected push is simply lost.

Reported per N: wall time from "go" to the last landed write (median of the
repetitions), mean and max attempts per writer, the ratio of the wall time to N times
the single-writer time measured in the same run (1.0 would be perfect serialisation
with no waste), and the updates the naive baseline lost.

    python bench/cas.py [--writers 1 8 32] [--reps 3]
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

BRANCH = "orchestrator-state"

CAS_WORKER = r"""
import json, os, sys, time
from pathlib import Path
from orchestrator.store import GitStateStore

repo, origin, index, go = sys.argv[1:5]
store = GitStateStore(Path(repo), origin)
Path(f"{go}.ready{index}").touch()
while not os.path.exists(go):
    time.sleep(0.001)
result = store.transact(
    lambda snap: {f"state/writers/{index}.json": b'{"done": true}\n'}, f"writer {index}")
print(json.dumps({"landed": result.landed, "attempts": result.attempts, "end": time.time()}))
"""

NAIVE_WORKER = r"""
import json, os, subprocess, sys, time
from pathlib import Path

repo, origin, index, go = sys.argv[1:5]
def git(*args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True).returncode
Path(f"{go}.ready{index}").touch()
while not os.path.exists(go):
    time.sleep(0.001)
git("pull", "--quiet", "--rebase", "origin", "@BRANCH@")
path = Path(repo, "state", "writers", f"{index}.json")
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text('{"done": true}\n')
git("add", ".")
git("commit", "--quiet", "-m", f"writer {index}")
rc = git("push", "--quiet", "origin", "HEAD:@BRANCH@")
print(json.dumps({"landed": rc == 0, "attempts": 1, "end": time.time()}))
""".replace("@BRANCH@", BRANCH)


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def setup(root: Path, n: int, kind: str) -> tuple[Path, list[Path]]:
    origin = root / "origin.git"
    git("init", "--quiet", "--bare", str(origin))
    seed = root / "seed"
    git("init", "--quiet", f"--initial-branch={BRANCH}", str(seed))
    (seed / "state").mkdir()
    (seed / "state" / "ticks.jsonl").write_text("{}\n")
    git("add", ".", cwd=seed)
    git("commit", "--quiet", "-m", "seed", cwd=seed)
    git("push", "--quiet", str(origin), BRANCH, cwd=seed)
    repos = []
    for i in range(n):
        repo = root / f"writer{i}"
        if kind == "naive":  # the baseline needs a checkout to rebase in
            git("clone", "--quiet", "--branch", BRANCH, str(origin), str(repo))
        else:
            git("init", "--quiet", str(repo))
        repos.append(repo)
    return origin, repos


def trial(n: int, kind: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-cas-") as tmp:
        root = Path(tmp)
        origin, repos = setup(root, n, kind)
        go = root / "go"
        code = CAS_WORKER if kind == "cas" else NAIVE_WORKER
        procs = [subprocess.Popen([sys.executable, "-c", code, str(repo), str(origin), str(i),
                                   str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
                 for i, repo in enumerate(repos)]
        while not all(Path(f"{go}.ready{i}").exists() for i in range(n)):
            if any(p.poll() is not None for p in procs):
                raise SystemExit("a writer died before the start: "
                                 + "".join(p.communicate()[1] for p in procs))
            time.sleep(0.005)
        start = time.time()
        go.touch()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                raise SystemExit(f"writer failed: {err}")
            results.append(json.loads(out))
        landed = git("ls-tree", "--name-only", f"{BRANCH}:state/writers", cwd=origin).split() \
            if git("ls-tree", BRANCH, "state/writers", cwd=origin) else []
        attempts = [r["attempts"] for r in results]
        return {
            "wall": max(r["end"] for r in results) - start,
            "mean_attempts": statistics.mean(attempts),
            "max_attempts": max(attempts),
            "lost": n - len(landed),
            "failed": sum(1 for r in results if not r["landed"]),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    rows = []
    single: float | None = None
    for n in sorted(set(args.writers)):
        cas = [trial(n, "cas") for _ in range(args.reps)]
        naive = [trial(n, "naive") for _ in range(args.reps)]
        wall = statistics.median(t["wall"] for t in cas)
        if n == 1:
            single = wall
        rows.append({
            "writers": n,
            "cas_wall_s": round(wall, 2),
            "cas_mean_attempts": round(statistics.mean(t["mean_attempts"] for t in cas), 1),
            "cas_max_attempts": max(int(t["max_attempts"]) for t in cas),
            "cas_lost": sum(int(t["lost"]) for t in cas),
            "ratio_to_n_singles": round(wall / (n * single), 2) if single else None,
            "naive_wall_s": round(statistics.median(t["wall"] for t in naive), 2),
            "naive_lost_mean": round(statistics.mean(t["lost"] for t in naive), 1),
        })
        print(json.dumps(rows[-1]), flush=True)
    print()
    print("| writers | CAS wall s | mean attempts | max attempts | wall / (N x single) "
          "| CAS lost | naive wall s | naive lost (of N) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['writers']} | {r['cas_wall_s']} | {r['cas_mean_attempts']} | "
              f"{r['cas_max_attempts']} | {r['ratio_to_n_singles']} | {r['cas_lost']} | "
              f"{r['naive_wall_s']} | {r['naive_lost_mean']} |")
    print(f"\n{args.reps} repetitions per cell; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores at the end.")


if __name__ == "__main__":
    main()
