"""How the tick, `validate` and cron scale, against floors measured in the same run.

Four tables, each cell a median of ``--reps`` runs of the real CLI in a subprocess
against a bare origin on this machine (so the numbers include Python's start-up and
git's processes, as a CI runner pays them):

1. **no-op tick** against finished runs and schedules, with the tick's peak memory.
   Floor: ``python -c "import click, pydantic, jinja2, httpx"`` plus one shallow
   ``git fetch`` of the state branch, timed in turns with the ticks of every size. Also
   the first tick (cursors written, the index
   of open runs built) and the tick in a fresh shallow clone, as on a GitHub runner,
   with what that clone downloaded.
   Then the tick's own retention: 10,000 finished runs, all but the last day's past the
   default 30 days, the fresh shallow clone tick with retention off and after the tick
   that compacted.
2. **validate** against schedule files. Floor: the same imports, then ``json.load`` of
   the same files.
3. **cron** ``next_slots`` against cronsim on the same expressions and zones, in one
   process (slots per second).

The machine is shared: compare the ratios, which are measured in the same run, more
than the absolute times. ``uptime`` is printed with the tables.

    python bench/scale.py [--reps 5] [--quick] [--only tick|validate|cron]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from orchestrator.config.models import TrackSpec
from orchestrator.state import codec, layout
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Run, Track
from orchestrator.store import GitStateStore

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
BRANCH = "orchestrator-state"
# Bytecode caching on: the floor's libraries were byte-compiled when installed, as this
# package is when pip installs it on a runner; with PYTHONDONTWRITEBYTECODE (which some
# containers set) every tick would also pay for compiling this package, the floor never.
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
       "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
       # no background gc in the clones while they are timed (or removed)
       "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "gc.auto", "GIT_CONFIG_VALUE_0": "0"}
FLOOR_IMPORTS = "import click, pydantic, jinja2, httpx"
# The tick under a wrapper that reports its own peak resident memory on stderr: VmHWM
# of /proc/self/status, which starts afresh at exec (ru_maxrss keeps the peak of the
# process that forked it, here the bench holding thousands of records).
MEASURED = ("import runpy, sys\n"
            "sys.argv = ['orchestrator', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('orchestrator', run_name='__main__')\n"
            "except SystemExit as exc:\n    code = exc.code\nelse:\n    code = 0\n"
            "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
            "print('maxrss', hwm[0], file=sys.stderr)\nsys.exit(code)\n")


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          env=ENV, text=True).stdout.strip()


def finished_runs(n: int, slots: list[datetime] | None = None) -> dict[str, bytes | None]:
    """``n`` completed runs of schedule ``old``: record, two tracks, polls and a brief;
    one a minute from 30 days before ``NOW`` (within the default retention), or at
    ``slots``."""
    files: dict[str, bytes | None] = {}
    spec = TrackSpec(name="t", run="true")
    for i in range(n):
        slot = slots[i] if slots else NOW - timedelta(days=30) + timedelta(minutes=i)
        run_id = f"old--{slot:%Y%m%dT%H%MZ}"
        run = Run(run_id=run_id, schedule_id="old", slot=slot, fire_at=slot, created_at=slot,
                  deadline=slot + timedelta(hours=1), status=RunStatus.COMPLETED,
                  tracks=["a", "b"], finished_at=slot + timedelta(minutes=1))
        files[layout.run_path(run_id)] = codec.to_json(run)
        for name in ("a", "b"):
            track = Track(run_id=run_id, name=name, phase=TrackPhase.COMPLETE,
                          spec=spec.model_copy(update={"name": name}))
            files[layout.track_path(run_id, name)] = codec.to_json(track)
        files[layout.polls_path(run_id)] = b'{"at":"x","changes":["fired"]}\n' * 3
        files[layout.brief_path(run_id)] = f"<!doctype html><p>{run_id}</p>\n".encode() * 40
    return files


def schedule_files(folder: Path, n: int, distinct: bool = False) -> None:
    """``n`` daily schedules in five zones: 300 timings (cron and zone), or, with
    ``distinct``, a timing of its own for each (up to 7,200)."""
    folder.mkdir(parents=True, exist_ok=True)
    zones = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney"]
    for i in range(n):
        hour = (i // 60) % 24 if distinct else 3
        spec = {"cron": f"{i % 60} {hour} * * *", "timezone": zones[i % len(zones)],
                "tracks": [{"name": "t", "run": "true"}]}
        (folder / f"s{i:04d}.json").write_text(json.dumps(spec) + "\n")


def workspace(root: Path, schedules: int, runs: int,
              slots: list[datetime] | None = None) -> tuple[Path, Path]:
    origin = root / "origin.git"
    repo = root / "repo"
    git("init", "-q", "--bare", "--initial-branch=main", str(origin), cwd=root)
    git("config", "uploadpack.allowFilter", "true", cwd=origin)  # as GitHub serves
    git("clone", "-q", str(origin), str(repo), cwd=root)
    schedule_files(repo / "schedules", schedules)
    git("add", ".", cwd=repo)
    git("commit", "-qm", "schedules", cwd=repo)
    git("push", "-q", "origin", "HEAD:main", cwd=repo)
    GitStateStore(repo, "origin", BRANCH).transact(lambda snap: finished_runs(runs, slots),
                                                   "bench: finished runs")
    return origin, repo


def median_of(reps: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(reps))


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, env=env or ENV)
    return time.perf_counter() - start


def tick_cmd(*extra: str) -> list[str]:
    return [sys.executable, "-c", MEASURED, "tick", "--now", NOW.isoformat(), *extra]


def measured_tick(cwd: Path, env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(tick_cmd(), cwd=cwd, check=True, capture_output=True, env=env,
                          text=True)
    seconds = time.perf_counter() - start
    rss = next(int(line.split()[1]) for line in proc.stderr.splitlines()
               if line.startswith("maxrss "))
    return seconds, rss // 1024


def size_mib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def tick_rows(reps: int, sizes: list[tuple[int, int]]) -> list[dict[str, object]]:
    """The no-op tick of each size, and the floor, measured in turns: every repetition
    times the floor and each size once, so a slow spell of the machine falls on all of
    them alike (the ratios compare samples taken side by side)."""
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        cases = []
        for schedules, runs in sizes:
            root = Path(tmp) / f"{schedules}-{runs}"
            root.mkdir()
            origin, repo = workspace(root, schedules, runs)
            env = {**ENV, "ORCHESTRATOR_WORK_DIR": str(root / "work")}
            first = timed(tick_cmd(), repo, env)  # cursors and the index written
            cases.append((schedules, runs, root, origin, repo, env, first,
                          git("ls-remote", "origin", BRANCH, cwd=repo)))
        floor_repo = cases[0][4]
        floors: list[float] = []
        samples: list[list[tuple[float, int]]] = [[] for _ in cases]
        for _ in range(reps):
            floors.append(timed([sys.executable, "-c", FLOOR_IMPORTS], floor_repo)
                          + timed(["git", "fetch", "-q", "--depth=1", "origin", BRANCH],
                                  floor_repo))
            for case, taken in zip(cases, samples, strict=True):
                taken.append(measured_tick(case[4], case[5]))
        floor = statistics.median(floors)
        rows = []
        for (schedules, runs, root, origin, repo, env, first, tip), taken in zip(
                cases, samples, strict=True):
            assert git("ls-remote", "origin", BRANCH, cwd=repo) == tip, "a no-op tick pushed"
            cold, fetched = cold_ticks(reps, root, origin, env)
            print(f"  peak MiB per tick: {[r for _, r in taken]}", file=sys.stderr)
            rows.append({"schedules": schedules, "runs": runs,
                         "noop": statistics.median(t for t, _ in taken),
                         "rss": max(r for _, r in taken), "floor": floor, "first": first,
                         "cold": cold, "fetched": fetched})
            print(f"  tick: {rows[-1]}", file=sys.stderr)
    return rows


def cold_ticks(reps: int, root: Path, origin: Path, env: dict[str, str]
               ) -> tuple[float, float]:
    """Median seconds of a tick in a fresh ``git clone --depth=1`` (a GitHub runner),
    and median MiB that clone's ``.git`` grew by during the tick."""
    cold: list[float] = []
    fetched: list[float] = []
    for i in range(reps):
        runner = root / f"cold{i}"
        git("clone", "-q", "--depth=1", f"file://{origin}", str(runner), cwd=root)
        git_before = size_mib(runner / ".git")
        cold.append(timed(tick_cmd(), runner, env))
        fetched.append(size_mib(runner / ".git") - git_before)
    return statistics.median(cold), statistics.median(fetched)


