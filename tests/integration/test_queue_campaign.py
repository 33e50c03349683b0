"""The drain campaign: one queue drained by three machines (three checkouts, three work
folders) whose ticks race as OS processes, are SIGKILLed at the tick's checkpoints and
at random moments of their life, with cancels (from the owning machine and from
another one), ``runs retry`` of ended runs, ``cancel_previous`` and item retries
thrown in; then ordinary ticks.

Real git (a bare origin), real ticks, real supervisors and worker processes. The
randomness is seeded and every wait is bounded and generous; nothing asserts on time.

The guarantee checked at the end: every item completed exactly once (one ``done`` in
its history; its command ran to its end once, or once more for each time a stopped
worker put it back while it ran), none lost, none dead, no claim left.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from orchestrator.state.items import ItemStatus, key_id
from orchestrator.state.phases import RunStatus
from orchestrator.support.checkpoints import POINTS
from tests import queues
from tests.drive import CRASHPOINT, _environment, cli, read_state, tick, wait_until
from tests.gitrepo import clone, make_origin
from tests.integration.test_killed_ticks import leftovers
from tests.integration.test_queue_faults import _enqueue
from tests.integration.test_two_machines import at, settled

ITEMS = 60
FLAKY = 6
"""Items 0..5 fail their first attempt (exit 3) and complete on their second."""
ROUNDS = 14
POLICIES = ("cancel_previous", "allow", "skip")
"""Each machine's schedule has its own overlap policy."""


def _command(log: Path) -> str:
    """About 20 ms of work, then one line for the item: an item logged ran to its end.
    A flaky item fails its first attempt."""
    return (f'if [ "$ORCHESTRATOR_ITEM_ATTEMPT" = 1 ] && grep -q \'"flaky"\' '
            f'"$ORCHESTRATOR_ITEM"; then exit 3; fi; sleep 0.02; '
            f'echo "$ORCHESTRATOR_ITEM_ID" >> {log}')


def _schedule(run: str, overlap: str) -> dict[str, Any]:
    return {"cron": "* * * * *", "overlap": overlap, "tracks": [{
        "name": "pages", "run": run, "max_attempts": 3, "retry_backoff_seconds": 0,
        "timeout_minutes": 5,
        "drain": {"queue": queues.QUEUE, "task_cap": 4, "max_workers": 2}}]}


