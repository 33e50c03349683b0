"""The ``after`` step of the planner, driven with plain datetimes: an upstream run's end
fires its downstream in the same decision, once; pauses, caps, catch-up and
``within_minutes`` decide what waits, what fires and what is dropped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.config.models import Schedule
from orchestrator.config.policies import Pause
from orchestrator.executors.base import Observation
from orchestrator.planner import Decision, Observations, consolidate
from orchestrator.state.layout import after_run_id, parse_run_id, slot_text
from orchestrator.state.model import State
from orchestrator.state.phases import TrackPhase
from orchestrator.tick import scope
from tests.builders import schedule
from tests.planning import tick

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
UP = schedule("up", cron="*/10 * * * *", overlap="allow")


def down(**spec: Any) -> Schedule:
    return schedule("down", cron=spec.pop("cron", None),
                    after={"schedule": "up", **spec.pop("after", {})}, **spec)


def ended(decision: Decision, phase: TrackPhase = TrackPhase.COMPLETE) -> Observations:
    """What the executor says next: every attempt sent by ``decision`` reached ``phase``."""
    return Observations(seen={r.key: Observation(key=r.key, phase=phase)
                              for r in decision.dispatch})


def committed(decision: Decision) -> State:
    """The state the next tick loads: the rendered runs finished, and left out as every
    finished run is (a tick reads only open runs)."""
    state = decision.state.copy()
    for run_id in decision.render:
        done = consolidate(state, run_id, T0)
        if done.cursor is not None:
            state.cursors[done.run.schedule_id] = done.cursor
        del state.runs[run_id]
        state.tracks.pop(run_id, None)
    return state


def downs(state: State) -> list[str]:
    return sorted(r for r, run in state.runs.items() if run.schedule_id == "down")


def upstream_ends(schedules: list[Schedule], minutes: list[int], state: State | None = None
                  ) -> tuple[Decision, State]:
    """``up`` fires at each of ``minutes`` and its run ends a minute later; the last
    decision, and the state it leaves."""
    state = state if state is not None else committed(tick(schedules, State(), T0))
    decision = tick(schedules, state, T0)
    for minute in minutes:
        fired = tick(schedules, committed(decision), T0 + timedelta(minutes=minute))
        decision = tick(schedules, committed(fired), T0 + timedelta(minutes=minute + 1),
                        ended(fired))
    return decision, committed(decision)


def test_the_upstream_s_end_fires_the_downstream_and_sends_its_tracks_in_one_decision(
        ) -> None:
    decision, state = upstream_ends([UP, down()], [10])
    [run_id] = downs(decision.state)
    assert run_id == after_run_id("down", T0 + timedelta(minutes=10), ["up--20261201T0710Z"])
    assert decision.state.runs[run_id].upstream == ["up--20261201T0710Z"]
    assert [r.key for r in decision.dispatch] == [f"{run_id}--a--1"]
    env = decision.dispatch[0].env
    assert env["ORCHESTRATOR_UPSTREAM_RUN"] == "up--20261201T0710Z"
    assert env["ORCHESTRATOR_UPSTREAM_RESULTS"] == "state/runs/up--20261201T0710Z"
    # a tick that lost the race decides again on the tip: nothing more fires
    again = tick([UP, down()], state, T0 + timedelta(minutes=11))
    assert downs(again.state) == [run_id]


def test_the_same_consolidating_run_seen_again_fires_nothing_more() -> None:
    """A brief that failed to render keeps the upstream run consolidating."""
    decision, _ = upstream_ends([UP, down()], [10])
    again = tick([UP, down()], decision.state, T0 + timedelta(minutes=12))
    assert downs(again.state) == downs(decision.state)


def test_the_run_id_parses_back_to_its_schedule_and_slot() -> None:
    run_id = after_run_id("down", T0, ["up--20261201T0700Z"])
    assert parse_run_id(run_id) == ("down", T0)
    assert slot_text(run_id) == "20261201T0700Z"


def paused(state: State) -> State:
    state.cursors["down"] = state.cursors["down"].model_copy(update={
        "paused": Pause(by="alice", at=T0, reason="maintenance")})
    return state


def resumed(state: State) -> State:
    state.cursors["down"] = state.cursors["down"].model_copy(update={"paused": None})
    return state


def test_a_paused_downstream_consumes_nothing_and_fires_once_resumed() -> None:
    schedules = [UP, down()]
    start = paused(committed(tick(schedules, State(), T0)))
    decision, state = upstream_ends(schedules, [10], start)
    assert downs(decision.state) == []
    assert ("down: after: 1 upstream run(s) wait, none consumed: paused since "
            "2026-12-01T07:00Z") in "\n".join(decision.log)
    later = tick(schedules, resumed(state), T0 + timedelta(minutes=15))
    assert len(downs(later.state)) == 1


@pytest.mark.parametrize(("catchup", "fired"), [("all", 2), ("latest", 1), ("none", 1)])
def test_a_backlog_left_while_paused_fires_as_the_catchup_policy_says(
        catchup: str, fired: int) -> None:
    schedules = [UP, down(catchup=catchup, overlap="allow")]
    start = paused(committed(tick(schedules, State(), T0)))
    _, state = upstream_ends(schedules, [10, 20], start)
    later = tick(schedules, resumed(state), T0 + timedelta(minutes=25))
    assert len(downs(later.state)) == fired
    skipped = "down: after: up--20261201T0710Z skipped (catchup="
    assert (skipped in "\n".join(later.log)) == (fired == 1)


def test_an_upstream_run_older_than_within_minutes_no_longer_counts() -> None:
    schedules = [UP, down(after={"within_minutes": 30})]
    start = paused(committed(tick(schedules, State(), T0)))
    _, state = upstream_ends(schedules, [10], start)
    later = tick(schedules, resumed(state), T0 + timedelta(minutes=60))
    assert downs(later.state) == []
    assert ("down: after: up--20261201T0710Z no longer counts (ended over 30 min ago)"
            in later.log)


def test_at_its_daily_cap_a_downstream_keeps_the_upstream_run_waiting() -> None:
    schedules = [UP, down(max_runs_per_day=1, overlap="allow")]
    decision, state = upstream_ends(schedules, [10, 20])
    assert len(downs(decision.state)) == 1
    assert any("not fired: daily cap of 1 reached; waits" in line for line in decision.log)
    cursor = state.cursors["down"]
    assert cursor.after is not None
    assert [e.run_id for e in cursor.after.waiting["up"]] == ["up--20261201T0720Z"]


def test_a_tick_scoped_to_an_upstream_run_fires_its_downstream_and_no_slot_of_it() -> None:
    """A fan-in job's tick is given the run's downstreams and their cursors: the
    decision that ends the run fires the downstream and sends its tracks, and fires
    no clock slot of it (one due at 07:11)."""
    schedules = [UP, down(cron="11 7 * * *")]
    fired = tick(schedules, committed(tick(schedules, State(), T0)), T0 + timedelta(minutes=10))
    state = committed(fired)
    run_id = "up--20261201T0710Z"
    full = scope.scoped(state, run_id, ["down"])
    assert scope.downstreams(schedules, state, run_id) == ((schedules[1],), frozenset())
    decision = tick(schedules[1:], full, T0 + timedelta(minutes=11), ended(fired),
                    only_run=run_id)
    assert decision.render == [run_id]
    [fired_after] = downs(decision.state)
    assert decision.state.runs[fired_after].upstream == [run_id]
    assert [r.run_id for r in decision.dispatch] == [fired_after]
    assert decision.state.cursors["down"].after is not None


def test_a_downstream_with_an_open_run_or_no_cursor_holds_the_upstream_run_open() -> None:
    """Also under the repository's max_concurrent_tracks, which counts runs a tick
    scoped to one run cannot see."""
    schedules = [UP, down()]
    state = committed(tick(schedules, committed(tick(schedules, State(), T0)),
                           T0 + timedelta(minutes=10)))
    run_id = "up--20261201T0710Z"
    held = ((), frozenset({"up"}))
    assert scope.downstreams(schedules, state, run_id, capped=True) == held
    other = state.copy()
    other.runs["down--x"] = state.runs[run_id].model_copy(update={
        "run_id": "down--x", "schedule_id": "down"})
    assert scope.downstreams(schedules, other, run_id) == held
    del state.cursors["down"]
    assert scope.downstreams(schedules, state, run_id) == held
    assert scope.downstreams([UP], state, run_id) == ((), frozenset())


def test_a_tick_scoped_to_an_upstream_run_leaves_its_fan_in_to_a_tick_that_sees_the_downstream(
        ) -> None:
    """A fan-in job's tick told to hold the run (a downstream needs a full tick) cannot
    count the run's end, so the run stays open for the next full tick, which fires
    the downstream."""
    schedules = [UP, down()]
    fired = tick(schedules, committed(tick(schedules, State(), T0)), T0 + timedelta(minutes=10))
    state = committed(fired)
    run_id = "up--20261201T0710Z"
    scoped = State(runs={run_id: state.runs[run_id]}, tracks={run_id: state.tracks[run_id]})
    later = T0 + timedelta(minutes=11)
    held = tick([], scoped, later, ended(fired), only_run=run_id, upstreams={"up"})
    assert held.render == [] and held.state.tracks[run_id]["a"].phase is TrackPhase.COMPLETE
    assert tick([], scoped, later, ended(fired), only_run=run_id).render == [run_id]
    state.tracks[run_id] = held.state.tracks[run_id]
    full = tick(schedules, state, later)
    assert full.render == [run_id] and len(downs(full.state)) == 1


def test_overlap_skip_consumes_an_upstream_run_that_ends_while_the_downstream_runs(
        ) -> None:
    """The downstream's first run is still open when the second upstream run ends: with
    ``skip`` that run is consumed and fires nothing; with ``buffer_one`` it fires."""
    for overlap, fired in (("skip", 1), ("buffer_one", 2)):
        schedules = [UP, down(overlap=overlap)]
        decision, state = upstream_ends(schedules, [10, 20])
        assert len(downs(decision.state)) == fired, overlap
        cursor = state.cursors["down"]
        assert cursor.after is not None and cursor.after.waiting == {}
        assert ("down: 2026-12-01T07:21Z skipped: " in "\n".join(decision.log)) == (
            overlap == "skip")
