"""A GitHub leg cancelled while its command ran: the command ends on the signal the leg
passed on, and the outcome it wrote on the way out says ``failed``; the track was
cancelled, as the job's conclusion says."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from orchestrator.executors.base import Observation
from orchestrator.executors.github.artifacts import _as_cancelled
from orchestrator.state.phases import TrackPhase

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
KEY = "nightly--20261201T0700Z--a--1"


def _job(phase: TrackPhase) -> Observation:
    return Observation(key=KEY, phase=phase, started_at=T0, finished_at=T0,
                       error=f"job {KEY} concluded cancelled",
                       details={"conclusion": "cancelled"})


def _outcome(code: int) -> Observation:
    return Observation(key=KEY, phase=TrackPhase.FAILED, started_at=T0, finished_at=T0,
                       error=f"exit code {code}", details={"source": "outcome",
                                                           "exit_code": code})


@pytest.mark.parametrize("code", [130, 143])
def test_a_command_stopped_by_the_cancel_is_cancelled(code: int) -> None:
    seen = _as_cancelled(_job(TrackPhase.CANCELLED), _outcome(code))
    assert seen.phase is TrackPhase.CANCELLED
    assert seen.details["exit_code"] == code  # the outcome's times and details stay


def test_a_command_that_failed_on_its_own_stays_failed() -> None:
    assert _as_cancelled(_job(TrackPhase.CANCELLED), _outcome(1)).phase is TrackPhase.FAILED
    finished = dataclasses.replace(_job(TrackPhase.FAILED))
    assert _as_cancelled(finished, _outcome(143)).phase is TrackPhase.FAILED
