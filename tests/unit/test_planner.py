"""The planner, driven with plain datetimes: every policy value and every transition."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.config.models import Schedule, ScheduleSpec
from orchestrator.executors.base import DispatchResult, Observation
from orchestrator.planner import (
    Decision,
    DispatchRecord,
    Observations,
    finish,
    jitter,
    plan,
    record_dispatch,
)
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.builders import schedule as build_schedule
from tests.builders import schedule_factory
from tests.planning import tick

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
NONE = Observations()


# Every five minutes, tracks t0 and t1 (``at`` instead of cron makes a one-shot).
sched = schedule_factory("job", cron="*/5 * * * *", tracks=2)


def run_ids(state: State) -> list[str]:
    return sorted(state.runs)


def phases(state: State, run_id: str) -> dict[str, str]:
    return {n: t.phase.value for n, t in sorted(state.tracks[run_id].items())}


def settle(decision: Decision, phase: TrackPhase = TrackPhase.COMPLETE) -> Observations:
    """Observations saying every dispatched attempt reached ``phase``."""
    return Observations(seen={r.key: Observation(key=r.key, phase=phase)
                              for r in decision.dispatch})


# ---------------------------------------------------------------- slots and catch-up


def test_first_sight_fires_the_latest_slot_inside_the_window_and_dispatches() -> None:
    d = tick([sched()], State(), T0 + timedelta(minutes=2))
    assert run_ids(d.state) == ["job--20261201T0700Z"]
    assert sorted(r.key for r in d.dispatch) == ["job--20261201T0700Z--t0--1",
                                                 "job--20261201T0700Z--t1--1"]
    assert d.state.runs["job--20261201T0700Z"].status is RunStatus.RUNNING
    cursor = d.state.cursors["job"]
    assert cursor.since == T0 and cursor.last_run_id == "job--20261201T0700Z"
    assert cursor.next_run_at == T0 + timedelta(minutes=5)


def test_nothing_due_changes_nothing() -> None:
    first = tick([sched(overlap="allow")], State(), T0)
    again = tick([sched(overlap="allow")], first.state, T0 + timedelta(minutes=1))
    assert again.state.dump() == first.state.dump()
    assert again.dispatch == [] and again.render == []


@pytest.mark.parametrize(("policy", "expected"), [
    ("all", ["job--20261201T0705Z", "job--20261201T0710Z", "job--20261201T0715Z",
             "job--20261201T0720Z"]),
    ("latest", ["job--20261201T0720Z"]),
    ("none", ["job--20261201T0720Z"]),
])
def test_catchup_after_an_outage(policy: str, expected: list[str]) -> None:
    s = sched(catchup=policy, overlap="allow", tracks=1)
    base = tick([s], State(), T0).state
    before = set(base.runs)
    later = T0 + timedelta(minutes=22)
    d = tick([s], base, later)
    assert sorted(set(d.state.runs) - before) == expected
    skipped = [n.slot for n in d.state.cursors["job"].notes
               if n.reason == "skipped" and n.at == later]
    assert skipped == ([] if policy == "all" else
                       [T0 + timedelta(minutes=m) for m in (5, 10, 15)])


@pytest.mark.parametrize("policy", ["all", "latest"])
def test_a_new_schedule_never_back_fills_whatever_its_catchup(policy: str) -> None:
    hourly = sched(cron="0 * * * *", catchup=policy, catchup_window_minutes=24 * 60,
                   overlap="allow", tracks=1)
    now = T0 + timedelta(minutes=30)
    d = tick([hourly], State(), now)
    assert run_ids(d.state) == ["job--20261201T0700Z"]  # the latest slot, not 24 runs
    # slots from before the file was first seen are nobody's promise: no notes, and
    # one line says where the schedule starts
    assert d.state.cursors["job"].notes == []
    assert [line for line in d.log if not line.startswith("job--")] == [
        "job: new schedule: first slot at 2026-12-01T07:00Z"]
    # from then on the policy holds: `all` catches up every slot after first sight
    later = tick([hourly], d.state, now + timedelta(hours=3))
    fired = sorted(set(later.state.runs) - set(d.state.runs))
    assert fired == (["job--20261201T0800Z", "job--20261201T0900Z", "job--20261201T1000Z"]
                     if policy == "all" else ["job--20261201T1000Z"])
    noted = [(n.slot.hour, n.reason) for n in later.state.cursors["job"].notes]
    assert noted == ([] if policy == "all" else [(8, "skipped"), (9, "skipped")])


def test_a_new_every_minute_schedule_says_one_line_and_keeps_no_notes() -> None:
    minutely = sched(cron="* * * * *", tracks=1)
    now = T0 + timedelta(seconds=30)
    d = tick([minutely], State(), now)
    assert run_ids(d.state) == ["job--20261201T0700Z"]
    assert d.state.cursors["job"].notes == []
    assert not any("skipped" in line or "missed" in line for line in d.log)
    assert "job: new schedule: first slot at 2026-12-01T07:00Z" in d.log


def test_a_new_schedule_with_nothing_due_names_its_first_slot_ahead() -> None:
    d = tick([sched(cron="15 9 * * *", catchup_window_minutes=10)], State(), T0)
    assert d.state.runs == {}
    assert d.log == ["job: new schedule: first slot at 2026-12-01T09:15Z"]
    none = tick([sched(catchup="none")], State(), T0 + timedelta(minutes=3))
    assert none.log == ["job: new schedule: first slot at 2026-12-01T07:05Z"]
    again = tick([sched(catchup="none")], none.state, T0 + timedelta(minutes=4))
    assert not any("new schedule" in line for line in again.log)


def test_slots_outside_the_window_are_missed_not_fired() -> None:
    s = sched(catchup="all", catchup_window_minutes=10, overlap="allow", tracks=1)
    base = tick([s], State(), T0).state
    d = tick([s], base, T0 + timedelta(minutes=30))
    new = sorted(set(d.state.runs) - set(base.runs))
    assert new == ["job--20261201T0720Z", "job--20261201T0725Z", "job--20261201T0730Z"]
    missed = sorted(n.slot for n in d.state.cursors["job"].notes if n.reason == "missed")
    assert missed == [T0 + timedelta(minutes=m) for m in (5, 10, 15)]
    assert d.state.cursors["job"].since == T0 + timedelta(minutes=30)


def test_catchup_none_never_fires_what_was_due_before_first_sight() -> None:
    s = sched(catchup="none", tracks=1)
    d = tick([s], State(), T0 + timedelta(minutes=3))
    assert d.state.runs == {}
    later = tick([s], d.state, T0 + timedelta(minutes=6))
    assert run_ids(later.state) == ["job--20261201T0705Z"]


def test_one_shot_fires_once_even_when_long_past() -> None:
    s = sched("once", at="2026-01-01T09:00:00", timezone="Europe/Paris", tracks=1)
    d = tick([s], State(), T0)
    assert run_ids(d.state) == ["once--20260101T0800Z"]
    assert d.state.cursors["once"].done
    again = tick([s], d.state, T0 + timedelta(days=2))
    assert run_ids(again.state) == ["once--20260101T0800Z"]


def test_one_shot_in_the_future_waits() -> None:
    s = sched("once", at="2026-12-01T08:00:00Z", tracks=1)
    d = tick([s], State(), T0)
    assert d.state.runs == {}
    assert run_ids(tick([s], d.state, T0 + timedelta(hours=1)).state) == [
        "once--20261201T0800Z"]


def test_disabled_schedule_is_reported_and_reenabling_with_none_skips_the_backlog() -> None:
    on = sched(catchup="none", tracks=1, overlap="allow")
    off = sched(catchup="none", tracks=1, overlap="allow", enabled=False)
    base = tick([on], State(), T0).state
    d = tick([off], base, T0 + timedelta(minutes=30))
    assert set(d.state.runs) == set(base.runs)
    assert d.state.cursors["job"].enabled is False
    assert "job: disabled" in d.log
    back = tick([on], d.state, T0 + timedelta(minutes=31))
    assert set(back.state.runs) == set(base.runs)  # nothing from the disabled half hour
    assert run_ids(tick([on], back.state, T0 + timedelta(minutes=35)).state)[-1] == \
        "job--20261201T0735Z"


def test_invalid_schedules_are_reported_and_do_not_block_valid_ones() -> None:
    d = tick([sched()], State(), T0, invalid=["schedules/bad.json: cron: nonsense"])
    assert d.invalid == ["schedules/bad.json: cron: nonsense"]
    assert run_ids(d.state) == ["job--20261201T0700Z"]


def test_daily_cap_counts_local_days() -> None:
    s = sched(cron="0 * * * *", max_runs_per_day=2, overlap="allow", tracks=1,
              timezone="America/New_York")
    state = State()
    fired: list[str] = []
    for hour in range(4, 10):
        d = tick([s], state, datetime(2026, 12, 1, hour, 0, tzinfo=UTC))
        state = d.state
        fired = run_ids(state)
    # 04:00 UTC is still 30 November in New York; 05:00 and 06:00 fill 1 December
    assert fired == ["job--20261201T0400Z", "job--20261201T0500Z", "job--20261201T0600Z"]
    assert [n.reason for n in state.cursors["job"].notes].count("daily_cap") == 3
    # 05:00 UTC = midnight in New York: a new local day
    d = tick([s], state, datetime(2026, 12, 2, 5, 0, tzinfo=UTC))
    assert "job--20261202T0500Z" in d.state.runs


def test_jitter_is_deterministic_bounded_and_delays_dispatch() -> None:
    assert jitter("a--20261201T0700Z", 0) == timedelta(0)
    values = {jitter(f"a--20261201T{h:02d}00Z", 300) for h in range(24)}
    assert all(timedelta(0) <= v <= timedelta(seconds=300) for v in values)
    assert len(values) > 10
    s = sched(jitter_seconds=600, tracks=1)
    d = tick([s], State(), T0)
    run = d.state.runs["job--20261201T0700Z"]
    assert run.fire_at == T0 + jitter(run.run_id, 600) > T0
    assert d.dispatch == [] and run.status is RunStatus.SCHEDULED
    later = tick([s], d.state, run.fire_at)
    assert [r.key for r in later.dispatch] == ["job--20261201T0700Z--t0--1"]


# ---------------------------------------------------------------- overlap


def _open_run_then_next_slot(policy: str) -> tuple[State, Decision]:
    s = sched(overlap=policy, tracks=1)
    first = tick([s], State(), T0)
    second = tick([s], first.state, T0 + timedelta(minutes=5))
    return first.state, second


def test_overlap_skip() -> None:
    _, d = _open_run_then_next_slot("skip")
    assert run_ids(d.state) == ["job--20261201T0700Z"]
    assert d.state.cursors["job"].notes[-1].reason == "overlap"


def test_overlap_skip_does_not_count_a_run_whose_last_track_just_finished() -> None:
    s = sched(overlap="skip", tracks=1)
    first = tick([s], State(), T0)
    # the tick at the next slot is the first to hear that the open run's track ended
    d = tick([s], first.state, T0 + timedelta(minutes=5), settle(first))
    assert run_ids(d.state) == ["job--20261201T0700Z", "job--20261201T0705Z"]
    assert d.state.runs["job--20261201T0700Z"].status is RunStatus.CONSOLIDATING
    assert d.render == ["job--20261201T0700Z"]
    assert [r.key for r in d.dispatch] == ["job--20261201T0705Z--t0--1"]


def test_overlap_allow() -> None:
    _, d = _open_run_then_next_slot("allow")
    assert run_ids(d.state) == ["job--20261201T0700Z", "job--20261201T0705Z"]
    assert [r.key for r in d.dispatch] == ["job--20261201T0705Z--t0--1"]


def test_overlap_buffer_one_waits_then_starts_and_buffers_only_one() -> None:
    s = sched(overlap="buffer_one", tracks=1)
    _, d = _open_run_then_next_slot("buffer_one")
    assert run_ids(d.state) == ["job--20261201T0700Z", "job--20261201T0705Z"]
    assert d.dispatch == []  # buffered behind the open run
    third = tick([s], d.state, T0 + timedelta(minutes=10))
    assert "job--20261201T0710Z" not in third.state.runs
    done = Observations(seen={"job--20261201T0700Z--t0--1": Observation(
        key="job--20261201T0700Z--t0--1", phase=TrackPhase.COMPLETE)})
    fourth = tick([s], third.state, T0 + timedelta(minutes=11), done)
    assert [r.key for r in fourth.dispatch] == ["job--20261201T0705Z--t0--1"]


def test_overlap_cancel_previous_cancels_open_tracks_and_starts_the_new_run() -> None:
    s = sched(overlap="cancel_previous", tracks=1)
    first = tick([s], State(), T0)
    handled = first.state.copy()
    record_dispatch(handled, [DispatchResult(key="job--20261201T0700Z--t0--1",
                                             handle={"pid": 1})], T0)
    d = tick([s], handled, T0 + timedelta(minutes=5))
    assert phases(d.state, "job--20261201T0700Z") == {"t0": "cancelled"}
    assert [h.key for h in d.cancel] == ["job--20261201T0700Z--t0--1"]
    assert d.state.runs["job--20261201T0700Z"].status is RunStatus.CONSOLIDATING
    assert [r.key for r in d.dispatch] == ["job--20261201T0705Z--t0--1"]


# ---------------------------------------------------------------- hygiene, retries, fan-in


def _dispatched(**fields: Any) -> tuple[Schedule, State]:
    s = sched(**fields)
    d = tick([s], State(), T0)
    state = d.state
    record_dispatch(state, [DispatchResult(key=r.key, handle={"pid": i})
                            for i, r in enumerate(d.dispatch)], T0)
    return s, state


def test_observations_move_tracks_and_stale_news_is_ignored() -> None:
    s, state = _dispatched(tracks=2, overlap="allow")
    k0, k1 = "job--20261201T0700Z--t0--1", "job--20261201T0700Z--t1--1"
    obs = Observations(seen={
        k0: Observation(key=k0, phase=TrackPhase.RUNNING, started_at=T0 + timedelta(seconds=5)),
        k1: Observation(key=k1, phase=TrackPhase.COMPLETE, result={"summary": "ok"}),
    })
    d = tick([s], state, T0 + timedelta(minutes=1), obs)
    assert phases(d.state, "job--20261201T0700Z") == {"t0": "running", "t1": "complete"}
    assert d.state.tracks["job--20261201T0700Z"]["t1"].result == {"summary": "ok"}
    back = Observations(seen={k1: Observation(key=k1, phase=TrackPhase.RUNNING)})
    d2 = tick([s], d.state, T0 + timedelta(minutes=2), back)
    assert phases(d2.state, "job--20261201T0700Z")["t1"] == "complete"


def test_timeout_counts_from_the_start_then_taps_out_and_cancels() -> None:
    s, state = _dispatched(tracks=1, overlap="allow")
    key = "job--20261201T0700Z--t0--1"
    queued = tick([s], state, T0 + timedelta(minutes=40))  # never started: no timeout
    assert queued.state.tracks["job--20261201T0700Z"]["t0"].phase is TrackPhase.DISPATCHED
    started = tick([s], queued.state, T0 + timedelta(minutes=41), Observations(seen={
        key: Observation(key=key, phase=TrackPhase.RUNNING,
                         started_at=T0 + timedelta(minutes=40))}))
    assert started.state.tracks["job--20261201T0700Z"]["t0"].started_at == \
        T0 + timedelta(minutes=40)
    early = tick([s], started.state, T0 + timedelta(minutes=69))
    assert early.state.tracks["job--20261201T0700Z"]["t0"].phase is TrackPhase.RUNNING
    d = tick([s], started.state, T0 + timedelta(minutes=70))
    track = d.state.tracks["job--20261201T0700Z"]["t0"]
    assert track.phase is TrackPhase.TAPPED_OUT
    assert "timeout of 30 minutes" in track.error_log[-1]
    assert [h.key for h in d.cancel] == ["job--20261201T0700Z--t0--1"]
    assert "job--20261201T0700Z--t0" in d.state.dlq
    assert d.state.runs["job--20261201T0700Z"].status is RunStatus.CONSOLIDATING
    assert d.render == ["job--20261201T0700Z"]


def test_deadline_taps_out_every_open_track_including_pending_ones() -> None:
    s = sched(tracks=2, deadline_minutes=20, overlap="allow", jitter_seconds=0)
    d = tick([s], State(), T0)
    state = d.state
    # t0 stays dispatched; t1 fails for good (one attempt) before the deadline
    k1 = "job--20261201T0700Z--t1--1"
    late = tick([s], state, T0 + timedelta(minutes=1), Observations(seen={
        k1: Observation(key=k1, phase=TrackPhase.FAILED, error="boom")}))
    assert phases(late.state, "job--20261201T0700Z")["t1"] == "failed"  # 1 attempt: parked
    d2 = tick([s], late.state, T0 + timedelta(minutes=20))
    assert phases(d2.state, "job--20261201T0700Z") == {"t0": "tapped_out", "t1": "failed"}
    assert d2.state.runs["job--20261201T0700Z"].status is RunStatus.CONSOLIDATING


def test_pending_track_tapped_out_by_deadline() -> None:
    data = {"cron": "0 7 * * *", "deadline_minutes": 10, "tracks": [
        {"name": "slow", "run": "false", "max_attempts": 3, "retry_backoff_seconds": 3600}]}
    s = Schedule(id="job", spec=ScheduleSpec.model_validate_json(json.dumps(data)))
    d = tick([s], State(), T0)
    key = d.dispatch[0].key
    failed = tick([s], d.state, T0 + timedelta(minutes=1), Observations(seen={
        key: Observation(key=key, phase=TrackPhase.FAILED, error="exit 1")}))
    track = failed.state.tracks["job--20261201T0700Z"]["slow"]
    assert track.phase is TrackPhase.PENDING and track.attempt == 2
    assert track.not_before == T0 + timedelta(minutes=61)
    end = tick([s], failed.state, T0 + timedelta(minutes=10))
    assert end.state.tracks["job--20261201T0700Z"]["slow"].phase is TrackPhase.TAPPED_OUT
    assert end.cancel == []  # nothing was running


def test_retry_with_backoff_then_dead_letter() -> None:
    data = {"cron": "0 7 * * *", "tracks": [
        {"name": "flaky", "run": "false", "max_attempts": 2, "retry_backoff_seconds": 60}]}
    s = Schedule(id="job", spec=ScheduleSpec.model_validate_json(json.dumps(data)))
    d = tick([s], State(), T0)
    k1 = d.dispatch[0].key
    d = tick([s], d.state, T0 + timedelta(minutes=1), Observations(seen={
        k1: Observation(key=k1, phase=TrackPhase.FAILED, error="exit code 1")}))
    assert d.dispatch == []
    d = tick([s], d.state, T0 + timedelta(seconds=119))
    assert d.dispatch == []  # backoff not over
    d = tick([s], d.state, T0 + timedelta(seconds=120))
    assert [r.key for r in d.dispatch] == ["job--20261201T0700Z--flaky--2"]
    d = tick([s], d.state, T0 + timedelta(minutes=3), Observations(seen={
        "job--20261201T0700Z--flaky--2": Observation(
            key="job--20261201T0700Z--flaky--2", phase=TrackPhase.FAILED, error="exit code 2")}))
    letter = d.state.dlq["job--20261201T0700Z--flaky"]
    assert letter.attempts == 2 and letter.reason == "failed after 2 attempt(s)"
    assert any("exit code 1" in e for e in letter.error_log)
    assert any("exit code 2" in e for e in letter.error_log)
    assert [h.to for h in letter.state_history] == [
        "dispatched", "failed", "pending", "dispatched", "failed"]
    assert d.state.runs["job--20261201T0700Z"].status is RunStatus.CONSOLIDATING
    again = tick([s], d.state, T0 + timedelta(minutes=4))
    assert again.state.dlq == d.state.dlq  # parked once


def test_unrecorded_dispatch_is_adopted_by_lookup_else_redispatched_after_grace() -> None:
    s = sched(tracks=1, overlap="allow")
    d = tick([s], State(), T0)
    key = d.dispatch[0].key
    found = Observations(found={key: DispatchResult(key=key, handle={"pid": 7})})
    adopted = tick([s], d.state, T0 + timedelta(minutes=1), found)
    assert adopted.state.tracks["job--20261201T0700Z"]["t0"].handle == {"pid": 7}
    assert adopted.dispatch == []
    absent = Observations(found={key: None})
    early = tick([s], d.state, T0 + timedelta(minutes=1), absent,
                 dispatch_grace=timedelta(minutes=2))
    assert early.dispatch == []
    unknown = tick([s], d.state, T0 + timedelta(hours=1), dispatch_grace=timedelta(minutes=2))
    # the backend could not be asked: never risk a second start
    assert key not in [r.key for r in unknown.dispatch]
    assert unknown.state.tracks["job--20261201T0700Z"]["t0"].phase is TrackPhase.DISPATCHED
    again = tick([s], d.state, T0 + timedelta(minutes=2), absent,
                 dispatch_grace=timedelta(minutes=2))
    assert [r.key for r in again.dispatch] == [key]  # same key: idempotent backends dedupe
    history = again.state.tracks["job--20261201T0700Z"]["t0"].state_history
    assert [(h.from_, h.to) for h in history][-2:] == [("dispatched", "pending"),
                                                       ("pending", "dispatched")]


def test_a_dispatch_is_claimed_by_the_machine_that_marks_it() -> None:
    s = sched(tracks=1, overlap="allow")
    d = tick([s], State(), T0, Observations(machine="laptop-1a2b3c4d"))
    assert d.state.tracks["job--20261201T0700Z"]["t0"].claimed_by == "laptop-1a2b3c4d"
    assert tick([s], State(), T0, NONE).state.tracks[
        "job--20261201T0700Z"]["t0"].claimed_by is None  # GitHub: nobody's


def test_another_machines_unrecorded_claim_is_tapped_out_after_its_timeout() -> None:
    s = sched(cron="0 7 * * *", tracks=[{"name": "t0", "run": "true", "timeout_minutes": 5}])
    d = tick([s], State(), T0, Observations(machine="a-00000001"))
    other = Observations(machine="b-00000002")  # not asked: it cannot see a's folder
    within = tick([s], d.state, T0 + timedelta(minutes=5, seconds=59), other,
                  dispatch_grace=timedelta(minutes=1))
    track = within.state.tracks["job--20261201T0700Z"]["t0"]
    assert track.phase is TrackPhase.DISPATCHED and within.dispatch == []
    past = tick([s], d.state, T0 + timedelta(minutes=6), other,
                dispatch_grace=timedelta(minutes=1))
    track = past.state.tracks["job--20261201T0700Z"]["t0"]
    assert track.phase is TrackPhase.TAPPED_OUT and past.dispatch == []
    assert "a-00000001 claimed its dispatch and never recorded it" in track.error_log[-1]
    # its own machine is not "another": it looks it up, and sends it again if absent
    key = d.dispatch[0].key
    mine = tick([s], d.state, T0 + timedelta(minutes=7), Observations(
        machine="a-00000001", found={key: None}), dispatch_grace=timedelta(minutes=1))
    assert [r.key for r in mine.dispatch] == [key]


def test_breaker_open_defers_dispatch() -> None:
    d = tick([sched()], State(), T0, Observations(executor_available=False))
    assert d.dispatch == []
    assert d.state.runs["job--20261201T0700Z"].status is RunStatus.SCHEDULED


def test_record_dispatch_sets_handles_and_turns_errors_into_failures() -> None:
    d = tick([sched(tracks=2)], State(), T0)
    k0, k1 = (r.key for r in d.dispatch)
    records = record_dispatch(d.state, [
        DispatchResult(key=k0, handle={"pid": 1}, url="file:///x"),
        DispatchResult(key=k1, error="no run command")], T0)
    assert [(r.track, r.outcome, r.detail) for r in records] == [
        ("t0", "started", "file:///x"), ("t1", "failed", "no run command")]
    assert [r.change for r in records] == ["t0: started, file:///x",
                                           "t1: dispatch failed: no run command"]
    # Only a track still dispatched under the same key is touched: a second answer is not news.
    assert record_dispatch(d.state, [DispatchResult(key=k1, error="again")], T0) == []
    t0, t1 = (d.state.tracks["job--20261201T0700Z"][n] for n in ("t0", "t1"))
    assert t0.handle == {"pid": 1} and t0.url == "file:///x"
    assert t1.phase is TrackPhase.FAILED and "no run command" in t1.error_log[-1]


def test_fan_in_and_finish() -> None:
    s = sched(tracks=2)
    d = tick([s], State(), T0)
    d = tick([s], d.state, T0 + timedelta(minutes=1), settle(d))
    run = d.state.runs["job--20261201T0700Z"]
    assert run.status is RunStatus.CONSOLIDATING and d.render == [run.run_id]
    done = finish(run, d.state.tracks[run.run_id].values(), T0 + timedelta(minutes=1))
    assert done.status is RunStatus.COMPLETED and done.finished_at == T0 + timedelta(minutes=1)
    assert [h.to for h in done.state_history] == ["running", "consolidating", "completed"]


def test_finish_fails_a_run_with_any_incomplete_track() -> None:
    s = sched(tracks=2)
    d = tick([s], State(), T0)
    k0 = d.dispatch[0].key
    k1 = d.dispatch[1].key
    d = tick([s], d.state, T0 + timedelta(minutes=1), Observations(seen={
        k0: Observation(key=k0, phase=TrackPhase.COMPLETE),
        k1: Observation(key=k1, phase=TrackPhase.CANCELLED)}))
    run = finish(d.state.runs["job--20261201T0700Z"],
                 d.state.tracks["job--20261201T0700Z"].values(), T0)
    assert run.status is RunStatus.FAILED and "t1" in run.state_history[-1].reason


def test_a_consolidating_run_is_rendered_again_until_finished() -> None:
    s = sched(tracks=1)
    d = tick([s], State(), T0)
    d = tick([s], d.state, T0 + timedelta(minutes=1), settle(d))
    again = tick([s], d.state, T0 + timedelta(minutes=2))
    assert again.render == ["job--20261201T0700Z"]


def test_the_decision_is_a_pure_function_of_its_inputs() -> None:
    s = [sched("a", tracks=3, jitter_seconds=30), sched("b", cron="*/2 * * * *")]
    one = tick(s, State(), T0 + timedelta(minutes=7))
    two = tick(s, State(), T0 + timedelta(minutes=7))
    assert one.state.dump() == two.state.dump()
    assert one.to_json() == two.to_json()


def test_a_handle_learned_while_observing_is_stored_and_the_run_keeps_its_workflow() -> None:
    s = sched(tracks=1, workflow="heavy.yml")
    d = tick([s], State(), T0)
    assert d.dispatch[0].workflow == "heavy.yml"
    key = d.dispatch[0].key
    record_dispatch(d.state, [DispatchResult(key=key, handle={"run_name": "x"})], T0)
    seen = Observations(seen={key: Observation(key=key, phase=TrackPhase.RUNNING,
                                               handle={"run_name": "x", "ci_run_id": 42},
                                               url="https://ci/42")})
    later = tick([s], d.state, T0 + timedelta(minutes=1), seen)
    track = later.state.tracks["job--20261201T0700Z"]["t0"]
    assert track.handle == {"run_name": "x", "ci_run_id": 42}
    assert track.phase is TrackPhase.RUNNING and track.url == "https://ci/42"


def test_a_dispatch_that_was_never_sent_does_not_spend_the_attempt() -> None:
    d = tick([sched(tracks=1)], State(), T0)
    key = d.dispatch[0].key
    records = record_dispatch(d.state, [DispatchResult(key=key, error="circuit open",
                                                       not_sent=True)], T0)
    track = d.state.tracks["job--20261201T0700Z"]["t0"]
    assert track.phase is TrackPhase.PENDING and track.attempt == 1 and track.error_log == []
    assert records == [DispatchRecord("job--20261201T0700Z", "t0", "not_sent", "circuit open")]
    assert records[0].change == "t0: not dispatched, will retry: circuit open"
    assert str(records[0]) == "job--20261201T0700Z/t0: not dispatched, will retry: circuit open"
    again = tick([sched(tracks=1)], d.state, T0 + timedelta(minutes=1))
    assert [r.key for r in again.dispatch] == [key]


def test_a_buffered_run_gets_its_whole_deadline_from_when_it_starts() -> None:
    s = sched(overlap="buffer_one", tracks=1, deadline_minutes=30)
    first = tick([s], State(), T0)
    second = tick([s], first.state, T0 + timedelta(minutes=5))
    waiting = second.state.runs["job--20261201T0705Z"]
    assert waiting.deadline == T0 + timedelta(minutes=35)
    key = "job--20261201T0700Z--t0--1"
    done = Observations(seen={key: Observation(key=key, phase=TrackPhase.COMPLETE)})
    third = tick([s], second.state, T0 + timedelta(minutes=25), done)
    started = third.state.runs["job--20261201T0705Z"]
    assert started.status is RunStatus.RUNNING
    assert started.deadline == T0 + timedelta(minutes=55)


def test_a_track_knows_its_schedule_its_slot_here_and_in_its_zone_and_the_slot_before() -> None:
    nightly = build_schedule("nightly", cron="15 2 * * 1-5", timezone="America/New_York")
    # Monday 2026-11-30, 02:15 New York (07:15Z); the slot before is Friday's
    monday = datetime(2026, 11, 30, 7, 16, tzinfo=UTC)
    decision = plan([nightly], State(), Observations(), monday)
    env = decision.dispatch[0].env
    assert env["ORCHESTRATOR_SCHEDULE"] == "nightly"
    assert env["ORCHESTRATOR_SLOT"] == "2026-11-30T07:15:00Z"
    assert env["ORCHESTRATOR_SLOT_LOCAL"] == "2026-11-30T02:15:00-05:00"
    assert env["ORCHESTRATOR_PREVIOUS_SLOT"] == "2026-11-27T07:15:00Z"
    once = build_schedule("once", cron=None, at="2026-11-30T07:00:00Z")
    env = plan([once], State(), Observations(), monday).dispatch[0].env
    assert env["ORCHESTRATOR_PREVIOUS_SLOT"] == ""  # a one-shot has none
