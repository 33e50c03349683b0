"""Many OS processes writing one state branch at the same moment: nothing is lost.

Each writer is its own Python process (as a CI matrix leg is); they start their
``transact`` together, released by one "go" file, against one bare origin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gitrepo import bare_origin, empty_clone, git

BRANCH = "orchestrator-state"
WRITERS = 16

WORKER = r"""
import json, os, sys, time
from pathlib import Path
from orchestrator.store import GitStateStore

repo, origin, mode, index, go = sys.argv[1:6]
store = GitStateStore(Path(repo), origin)

def own(snap):
    return {f"state/writers/{index}.json": json.dumps({"writer": int(index)}).encode()}

def counter(snap):
    n = json.loads(snap.files.get("state/counter.json", b'{"n": 0}'))["n"]
    return {"state/counter.json": json.dumps({"n": n + 1}).encode()}

Path(f"{go}.ready{index}").touch()
while not os.path.exists(go):
    time.sleep(0.002)
result = store.transact(own if mode == "own" else counter, f"writer {index}")
print(json.dumps({"landed": result.landed, "attempts": result.attempts}))
"""


def run_writers(tmp_path: Path, mode: str, shared_clone: bool) -> tuple[Path, list[dict[str, int]]]:
    origin = bare_origin(tmp_path, branch=None)
    repos = []
    for i in range(WRITERS):
        repo = tmp_path / ("shared" if shared_clone else f"clone{i}")
        if not repo.exists():
            empty_clone(repo)
        repos.append(repo)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(repo), str(origin), mode,
                               str(i), str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, repo in enumerate(repos)]
    deadline = time.monotonic() + 60
    while not all(Path(f"{go}.ready{i}").exists() for i in range(WRITERS)):
        assert time.monotonic() < deadline, "writers did not start"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    return origin, results


def assert_linear(origin: Path, commits: int) -> None:
    assert git("rev-list", "--count", BRANCH, cwd=origin) == str(commits)
    assert git("rev-list", "--count", "--first-parent", BRANCH, cwd=origin) == str(commits)
    assert git("rev-list", "--min-parents=2", BRANCH, cwd=origin) == ""


@pytest.mark.slow
@pytest.mark.parametrize("shared_clone", [True, False], ids=["one-clone", "clone-each"])
def test_sixteen_writers_of_their_own_files_all_land(tmp_path: Path,
                                                     shared_clone: bool) -> None:
    origin, results = run_writers(tmp_path, "own", shared_clone)
    assert all(r["landed"] for r in results)
    assert sum(r["attempts"] for r in results) > WRITERS  # they really raced
    assert_linear(origin, WRITERS)
    names = git("ls-tree", "--name-only", f"{BRANCH}:state/writers", cwd=origin).split()
    assert sorted(names) == sorted(f"{i}.json" for i in range(WRITERS))


@pytest.mark.slow
@pytest.mark.parametrize("shared_clone", [True, False], ids=["one-clone", "clone-each"])
def test_sixteen_increments_of_one_counter_make_sixteen(tmp_path: Path,
                                                        shared_clone: bool) -> None:
    origin, results = run_writers(tmp_path, "counter", shared_clone)
    assert all(r["landed"] for r in results)
    assert json.loads(git("show", f"{BRANCH}:state/counter.json", cwd=origin)) == {"n": WRITERS}
    assert_linear(origin, WRITERS)
    # Every commit is one increment: the values along history are 1..16, none repeated.
    values = [json.loads(git("show", f"{BRANCH}~{k}:state/counter.json", cwd=origin))["n"]
              for k in range(WRITERS)]
    assert values == list(range(WRITERS, 0, -1))
    assert os.environ.get("GITHUB_TOKEN") is None
