"""A leg that fails to start is its runner label's fault, not the track's: how a
GitHub job says so, and what the planner does with it (degrade the label, send the
track to the next one without spending an attempt)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.config.models import Schedule
from orchestrator.executors.base import Handle, Observation
from orchestrator.executors.github.observation import (
    failed_to_start,
    job_observation,
    missing_job,
)
from orchestrator.planner import Decision, Observations, plan
from orchestrator.state import health as runner_health
from orchestrator.state.model import State
from orchestrator.state.phases import TrackPhase
from tests.builders import schedule_factory

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
K = "job--20261201T0700Z"
sched = schedule_factory("job", cron="*/5 * * * *", overlap="skip")


def step(number: int, name: str, status: str = "completed",
         conclusion: str | None = "success", started: bool = True) -> dict[str, Any]:
    at = "2026-12-01T07:01:00Z" if started else None
    return {"name": name, "number": number, "status": status, "conclusion": conclusion,
            "started_at": at, "completed_at": at if status == "completed" else None}


def job(conclusion: str = "failure", runner: str | None = "gpu-7",
        steps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": 1, "name": f"{K}--t0--1", "status": "completed", "conclusion": conclusion,
            "started_at": "2026-12-01T07:00:30Z", "completed_at": "2026-12-01T07:02:00Z",
            "runner_name": runner, "labels": ["gpu"], "steps": steps}


RAN = [step(1, "Set up job"), step(2, "Install the orchestrator"),
       step(3, "Run the track", conclusion="failure"), step(4, "Complete job")]
LOST_IN_SET_UP = [step(1, "Set up job"),
                  step(2, "Install the orchestrator", "in_progress", None),
                  step(3, "Run the track", "queued", None, started=False)]
INSTALL_FAILED = [step(1, "Set up job"),
                  step(2, "Install the orchestrator", conclusion="failure"),
                  step(3, "Run the track", conclusion="skipped", started=False)]
RUNNER_SET_UP_FAILED = [step(1, "Set up job", conclusion="failure"),
                        step(2, "Run the track", conclusion="skipped", started=False)]


@pytest.mark.parametrize(("answer", "expected"), [
    (job(runner=None, steps=[]), True),  # no runner ever took it
    (job(runner="", steps=[]), True),
    (job(steps=[]), True),  # a runner took it and was lost before its first step
    (job(steps=LOST_IN_SET_UP), True),
    (job(steps=RUNNER_SET_UP_FAILED), True),  # GitHub's own set-up step: the runner's
    (job(steps=RAN), False),  # the track ran and failed: the track's fault
    (job(steps=INSTALL_FAILED), False),  # the workflow's set-up fails on every label
    (job("cancelled", runner=None, steps=[]), False),  # someone cancelled it
    (job("success", steps=[]), False),
    (job(steps=[step(1, "Set up job"), step(2, "make", conclusion="failure")]), False),
    (job(steps=None), False),  # steps not reported: nothing says it did not run
])
def test_the_rule_for_a_job_that_failed_to_start(answer: dict[str, Any],
                                                 expected: bool) -> None:
    assert failed_to_start(answer) is expected


def test_the_observation_carries_the_fault_and_no_start() -> None:
    handle = Handle(key=f"{K}--t0--1", handle={"ci_run_id": 9}, timeout_minutes=30)
    seen = job_observation(handle, 9, job(runner=None, steps=[]))
    assert (seen.phase, seen.failed_to_start, seen.started_at) == (TrackPhase.FAILED, True, None)
    assert seen.error == f"job {K}--t0--1 failed to start on gpu (no runner took it)"
    lost = job_observation(handle, 9, job(steps=LOST_IN_SET_UP))
    assert lost.error is not None and "its runner gpu-7 was lost setting up" in lost.error
    ran = job_observation(handle, 9, job(steps=RAN))
    assert (ran.phase, ran.failed_to_start) == (TrackPhase.FAILED, False)


def test_a_queued_job_cancelled_past_its_timeout_was_cancelled_not_tapped_out() -> None:
    # GitHub gives a job no runner took its creation as `started_at`: it never ran, so
    # a cancel hours later is a cancel (a leg leaving its label), not the timeout
    handle = Handle(key=f"{K}--t0--1", handle={"ci_run_id": 9}, timeout_minutes=30)
    queued = {**job("cancelled", runner=None, steps=[]), "completed_at": "2026-12-01T09:00:00Z"}
    assert job_observation(handle, 9, queued).phase is TrackPhase.CANCELLED
    ran = {**queued, "runner_name": "gpu-7"}
    assert job_observation(handle, 9, ran).phase is TrackPhase.TAPPED_OUT


def test_a_startup_failure_of_the_whole_run_is_not_the_label_s_fault() -> None:
    handle = Handle(key=f"{K}--t0--1", handle={"ci_run_id": 9}, timeout_minutes=30)
    seen = missing_job(handle, 9, 200, {"status": "completed",
                                        "conclusion": "startup_failure"}, None)
    assert (seen.phase, seen.failed_to_start) == (TrackPhase.FAILED, False)


# ---------------------------------------------------------------- the planner


def route(**kw: Any) -> Schedule:
    return sched(tracks=[{"name": n, "run": "true", "max_attempts": 2} for n in ("t0", "t1")],
                 runs_on=["gpu", "ubuntu-latest"], queue_timeout_minutes=10,
                 runner_cooldown_minutes=30, **kw)


def dispatched(s: Schedule) -> Decision:
    d = plan([s], State(), Observations(), T0)
    assert [(r.key, r.runs_on) for r in d.dispatch] == [
        (f"{K}--t0--1", "gpu"), (f"{K}--t1--1", "gpu")]
    for name in ("t0", "t1"):  # as the executor recorded them
        track = d.state.tracks[K][name]
        d.state.tracks[K][name] = track.model_copy(update={"handle": {"ci_run_id": 7}})
    return d


def news(*obs: Observation) -> Observations:
    return Observations(seen={o.key: o for o in obs})


def no_start(key: str) -> Observation:
    return Observation(key=key, phase=TrackPhase.FAILED, failed_to_start=True,
                       error=f"job {key} failed to start on gpu (no runner took it)",
                       finished_at=T0 + timedelta(minutes=1))


def test_a_leg_that_failed_to_start_degrades_its_label_and_moves_on_free() -> None:
    s = route()
    d = dispatched(s)
    d1 = plan([s], d.state, news(no_start(f"{K}--t0--1")), T0 + timedelta(minutes=2))
    gpu = d1.state.runners["gpu"]
    assert (gpu.status, gpu.consecutive_failures) == ("degraded", 1)
    assert gpu.last_checked_at == T0 + timedelta(minutes=2)
    assert gpu.notes == f"{K}--t0--1 failed to start"
    # at once, to the next label, under a fresh attempt number: the budget is untouched
    assert [(r.key, r.runs_on) for r in d1.dispatch] == [(f"{K}--t0--2", "ubuntu-latest")]
    t0 = d1.state.tracks[K]["t0"]
    assert (t0.attempt, t0.max_attempts, t0.runner, t0.phase) == (
        2, 3, "ubuntu-latest", TrackPhase.DISPATCHED)
    assert t0.error_log[-1].endswith("failed to start on gpu (no runner took it)")
    reasons = [h.reason for h in t0.state_history]
    assert "failed to start on gpu, not the track's fault; trying the next label" in reasons
    assert not any(r.startswith("retry") for r in reasons)
    assert d1.state.dlq == {}
    assert d1.cancel == []  # its job is over: nothing to stop
    assert any("t0: dispatched -> pending (failed to start on gpu" in line
               for line in d1.touched_runs[K])


def test_legs_failing_together_count_one_failure_of_the_label() -> None:
    s = route()
    d = dispatched(s)
    d1 = plan([s], d.state, news(no_start(f"{K}--t0--1"), no_start(f"{K}--t1--1")),
              T0 + timedelta(minutes=2))
    assert d1.state.runners["gpu"].consecutive_failures == 1
    assert sorted(r.key for r in d1.dispatch) == [f"{K}--t0--2", f"{K}--t1--2"]
    assert {r.runs_on for r in d1.dispatch} == {"ubuntu-latest"}


def test_a_genuine_failure_on_the_label_does_not_degrade_it() -> None:
    s = route()
    d = dispatched(s)
    failed = Observation(key=f"{K}--t0--1", phase=TrackPhase.FAILED,
                         started_at=T0 + timedelta(seconds=30),
                         finished_at=T0 + timedelta(minutes=1),
                         error=f"job {K}--t0--1 concluded failure")
    running = Observation(key=f"{K}--t1--1", phase=TrackPhase.RUNNING,
                          started_at=T0 + timedelta(seconds=40))
    d1 = plan([s], d.state, news(failed, running), T0 + timedelta(minutes=2))
    assert d1.state.runners == {}
    t0 = d1.state.tracks[K]["t0"]
    # an ordinary retry: the attempt is spent, the budget the same, the label kept
    assert (t0.phase, t0.attempt, t0.max_attempts) == (TrackPhase.PENDING, 2, 2)
    assert t0.state_history[-1].reason.startswith("retry 2/2")
    later = plan([s], d1.state, Observations(), T0 + timedelta(hours=1))
    assert [(r.key, r.runs_on) for r in later.dispatch] == [(f"{K}--t0--2", "gpu")]


def test_without_runs_on_a_leg_that_failed_to_start_spends_an_attempt() -> None:
    s = sched(tracks=[{"name": "t0", "run": "true", "max_attempts": 2}])
    d = plan([s], State(), Observations(), T0)
    d1 = plan([s], d.state, news(no_start(f"{K}--t0--1")), T0 + timedelta(minutes=2))
    t0 = d1.state.tracks[K]["t0"]
    assert (t0.phase, t0.attempt, t0.max_attempts) == (TrackPhase.PENDING, 2, 2)
    assert d1.state.runners == {}


def test_a_probe_that_fails_to_start_degrades_the_label_again() -> None:
    s = route()
    state = State(runners={"gpu": runner_health.degrade(None, T0 - timedelta(hours=1), "queued")})
    d = plan([s], state, Observations(), T0)
    assert [(r.key, r.runs_on) for r in d.dispatch] == [
        (f"{K}--t0--1", "gpu"), (f"{K}--t1--1", "ubuntu-latest")]
    assert d.state.runners["gpu"].probe == f"{K}--t0--1"
    d1 = plan([s], d.state, news(no_start(f"{K}--t0--1")), T0 + timedelta(minutes=2))
    gpu = d1.state.runners["gpu"]
    assert (gpu.status, gpu.consecutive_failures, gpu.probe) == ("degraded", 2, None)
    assert [(r.key, r.runs_on) for r in d1.dispatch] == [(f"{K}--t0--2", "ubuntu-latest")]