@dataclass(frozen=True)
class Machine:
    repo: Path
    work: Path
    schedule: str

    def start(self, minute: int, crash: str | None, delay: float) -> subprocess.Popen[str]:
        """A tick at ``minute`` as a process of its own, killed at ``crash``."""
        entry = ["-m", "orchestrator"] if crash is None else [str(CRASHPOINT), crash]
        # a killed tick's temporary files (a commit's index) stay beside its work folder
        env = _environment(self.work, {"CRASH_DELAY": f"{delay:.3f}", **leftovers(self.work)})
        return subprocess.Popen([sys.executable, *entry, "--repo", str(self.repo), "tick",
                                 "--now", at(minute)], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _fleet(tmp_path: Path, log: Path) -> list[Machine]:
    schedules = {f"s{n}": _schedule(_command(log), policy)
                 for n, policy in enumerate(POLICIES)}
    origin = make_origin(tmp_path, schedules)
    fleet = []
    for n in range(len(POLICIES)):
        repo = clone(origin, tmp_path / f"machine{n}")
        for other in range(len(POLICIES)):  # each machine plans its own schedule only
            if other != n:
                (repo / "schedules" / f"s{other}.json").unlink()
        fleet.append(Machine(repo, tmp_path / f"work{n}", f"s{n}"))
    return fleet


def _enqueue_flaky(repo: Path) -> None:
    _enqueue(repo, ITEMS - FLAKY)
    lines = repo.parent / "flaky.jsonl"
    lines.write_text("".join(json.dumps({"payload": {"kind": "flaky"}, "key": f"f{n}"})
                             + "\n" for n in range(FLAKY)))
    cli(repo, "queue", "add", queues.QUEUE, "--file", str(lines),
        "--now", "2026-12-01T06:00:00Z", check=True)


def _race(fleet: list[Machine], minute: int, rng: random.Random) -> None:
    """One tick per machine at once; each killed at a checkpoint, at a random moment of
    its life, or not at all."""
    procs = []
    for machine in fleet:
        roll = rng.random()
        crash = (rng.choice(POINTS) if roll < 0.35 else
                 f"process-{rng.randint(1, 40)}" if roll < 0.6 else None)
        procs.append(machine.start(minute, crash, rng.uniform(0.0, 0.05)))
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode in (0, -9), err  # 0: a point it did not reach


def _verb(fleet: list[Machine], minute: int, rng: random.Random,
          statuses: tuple[RunStatus, ...], *words: str, second: str) -> None:
    """``runs VERB RUN WORDS`` of a run in ``statuses``, from a random machine, at
    ``second`` past ``minute`` (exit 1: the verb refused)."""
    state, _ = read_state(fleet[0].repo)
    runs = sorted(r for r, run in state.runs.items() if run.status in statuses)
    if not runs:
        return
    by = rng.choice(fleet)
    out = cli(by.repo, "runs", words[0], rng.choice(runs), *words[1:],
              "--now", at(minute).replace(":30Z", f":{second}Z"), work=by.work)
    assert out.returncode in (0, 1), out.stderr


def _cancel_one(fleet: list[Machine], minute: int, rng: random.Random) -> None:
    """``runs cancel`` of an open run with workers, from its machine or another one
    (1: too late, or already cancelled)."""
    _verb(fleet, minute, rng, (RunStatus.SCHEDULED, RunStatus.RUNNING),
          "cancel", "--reason", "campaign", second="45")


def _retry_one(fleet: list[Machine], minute: int, rng: random.Random) -> None:
    """``runs retry --failed`` of an ended run (its drain reruns under new keys), from
    one of the machines (1: nothing of it to retry)."""
    _verb(fleet, minute, rng, (RunStatus.CANCELLED, RunStatus.FAILED),
          "retry", "--failed", second="50")


def _drained(repo: Path) -> bool:
    book = queues.book_of(read_state(repo)[1])
    return book.counts == {"done": ITEMS} and not book.claims


def _finish(fleet: list[Machine], first: int) -> None:
    """Ordinary ticks round the machines, each once its workers ended, until the queue
    is drained and no run is open."""
    for minute in range(first, first + 20):
        for machine in fleet:
            wait_until(lambda m=machine: settled(m.work), timeout=60)  # type: ignore[misc]
            tick(machine.repo, _when(minute), machine.work)
        if _drained(fleet[0].repo):
            return
    raise AssertionError(f"not drained: {queues.book_of(read_state(fleet[0].repo)[1]).counts}")


def _when(minute: int) -> datetime:
    return datetime.fromisoformat(at(minute))


def _put_back_while_running(history: list[Any]) -> int:
    """How often a stopped worker reported the item released while it ran it."""
    return sum(1 for h in history if h.from_ == ItemStatus.CLAIMED.value
               and h.to == ItemStatus.READY.value and h.by.count("--") >= 2)


@pytest.mark.slow
def test_three_racing_machines_killed_and_cancelled_drain_every_item_exactly_once(
        tmp_path: Path) -> None:
    log = tmp_path / "worked.log"
    fleet = _fleet(tmp_path, log)
    _enqueue_flaky(fleet[0].repo)
    rng = random.Random(41)
    for minute in range(1, ROUNDS + 1):
        _race(fleet, minute, rng)
        if minute % 3 == 0:
            _cancel_one(fleet, minute, rng)
        if minute % 4 == 2:
            _retry_one(fleet, minute, rng)
    _finish(fleet, ROUNDS + 1)

    _, files = read_state(fleet[0].repo)
    book = queues.book_of(files)
    ids = [key_id(queues.QUEUE, f"k{n}") for n in range(ITEMS - FLAKY)]
    ids += [key_id(queues.QUEUE, f"f{n}") for n in range(FLAKY)]
    logged = Counter(queues.worked(log))
    assert set(logged) == set(ids)  # none lost
    for item_id in ids:
        item = book.item(item_id)
        assert item is not None and item.status is ItemStatus.DONE
        steps = [h.to for h in item.state_history]
        assert steps.count(ItemStatus.DONE.value) == 1, item.state_history
        # run to its end once, or once more each time it was put back while it ran
        assert 1 <= logged[item_id] <= 1 + _put_back_while_running(item.state_history)
    assert book.counts == {"done": ITEMS} and not book.claims
