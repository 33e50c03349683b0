"""A batch of legs on GitHub, fanned in: pushes, API requests and latency per run.

Against the fake GitHub server of the tests (``tests/fakes/github.py``) with the jobs
of ``.github/workflows/track.yml`` played on this machine (``tests/workflow_player.py``):
a tick fires a one-shot schedule of N tracks (``run: true``) and dispatches them; the
N legs are played at once (8 at a time), each writing and uploading its outcome; then
the ``fan-in`` job downloads the batch's artifacts and runs
``orchestrator tick --run RUN --outcomes DIR``. For N = 4, 64 and 256:

- pushes per run: commits on the state branch from the firing tick to the brief;
- API requests per run: every request the fake GitHub answered (the artifact archives'
  signed URLs are off the API and not counted);
- fan-in latency: from the last leg's end (as its outcome file says) to the brief on the
  state branch (the fan-in tick's exit): the fan-in job's own duration, set-up aside;
- whether the whole batch landed in one push.

With ``--lost N ...``, the same when the fan-in job never ran and the cron tick
reads the outcomes through the artifacts API (one listing, at most 64 archives a
tick, job conclusions for the rest). With ``--old N ...``, the same for the
``track.yml`` before the fan-in job (legs that push their own report;
``tests/data/workflows/track-v1.yml``). In both the brief waits for the next cron
tick, played at once here: the latency shown leaves out the cron's delay.

    python bench/github.py [--tracks 4 64 256] [--lost 4 64 256] [--old 4 64]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYTHONPATH", str(ROOT))  # the played steps import this checkout
for name, value in (("GIT_AUTHOR_NAME", "bench"), ("GIT_AUTHOR_EMAIL", "bench@localhost"),
                    ("GIT_COMMITTER_NAME", "bench"), ("GIT_COMMITTER_EMAIL", "bench@localhost")):
    os.environ.setdefault(name, value)

from orchestrator.executors.github import GitHubExecutor  # noqa: E402
from orchestrator.state import layout  # noqa: E402
from orchestrator.state import model as state_model  # noqa: E402
from orchestrator.state.phases import RunStatus  # noqa: E402
from orchestrator.store import GitStateStore  # noqa: E402
from orchestrator.tick.settings import TickSettings  # noqa: E402
from orchestrator.tick.shell import Tick  # noqa: E402
from tests.fakes.github import FakeGitHub  # noqa: E402
from tests.gitrepo import clone, git, make_origin  # noqa: E402
from tests.workflow_player import Player  # noqa: E402

BRANCH = "orchestrator-state"
OLD = ROOT / "tests" / "data" / "workflows" / "track-v1.yml"


def _tick(repo: Path, fake: FakeGitHub) -> None:
    now = datetime.now(UTC)

    def make(breaker: Any) -> GitHubExecutor:
        return GitHubExecutor(fake.repository, fake.token, api_url=fake.api_url, now=now,
                              breaker=breaker)

    Tick(GitStateStore(repo, "origin", BRANCH), repo, make, now,
         TickSettings(executor_name="github")).run()


def _commits(repo: Path) -> int:
    git("fetch", "--quiet", "origin", BRANCH, cwd=repo)
    return int(git("rev-list", "--count", "FETCH_HEAD", cwd=repo))


def one(n: int, root: Path, *, old: bool = False, lost: bool = False) -> dict[str, Any]:
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    tracks = [{"name": f"t{i:03d}", "run": "true", "timeout_minutes": 10} for i in range(n)]
    origin = make_origin(root, {"bench": {"at": f"{slot:%Y-%m-%dT%H:%M}Z", "tracks": tracks}})
    repo = clone(origin, root / "repo")
    with FakeGitHub() as fake:
        _tick(repo, fake)  # fires and dispatches: the run's first two pushes
        [call] = fake.dispatches
        inputs = call.body["inputs"]
        [ci_run] = fake.runs
        player = Player(fake, origin, root / "play", workflow=OLD if old else Player.workflow,
                        shared_checkout=not old)
        if not old:
            player._checkout("leg")  # made once, before the legs start together
        legs = player.legs(inputs)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda leg: player.play_leg(ci_run, inputs, leg), legs))
        leg_pushes = _commits(repo) - 2
        if old or lost:
            last_end = datetime.now(UTC)  # the last leg ended; the cron tick follows
            pushed = _commits(repo)
            if lost:  # the fan-in job's runner was lost: the cron tick reads artifacts
                fake.set_job(ci_run, "fan-in", "completed", "cancelled")
            _tick(repo, fake)
        else:
            ends = [json.loads(p.read_text())["finished_at"]
                    for p in (root / "play").rglob(f"{inputs['run_id']}--*.json")
                    if "temp-" in str(p) and "fan-in" not in str(p)]
            last_end = max(datetime.fromisoformat(e.replace("Z", "+00:00")) for e in ends)
            pushed = _commits(repo)
            played = player.play_fan_in(ci_run, inputs)
            assert played.conclusion == "success", [p.stderr for p in played.output]
        landed = datetime.now(UTC)
        after = _commits(repo)
        snap = GitStateStore(repo, "origin", BRANCH).read()
        state = state_model.load(snap.files, all_tracks=True)
        run_id = inputs["run_id"]
        assert state.runs[run_id].status is RunStatus.COMPLETED, state.runs[run_id].status
        assert layout.brief_path(run_id) in snap.files
        api = [r for r in fake.requests if r.endpoint != "blob"]
        workflow = ("before (legs push)" if old else
                    "fan-in job lost, cron tick" if lost else "fan-in")
        return {"tracks": n, "workflow": workflow,
                "pushes": after, "leg_pushes": leg_pushes,
                "fan_in_pushes": after - pushed, "api_requests": len(api),
                "latency_s": round((landed - last_end).total_seconds(), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracks", type=int, nargs="+", default=[4, 64, 256])
    parser.add_argument("--old", type=int, nargs="*", default=[], metavar="N",
                        help="also measure track.yml before the fan-in job, for these N")
    parser.add_argument("--lost", type=int, nargs="*", default=[], metavar="N",
                        help="also measure a fan-in job that never ran, for these N")
    args = parser.parse_args()
    rows = []
    for n in args.tracks:
        modes = [{}, *([{"lost": True}] if n in args.lost else []),
                 *([{"old": True}] if n in args.old else [])]
        for mode in modes:
            with tempfile.TemporaryDirectory() as tmp:
                started = time.monotonic()
                row = one(n, Path(tmp), **mode)
                row["bench_s"] = round(time.monotonic() - started, 1)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    print("| tracks | track.yml | pushes per run | by legs | by the fan-in job (cron tick) "
          "| API requests per run | last leg's end to brief |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        latency = (f"{r['latency_s']} s" if r["workflow"] == "fan-in"
                   else f"next cron tick + {r['latency_s']} s")
        print(f"| {r['tracks']} | {r['workflow']} | {r['pushes']} | {r['leg_pushes']} | "
              f"{r['fan_in_pushes']} | {r['api_requests']} | {latency} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
