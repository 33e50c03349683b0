"""Schedules chained by ``after`` on GitHub (the fake): the fan-in job that ends an
upstream run fires the downstream in the same push, so a chain needs no cron tick
between links; racing and killed ticks fire each downstream once per upstream run.

A fan-in job is played as track.yml's ``fan-in`` runs it: the legs' outcome files in a
folder, then ``orchestrator tick --run RUN --outcomes DIR`` (in this process for the
push count, as killable processes in the campaign). Time is passed in.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.executors import outcomes
from orchestrator.executors.github import GitHubExecutor
from orchestrator.state.breaker import Breaker, BreakerPolicy
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.store import GitStateStore
from orchestrator.support.checkpoints import POINTS
from orchestrator.tick.settings import TickSettings
from orchestrator.tick.shell import Tick
from tests.builders import spec_data
from tests.drive import CRASHPOINT, STATE_BRANCH, Sleeper, github_tick, state_of
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, git, make_origin
from tests.integration.test_killed_ticks import leftovers

T0 = datetime.fromisoformat("2026-12-01T07:00:30Z")
CHAIN = {
    "ingest": spec_data("0 7 * * *"),
    "transform": spec_data(None, after={"schedule": "ingest"}),
    "report": spec_data(None, after={"schedule": "transform"}),
}


def runs_of(state: State, schedule_id: str) -> list[str]:
    return sorted(r for r, run in state.runs.items() if run.schedule_id == schedule_id)


def pushes(repo: Path) -> int:
    """The commits on the origin's state branch (none before the first tick)."""
    if not git("ls-remote", "origin", STATE_BRANCH, cwd=repo).strip():
        return 0
    git("fetch", "--quiet", "origin", STATE_BRANCH, cwd=repo)
    return int(git("rev-list", "--count", "FETCH_HEAD", cwd=repo))


def legs_ended(repo: Path, run_id: str, folder: Path, now: datetime) -> Path:
    """``folder`` holding what the run's legs uploaded: an outcome that completed, for
    each track's current attempt."""
    state, _ = state_of(repo)
    folder.mkdir(parents=True, exist_ok=True)
    for name, track in state.tracks[run_id].items():
        if track.phase in (TrackPhase.DISPATCHED, TrackPhase.RUNNING):
            outcomes.write(folder, outcomes.build(
                run_id=run_id, track=name, attempt=track.attempt, exit_code=0,
                started_at=now - timedelta(seconds=40), finished_at=now - timedelta(seconds=20)))
    return folder


def fan_in_job(repo: Path, fake: FakeGitHub, now: datetime, run_id: str, folder: Path) -> None:
    """The batch's ``fan-in`` job: the tick scoped to ``run_id``, with its legs' outcomes."""
    fake.now = now

    def make(breaker: Breaker | None) -> GitHubExecutor:
        return GitHubExecutor(fake.repository, fake.token, api_url=fake.api_url, now=now,
                              breaker=breaker, sleep=Sleeper(fake, now),
                              policy=BreakerPolicy(threshold=5, cooldown=timedelta(minutes=15)))

    settings = TickSettings(executor_name="github", dispatch_grace=timedelta(minutes=10),
                            scope=run_id, outcomes=outcomes.read_folder(folder, run_id))
    result = Tick(GitStateStore(repo, "origin", STATE_BRANCH), repo, make, now,
                  settings).run()
    assert result.mark_landed


