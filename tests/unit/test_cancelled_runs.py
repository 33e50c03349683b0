"""A run an operator cancelled ends ``cancelled``, not ``failed``: the state machine,
the consolidation, the readers of a run's status, and the records stored before the
status existed (:mod:`orchestrator.state.machine`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from test_policies import T0, K, saga, seen

from orchestrator.brief import context_from_files, dashboard, render_markdown
from orchestrator.notify import events
from orchestrator.planner import CancelRequest, consolidate
from orchestrator.planner.pause import failure_streak, record_finish
from orchestrator.runs import deadletters, retry, status
from orchestrator.state import codec, layout, machine
from orchestrator.state import model as state_model
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Act, Cursor, Run
from tests.builders import schedule
from tests.memory_tick import MemoryShell
from tests.planning import tick

NOW = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"
NIGHTLY = schedule("nightly", cron="0 7 * * *", tracks=("a", "b"))
MINUTE = timedelta(minutes=1)
CAROL = Act(by="carol", at=NOW + 2 * MINUTE, reason="wrong data")


def test_a_cancel_applied_by_a_tick_ends_the_run_cancelled(shell: MemoryShell) -> None:
    shell.schedules = [NIGHTLY]
    assert sorted(shell.run(NOW + MINUTE).dispatched) == [f"{RUN}--a--1", f"{RUN}--b--1"]
    shell.executor.finish(f"{RUN}--a--1", NOW + MINUTE)  # b runs on
    result = shell.run(NOW + 2 * MINUTE, requests=(CancelRequest(RUN, CAROL),))
    assert result.finished == (RUN,)
    run = shell.run_record(RUN)
    assert run.status is RunStatus.CANCELLED and run.status in machine.RUN_TERMINAL
    assert run.state_history[-1].reason == "cancelled by carol: wrong data"
    assert shell.track(RUN, "b").phase is TrackPhase.CANCELLED
    assert shell.executor.cancelled  # b's attempt was stopped
    assert RUN not in json.loads(shell.files[layout.OPEN_INDEX])["runs"]
    assert state_model.load(shell.files).cursors["nightly"].failures_in_a_row == 0
    brief = shell.files[layout.brief_path(RUN)].decode()
    assert "Run cancelled" in brief and "by carol: wrong data" in brief
    assert 'class="status s-cancelled">cancelled<' in brief
    index = shell.files[layout.INDEX].decode()  # the dashboard: neutral, no attention
    assert f'class="o-cancelled" href="runs/{RUN}/brief.html"' in index
    assert '<span class="pill s-cancelled">cancelled</span>' in index
    assert "Nothing needs attention" in index
    ctx = context_from_files(shell.files, RUN, now=NOW + 3 * MINUTE, schedule=NIGHTLY.spec)
    summary = render_markdown(ctx)  # the job summary's and the notifications' brief
    assert f"({RunStatus.CANCELLED.value})" in summary
    assert "⚪ **Run cancelled**: by carol: wrong data; 1 of 2 tracks complete." in summary


def test_a_cancel_after_every_track_ended_is_refused_and_the_run_completes(
        shell: MemoryShell) -> None:
    shell.schedules = [NIGHTLY]
    shell.run(NOW + MINUTE)
    for track in ("a", "b"):  # both exited 0; no tick has recorded it yet
        shell.executor.finish(f"{RUN}--{track}--1", NOW + MINUTE)
    result = shell.run(NOW + 2 * MINUTE, requests=(CancelRequest(RUN, CAROL),))
    assert result.decision is not None
    assert result.decision.answers[f"cancel {RUN}"] == (
        f"{RUN}: not cancelled: too late, its work ended (complete)")
    run = shell.run_record(RUN)
    assert run.status is RunStatus.COMPLETED and run.standing_cancel is None
    assert not shell.executor.cancelled


def _cancelled_saga() -> tuple[State, datetime]:
    """b and c completed; the operator cancels while a and d run: the saga undoes c."""
    s = saga()
    d = tick([s], State(), T0)
    d = tick([s], d.state, T0 + MINUTE, seen((f"{K}--b--1", TrackPhase.COMPLETE)))
    d = tick([s], d.state, T0 + 2 * MINUTE, seen((f"{K}--c--1", TrackPhase.COMPLETE)))
    act = Act(by="carol", at=T0 + 3 * MINUTE, reason="stop")
    d = tick([s], d.state, T0 + 3 * MINUTE, requests=[CancelRequest(K, act)])
    assert [r.key for r in d.dispatch] == [f"{K}--c--undo--1"]
    return d.state, T0 + 3 * MINUTE


def test_a_cancelled_run_whose_saga_completed_ends_cancelled() -> None:
    s = saga()
    state, at = _cancelled_saga()
    d = tick([s], state, at + MINUTE, seen((f"{K}--c--undo--1", TrackPhase.COMPLETE)))
    d = tick([s], d.state, at + 2 * MINUTE, seen((f"{K}--b--undo--1", TrackPhase.COMPLETE)))
    assert d.render == [K]
    assert consolidate(d.state, K, at + 3 * MINUTE).run.status is RunStatus.CANCELLED


def test_a_cancelled_run_whose_compensation_failed_for_good_ends_failed_until_requeued(
        ) -> None:
    s = saga()
    state, at = _cancelled_saga()
    d = tick([s], state, at + MINUTE, seen((f"{K}--c--undo--1", TrackPhase.FAILED)))
    d = tick([s], d.state, at + 2 * MINUTE)
    d = tick([s], d.state, at + 3 * MINUTE, seen((f"{K}--c--undo--2", TrackPhase.FAILED)))
    assert d.render == [K] and f"{K}--c" in d.state.dlq
    failed = consolidate(d.state, K, at + 4 * MINUTE).run
    assert failed.status is RunStatus.FAILED
    assert failed.state_history[-1].reason == ("not complete: a, d; "
                                               "compensation of c failed")
    # the operator fixes the cause and requeues it: once the saga is over, the cancel stands
    d.state.runs[K] = failed
    files = d.state.dump()
    change = deadletters.requeue(files, f"{K}--c", "ops", "fixed", at + timedelta(hours=1))
    state = state_model.load({p: b for p, b in {**files, **change}.items() if b is not None},
                             all_tracks=True)
    assert state.runs[K].status is RunStatus.RUNNING
    now = at + timedelta(hours=1, minutes=1)
    d = tick([s], state, now)
    d = tick([s], d.state, now + MINUTE, seen((f"{K}--c--undo--3", TrackPhase.COMPLETE)))
    d = tick([s], d.state, now + 2 * MINUTE, seen((f"{K}--b--undo--1", TrackPhase.COMPLETE)))
    assert d.render == [K]
    assert consolidate(d.state, K, now + 3 * MINUTE).run.status is RunStatus.CANCELLED


def test_a_run_that_failed_before_the_cancel_ends_cancelled_its_dead_letter_waits() -> None:
    s = saga("cancel_run")
    d = tick([s], State(), T0)
    d = tick([s], d.state, T0 + MINUTE, seen((f"{K}--a--1", TrackPhase.FAILED)))
    assert f"{K}--a" in d.state.dlq and d.render == [K]  # cancel_run stopped the rest
    assert consolidate(d.state, K, T0 + 2 * MINUTE).run.status is RunStatus.FAILED
    s = saga("continue")
    d = tick([s], State(), T0)
    d = tick([s], d.state, T0 + MINUTE, seen((f"{K}--a--1", TrackPhase.FAILED)))
    act = Act(by="carol", at=T0 + 2 * MINUTE)
    d = tick([s], d.state, T0 + 2 * MINUTE, requests=[CancelRequest(K, act)])
    assert consolidate(d.state, K, T0 + 3 * MINUTE).run.status is RunStatus.CANCELLED
    assert f"{K}--a" in d.state.dlq


def test_a_retried_cancelled_run_ends_by_its_tracks_and_may_be_cancelled_again() -> None:
    s = saga("continue")
    d = tick([s], State(), T0)
    act = Act(by="carol", at=T0 + MINUTE)
    d = tick([s], d.state, T0 + MINUTE, requests=[CancelRequest(K, act)])
    d.state.runs[K] = consolidate(d.state, K, T0 + MINUTE).run
    assert d.state.runs[K].status is RunStatus.CANCELLED
    files = d.state.dump()
    again = Act(by="dave", at=T0 + 2 * MINUTE, reason="it was fine")
    change = retry.retry(files, K, [], True, again)
    state = state_model.load({p: b for p, b in {**files, **change}.items() if b is not None},
                             all_tracks=True)
    run = state.runs[K]
    assert run.status is RunStatus.RUNNING and run.standing_cancel is None
    assert run.cancelled == act  # what happened stays on the record
    d = tick([s], state, T0 + 3 * MINUTE)
    stop = Act(by="erin", at=T0 + 4 * MINUTE)
    late = tick([s], d.state, T0 + 4 * MINUTE, requests=[CancelRequest(K, stop)])
    assert late.answers[f"cancel {K}"] == f"{K}: cancelled by erin"
    done = tick([s], d.state, T0 + 4 * MINUTE,
                seen(*((r.key, TrackPhase.COMPLETE) for r in d.dispatch)))
    assert consolidate(done.state, K, T0 + 5 * MINUTE).run.status is RunStatus.COMPLETED


def _parse(data: bytes) -> Run:
    return codec.parse_record(Run, layout.run_path(RUN), data)


def _old_record() -> bytes:
    """A run cancelled before ``cancelled`` existed, as such a tick stored it."""
    return json.dumps({
        "run_id": RUN, "schedule_id": "nightly", "slot": "2026-12-01T07:00:00Z",
        "fire_at": "2026-12-01T07:00:00Z", "created_at": "2026-12-01T07:00:00Z",
        "deadline": "2026-12-01T09:00:00Z", "status": "failed", "tracks": ["a"],
        "finished_at": "2026-12-01T07:05:00Z",
        "state_history": [
            {"from": "scheduled", "to": "running", "at": "2026-12-01T07:00:00Z"},
            {"from": "running", "to": "consolidating", "at": "2026-12-01T07:04:00Z"},
            {"from": "consolidating", "to": "failed", "at": "2026-12-01T07:05:00Z",
             "reason": "not complete: a"}],
        "cancelled": {"by": "carol", "at": "2026-12-01T07:03:00Z", "reason": "old"},
    }).encode()


def test_an_old_failed_record_with_a_cancel_still_loads_as_failed() -> None:
    data = _old_record()
    run = _parse(data)
    assert run.status is RunStatus.FAILED and run.cancelled is not None
    assert run.acts() == ["cancelled by carol: old at 2026-12-01 07:03 UTC"]
    assert codec.to_json(run) == codec.to_json(_parse(codec.to_json(run)))
    state = state_model.load({layout.run_path(RUN): data})
    assert state.runs[RUN].status is RunStatus.FAILED  # not migrated


def test_a_cancelled_run_neither_counts_towards_a_pause_nor_breaks_the_streak() -> None:
    cursor = Cursor(schedule_id="nightly", since=NOW, failures_in_a_row=2)
    state = State()
    for i, ended in enumerate([RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.FAILED]):
        run = _parse(_old_record()).model_copy(update={
            "run_id": f"nightly--20261201T0{7 + i}00Z", "status": ended,
            "slot": NOW + timedelta(hours=i)})
        state.runs[run.run_id] = run
        if ended is RunStatus.CANCELLED:
            assert record_finish(cursor, run) is cursor
    assert failure_streak(state, "nightly") == ["nightly--20261201T0900Z",
                                                "nightly--20261201T0700Z"]


def test_the_success_rate_leaves_cancelled_runs_out() -> None:
    def strip(*statuses: str) -> list[dashboard.Outcome]:
        return [dashboard.Outcome(run_id=f"r{i}", status=s, slot=NOW, duration=None,
                                  href=None) for i, s in enumerate(statuses)]

    assert dashboard._success(strip("completed", "cancelled", "failed", "completed")) == (
        "2 of 3 finished runs succeeded (67%); 1 cancelled, not counted")
    assert dashboard._success(strip("cancelled")) == (
        "no run succeeded or failed; 1 cancelled, not counted")
    assert dashboard._success(strip("completed", "running")) == (
        "1 of 1 finished runs succeeded (100%)")


def test_a_cancelled_run_raises_no_event_and_no_attention_item(shell: MemoryShell) -> None:
    shell.schedules = [NIGHTLY]
    shell.run(NOW + MINUTE)
    before = state_model.load(shell.files, all_tracks=True)
    shell.run(NOW + 2 * MINUTE, requests=(CancelRequest(RUN, CAROL),))
    after = state_model.load(shell.files, all_tracks=True)
    assert after.runs[RUN].status is RunStatus.CANCELLED
    seen_ = events.Seen(now=NOW + 2 * MINUTE, links=events.Links(), specs={}, failing={})
    assert events.derive(before, after, seen_) == []
    report = status.build(shell.files, [NIGHTLY], [], NOW + 3 * MINUTE, timedelta(hours=1))
    assert report["attention"] == [] and report["open_runs"] == []
