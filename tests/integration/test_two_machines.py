"""Two machines (two checkouts, two work folders) with local executors on one state
branch: a dispatch is claimed by the machine that marks it, launched only there, and
killed ticks never launch a track twice.

Real ticks (``python -m orchestrator``, killed with SIGKILL at a checkpoint through
:mod:`tests.crashpoint`), a real bare origin in a temporary folder, real supervisors and
track processes. Each machine's ``launches.log`` counts what really started.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from orchestrator.executors.workfolder import MACHINE_ID
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.support.checkpoints import POINTS
from tests.builders import spec_data
from tests.drive import cli_tick, launches, state_of, tick, wait_until
from tests.gitrepo import clone, git, make_origin

EVERY = spec_data("* * * * *", run="true", overlap="allow", catchup="all")
"""Every minute, and a slot a killed tick never marked fires with the next one."""
NIGHTLY = spec_data("0 7 * * *", tracks=[{"name": n, "run": "true", "timeout_minutes": 3}
                                         for n in ("a", "b")])
RUN = "nightly--20261201T0700Z"


def at(minute: int) -> str:
    return f"2026-12-01T{7 + minute // 60:02d}:{minute % 60:02d}:30Z"


@dataclass(frozen=True)
class Machine:
    """A checkout and its work folder: what one machine running ``serve`` has."""

    repo: Path
    work: Path

    def tick(self, minute: int, crash: str | None = None) -> str:
        """A tick at ``minute``, what it logged. Killed at ``crash``: a process of its
        own (:mod:`tests.crashpoint`); else in this process, which is quicker."""
        if crash is None:
            return "\n".join(tick(self.repo, datetime.fromisoformat(at(minute)), self.work).log)
        proc = cli_tick(self.repo, at(minute), work=self.work, crash_at=crash, timeout=180)
        assert proc.returncode in (0, -9), proc.stderr  # 0: a point it did not reach
        return proc.stdout

    @property
    def id(self) -> str:
        return (self.work / MACHINE_ID).read_text().strip()

    def launched(self) -> list[str]:
        return launches(self.work)


def machines(tmp_path: Path, schedules: dict[str, dict[str, object]], n: int = 2
             ) -> tuple[Path, list[Machine]]:
    origin = make_origin(tmp_path, schedules)
    return origin, [Machine(clone(origin, tmp_path / f"repo{i}"), tmp_path / f"work{i}")
                    for i in range(n)]


def settled(work: Path) -> bool:
    """Whether every attempt launched in ``work`` has ended."""
    statuses = list(work.glob("*/status.json"))
    return all(json.loads(s.read_text()).get("state") not in ("queued", "running")
               for s in statuses)


def duplicates(fleet: list[Machine]) -> list[str]:
    counts = Counter(key for m in fleet for key in m.launched())
    return sorted(key for key, n in counts.items() if n > 1)


def finish(fleet: list[Machine], first: int, minutes: int = 3) -> int:
    """Ordinary ticks on every machine for ``minutes`` minutes from ``first`` (the grace
    passes: what was never launched goes again), then once more at the last minute,
    after every attempt ended, so the last runs are seen to end. The last minute."""
    last = first + minutes - 1
    for minute in [*range(first, last + 1), last]:
        for machine in fleet:
            wait_until(lambda m=machine: settled(m.work), timeout=60)  # type: ignore[misc]
            machine.tick(minute)
    return last


def test_a_dispatch_is_launched_and_adopted_only_by_the_machine_that_claimed_it(
        tmp_path: Path) -> None:
    _origin, (a, b) = machines(tmp_path, {"nightly": NIGHTLY})
    a.tick(1, crash="after-dispatch")  # launched, never recorded
    wait_until(lambda: len(a.launched()) == 2)
    state, _ = state_of(a.repo)
    tracks = state.tracks[RUN]
    assert {t.claimed_by for t in tracks.values()} == {a.id}
    assert all(t.phase is TrackPhase.DISPATCHED and t.handle is None for t in tracks.values())
    for minute in (3, 4):  # past the grace: machine b leaves a's dispatches alone
        b.tick(minute)
    assert b.launched() == []
    a.tick(5)  # a adopts what it launched
    wait_until(lambda: settled(a.work))
    a.tick(6)
    state, _ = state_of(a.repo)
    assert state.runs[RUN].status is RunStatus.COMPLETED
    assert sorted(a.launched()) == [f"{RUN}--a--1", f"{RUN}--b--1"]
    assert b.launched() == []


def test_a_claim_whose_machine_never_reports_is_tapped_out_not_launched_again(
        tmp_path: Path) -> None:
    _origin, (a, b) = machines(tmp_path, {"nightly": NIGHTLY})
    a.tick(1, crash="after-mark")  # claimed, and the machine is gone for good
    b.tick(3)
    state, _ = state_of(b.repo)
    assert {t.phase for t in state.tracks[RUN].values()} == {TrackPhase.DISPATCHED}
    # timeout 3 minutes, grace 1: after 07:05 the attempt is over even if it ran
    out = b.tick(6)
    assert "never recorded it within its timeout of 3 minutes" in out
    state, _ = state_of(b.repo)
    assert {t.phase for t in state.tracks[RUN].values()} == {TrackPhase.TAPPED_OUT}
    assert state.runs[RUN].status is RunStatus.FAILED
    assert a.launched() == [] and b.launched() == []


def test_each_machine_keeps_its_id_and_two_folders_are_two_machines(tmp_path: Path) -> None:
    _origin, (a, b) = machines(tmp_path, {"every": EVERY})
    a.tick(0)
    b.tick(1)
    first = (a.id, b.id)
    a.tick(2)
    assert (a.id, b.id) == first and a.id != b.id
    (b.work / MACHINE_ID).write_text("Not An Id\n")
    out = cli_tick(b.repo, at(3), work=b.work)
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert f"{b.work / MACHINE_ID}: 'Not An Id' is not a machine id" in out.stderr


@pytest.mark.slow
def test_ticks_killed_after_dispatch_on_two_machines_in_turn_launch_nothing_twice(
        tmp_path: Path) -> None:
    """The acceptance loop: each minute one machine's tick is killed after it launched
    its tracks and before it recorded them, and the other machine ticks right after.

    The machines take turns, so from the third minute on each machine's killed tick
    follows its own ordinary tick, which adopted its previous unrecorded launch while
    the other machine's sat claimed beside it: ten minutes are five rounds of that."""
    _origin, fleet = machines(tmp_path, {"every": EVERY})
    killed = []
    for minute in range(10):
        victim, other = fleet[minute % 2], fleet[1 - minute % 2]
        proc = cli_tick(victim.repo, at(minute), work=victim.work, crash_at="after-dispatch",
                        timeout=180)
        killed.append(proc.returncode == -9)
        other.tick(minute)
    assert all(killed), killed  # every victim reached its launch and died there
    assert all(m.launched() for m in fleet)  # both machines launched, and were killed
    last = finish(fleet, 30, minutes=2)
    state, _ = state_of(fleet[0].repo)
    assert duplicates(fleet) == []
    assert sorted(state.runs) == [f"every--20261201T07{m:02d}Z" for m in range(last + 1)]
    assert [r for r, run in state.runs.items() if run.status is not RunStatus.COMPLETED] == []
    assert sum(len(m.launched()) for m in fleet) == last + 1


