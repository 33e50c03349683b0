"""What a no-op tick costs in CPU instructions, against the floor, on any machine load.

Wall-clock figures on a shared machine move with everything else it runs; the number
of instructions a process executes does not. This bench runs the real CLI's no-op tick
under valgrind's callgrind (the Python process only, not its git children), and the
floor, ``python -c "import click, pydantic, jinja2, httpx"``, the same way, and prints
both counts and their ratio. Repeated runs give the same counts to within a fraction
of a percent, so a change of a few percent is a real change.

With ``--tree PATH`` it measures another checkout of the package too (e.g. the commit
before a change, ``git worktree add ../before <commit>``), on a workspace built by that
checkout's own code: the before-and-after of one change in one table.

    python bench/instructions.py [--schedules 100] [--runs 1000] [--tree PATH ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NOW = "2026-12-01T12:00:00+00:00"
FLOOR = "import click, pydantic, jinja2, httpx"
BUILD = """
import sys
sys.path.insert(0, {tree!r}); sys.path.insert(0, {tree!r} + "/bench")
from pathlib import Path
import tick
print(tick.workspace(Path({root!r}), {schedules}, {runs}))
"""


def callgrind(argv: list[str], cwd: Path, env: dict[str, str]) -> int:
    """Instructions the process ``argv`` executed (its children not counted)."""
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no count from callgrind: {done.stderr[-500:]}")
    return int(found.group(1))


def environment(tree: Path, work: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
            "PYTHONPATH": str(tree), "ORCHESTRATOR_WORK_DIR": str(work),
            "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
            "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


def measure(tree: Path, root: Path, schedules: int, runs: int) -> dict[str, object]:
    env = environment(tree, root / "work")
    built = subprocess.run([sys.executable, "-c", BUILD.format(
        tree=str(tree), root=str(root), schedules=schedules, runs=runs)],
        env=env, cwd=tree, capture_output=True, text=True, check=True)
    repo = Path(built.stdout.strip().splitlines()[-1])
    tick = [sys.executable, "-m", "orchestrator", "tick", "--now", NOW]
    for _ in range(2):  # the first writes the cursors and the memo; the second is quiet
        subprocess.run(tick, cwd=repo, env=env, check=True, capture_output=True)
    count = callgrind(tick, repo, env)
    floor = callgrind([sys.executable, "-c", FLOOR], repo, env)
    return {"tree": str(tree), "tick": count, "floor": floor, "ratio": count / floor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schedules", type=int, default=100)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="another checkout to measure beside this one")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed (apt-get install valgrind)")
    rows = []
    for tree in [*args.tree, ROOT]:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(measure(tree.resolve(), Path(tmp), args.schedules, args.runs))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"no-op tick, {args.schedules} schedules, {args.runs} finished runs; "
          f"floor: python -c {FLOOR!r}")
    print("| checkout | tick instructions (M) | floor (M) | tick / floor |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['tree']} | {row['tick'] / 1e6:,.0f} | {row['floor'] / 1e6:,.0f} "
              f"| {row['ratio']:.2f} |")


if __name__ == "__main__":
    main()
