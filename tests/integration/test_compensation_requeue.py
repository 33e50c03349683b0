"""Requeuing a failed compensation with the local executor and real git: once the
outside cause is fixed, the saga goes on where it stopped, and every compensation
still runs exactly once, in order."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.support.times import iso
from tests.drive import cli, launches, state_of

NOTE = 'echo "$ORCHESTRATOR_TRACK $ORCHESTRATOR_ATTEMPT" >> "$UNDO_LOG"'


def slot_now() -> datetime:
    # The local executor stamps starts with the real clock; tick close to it.
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return now - timedelta(minutes=now.minute % 5)


@pytest.mark.slow
def test_requeue_of_a_failed_compensation_reopens_the_saga_where_it_stopped(
        tmp_path: Path, repo_with_origin: Callable[..., Path]) -> None:
    t0 = slot_now()
    # once a day, so the ticks' clock never reaches a second run; `needs` fixes the
    # order of completion, hence of the compensations: three, two, one
    repo = repo_with_origin({"saga": {"cron": f"{t0.minute} {t0.hour} * * *",
                                      "on_failure": "compensate",
                                      "tracks": [
        {"name": "one", "run": "true", "compensate": {"run": NOTE}},
        {"name": "two", "run": "true", "needs": ["one"], "compensate": {"run": NOTE}},
        {"name": "three", "run": "true", "needs": ["two"],
         "compensate": {"run": f'{NOTE}; test -e "$MARKER"', "max_attempts": 2}},
        {"name": "bad", "run": "false", "needs": ["three"]},
    ]}})
    work, undo_log, marker = tmp_path / "work", tmp_path / "undo.log", tmp_path / "fixed"
    env = {"ORCHESTRATOR_WORK_DIR": str(work), "UNDO_LOG": str(undo_log),
           "MARKER": str(marker)}
    run_id = f"saga--{t0:%Y%m%dT%H%MZ}"
    clock = iter(range(10, 100_000, 10))  # seconds after the slot, one step per tick

    def tick_until(done: Callable[[State], bool]) -> State:
        for _ in range(80):
            cli(repo, "tick", "--now", iso(t0 + timedelta(seconds=next(clock))), env=env,
                check=True)
            state, _ = state_of(repo)
            if done(state):
                return state
            time.sleep(0.2)
        raise AssertionError(f"not reached; undo log: {lines()}")

    def lines() -> list[str]:
        return undo_log.read_text().splitlines() if undo_log.exists() else []

    letter = f"{run_id}--three"
    state = tick_until(lambda s: s.runs[run_id].status is RunStatus.FAILED)
    assert state.dlq[letter].reason == "compensation_failed"
    assert lines() == ["three 1", "three 2"]
    undos = state.undos[run_id]
    assert (undos["two"].phase, undos["one"].phase) == (TrackPhase.CANCELLED,) * 2

    marker.touch()  # the outside cause is fixed
    out = cli(repo, "dlq", "requeue", letter, "--by", "ops", "--reason", "service back",
              "--now", iso(t0 + timedelta(seconds=next(clock))), check=True)
    assert f"requeued {letter}" in out.stdout
    state, _ = state_of(repo)
    assert letter not in state.dlq
    assert state.runs[run_id].status is RunStatus.RUNNING
    undos = state.undos[run_id]
    three = undos["three"]
    # a fresh budget: the two attempts used, two more
    assert (three.phase, three.attempt, three.max_attempts) == (TrackPhase.PENDING, 3, 4)
    assert three.state_history[-1].reason == "requeued by ops: service back"
    for name in ("two", "one"):
        assert undos[name].phase is TrackPhase.PENDING
        assert undos[name].state_history[-1].reason == (
            "requeued by ops: service back (the saga reopens at three)")
    assert state.runs[run_id].state_history[-1].reason == "requeued by ops: service back"

    state = tick_until(lambda s: s.runs[run_id].status is RunStatus.FAILED)
    # the failed one once more, then the ones it held back, once each, in order
    assert lines() == ["three 1", "three 2", "three 3", "two 1", "one 1"]
    assert [k for k in launches(work) if "--undo--" in k] == [
        f"{run_id}--three--undo--1", f"{run_id}--three--undo--2",
        f"{run_id}--three--undo--3", f"{run_id}--two--undo--1", f"{run_id}--one--undo--1"]
    assert {u.phase for u in state.undos[run_id].values()} == {TrackPhase.COMPLETE}
    # the track that set the saga off still failed: the run ends failed again, and no
    # compensation waits in the dead letter queue (only `bad` itself, parked)
    assert state.runs[run_id].status is RunStatus.FAILED
    assert sorted(state.dlq) == [f"{run_id}--bad"]
    listed = cli(repo, "dlq", "list", check=True).stdout
    assert "compensation_failed" not in listed
