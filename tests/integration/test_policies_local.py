"""Failure and capacity policies end to end with the local executor and real git:
``max_parallel`` never exceeded (checked from launches.log and each attempt's end),
repository caps from ``orchestrator.json``, and a pause after repeated failures with
its resume through the CLI."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.state.phases import RunStatus
from orchestrator.support.times import iso, parse_utc
from tests.builders import spec_data
from tests.drive import cli, launches, state_of, tick, wait_until


def slot_now() -> datetime:
    """The last five-minute slot on the real clock. The local executor stamps starts
    with the real clock and a track's timeout counts from its start, so these tests
    tick close to real time."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return now - timedelta(minutes=now.minute % 5)


def run_id(schedule: str, slot: datetime) -> str:
    return f"{schedule}--{slot:%Y%m%dT%H%MZ}"


def intervals(work: Path) -> list[tuple[datetime, datetime]]:
    """(launched, finished) of every launch in launches.log, from the attempts' status."""
    out = []
    for line in (work / "launches.log").read_text().splitlines():
        entry = json.loads(line)
        status = json.loads((work / entry["key"] / "status.json").read_text())
        start, end = parse_utc(entry["at"]), parse_utc(status["finished_at"])
        assert start is not None and end is not None
        out.append((start, end))
    return out


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
                    key=lambda ev: (ev[0], ev[1]))  # an end before a start at one instant
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def tick_until_finished(repo: Path, work: Path, run_id: str, start: datetime,
                        limit: int = 80) -> int:
    """Tick every 0.2 s (its ``now`` one second on) until ``run_id`` is finished; return
    how many ticks that took."""
    for i in range(limit):
        tick(repo, start + timedelta(seconds=i), work)
        state, _ = state_of(repo)
        if state.runs[run_id].status in (RunStatus.COMPLETED, RunStatus.FAILED):
            return i + 1
        time.sleep(0.2)
    raise AssertionError(f"{run_id} did not finish")


@pytest.mark.slow
def test_max_parallel_is_never_exceeded(tmp_path: Path,
                                        repo_with_origin: Callable[..., Path]) -> None:
    repo = repo_with_origin({"nightly": spec_data(cron="*/5 * * * *", tracks=5,
                                                  run="sleep 0.4", max_parallel=2)})
    work = tmp_path / "work"
    t0 = slot_now()
    run = run_id("nightly", t0)
    first = tick(repo, t0 + timedelta(seconds=10), work)
    assert len(first.dispatched) == 2
    assert any("waiting: t2, t3, t4 (max_parallel 2 of the run in flight)" in line
               for line in first.log)
    tick_until_finished(repo, work, run, t0 + timedelta(seconds=20))
    assert sorted(launches(work)) == [f"{run}--t{i}--1" for i in range(5)]
    assert most_at_once(intervals(work)) == 2
    state, snap = state_of(repo)
    assert state.runs[run].status is RunStatus.COMPLETED
    polls = snap.files[f"state/runs/{run}/polls.jsonl"].decode()
    assert "max_parallel 2 of the run in flight" in polls  # what waited, and why


@pytest.mark.slow
def test_repository_caps_from_orchestrator_json(tmp_path: Path,
                                                repo_with_origin: Callable[..., Path]) -> None:
    repo = repo_with_origin({"a": spec_data(cron="*/5 * * * *", tracks=3, run="sleep 0.4"),
                             "b": spec_data(cron="*/5 * * * *", tracks=3, run="sleep 0.4")})
    (repo / "orchestrator.json").write_text(json.dumps(
        {"max_concurrent_tracks": 3, "max_dispatches_per_tick": 2}))
    work = tmp_path / "work"
    t0 = slot_now()
    first = tick(repo, t0 + timedelta(seconds=10), work)
    # two per tick, shared round-robin between the two schedules that fired together
    assert first.dispatched == (f"{run_id('a', t0)}--t0--1", f"{run_id('b', t0)}--t0--1")
    for i in range(80):
        tick(repo, t0 + timedelta(seconds=20 + i), work)
        state, _ = state_of(repo)
        if all(r.status is RunStatus.COMPLETED for r in state.runs.values()):
            break
        time.sleep(0.2)
    assert len(launches(work)) == 6
    assert most_at_once(intervals(work)) <= 3


