"""The leg outcome format: phases from exit codes, the stderr tail, strict parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.executors import outcomes
from orchestrator.state.phases import TrackPhase

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"
MINUTE = timedelta(minutes=1)


@pytest.mark.parametrize(("code", "elapsed", "phase"), [
    (0, timedelta(seconds=3), "complete"),
    (1, timedelta(seconds=3), "failed"),
    (124, MINUTE, "tapped_out"),  # timeout's TERM
    (137, MINUTE + timedelta(seconds=30), "tapped_out"),  # KILL after the grace
    (124, timedelta(seconds=5), "failed"),  # exited 124 by itself, early
    (75, timedelta(seconds=2), "waiting"),  # a poll's "not yet"
    (None, timedelta(0), "failed"),  # never ran
])
def test_the_phase_follows_the_exit_code_and_the_limit(code: int | None, elapsed: timedelta,
                                                       phase: str) -> None:
    assert outcomes.phase_for(code, elapsed, MINUTE) == phase


def test_a_timeout_exit_without_a_limit_is_a_failure() -> None:
    assert outcomes.phase_for(124, MINUTE, None) == "failed"


def test_the_error_keeps_the_last_lines_of_stderr() -> None:
    stderr = "\n".join(f"line {i}" for i in range(100)) + "\nValueError: bad row\n\n"
    outcome = outcomes.build(run_id=RUN, track="load", attempt=2, exit_code=2,
                             started_at=T0, finished_at=T0 + MINUTE, stderr=stderr)
    assert outcome.key == f"{RUN}--load--2"
    assert outcome.phase == "failed"
    assert outcome.error is not None
    assert outcome.error.startswith("exit code 2; stderr ends with:\n")
    assert outcome.error.endswith("ValueError: bad row")
    assert "line 80" not in outcome.error and "line 81" in outcome.error  # 20 lines
    assert len(outcomes.stderr_tail("x" * 10_000)) == outcomes.STDERR_CHARS


def test_a_tapped_out_outcome_says_its_limit() -> None:
    outcome = outcomes.build(run_id=RUN, track="crawl", attempt=1, exit_code=124,
                             started_at=T0, finished_at=T0 + 2 * MINUTE, limit=2 * MINUTE)
    assert outcome.phase == "tapped_out"
    assert outcome.error == "stopped at its timeout of 2 minutes"


def test_a_poll_s_not_yet_is_a_waiting_outcome_under_the_poll_s_own_key() -> None:
    outcome = outcomes.build(run_id=RUN, track="wait-for-export", attempt=1, poll=2,
                             exit_code=75, started_at=T0, finished_at=T0 + MINUTE)
    assert outcome.key == f"{RUN}--wait-for-export--1.2"
    assert (outcome.phase, outcome.error) == ("waiting", None)
    data = outcomes.dump(outcome)
    assert outcomes.parse(f"{outcome.key}.json", data) == outcome
    assert outcomes.observation(outcome).phase is TrackPhase.WAITING


def test_a_compensation_s_outcome_has_the_compensation_s_key() -> None:
    outcome = outcomes.build(run_id=RUN, track="publish", attempt=1, compensating=True,
                             exit_code=0, started_at=T0, finished_at=T0 + MINUTE)
    assert outcome.key == f"{RUN}--publish--undo--1"
    assert outcomes.parse(f"{outcome.key}.json", outcomes.dump(outcome)) == outcome


def test_a_written_outcome_parses_back_and_becomes_an_observation() -> None:
    outcome = outcomes.build(run_id=RUN, track="build", attempt=1, exit_code=0,
                             started_at=T0, finished_at=T0 + MINUTE,
                             result={"summary": "built"})
    data = outcomes.dump(outcome)
    assert outcomes.parse(f"{outcome.key}.json", data) == outcome
    seen = outcomes.observation(outcome, url="https://ci/1")
    assert (seen.key, seen.phase, seen.result) == (outcome.key, TrackPhase.COMPLETE,
                                                   {"summary": "built"})
    assert (seen.started_at, seen.finished_at) == (T0, T0 + MINUTE)
    assert seen.details["source"] == "outcome" and seen.url == "https://ci/1"


@pytest.mark.parametrize(("name", "data", "problem"), [
    ("x.json", b"not json", "(root)"),
    (f"{RUN}--a--1.json", b'{"format": 2}', "format"),
    (f"{RUN}--a--1.json", b'{"format": 1, "run_id": "x", "track": "a", "attempt": 1, '
                          b'"phase": "complete", "started_at": "2026-12-01T07:00:00Z", '
                          b'"finished_at": "2026-12-01T07:01:00Z"}', "invalid run id"),
    (f"{RUN}--b--1.json", b'{"format": 1, "run_id": "' + RUN.encode() + b'", "track": "a", '
                          b'"attempt": 1, "phase": "complete", '
                          b'"started_at": "2026-12-01T07:00:00Z", '
                          b'"finished_at": "2026-12-01T07:01:00Z"}', "not of"),
    (f"{RUN}--a--1.json", b'{"format": 1, "run_id": "' + RUN.encode() + b'", "track": "a", '
                          b'"attempt": 1, "phase": "running", '
                          b'"started_at": "2026-12-01T07:00:00Z", '
                          b'"finished_at": "2026-12-01T07:01:00Z"}', "phase"),
    (f"{RUN}--a--1.json", b'{"format": 1, "run_id": "' + RUN.encode() + b'", "track": "a", '
                          b'"attempt": 1, "phase": "complete", "extra": 1, '
                          b'"started_at": "2026-12-01T07:00:00Z", '
                          b'"finished_at": "2026-12-01T07:01:00Z"}', "extra"),
    (f"{RUN}--a--1.json", b" " * (outcomes.MAX_BYTES + 1), "larger than"),
])
def test_a_bad_outcome_is_refused_naming_the_file(name: str, data: bytes, problem: str) -> None:
    with pytest.raises(outcomes.BadOutcome) as caught:
        outcomes.parse(name, data)
    assert str(caught.value).startswith(name)
    assert problem in str(caught.value)