def retention_rows(reps: int, runs: int = 10_000, recent: int = 100
                   ) -> list[dict[str, object]]:
    """The tick's own retention (default 30 days): ``runs`` finished runs, all but the
    last day's ``recent`` past it. The first tick compacts; then the fresh shallow clone
    tick, before (history kept by hand, ``keep_finished_runs_days: null``) and after."""
    old = runs - recent
    rows: list[dict[str, object]] = []
    # the old ones every 4 minutes ending 32.5 days ago, the recent ones within the day
    slots = [NOW - timedelta(days=32, hours=12) - timedelta(minutes=4 * (old - i))
             for i in range(old)]
    slots += [NOW - timedelta(days=1) + timedelta(minutes=14 * i + 1) for i in range(recent)]
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        origin, repo = workspace(root, 10, runs, slots)
        env = {**ENV, "ORCHESTRATOR_WORK_DIR": str(root / "work")}
        keep_all = root / "keep-all"
        keep_all.mkdir()
        (repo / "orchestrator.json").write_text('{"keep_finished_runs_days": null}\n')
        git("add", ".", cwd=repo)
        git("commit", "-qm", "keep every run", cwd=repo)
        git("push", "-q", "origin", "HEAD:main", cwd=repo)
        timed(tick_cmd(), repo, env)  # cursors and the index written, nothing archived
        cold, fetched = cold_ticks(reps, keep_all, origin, env)
        rows.append({"case": f"{runs:,} finished runs, retention off", "compact": None,
                     "cold": cold, "fetched": fetched, "left": runs})
        git("rm", "-q", "orchestrator.json", cwd=repo)
        git("commit", "-qm", "default retention", cwd=repo)
        git("push", "-q", "origin", "HEAD:main", cwd=repo)
        compact = timed(tick_cmd(), repo, env)  # the tick that compacts
        left = len([line for line in git("ls-tree", "--name-only", f"{BRANCH}:state/runs",
                                         cwd=origin).splitlines() if line])
        assert left <= recent + 10, f"{left} run folders left after the compaction"
        after = root / "after"
        after.mkdir()
        cold, fetched = cold_ticks(reps, after, origin, env)
        rows.append({"case": f"{runs:,} finished runs, {old:,} past 30 days, after the "
                     "tick compacted", "compact": compact, "cold": cold,
                     "fetched": fetched, "left": left})
        print(f"  retention: {rows}", file=sys.stderr)
    return rows


