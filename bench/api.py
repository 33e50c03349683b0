"""The static JSON API (``render --api``) at 10,000 runs: its cost, its largest file,
and what a tick that finishes one run makes it rewrite.

Builds a state branch of 10,000 runs (100 schedules, 100 runs each, one track each,
every 7th failed; the newest run of ``s0000`` still running), then times a full render
into an empty folder as ``render --api`` does it: reading the branch, parsing the
records, building the files, writing them. Then the open run finishes, and the render
runs again into the same folder, incrementally (:mod:`orchestrator.api.incremental`):
the files it wrote are listed. A full render of the same branch into an empty folder,
timed in the same run, is the yardstick; its files must be the same bytes.

    python bench/api.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrator.api import incremental, site
from orchestrator.config.files import load_all
from orchestrator.config.models import TrackSpec
from orchestrator.state import codec, layout
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Run, Track
from orchestrator.store import GitStateStore
from orchestrator.support.credentials import Redactor

SCHEDULES, PER_SCHEDULE = 100, 100
T0 = datetime(2026, 11, 20, tzinfo=UTC)
NOW = T0 + timedelta(hours=PER_SCHEDULE + 1)
BRANCH = "orchestrator-state"


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def records(k: int, *, open_: bool = False) -> dict[str, bytes | None]:
    sid, slot = f"s{k % SCHEDULES:04d}", T0 + timedelta(hours=k // SCHEDULES)
    run_id = f"{sid}--{slot:%Y%m%dT%H%MZ}"
    status = RunStatus.FAILED if k % 7 == 0 else RunStatus.COMPLETED
    run = Run(run_id=run_id, schedule_id=sid, slot=slot, fire_at=slot, created_at=slot,
              deadline=slot + timedelta(hours=1), tracks=["t"],
              status=RunStatus.RUNNING if open_ else status,
              finished_at=None if open_ else slot + timedelta(minutes=1))
    track = Track(run_id=run_id, name="t", spec=TrackSpec(name="t", run="true"),
                  phase=TrackPhase.RUNNING if open_ else TrackPhase.COMPLETE,
                  result=None if open_ else {"summary": f"loaded {k} rows"})
    return {layout.run_path(run_id): codec.to_json(run),
            layout.track_path(run_id, "t"): codec.to_json(track)}


def workspace(root: Path) -> Path:
    origin, repo = root / "origin.git", root / "repo"
    git("init", "-q", "--bare", "--initial-branch=main", str(origin), cwd=root)
    git("clone", "-q", str(origin), str(repo), cwd=root)
    (repo / "schedules").mkdir()
    for i in range(SCHEDULES):
        (repo / "schedules" / f"s{i:04d}.json").write_text(json.dumps({
            "cron": f"{i % 60} * * * *", "tracks": [{"name": "t", "run": "true"}]}))
    git("add", ".", cwd=repo)
    git("commit", "-qm", "schedules", cwd=repo)
    git("push", "-q", "origin", "HEAD:main", cwd=repo)
    last = SCHEDULES * PER_SCHEDULE - SCHEDULES  # the newest run of s0000
    files: dict[str, bytes | None] = {layout.TICKS: codec.json_line({"at": "2026-11-24T04:00:00Z"})}
    for k in range(SCHEDULES * PER_SCHEDULE):
        files.update(records(k, open_=k == last))
    GitStateStore(repo, "origin", BRANCH).transact(lambda snap: files, "runs")
    return repo


def render(repo: Path, out: Path) -> tuple[float, incremental.Rendered]:
    """Seconds to read the branch, parse it and render into ``out``, and what was done."""
    start = time.perf_counter()
    snap = GitStateStore(repo, "origin", BRANCH).read()
    schedules = load_all(repo / "schedules").schedules
    inputs = site.inputs_from_files(snap.files, schedules, [], NOW, NOW, timedelta(hours=2),
                                    all_tracks=False)
    done = incremental.render(out, inputs, Redactor(), incremental.renderer([]),
                              lambda run_id: snap.files.object_id(layout.run_dir(run_id)),
                              lambda run_ids: site.load_tracks(snap.files, run_ids))
    return time.perf_counter() - start, done


def published(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and p.name != incremental.MANIFEST}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo, out = workspace(Path(tmp)), Path(tmp) / "site"
        first, done = render(repo, out)
        files = published(out)
        biggest = max(files, key=lambda p: len(files[p]))
        print("| render | seconds | of a full render | written | removed |")
        print("|---|---:|---:|---:|---:|")
        print(f"| full, empty folder | {first:.1f} | | {len(done.written):,} | "
              f"{len(done.removed)} |")
        last = SCHEDULES * PER_SCHEDULE - SCHEDULES
        GitStateStore(repo, "origin", BRANCH).transact(lambda snap: records(last), "finish")
        again, done = render(repo, out)
        assert done.full is None, done.full
        full, fresh = render(repo, Path(tmp) / "fresh")
        assert fresh.full is not None and published(Path(tmp) / "fresh") == published(out)
        print(f"| one run finished, incremental | {again:.1f} | {again / full:.0%} | "
              f"{len(done.written):,} | {len(done.removed)} |")
        print(f"| the same branch, full, empty folder | {full:.1f} | 100% | "
              f"{len(fresh.written):,} | {len(fresh.removed)} |")
        print("\nrewritten:", ", ".join(done.written))
        size = sum(map(len, files.values())) + (out / incremental.MANIFEST).stat().st_size
        print(f"largest file: `{biggest}` {len(files[biggest]) / 1024:.0f} KiB; "
              f"{len(files):,} files, {size / 2**20:.1f} MiB with the manifest "
              f"({(out / incremental.MANIFEST).stat().st_size / 2**20:.1f} MiB)")
        subprocess.run(["tar", "-czf", f"{tmp}/site.tgz", "-C", str(out), "."], check=True)
        print(f"as a gzipped tar (what a cache keeps): "
              f"{Path(tmp, 'site.tgz').stat().st_size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
