"""Tracks that wait for others, the consolidate step and poll tracks, in the planner.

Driven with plain datetimes, as the rest of the planner: each test ticks, then tells
the planner what the executor saw, and ticks again.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.config.files import describe_error
from orchestrator.config.models import Schedule, ScheduleSpec
from orchestrator.executors.base import Observation
from orchestrator.planner import Decision, finish
from orchestrator.state import machine
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.builders import schedule, spec_data
from tests.planning import tick

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "g--20261201T0700Z"


def graph(*tracks: dict[str, Any], **fields: Any) -> Schedule:
    """Schedule ``g``, daily at 07:00, with the given track entries."""
    entries = [{"run": "true", **t} for t in tracks]
    return schedule("g", tracks=entries, **fields)


def saw(d: Decision, phase: TrackPhase, **fields: Any) -> dict[str, Observation]:
    """Every attempt ``d`` dispatched, observed in ``phase``."""
    return {r.key: Observation(key=r.key, phase=phase, **fields) for r in d.dispatch}


def started(d: Decision) -> list[str]:
    return sorted(r.track for r in d.dispatch)


def phases(state: State) -> dict[str, str]:
    return {n: t.phase.value for n, t in sorted(state.tracks[RUN].items())}


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(("tracks", "field", "words"), [
    ([{"name": "a", "needs": ["a"]}], "tracks.0.needs", "needs itself"),
    ([{"name": "a"}, {"name": "b", "needs": ["nope"]}], "tracks.1.needs",
     "needs 'nope', which is not a track"),
    ([{"name": "a", "needs": ["c"]}, {"name": "b", "needs": ["a"]},
      {"name": "c", "needs": ["b"]}], "tracks.0.needs", "cycle: a -> c -> b -> a"),
    ([{"name": "x"}, {"name": "b", "needs": ["c"]}, {"name": "c", "needs": ["b"]}],
     "tracks.1.needs", "cycle: b -> c -> b"),
])
def test_a_bad_graph_is_an_error_naming_the_needs_field(
        tracks: list[dict[str, Any]], field: str, words: str) -> None:
    data = spec_data(tracks=[{"run": "true", **t} for t in tracks])
    with pytest.raises(ValidationError) as info:
        ScheduleSpec.model_validate_json(json.dumps(data))
    where, problem = describe_error(info.value.errors()[0])
    assert where == field
    assert words in problem


def test_consolidate_is_a_final_track_needing_every_other_one_always() -> None:
    s = graph({"name": "a"}, {"name": "b", "needs": ["a"]},
              consolidate={"run": "merge", "timeout_minutes": 5, "max_attempts": 2})
    last = s.spec.run_tracks[-1]
    assert [t.name for t in s.spec.run_tracks] == ["a", "b", "consolidate"]
    assert (last.run, last.needs, last.when.value) == ("merge", ["a", "b"], "always")
    assert (last.timeout_minutes, last.max_attempts) == (5, 2)
    # the name is reserved only where the step exists
    data = spec_data(tracks=[{"name": "consolidate", "run": "x"}], consolidate={"run": "y"})
    with pytest.raises(ValidationError) as info:
        ScheduleSpec.model_validate_json(json.dumps(data))
    assert describe_error(info.value.errors()[0])[0] == "tracks.0.name"
    assert graph({"name": "consolidate"}).spec.run_tracks[0].name == "consolidate"


# ---------------------------------------------------------------- graph order


def test_each_stage_is_dispatched_by_the_tick_that_sees_its_needs_finish() -> None:
    s = graph({"name": "fetch"}, {"name": "left", "needs": ["fetch"]},
              {"name": "right", "needs": ["fetch"]},
              {"name": "merge", "needs": ["left", "right"]})
    d1 = tick(s, State(), T0)
    assert started(d1) == ["fetch"]
    assert phases(d1.state)["merge"] == "pending"
    d2 = tick(s, d1.state, T0 + timedelta(minutes=1), saw(d1, TrackPhase.COMPLETE))
    assert started(d2) == ["left", "right"]
    left = next(r for r in d2.dispatch if r.track == "left")
    d3 = tick(s, d2.state, T0 + timedelta(minutes=2),
              {left.key: Observation(key=left.key, phase=TrackPhase.COMPLETE)})
    assert started(d3) == []  # right is still running
    right = next(r for r in d2.dispatch if r.track == "right")
    d4 = tick(s, d3.state, T0 + timedelta(minutes=3),
              {right.key: Observation(key=right.key, phase=TrackPhase.COMPLETE)})
    assert started(d4) == ["merge"] and d4.render == []
    d5 = tick(s, d4.state, T0 + timedelta(minutes=4), saw(d4, TrackPhase.COMPLETE))
    assert d5.render == [RUN]
    assert d5.state.runs[RUN].status is RunStatus.CONSOLIDATING


def test_a_need_waiting_for_its_retry_holds_its_dependants() -> None:
    s = graph({"name": "a", "max_attempts": 2, "retry_backoff_seconds": 60},
              {"name": "b", "needs": ["a"]})
    d1 = tick(s, State(), T0)
    d2 = tick(s, d1.state, T0 + timedelta(minutes=1), saw(d1, TrackPhase.FAILED))
    assert phases(d2.state) == {"a": "pending", "b": "pending"} and started(d2) == []
    d3 = tick(s, d2.state, T0 + timedelta(minutes=2, seconds=1))
    assert started(d3) == ["a"]
    d4 = tick(s, d3.state, T0 + timedelta(minutes=3), saw(d3, TrackPhase.COMPLETE))
    assert started(d4) == ["b"]


def test_when_success_skips_the_dependants_of_a_failure_transitively() -> None:
    s = graph({"name": "a"}, {"name": "ok"}, {"name": "b", "needs": ["a", "ok"]},
              {"name": "c", "needs": ["b"]})
    d1 = tick(s, State(), T0)
    assert started(d1) == ["a", "ok"]
    seen = saw(d1, TrackPhase.COMPLETE)
    key_a = next(r.key for r in d1.dispatch if r.track == "a")
    seen[key_a] = Observation(key=key_a, phase=TrackPhase.FAILED, error="exit code 1")
    d2 = tick(s, d1.state, T0 + timedelta(minutes=1), seen)
    assert phases(d2.state) == {"a": "failed", "b": "skipped", "c": "skipped", "ok": "complete"}
    assert started(d2) == []
    b = d2.state.tracks[RUN]["b"]
    assert b.state_history[-1].reason == "needs did not complete: a failed"
    assert d2.state.tracks[RUN]["c"].state_history[-1].reason == (
        "needs did not complete: b skipped")
    # every track is terminal: the run consolidates in that same tick, and failed
    assert d2.render == [RUN]
    run = finish(d2.state.runs[RUN], d2.state.tracks[RUN].values(), T0 + timedelta(minutes=1))
    assert run.status is RunStatus.FAILED
    assert TrackPhase.SKIPPED in machine.TRACK_TERMINAL
    assert not machine.TRACK_TRANSITIONS[TrackPhase.SKIPPED]


def test_when_always_runs_whatever_its_needs_ended_in() -> None:
    s = graph({"name": "a"}, {"name": "b", "needs": ["a"]},
              {"name": "cleanup", "needs": ["b"], "when": "always"})
    d1 = tick(s, State(), T0)
    d2 = tick(s, d1.state, T0 + timedelta(minutes=1), saw(d1, TrackPhase.TAPPED_OUT))
    assert phases(d2.state) == {"a": "tapped_out", "b": "skipped", "cleanup": "dispatched"}
    assert started(d2) == ["cleanup"] and d2.render == []


def test_consolidate_sees_every_result_and_runs_after_a_failure() -> None:
    s = graph({"name": "a"}, {"name": "b"}, consolidate={"run": "merge"})
    d1 = tick(s, State(), T0)
    assert started(d1) == ["a", "b"]
    ka, kb = (next(r.key for r in d1.dispatch if r.track == n) for n in "ab")
    end = T0 + timedelta(seconds=30)
    d2 = tick(s, d1.state, T0 + timedelta(minutes=1), {
        ka: Observation(key=ka, phase=TrackPhase.COMPLETE, result={"summary": "3 rows"},
                        started_at=T0 + timedelta(seconds=1), finished_at=end),
        kb: Observation(key=kb, phase=TrackPhase.FAILED,
                        error="exit code 2; stderr ends with:\nboom"),
    })
    assert started(d2) == ["consolidate"]
    results = d2.dispatch[0].results
    assert results is not None and sorted(results) == ["a", "b"]
    assert results["a"]["phase"] == "complete" and results["a"]["attempt"] == 1
    assert results["a"]["result"] == {"summary": "3 rows"}
    assert results["a"]["finished_at"] == end.isoformat()
    assert results["b"]["phase"] == "failed"
    assert "boom" in results["b"]["error_tail"][-1]
    assert [r.results for r in d1.dispatch] == [None, None]  # no needs, no results
    d3 = tick(s, d2.state, T0 + timedelta(minutes=2), saw(d2, TrackPhase.COMPLETE))
    assert d3.render == [RUN]


# ---------------------------------------------------------------- measured times


def test_an_observed_end_is_dated_with_the_command_s_own_times() -> None:
    s = graph({"name": "a"})
    d1 = tick(s, State(), T0)
    key = d1.dispatch[0].key
    began, ended = T0 + timedelta(seconds=2), T0 + timedelta(seconds=2, milliseconds=1)
    d2 = tick(s, d1.state, T0 + timedelta(minutes=9), {key: Observation(
        key=key, phase=TrackPhase.COMPLETE, started_at=began, finished_at=ended)})
    a = d2.state.tracks[RUN]["a"]
    assert (a.started_at, a.finished_at) == (began, ended)
    assert a.state_history[-1].at == ended
    # a clock ahead of the tick's, or behind the previous step, is kept in between
    d1b = tick(s, State(), T0)
    d2b = tick(s, d1b.state, T0 + timedelta(minutes=1), {key: Observation(
        key=key, phase=TrackPhase.COMPLETE, finished_at=T0 - timedelta(hours=1))})
    assert d2b.state.tracks[RUN]["a"].state_history[-1].at == T0


# ---------------------------------------------------------------- poll tracks


POLLER = {"name": "wait", "poll_interval_minutes": 10}


def test_not_yet_waits_then_polls_again_without_using_an_attempt() -> None:
    s = graph(POLLER)
    d1 = tick(s, State(), T0)
    assert [r.key for r in d1.dispatch] == [f"{RUN}--wait--1"]
    t1 = T0 + timedelta(minutes=1)
    d2 = tick(s, d1.state, t1, saw(d1, TrackPhase.WAITING, finished_at=T0 + timedelta(seconds=5)))
    w = d2.state.tracks[RUN]["wait"]
    assert (w.phase, w.attempt, w.polls) == (TrackPhase.WAITING, 1, 1)
    assert w.not_before == T0 + timedelta(minutes=10, seconds=5)
    assert d2.polls[RUN][0]["answer"] == "not yet" and d2.dispatch == []
    assert tick(s, d2.state, T0 + timedelta(minutes=10)).dispatch == []
    d3 = tick(s, d2.state, T0 + timedelta(minutes=10, seconds=5))
    assert [r.key for r in d3.dispatch] == [f"{RUN}--wait--1.1"]
    # a result asking for its own interval wins over poll_interval_minutes
    t3 = T0 + timedelta(minutes=11)
    d4 = tick(s, d3.state, t3, saw(d3, TrackPhase.COMPLETE, finished_at=t3,
                                   result={"poll_again_in_minutes": 2}))
    w = d4.state.tracks[RUN]["wait"]
    assert (w.phase, w.polls, w.not_before) == (TrackPhase.WAITING, 2, t3 + timedelta(minutes=2))
    d5 = tick(s, d4.state, t3 + timedelta(minutes=2))
    assert [r.key for r in d5.dispatch] == [f"{RUN}--wait--1.2"]
    d6 = tick(s, d5.state, t3 + timedelta(minutes=3), saw(d5, TrackPhase.COMPLETE,
                                                          result={"summary": "ready"}))
    w = d6.state.tracks[RUN]["wait"]
    assert (w.phase, w.attempt, w.result) == (TrackPhase.COMPLETE, 1, {"summary": "ready"})
    assert d6.polls[RUN][0]["answer"] == "complete" and d6.render == [RUN]


def test_a_poll_still_waiting_at_the_run_deadline_is_tapped_out() -> None:
    s = graph(POLLER, deadline_minutes=30)
    d1 = tick(s, State(), T0)
    d2 = tick(s, d1.state, T0 + timedelta(minutes=1), saw(d1, TrackPhase.WAITING))
    deadline = d2.state.runs[RUN].deadline
    d3 = tick(s, d2.state, deadline)
    w = d3.state.tracks[RUN]["wait"]
    assert w.phase is TrackPhase.TAPPED_OUT and d3.dispatch == [] and d3.cancel == []
    assert d3.render == [RUN] and f"{RUN}--wait" in d3.state.dlq


def test_a_poll_that_fails_follows_the_retry_rules() -> None:
    s = graph({**POLLER, "max_attempts": 2, "retry_backoff_seconds": 30})
    d1 = tick(s, State(), T0)
    d2 = tick(s, d1.state, T0 + timedelta(minutes=1), saw(d1, TrackPhase.WAITING))
    d3 = tick(s, d2.state, T0 + timedelta(minutes=11))
    t4 = T0 + timedelta(minutes=12)
    d4 = tick(s, d3.state, t4, saw(d3, TrackPhase.FAILED, error="exit code 1"))
    w = d4.state.tracks[RUN]["wait"]
    assert (w.phase, w.attempt, w.polls) == (TrackPhase.PENDING, 2, 0)
    assert w.not_before == t4 + timedelta(seconds=30)
    assert d4.polls[RUN][0]["answer"] == "failed"
    d5 = tick(s, d4.state, t4 + timedelta(seconds=30))
    assert [r.key for r in d5.dispatch] == [f"{RUN}--wait--2"]


def test_a_track_that_is_no_poller_records_no_poll_lines() -> None:
    s = graph({"name": "a"})
    d1 = tick(s, State(), T0)
    d2 = tick(s, d1.state, T0 + timedelta(minutes=1), saw(d1, TrackPhase.COMPLETE))
    assert d2.polls == {}