def validate_rows(reps: int, counts: list[int]) -> list[dict[str, object]]:
    rows = []
    for n, distinct in [(n, d) for n in counts for d in (False, True)]:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
            root = Path(tmp)
            git("init", "-q", str(root), cwd=root)
            schedule_files(root / "schedules", n, distinct)
            floor_code = (f"{FLOOR_IMPORTS}; import json, glob\n"
                          "for f in glob.glob('schedules/*.json'):\n"
                          "    json.load(open(f))\n")
            floor = statistics.median(timed([sys.executable, "-c", floor_code], root)
                                      for _ in range(reps))
            cmd = [sys.executable, "-m", "orchestrator", "validate", "--preview", "3"]
            proc = subprocess.run(cmd, cwd=root, capture_output=True, env=ENV)
            assert proc.returncode == 0, proc.stderr
            took = statistics.median(timed(cmd, root) for _ in range(reps))
            rows.append({"files": n, "distinct": distinct, "validate": took, "floor": floor})
            print(f"  validate: {rows[-1]}", file=sys.stderr)
    return rows


EXPRESSIONS = ["* * * * *", "*/5 * * * *", "30 2 * * *", "0 9 * * 1-5", "15 1,13 1 * *",
               "0 0 29 2 *", "30 1 * 3,10 0"]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]


