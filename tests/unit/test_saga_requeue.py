"""``dlq requeue`` of a ``compensation_failed`` letter, on plain state and the planner:
the saga reopens where it stopped."""

from __future__ import annotations

from datetime import timedelta

import pytest
from test_policies import T0, K, complete_then_fail, saga, seen

from orchestrator.errors import IllegalTransition, UserError
from orchestrator.planner import finish
from orchestrator.runs import deadletters
from orchestrator.state import machine
from orchestrator.state import model as state_model
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.planning import tick


def parked() -> State:
    """c's compensation failed both attempts and was parked; b's was cancelled behind
    it; the run was consolidated ``failed``."""
    s = saga()
    d = complete_then_fail(s)
    d = tick([s], d.state, T0 + timedelta(minutes=4), seen((f"{K}--c--undo--1", TrackPhase.FAILED)))
    d = tick([s], d.state, T0 + timedelta(minutes=5))
    d = tick([s], d.state, T0 + timedelta(minutes=6), seen((f"{K}--c--undo--2", TrackPhase.FAILED)))
    assert d.render == [K]
    state = d.state
    state.runs[K] = finish(state.runs[K], state.tracks[K].values(), T0 + timedelta(minutes=7))
    return state


def requeued(state: State) -> State:
    files = state.dump()
    change = deadletters.requeue(files, f"{K}--c", "ops", "fixed", T0 + timedelta(hours=2))
    merged = {p: d for p, d in {**files, **change}.items() if d is not None}
    return state_model.load(merged, all_tracks=True)


def test_requeue_reopens_the_failed_compensation_the_cancelled_ones_and_the_run() -> None:
    state = parked()
    assert state.runs[K].status is RunStatus.FAILED
    after = requeued(state)
    assert f"{K}--c" not in after.dlq
    c, b = after.undos[K]["c"], after.undos[K]["b"]
    assert (c.phase, c.attempt, c.max_attempts) == (TrackPhase.PENDING, 3, 4)
    assert c.state_history[-1].reason == "requeued by ops: fixed"
    assert (b.phase, b.attempt, b.finished_at) == (TrackPhase.PENDING, 1, None)
    assert [(h.from_, h.to) for h in b.state_history] == [
        ("pending", "cancelled"), ("cancelled", "pending")]
    assert b.state_history[-1].reason == "requeued by ops: fixed (the saga reopens at c)"
    run = after.runs[K]
    assert run.status is RunStatus.RUNNING and run.finished_at is None
    # the actions themselves are untouched: a stays failed (and parked), b and c done
    assert {n: t.phase for n, t in after.tracks[K].items()} == {
        "a": TrackPhase.FAILED, "b": TrackPhase.COMPLETE,
        "c": TrackPhase.COMPLETE, "d": TrackPhase.CANCELLED}
    assert f"{K}--a" in after.dlq


def test_the_reopened_saga_runs_on_in_order_and_the_run_fails_again() -> None:
    s = saga()
    state = requeued(parked())
    now = T0 + timedelta(hours=2, minutes=1)
    d = tick([s], state, now)
    assert [r.key for r in d.dispatch] == [f"{K}--c--undo--3"]  # one at a time, c first
    d = tick([s], d.state, now + timedelta(minutes=1),
             seen((f"{K}--c--undo--3", TrackPhase.COMPLETE)))
    assert [r.key for r in d.dispatch] == [f"{K}--b--undo--1"]
    assert d.render == []  # a compensation is open: no consolidation yet
    d = tick([s], d.state, now + timedelta(minutes=2),
             seen((f"{K}--b--undo--1", TrackPhase.COMPLETE)))
    assert d.render == [K] and d.dispatch == []
    run = finish(d.state.runs[K], d.state.tracks[K].values(), now + timedelta(minutes=3))
    assert run.status is RunStatus.FAILED
    assert f"{K}--c" not in d.state.dlq


def test_a_compensation_that_is_not_failed_is_not_requeued() -> None:
    state = parked()
    state.undos[K]["c"] = state.undos[K]["c"].model_copy(update={"phase": TrackPhase.COMPLETE})
    with pytest.raises(UserError, match=r"compensation .* is complete, not failed"):
        deadletters.requeue(state.dump(), f"{K}--c", "ops", "", T0 + timedelta(hours=2))


def test_only_a_cancelled_compensation_reopens() -> None:
    state = parked()
    with pytest.raises(IllegalTransition, match="not a track cancelled"):
        machine.reopen_compensation(state.tracks[K]["d"], T0, "x")
    with pytest.raises(IllegalTransition, match="not a compensation complete"):
        machine.reopen_compensation(
            state.undos[K]["b"].model_copy(update={"phase": TrackPhase.COMPLETE}), T0, "x")


def test_status_shows_a_saga_s_compensations_in_order() -> None:
    from orchestrator.runs import status

    state = requeued(parked())
    report = status.build(state.dump(), [], [], T0 + timedelta(hours=2), timedelta(hours=1))
    [run] = report["open_runs"]
    assert list(run["compensations"].items()) == [("c", "pending"), ("b", "pending")]
    assert "    compensating (newest first): c pending, b pending" in status.text(report)


def test_a_requeued_run_that_fails_again_is_not_counted_twice_for_the_pause() -> None:
    from orchestrator.planner.pause import record_finish
    from orchestrator.state.records import Cursor

    state = parked()
    cursor = Cursor(schedule_id="job", since=T0, failures_in_a_row=1)  # K's failure
    reopened = requeued(state).runs[K]
    consolidating = machine.move_run(reopened, RunStatus.CONSOLIDATING, T0 + timedelta(hours=3))
    again = finish(consolidating, state.tracks[K].values(), T0 + timedelta(hours=3))
    assert again.status is RunStatus.FAILED
    assert record_finish(cursor, again) is cursor
    first = state.runs[K]
    assert record_finish(cursor, first).failures_in_a_row == 2  # a first failure counts


def test_schedules_show_names_every_policy() -> None:
    from orchestrator.commands.schedules import policy_lines
    from tests.builders import schedule_spec

    spec = schedule_spec(tracks=[{"name": "a", "run": "make a",
                                  "compensate": {"run": "unmake a"}},
                                 {"name": "b", "run": "make b", "runs_on": ["arm"]}],
                         on_failure="compensate", runs_on=["gpu", "ubuntu-latest"],
                         max_parallel=2, pause_after_failures=3, queue_timeout_minutes=10)
    assert policy_lines(spec) == [
        "  policies:  at most 2 track(s) of a run in flight; pause after 3 failed run(s) "
        "in a row; on failure: compensate; runs on gpu, then ubuntu-latest; a label is "
        "degraded after 10 min queued or a failed start, probed after 30 min",
        "    a: undone by unmake a",
        "    b: runs on arm"]
    assert policy_lines(schedule_spec()) == []


def test_status_says_a_run_is_capped_by_max_parallel() -> None:
    from orchestrator.runs import status
    from tests.builders import schedule

    s = schedule("job", cron="*/5 * * * *", tracks=3, max_parallel=1)
    d = tick([s], State(), T0)
    report = status.build(d.state.dump(), [s], [], T0, timedelta(hours=1))
    assert report["open_runs"][0]["max_parallel"] == 1
    assert (f"  {K}  running: t0 dispatched, t1 pending, t2 pending  (at most 1 in flight)"
            in status.text(report))
