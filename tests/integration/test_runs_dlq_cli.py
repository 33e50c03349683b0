"""`runs`, `schedules runs` and `dlq` through the CLI, against a real origin."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.state.phases import RunStatus, TrackPhase
from tests.builders import spec_data
from tests.drive import cli, launches, state_of, tick, wait_until

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"
KEY = f"{RUN}--bad"


@pytest.fixture()
def parked(tmp_path: Path, repo_with_origin: Callable[..., Path]) -> tuple[Path, Path]:
    """A run whose track `bad` failed its only attempt and sits in the dead letter queue."""
    repo = repo_with_origin({"nightly": spec_data(tracks=[
        {"name": "good", "run": "true"},
        {"name": "bad", "run": 'test "$ORCHESTRATOR_ATTEMPT" != 1'},
    ])})
    work = tmp_path / "work"
    tick(repo, T0 + timedelta(minutes=1), work)
    wait_until(lambda: len(launches(work)) == 2)
    time.sleep(0.5)
    tick(repo, T0 + timedelta(minutes=2), work)
    state, _ = state_of(repo)
    assert state.runs[RUN].status is RunStatus.FAILED
    return repo, work


@pytest.mark.slow
def test_runs_list_and_show(parked: tuple[Path, Path]) -> None:
    repo, _ = parked
    rows = json.loads(cli(repo, "runs", "list", "--json").stdout)
    assert [(r["run_id"], r["status"], r["tracks"]) for r in rows] == [
        (RUN, "failed", {"complete": 1, "failed": 1})]
    text = cli(repo, "runs", "show", RUN).stdout
    assert "track bad: failed (attempt 1/1)" in text and "exit code 1" in text
    shown = json.loads(cli(repo, "runs", "show", RUN, "--json").stdout)
    assert shown["tracks"]["good"]["phase"] == "complete"
    assert json.loads(cli(repo, "schedules", "runs", "nightly", "--json").stdout)[0][
        "run_id"] == RUN
    assert json.loads(cli(repo, "schedules", "runs", "other", "--json").stdout) == []


@pytest.mark.parametrize("args", [["runs", "show", "nightly--20261202T0700Z"],
                                  ["runs", "show", "../etc"],
                                  ["dlq", "show", "nope--20261201T0700Z--x"],
                                  ["dlq", "requeue", "../../x"]])
def test_unknown_or_malformed_ids_exit_1_with_one_line(parked: tuple[Path, Path],
                                                      args: list[str]) -> None:
    repo, _ = parked
    proc = cli(repo, *args)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("orchestrator: ")


@pytest.mark.slow
def test_requeue_reopens_the_run_and_the_next_tick_runs_a_fresh_attempt(
        parked: tuple[Path, Path]) -> None:
    repo, work = parked
    letters = json.loads(cli(repo, "dlq", "list", "--json").stdout)
    assert [d["key"] for d in letters] == [KEY]
    assert "exit code 1" in cli(repo, "dlq", "show", KEY).stdout
    proc = cli(repo, "dlq", "requeue", KEY, "--reason", "fixed upstream", "--by", "ops")
    assert proc.returncode == 0, proc.stderr
    state, _ = state_of(repo)
    track = state.tracks[RUN]["bad"]
    assert track.phase is TrackPhase.PENDING and track.attempt == 2
    assert track.max_attempts == 2
    assert track.state_history[-1].reason == "requeued by ops: fixed upstream"
    assert state.runs[RUN].status is RunStatus.RUNNING
    assert KEY not in state.dlq
    tick(repo, T0 + timedelta(minutes=10), work)
    wait_until(lambda: f"{KEY}--2" in launches(work))
    time.sleep(0.5)
    tick(repo, T0 + timedelta(minutes=11), work)
    state, _ = state_of(repo)
    assert state.tracks[RUN]["bad"].phase is TrackPhase.COMPLETE
    assert state.runs[RUN].status is RunStatus.COMPLETED
    assert json.loads(cli(repo, "dlq", "list", "--json").stdout) == []


@pytest.mark.slow
def test_discard_records_who_and_why_and_blocks_a_requeue(parked: tuple[Path, Path]) -> None:
    repo, _ = parked
    assert cli(repo, "dlq", "discard", KEY, "--reason", "obsolete", "--by", "ops"
               ).returncode == 0
    assert json.loads(cli(repo, "dlq", "list", "--json").stdout) == []
    everything = json.loads(cli(repo, "dlq", "list", "--all", "--json").stdout)
    assert everything[0]["discarded_by"] == "ops"
    assert everything[0]["discarded_reason"] == "obsolete"
    proc = cli(repo, "dlq", "requeue", KEY)
    assert proc.returncode == 1 and "was discarded" in proc.stderr
    again = cli(repo, "dlq", "discard", KEY, "--reason", "twice")
    assert again.returncode == 0  # idempotent: nothing changes
    state, _ = state_of(repo)
    assert state.dlq[KEY].discarded_reason == "obsolete"


@pytest.mark.slow
def test_a_requeue_after_the_deadline_gives_the_run_a_new_allowance(
        parked: tuple[Path, Path]) -> None:
    repo, work = parked
    late = T0 + timedelta(days=2)  # long past the run's 240-minute deadline
    assert cli(repo, "dlq", "requeue", KEY, "--now", late.isoformat()).returncode == 0
    state, _ = state_of(repo)
    assert state.runs[RUN].deadline == late + timedelta(minutes=240)
    tick(repo, late + timedelta(minutes=1), work)
    wait_until(lambda: f"{KEY}--2" in launches(work))
    time.sleep(0.5)
    tick(repo, late + timedelta(minutes=2), work)
    state, _ = state_of(repo)
    assert state.tracks[RUN]["bad"].phase is TrackPhase.COMPLETE


def test_an_unknown_status_filter_is_a_usage_error(parked: tuple[Path, Path]) -> None:
    repo, _ = parked
    proc = cli(repo, "runs", "list", "--status", "complete")  # the run status is "completed"
    assert proc.returncode == 2 and "'complete' is not one of" in proc.stderr
