"""A random kill campaign: ticks of several machines on one state branch, SIGKILLed.

M machines (each a checkout and a work folder) share one bare origin and an
every-minute schedule. Each minute every machine ticks, at once; a tick is killed, at
random, at one of the tick's checkpoints (``tests/crashpoint.py``), at a random moment
of its life, or not at all. Between minutes the state branch may be moved by another
writer. Then ordinary ticks let everything settle.

Reported: ticks started and killed, launches, duplicate launches (a key launched more
than once, over every work folder), runs left open, slots that never got a run, and
the ticks after the campaign that failed. Every count but the first three must be 0.

    PYTHONPATH=. python bench/campaign.py [--machines 2] [--minutes 60] [--seed 25]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator.state.phases import RunStatus  # noqa: E402
from orchestrator.support.checkpoints import POINTS  # noqa: E402
from tests.builders import spec_data  # noqa: E402
from tests.drive import STATE_BRANCH, launches, state_of  # noqa: E402
from tests.gitrepo import clone, git, make_origin  # noqa: E402

EVERY = spec_data("* * * * *", run="true", overlap="allow", catchup="all")


def at(minute: int) -> str:
    return f"2026-12-01T{7 + minute // 60:02d}:{minute % 60:02d}:30Z"


def start(repo: Path, work: Path, minute: int, point: str | None) -> subprocess.Popen[str]:
    """A tick in its own session, with a crash point when ``point`` is set."""
    cmd = [sys.executable, *([str(ROOT / "tests" / "crashpoint.py"), point] if point else
                             ["-m", "orchestrator"]),
           "--repo", str(repo), "tick", "--now", at(minute)]
    env = {**os.environ, "ORCHESTRATOR_WORK_DIR": str(work), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def settled(work: Path) -> bool:
    return all(json.loads(s.read_text()).get("state") not in ("queued", "running")
               for s in work.glob("*/status.json"))


def campaign(folder: Path, machines: int, minutes: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    origin = make_origin(folder, {"every": EVERY})
    fleet = [(clone(origin, folder / f"repo{i}"), folder / f"work{i}") for i in range(machines)]
    for repo, work in fleet:
        start(repo, work, 0, None).communicate(timeout=120)
    started = killed = 0
    for minute in range(1, minutes + 1):
        if rng.random() < 0.3:  # another writer: the next ticks must fetch
            branch = f"refs/heads/{STATE_BRANCH}"
            tip = git("rev-parse", branch, cwd=origin)
            commit = git("commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", "elsewhere",
                         cwd=origin)
            git("update-ref", branch, commit, tip, cwd=origin)
        procs = []
        for repo, work in fleet:
            how = rng.choice([*POINTS, "moment", "none"])
            procs.append((start(repo, work, minute, how if how in POINTS else None), how))
        for proc, how in procs:
            if how == "moment":
                time.sleep(rng.uniform(0.0, 1.0))
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=300)
            started += 1
            killed += proc.returncode == -9
    failed_after = 0
    last = minutes + 3
    for minute in [*range(minutes + 1, last + 1), last]:
        for repo, work in fleet:
            end = time.monotonic() + 120
            while not settled(work) and time.monotonic() < end:
                time.sleep(0.2)
            failed_after += start(repo, work, minute, None).wait(timeout=300) != 0
    state, _ = state_of(fleet[0][0])
    counts = Counter(key for _, work in fleet for key in launches(work))
    slots = {f"every--20261201T{7 + m // 60:02d}{m % 60:02d}Z" for m in range(last + 1)}
    return {
        "ticks": started, "killed": killed, "launches": sum(counts.values()),
        "duplicates": sum(1 for n in counts.values() if n > 1),
        "open runs": sum(1 for r in state.runs.values() if r.status is not RunStatus.COMPLETED),
        "slots without a run": len(slots - set(state.runs)),
        "failed ticks after": failed_after,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=2)
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--seed", type=int, default=25)
    args = parser.parse_args()
    if not 1 <= args.minutes <= 1000:
        parser.error("--minutes: 1 to 1000 (the slots stay within one day)")
    with tempfile.TemporaryDirectory() as tmp:
        began = time.monotonic()
        result = campaign(Path(tmp), args.machines, args.minutes, args.seed)
        result["seconds"] = round(time.monotonic() - began)
    print("| " + " | ".join(result) + " |")
    print("|" + "---:|" * len(result))
    print("| " + " | ".join(str(v) for v in result.values()) + " |")
    bad = ("duplicates", "open runs", "slots without a run", "failed ticks after")
    return 1 if any(result[k] for k in bad) else 0


if __name__ == "__main__":
    sys.exit(main())