@pytest.mark.slow
@pytest.mark.parametrize("count", [1, 2])
def test_ticks_killed_at_every_checkpoint_on_one_and_two_machines(
        tmp_path: Path, count: int) -> None:
    """The campaign: ticks killed at each point of no return a tick has (before and
    after the mark, after dispatching, after recording, while git fetches, while it
    pushes), round the machines; then ordinary ticks. No launch twice, no run left
    open, every slot fired."""
    origin, fleet = machines(tmp_path, {"every": EVERY}, count)
    for machine in fleet:
        machine.tick(0)  # the schedule is seen: from here on every slot fires
    points = list(POINTS)  # each once: bench/campaign.py runs longer, random ones
    random.Random(25 + count).shuffle(points)
    for minute, point in enumerate(points, start=1):
        victim = fleet[minute % count]
        if point == "fetch":
            _another_writer(origin)  # the victim has a new tip to fetch
        victim.tick(minute, crash=point)
        for other in fleet:
            if other is not victim:
                other.tick(minute)
    last = finish(fleet, len(points) + 1)
    state, _ = state_of(fleet[0].repo)
    assert duplicates(fleet) == []
    open_runs = [r for r, run in state.runs.items() if run.status is not RunStatus.COMPLETED]
    assert open_runs == []
    assert sorted(state.runs) == [f"every--20261201T07{m:02d}Z" for m in range(last + 1)]


def _another_writer(origin: Path) -> None:
    """Move the state branch by one commit, as a tick elsewhere would."""
    branch = "refs/heads/orchestrator-state"
    tip = git("rev-parse", branch, cwd=origin)
    commit = git("commit-tree", f"{tip}^{{tree}}", "-p", tip, "-m", "elsewhere", cwd=origin)
    git("update-ref", branch, commit, tip, cwd=origin)