def test_each_fan_in_job_fires_the_next_link_in_its_own_push(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo = clone(make_origin(tmp_path, CHAIN), tmp_path / "repo")
    before = pushes(repo)
    github_tick(repo, fake_github, T0)
    fired = pushes(repo)
    assert fired - before == 2  # the mark, then the dispatch's record
    chain, per_link = ["ingest--20261201T0700Z"], []
    for minute, downstream in ((3, "transform"), (6, "report"), (9, None)):
        now = T0 + timedelta(minutes=minute)
        start = pushes(repo)
        fan_in_job(repo, fake_github, now, chain[-1],
                   legs_ended(repo, chain[-1], tmp_path / f"legs{minute}", now))
        per_link.append(pushes(repo) - start)
        state, _ = state_of(repo)
        assert state.runs[chain[-1]].status is RunStatus.COMPLETED
        if downstream is not None:
            [run_id] = runs_of(state, downstream)
            assert state.runs[run_id].upstream == [chain[-1]]
            assert state.runs[run_id].status is RunStatus.RUNNING  # sent in that push
            chain.append(run_id)
    # each fan-in: its mark (the upstream's end and the downstream's dispatch), then the
    # record of the dispatch; the last link dispatches nothing
    assert per_link == [2, 2, 1]
    assert fired - before + sum(per_link) <= 3 * len(CHAIN)
    assert [c.body["inputs"]["run_id"] for c in fake_github.dispatches] == chain
    state, _ = state_of(repo)
    assert [len(runs_of(state, s)) for s in CHAIN] == [1, 1, 1]


# --------------------------------------------------------------------------- the campaign

RACERS = 4
ROUNDS = 20
BEFORE_LANDING = ("before-mark", "mark-planned", "fetch", "push")
"""The fan-in's checkpoints before its mark lands: a kill there commits nothing, so it
may die there when the full ticks race it to record the end."""
SLOTS = ("ingest--20261201T0700Z", "ingest--20261201T0705Z", "ingest--20261201T0710Z")


def start(repo: Path, fake: FakeGitHub, now: datetime, point: str | None,
          *options: str) -> subprocess.Popen[str]:
    """A GitHub tick of ``repo`` at ``now``, killed with SIGKILL at ``point`` if given."""
    entry = ["-m", "orchestrator"] if point is None else [str(CRASHPOINT), point]
    return subprocess.Popen(
        [sys.executable, *entry, "--repo", str(repo), "tick", "--executor", "github",
         "--now", f"{now:%Y-%m-%dT%H:%M:%SZ}", *options],
        env={**os.environ, **fake.env(), **leftovers(repo)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)


def ready(state: State, fake: FakeGitHub) -> str | None:
    """The oldest open run whose batch GitHub has, with a track not yet ended: the
    run whose fan-in job plays next (``None``: no batch waits)."""
    sent = {c.body["inputs"]["run_id"] for c in fake.dispatches}
    for run_id, run in sorted(state.runs.items(), key=lambda r: (r[1].slot, r[0])):
        tracks = state.tracks.get(run_id, {}).values()
        if (run.status is RunStatus.RUNNING and run_id in sent
                and any(t.phase is TrackPhase.DISPATCHED for t in tracks)):
            return run_id
    return None


def race(repos: list[Path], fake: FakeGitHub, now: datetime, run_id: str | None,
         folder: Path, points: list[str | None]) -> list[int]:
    """The fan-in job of ``run_id`` (if any) and full ticks, all at once; racer ``i``
    is killed at ``points[i]``. Their exit codes."""
    fake.now = now
    scoped = ["--run", run_id, "--outcomes", str(folder)] if run_id else []
    procs = [start(repo, fake, now, point, *(scoped if i == 0 else ()))
             for i, (repo, point) in enumerate(zip(repos, points, strict=True))]
    for proc, point in zip(procs, points, strict=True):
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 or (point and proc.returncode == -9), err
    return [p.returncode for p in procs]


def kill_points(fan_in: str, played: int) -> list[str | None]:
    """Where the racers of the ``played``-th fan-in die: the fan-in job (racer 0) at
    ``fan_in``, one full tick at each checkpoint in turn."""
    points: list[str | None] = [None] * RACERS
    points[0] = fan_in
    points[1 + played % (RACERS - 1)] = POINTS[played % len(POINTS)]
    return points


def legs_done_on_github(fake: FakeGitHub, run_id: str) -> None:
    """GitHub says the run's batches ended (legs and fan-in): full ticks may record
    the legs too, racing the fan-in job."""
    for ci_run in [r.id for r in fake.runs.values() if r.inputs.get("run_id") == run_id]:
        fake.complete_all(ci_run)


def done(state: State) -> bool:
    """Whether both chains ran to their end."""
    return (runs_of(state, "ingest") == list(SLOTS) and len(runs_of(state, "report")) == len(SLOTS)
            and all(r.status is RunStatus.COMPLETED for r in state.runs.values()))


@pytest.mark.slow
def test_racing_and_killed_ticks_fire_each_link_once_per_upstream_run(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    """Three ingest runs, each starting a chain of three. Each round the fan-in job of
    the oldest waiting batch races three full ticks, and two of the four are SIGKILLed.
    The fan-in job dies at each checkpoint it has not died at yet. When that is before
    its mark lands (and on every other batch once it died at each), GitHub also says
    the legs ended, so the full ticks race it to record the end. A run whose fan-in
    died is played again, as a re-run job would be; a dispatch that was never sent is
    sent after its grace."""
    origin = make_origin(tmp_path, {**CHAIN, "ingest": spec_data("0,5,10 7 * * *", catchup="all",
                                                                 overlap="allow")})
    repos = [clone(origin, tmp_path / f"repo{i}") for i in range(RACERS)]
    played, unhit = 0, list(POINTS)
    for round_no in range(ROUNDS):
        now = T0 + timedelta(minutes=11 * round_no)
        state, _ = state_of(repos[0])
        if round_no and done(state):
            break
        run_id = ready(state, fake_github)
        folder = tmp_path / f"legs{round_no}"
        points: list[str | None] = [None] * RACERS
        if run_id is not None:
            legs_ended(repos[0], run_id, folder, now)
            point = unhit[0] if unhit else POINTS[played % len(POINTS)]
            rivals = point in BEFORE_LANDING if unhit else played % 2 == 1
            if rivals:
                legs_done_on_github(fake_github, run_id)
            points, played = kill_points(point, played), played + 1
        died = race(repos, fake_github, now, run_id, folder, points)[0] == -9
        if died and points[0] in unhit:
            unhit.remove(str(points[0]))
    # the fan-in job died at every checkpoint of the tick (git's are best effort: a
    # fetch or push that was quick is over before its kill, which then comes after)
    assert [p for p in unhit if p not in ("fetch", "push")] == [], played
    state, _ = state_of(repos[0])
    assert done(state), sorted((r, s.status.value) for r, s in state.runs.items())
    for schedule, upstream in (("transform", "ingest"), ("report", "transform")):
        fired = Counter(u for r in runs_of(state, schedule) for u in state.runs[r].upstream)
        assert fired == Counter(runs_of(state, upstream))  # once each, none lost
    sent = Counter(c.body["inputs"]["run_id"] for c in fake_github.dispatches)
    assert sent == Counter(set(state.runs))  # each run's batch sent once