def cron_rows(reps: int, n: int = 500) -> list[dict[str, object]]:
    from cronsim import CronSim, CronSimError

    from orchestrator.cron import DstPolicy, next_slots

    rows = []
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for expr in EXPRESSIONS:
        ours: list[float] = []
        theirs: list[float] = []
        for zone in ZONES:
            tz = ZoneInfo(zone)
            # as many slots as ours finds within its horizon (a rare one finds fewer)
            count = len(next_slots(expr, tz, DstPolicy(), start, n))

            def run_ours(tz: ZoneInfo = tz, count: int = count, expr: str = expr) -> float:
                began = time.perf_counter()
                next_slots(expr, tz, DstPolicy(), start, n)
                return count / (time.perf_counter() - began)

            def run_theirs(zone: str = zone, expr: str = expr, count: int = count) -> float:
                began = time.perf_counter()
                it = CronSim(expr, start.astimezone(ZoneInfo(zone)))
                for _ in range(count):
                    next(it)
                return count / (time.perf_counter() - began)

            ours.append(median_of(reps, run_ours))
            with contextlib.suppress(CronSimError, StopIteration):  # cronsim lacks it
                theirs.append(median_of(reps, run_theirs))
        rows.append({"expr": expr, "ours": statistics.median(ours),
                     "cronsim": statistics.median(theirs) if theirs else None})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer, smaller cases")
    parser.add_argument("--only", choices=["tick", "validate", "cron"],
                        help="measure one table")
    args = parser.parse_args()
    sizes = [(10, 100), (10, 10_000)] if args.quick else [
        (10, 100), (1000, 100), (10, 10_000), (1000, 10_000)]
    wanted = {args.only} if args.only else {"tick", "validate", "cron"}
    ticks = tick_rows(args.reps, sizes) if "tick" in wanted else []
    kept = retention_rows(args.reps) if "tick" in wanted else []
    validates = (validate_rows(args.reps, [1000] if args.quick else [1000, 5000])
                 if "validate" in wanted else [])
    crons = cron_rows(args.reps) if "cron" in wanted else []
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, medians of {args.reps}; uptime: "
          f"{subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}\n")
    if ticks:
        print_ticks(ticks)
        print_retention(kept)
    if validates:
        print_validates(validates)
    if crons:
        print_crons(crons)


def print_ticks(ticks: list[dict[str, object]]) -> None:
    base = next(r for r in ticks if r["schedules"] == 10 and r["runs"] == 100)
    print("| schedules | finished runs | no-op tick s | peak MiB | floor s | tick / floor "
          "| tick / same tick with 100 runs | first tick s | fresh shallow clone s "
          "| it downloaded MiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in ticks:
        same = next((b for b in ticks if b["schedules"] == r["schedules"]
                     and b["runs"] == 100), base)
        print(f"| {r['schedules']} | {r['runs']} | {r['noop']:.3f} | {r['rss']} "
              f"| {r['floor']:.3f} | {r['noop'] / r['floor']:.2f} "  # type: ignore[operator]
              f"| {r['noop'] / same['noop']:.2f} | {r['first']:.2f} "  # type: ignore[operator]
              f"| {r['cold']:.2f} | {r['fetched']:.1f} |")
    print()


def print_retention(kept: list[dict[str, object]]) -> None:
    print("| state branch | compacting tick s | fresh shallow clone tick s "
          "| it downloaded MiB | run folders left |")
    print("|---|---:|---:|---:|---:|")
    for r in kept:
        compact = "-" if r["compact"] is None else f"{r['compact']:.2f}"
        print(f"| {r['case']} | {compact} | {r['cold']:.2f} | {r['fetched']:.2f} "
              f"| {r['left']:,} |")
    print()


def print_validates(validates: list[dict[str, object]]) -> None:
    print("| schedule files | timings | validate --preview 3 s | floor s | ratio |")
    print("|---:|---|---:|---:|---:|")
    for r in validates:
        timings = "one each" if r["distinct"] else "300"
        print(f"| {r['files']} | {timings} | {r['validate']:.3f} | {r['floor']:.3f} "
              f"| {r['validate'] / r['floor']:.1f} |")  # type: ignore[operator]
    print()


def print_crons(crons: list[dict[str, object]]) -> None:
    print("| expression | next_slots slots/s | cronsim slots/s | ratio |")
    print("|---|---:|---:|---:|")
    for r in crons:
        theirs = r["cronsim"]
        ratio = f"{r['ours'] / theirs:.2f}" if theirs else "-"  # type: ignore[operator]
        print(f"| `{r['expr']}` | {r['ours']:,.0f} | "
              f"{'-' if theirs is None else format(theirs, ',.0f')} | {ratio} |")


if __name__ == "__main__":
    main()
