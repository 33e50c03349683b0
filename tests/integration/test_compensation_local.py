"""Compensation (a saga) end to end with the local executor and real git: every
completed track is undone exactly once, newest first, with the original result in its
environment, even when the tick that dispatches a compensation is killed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.support.times import iso
from tests.drive import cli, launches, state_of, wait_until

UNDO = ('echo "$ORCHESTRATOR_TRACK $ORCHESTRATOR_COMPENSATING $ORCHESTRATOR_ORIGINAL_RESULT"'
        ' >> "$UNDO_LOG"')


def slot_now() -> datetime:
    # The local executor stamps starts with the real clock; tick close to it.
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return now - timedelta(minutes=now.minute % 5)


def exited(work: Path, count: int) -> bool:
    done = [p for p in work.glob("*/status.json")
            if json.loads(p.read_text()).get("state") == "exited"]
    return len(done) >= count


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["after-mark", "after-dispatch"])
def test_compensations_run_in_reverse_order_exactly_once_across_a_killed_tick(
        tmp_path: Path, repo_with_origin: Callable[..., Path], fault: str) -> None:
    undo = {"run": UNDO, "max_attempts": 2}
    result = """printf '{"summary": "made %s"}' "$ORCHESTRATOR_TRACK" > "$ORCHESTRATOR_RESULT\""""
    repo = repo_with_origin({"saga": {"cron": "*/5 * * * *", "on_failure": "compensate",
                                      "tracks": [
        {"name": "first", "run": result, "compensate": undo},
        {"name": "second", "run": f"sleep 0.5; {result}", "compensate": undo},
        {"name": "bad", "run": "sleep 1; false"},
    ]}})
    work, undo_log = tmp_path / "work", tmp_path / "undo.log"
    env = {"ORCHESTRATOR_WORK_DIR": str(work), "UNDO_LOG": str(undo_log)}
    t0 = slot_now()
    run_id = f"saga--{t0:%Y%m%dT%H%MZ}"

    def tick_at(seconds: int, **kw: str) -> None:
        cli(repo, "tick", "--now", iso(t0 + timedelta(seconds=seconds)), env=env,
            check="crash_at" not in kw, **kw)  # type: ignore[arg-type]

    tick_at(10)
    wait_until(lambda: exited(work, 3))
    # this tick sees `bad` fail, cancels nothing (all done) and starts the first
    # compensation; it is killed before (or right after) sending it
    tick_at(20, crash_at=fault)
    state, _ = state_of(repo)
    assert state.undos[run_id]["second"].phase is TrackPhase.DISPATCHED
    assert state.undos[run_id]["first"].phase is TrackPhase.PENDING
    for i in range(40):
        # past the dispatch grace, so a compensation never sent is sent again
        tick_at(90 + i * 10)
        state, _ = state_of(repo)
        if state.runs[run_id].status is RunStatus.FAILED:
            break
        time.sleep(0.3)
    assert state.runs[run_id].status is RunStatus.FAILED
    lines = undo_log.read_text().splitlines()
    assert lines == ['second 1 {"summary": "made second"}',
                     'first 1 {"summary": "made first"}']
    undo_keys = [k for k in launches(work) if "--undo--" in k]
    assert undo_keys == [f"{run_id}--second--undo--1", f"{run_id}--first--undo--1"]
    assert {u.phase for u in state.undos[run_id].values()} == {TrackPhase.COMPLETE}
    history = state.undos[run_id]["first"].state_history
    assert [h.to for h in history][-1] == "complete" and all(h.at for h in history)
    _, snap = state_of(repo)
    brief = snap.files[f"state/runs/{run_id}/brief.html"].decode()
    assert 'id="compensation"' in brief and "<code>second</code>" in brief


def test_a_failing_compensation_is_dead_lettered(tmp_path: Path,
                                                 repo_with_origin: Callable[..., Path]
                                                 ) -> None:
    repo = repo_with_origin({"saga": {"cron": "*/5 * * * *", "on_failure": "compensate",
                                      "tracks": [
        {"name": "ok", "run": "true", "compensate": {"run": "false", "max_attempts": 1}},
        {"name": "bad", "run": "sleep 0.5; false"},
    ]}})
    work = tmp_path / "work"
    env = {"ORCHESTRATOR_WORK_DIR": str(work)}
    t0 = slot_now()
    run_id = f"saga--{t0:%Y%m%dT%H%MZ}"
    cli(repo, "tick", "--now", iso(t0 + timedelta(seconds=10)), env=env, check=True)
    wait_until(lambda: exited(work, 2))
    for i in range(30):
        cli(repo, "tick", "--now", iso(t0 + timedelta(seconds=20 + i)), env=env, check=True)
        state, _ = state_of(repo)
        if state.runs[run_id].status is RunStatus.FAILED:
            break
        time.sleep(0.3)
    assert state.runs[run_id].status is RunStatus.FAILED
    assert state.dlq[f"{run_id}--ok"].reason == "compensation_failed"
    listed = cli(repo, "dlq", "list", check=True).stdout
    assert f"{run_id}--ok" in listed and "compensation_failed" in listed