def test_an_invalid_orchestrator_json_is_reported_and_the_schedules_still_fire(
        tmp_path: Path, repo_with_origin: Callable[..., Path]) -> None:
    repo = repo_with_origin({"nightly": spec_data(tracks=2)})
    (repo / "orchestrator.json").write_text(json.dumps({"max_concurrent_tracks": 0}))
    result = tick(repo, datetime(2026, 12, 1, 7, 1, tzinfo=UTC), tmp_path / "work")
    assert len(result.dispatched) == 2
    assert any("orchestrator.json: max_concurrent_tracks" in e for e in result.schedule_errors)
    proc = cli(repo, "validate", check=False)
    assert proc.returncode == 1
    assert "orchestrator.json: max_concurrent_tracks: Input should be greater than or " \
        "equal to 1" in proc.stderr


@pytest.mark.slow
def test_pause_after_failures_then_resume(tmp_path: Path,
                                          repo_with_origin: Callable[..., Path]) -> None:
    repo = repo_with_origin({"nightly": spec_data(
        cron="*/5 * * * *", tracks=1, run="false", pause_after_failures=2)})
    work = tmp_path / "work"
    t0 = slot_now()
    for n, slot in enumerate((t0, t0 + timedelta(minutes=5)), start=1):
        fired = tick(repo, slot + timedelta(seconds=30), work)
        assert len(fired.dispatched) == 1
        wait_until(lambda n=n: len(launches(work)) == n)
        time.sleep(0.3)
        tick_until_finished(repo, work, run_id("nightly", slot), slot + timedelta(minutes=1))
    paused = tick(repo, t0 + timedelta(minutes=10, seconds=30), work)
    assert paused.dispatched == () and paused.mark_landed
    assert any("nightly: paused: 2 consecutive runs failed" in line for line in paused.log)
    state, _ = state_of(repo)
    assert run_id("nightly", t0 + timedelta(minutes=10)) not in state.runs
    pause = state.cursors["nightly"].paused
    assert pause is not None and pause.by == "orchestrator"

    _, snap = state_of(repo)
    index = snap.files["state/index.html"].decode()
    # first on the dashboard, with who and how to resume
    assert "nightly is paused since" in index and "by orchestrator" in index
    assert "orchestrator schedules resume nightly --reason ..." in index
    status = cli(repo, "status", "--now", iso(t0 + timedelta(minutes=11)), check=False)
    assert f"PAUSED since {iso(t0 + timedelta(minutes=10, seconds=30))} by orchestrator" \
        in status.stdout
    listed = cli(repo, "schedules", "list", check=True).stdout
    assert listed.startswith("nightly  paused  ")
    shown = cli(repo, "schedules", "show", "nightly", check=True).stdout
    assert "PAUSED:    paused since" in shown and "by orchestrator: 2 consecutive" in shown
    assert "policies:  pause after 2 failed run(s) in a row" in shown
    as_json = json.loads(cli(repo, "schedules", "show", "nightly", "--json", check=True).stdout)
    assert as_json["paused"]["by"] == "orchestrator"
    # fixing the file is not a resume
    spec_file = repo / "schedules" / "nightly.json"
    spec_file.write_text(json.dumps(spec_data(cron="*/5 * * * *", tracks=1, run="true",
                                              pause_after_failures=2)))
    assert tick(repo, t0 + timedelta(minutes=15, seconds=30), work).dispatched == ()

    wrong = cli(repo, "schedules", "resume", "other", "--reason", "x", check=False)
    assert wrong.returncode == 1 and "no schedule 'other'" in wrong.stderr
    cli(repo, "schedules", "resume", "nightly", "--reason", "credentials rotated",
        "--by", "alice", "--now", iso(t0 + timedelta(minutes=16)), check=True)
    state, _ = state_of(repo)
    resumed = state.cursors["nightly"].resumed
    assert state.cursors["nightly"].paused is None and resumed is not None
    assert "paused" not in cli(repo, "schedules", "list", check=True).stdout
    _, snap = state_of(repo)
    assert "is paused" not in snap.files["state/index.html"].decode()
    assert (resumed.by, resumed.reason) == ("alice", "credentials rotated")
    again = cli(repo, "schedules", "resume", "nightly", "--reason", "twice", check=False)
    assert again.returncode == 1 and "not paused" in again.stderr
    # the slot at +15 came due while paused: not back-filled; the one at +20 fires
    assert tick(repo, t0 + timedelta(minutes=17), work).dispatched == ()
    assert tick(repo, t0 + timedelta(minutes=20, seconds=5), work).dispatched == (
        f"{run_id('nightly', t0 + timedelta(minutes=20))}--t0--1",)
