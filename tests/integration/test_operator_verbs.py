"""The operator's verbs (trigger, backfill, runs cancel, runs retry) against real git,
the real CLI as racing OS processes, and real track processes of the local executor."""

from __future__ import annotations

import itertools
import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.state import layout
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.builders import spec_data
from tests.drive import cli, launches, read_state, start_cli, state_of, tick, wait_until
from tests.gitrepo import clone, git, make_origin

NOW = "2026-12-01T14:12:30Z"
AT = datetime(2026, 12, 1, 14, 12, 30, tzinfo=UTC)
MANUAL = "nightly--20261201T1412Z-manual-1"


def checkout(tmp: Path, **spec: Any) -> Path:
    origin = make_origin(tmp, {"nightly": spec_data(**spec)})
    return clone(origin, tmp / "repo")


def tip(repo: Path) -> str:
    """The state branch's tip on origin ("" before the first commit)."""
    return git("ls-remote", "origin", "refs/heads/orchestrator-state", cwd=repo)


def settle(repo: Path, work: Path, start: datetime, until: Any, ticks: int = 40) -> datetime:
    """Tick once a simulated minute until ``until(state)`` holds; the last tick's time."""
    now = start
    for _ in range(ticks):
        now += timedelta(minutes=1)
        tick(repo, now, work)
        if until(read_state(repo)[0]):
            return now
        time.sleep(0.3)  # the tracks run on the real clock
    raise AssertionError("the state never settled")


# --------------------------------------------------------------------------- trigger


@pytest.mark.slow
def test_two_triggers_with_one_request_id_racing_two_ticks_start_one_run(
        tmp_path: Path) -> None:
    repo = checkout(tmp_path, tracks=["a", "b"], run="true")
    work = tmp_path / "work"
    env = {"ORCHESTRATOR_WORK_DIR": str(work)}
    procs = [start_cli(repo, "trigger", "nightly", "--request-id", "deploy-42", "--now", NOW,
                       "--by", "alice", "--reason", "hotfix", env=env) for _ in range(2)]
    procs += [start_cli(repo, "tick", "--now", NOW, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [o[1] for o in outs]
    state, _ = read_state(repo)
    manual = [r for r in state.runs.values() if r.origin == "manual"]
    assert [r.run_id for r in manual] == [MANUAL]
    assert layout.parse_run_id(MANUAL) == ("nightly", AT.replace(second=0))
    assert manual[0].requested is not None and manual[0].requested.by == "alice"
    assert manual[0].requested.reason == "hotfix"
    assert state.cursors["nightly"].requests == {"deploy-42": MANUAL}
    assert sorted(launches(work)) == [f"{MANUAL}--a--1", f"{MANUAL}--b--1"]
    for out, _err in outs[:2]:
        assert MANUAL in out.splitlines()[-1]
    again = cli(repo, "trigger", "nightly", "--request-id", "deploy-42", "--now",
                "2026-12-01T15:00:00Z", env=env)
    assert again.returncode == 0, again.stderr
    assert f"{MANUAL}: already started by request deploy-42" in again.stdout
    assert len([r for r in state_of(repo)[0].runs.values() if r.origin == "manual"]) == 1


def test_trigger_inputs_reach_the_tracks_and_a_disabled_schedule_needs_force(
        tmp_path: Path) -> None:
    repo = checkout(tmp_path, tracks=[{"name": "a", "run": "true", "inputs": {"env": "prod",
                                                                            "x": "1"}}],
                    enabled=False)
    work = tmp_path / "work"
    before = tip(repo)
    refused = cli(repo, "trigger", "nightly", "--now", NOW, work=work)
    assert refused.returncode == 1
    assert refused.stderr.strip() == ("orchestrator: nightly: not triggered: the schedule is "
                                      "disabled (--force starts it anyway)")
    assert tip(repo) == before  # nothing written
    forced = cli(repo, "trigger", "nightly", "--now", NOW, "--force", "--input", "env=staging",
                 work=work)
    assert forced.returncode == 0, forced.stderr
    track = state_of(repo)[0].tracks[MANUAL]["a"]
    assert track.spec.inputs == {"env": "staging", "x": "1"}


# --------------------------------------------------------------------------- backfill


@pytest.mark.slow
def test_backfill_of_five_daily_slots_two_of_which_ran_fires_three_one_at_a_time(
        tmp_path: Path) -> None:
    repo = checkout(tmp_path, tracks=["a"], run="sleep 0.2", catchup="latest")
    work = tmp_path / "work"
    days = [datetime(2026, 12, d, 7, 0, tzinfo=UTC) for d in range(1, 6)]
    ids = [layout.run_id_for("nightly", d) for d in days]
    # the 2nd and 4th slots run by cron, each to its end before the clock jumps (a track
    # still running when the next tick is 2 days later would be tapped out)
    for day in (1, 3):
        settle(repo, work, days[day], lambda state, i=ids[day]: i in state.runs and
               state.runs[i].status is RunStatus.COMPLETED)
    assert {ids[1], ids[3]} <= set(state_of(repo)[0].runs)
    dry = cli(repo, "backfill", "nightly", "--from", "2026-12-01T00:00:00Z", "--to",
              "2026-12-05T23:59:00Z", "--dry-run", work=work)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[-1] == "3 slot(s) to fire, 2 already ran"
    start = days[4] + timedelta(minutes=1)  # the 5th slot is due for the cron tick too
    env = {"ORCHESTRATOR_WORK_DIR": str(work)}
    stamp = f"{start:%Y-%m-%dT%H:%M:%SZ}"
    procs = [start_cli(repo, "backfill", "nightly", "--from", "2026-12-01T00:00:00Z", "--to",
                       "2026-12-05T23:59:00Z", "--by", "bob", "--now", stamp, env=env),
             start_cli(repo, "tick", "--now", stamp, env=env)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]

    def done(state: Any) -> bool:
        return all(i in state.runs and state.runs[i].status is RunStatus.COMPLETED
                   for i in ids)

    settle(repo, work, start, done)
    state, _ = read_state(repo)
    assert state.cursors["nightly"].backfill is None
    keys = launches(work)
    assert sorted(keys) == sorted(set(keys))  # nothing launched twice
    # nothing fired twice: the runs that cron fired are still cron's, never re-created
    assert [state.runs[i].origin for i in (ids[1], ids[3])] == ["cron", "cron"]
    assert sorted(keys) == sorted(f"{i}--a--1" for i in ids)
    filled = sorted((state.runs[i] for i in (ids[0], ids[2], ids[4])
                     if state.runs[i].origin == "backfill"), key=lambda r: r.created_at)
    # the 5th slot went to whichever of the tick and the backfill landed first
    assert [r.run_id for r in filled][:2] == [ids[0], ids[2]]
    for earlier, later in itertools.pairwise(filled):
        assert earlier.slot < later.slot  # oldest first
        assert earlier.finished_at is not None and later.created_at >= earlier.finished_at
    assert all(r.requested is not None and r.requested.by == "bob" for r in filled)


def test_backfill_refuses_a_reversed_range_and_one_over_max(tmp_path: Path) -> None:
    repo = checkout(tmp_path)
    before = tip(repo)
    reversed_ = cli(repo, "backfill", "nightly", "--from", "2026-12-05T00:00:00Z", "--to",
                    "2026-12-01T00:00:00Z")
    assert reversed_.returncode == 1
    assert "is after --to" in reversed_.stderr and len(reversed_.stderr.splitlines()) == 1
    big = cli(repo, "backfill", "nightly", "--from", "2026-01-01T00:00:00Z", "--to",
              "2026-12-01T00:00:00Z", "--max", "30")
    assert big.returncode == 1
    assert big.stderr.strip() == ("orchestrator: nightly: the range has more than 30 slots; "
                                  "narrow it or raise --max")
    unknown = cli(repo, "backfill", "nope", "--from", "2026-12-05T00:00:00Z", "--to",
                  "2026-12-06T00:00:00Z")
    assert unknown.returncode == 1 and "unknown schedule 'nope'" in unknown.stderr
    assert tip(repo) == before


# --------------------------------------------------------------------------- cancel


@pytest.mark.slow
def test_cancel_of_a_local_run_stops_the_sleeping_track_and_compensates(
        tmp_path: Path) -> None:
    undone = tmp_path / "undone"
    repo = checkout(tmp_path, on_failure="compensate", tracks=[
        {"name": "quick", "run": "true", "compensate": {"run": f"touch {undone}"}},
        {"name": "sleepy", "run": "sleep 300"}])
    work = tmp_path / "work"
    assert cli(repo, "trigger", "nightly", "--now", NOW, work=work).returncode == 0
    now = settle(repo, work, AT, lambda s: s.tracks[MANUAL]["quick"].phase
                 is TrackPhase.COMPLETE and s.tracks[MANUAL]["sleepy"].phase
                 is TrackPhase.RUNNING)
    status = work / f"{MANUAL}--sleepy--1" / "status.json"
    wait_until(lambda: "pgid" in status.read_text())
    pgid = int(json.loads(status.read_text())["pgid"])
    os.killpg(pgid, 0)  # alive
    cancelled = cli(repo, "runs", "cancel", MANUAL, "--reason", "wrong data", "--by", "carol",
                    "--now", f"{now + timedelta(seconds=30):%Y-%m-%dT%H:%M:%SZ}", work=work)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"{MANUAL}: cancelled by carol: wrong data" in cancelled.stdout

    def gone() -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, timeout=5 + 5)  # the grace (5 s) and a margin
    # a cancel is its own end state (before RunStatus.CANCELLED the run ended failed)
    settle(repo, work, now, lambda s: s.runs[MANUAL].status is RunStatus.CANCELLED)
    state, files = read_state(repo)
    assert state.tracks[MANUAL]["sleepy"].phase is TrackPhase.CANCELLED
    assert state.undos[MANUAL]["quick"].phase is TrackPhase.COMPLETE
    assert undone.exists()
    run = state.runs[MANUAL]
    assert run.cancelled is not None and run.cancelled.by == "carol"
    brief = files[layout.brief_path(MANUAL)].decode()
    assert "cancelled by carol" in brief and "wrong data" in brief
    assert "Run cancelled" in brief and "The run was cancelled under" in brief
    again = cli(repo, "runs", "cancel", MANUAL, "--reason", "again", work=work)
    assert again.returncode == 1
    assert again.stderr.strip() == (f"orchestrator: run {MANUAL} is cancelled: only a "
                                    "scheduled or running run can be cancelled")


# --------------------------------------------------------------------------- retry


@pytest.mark.slow
def test_retry_failed_reruns_only_the_failed_track_and_its_dependants(tmp_path: Path) -> None:
    flag = tmp_path / "fixed"
    repo = checkout(tmp_path, tracks=[
        {"name": "a", "run": "true"},
        {"name": "b", "run": f"test -f {flag}"},
        {"name": "c", "run": "true", "needs": ["b"]}])
    work = tmp_path / "work"
    assert cli(repo, "trigger", "nightly", "--now", NOW, work=work).returncode == 0
    now = settle(repo, work, AT, lambda s: s.runs[MANUAL].status is RunStatus.FAILED)
    state, _ = read_state(repo)
    key = layout.dlq_key(MANUAL, "b")
    assert state.tracks[MANUAL]["c"].phase is TrackPhase.SKIPPED
    assert not state.dlq[key].discarded
    open_run = cli(repo, "runs", "retry", MANUAL, work=work)
    assert open_run.returncode == 1 and "name the tracks" in open_run.stderr
    unknown = cli(repo, "runs", "retry", MANUAL, "--track", "zz", work=work)
    assert unknown.returncode == 1 and "has no track 'zz'" in unknown.stderr
    flag.touch()
    stamp = f"{now + timedelta(minutes=1):%Y-%m-%dT%H:%M:%SZ}"
    retried = cli(repo, "runs", "retry", MANUAL, "--failed", "--by", "dave", "--now", stamp,
                  work=work)
    assert retried.returncode == 0, retried.stderr
    assert f"{MANUAL}: retrying b, c by dave" in retried.stdout
    settle(repo, work, now + timedelta(minutes=1),
           lambda s: s.runs[MANUAL].status is RunStatus.COMPLETED)
    state, files = read_state(repo)
    assert sorted(launches(work)) == sorted([f"{MANUAL}--a--1", f"{MANUAL}--b--1",
                                             f"{MANUAL}--b--2", f"{MANUAL}--c--2"])
    letter = state.dlq[key]
    assert letter.discarded and f"retried in run {MANUAL}" in (letter.discarded_reason or "")
    assert state.runs[MANUAL].retries[-1].tracks == ["b", "c"]
    assert "retried b, c by dave" in files[layout.brief_path(MANUAL)].decode()
    # a named track of a finished run reruns with the tracks that need it
    stamp = f"{now + timedelta(minutes=9):%Y-%m-%dT%H:%M:%SZ}"
    named = cli(repo, "runs", "retry", MANUAL, "--track", "b", "--by", "dave", "--now", stamp,
                work=work)
    assert named.returncode == 0, named.stderr
    assert f"{MANUAL}: retrying b, c by dave" in named.stdout
    settle(repo, work, now + timedelta(minutes=9),
           lambda s: s.runs[MANUAL].status is RunStatus.COMPLETED)
    keys = launches(work)
    assert len(keys) == 6 and {f"{MANUAL}--b--3", f"{MANUAL}--c--3"} <= set(keys)


def test_bad_run_ids_and_unknown_runs_write_nothing(tmp_path: Path) -> None:
    repo = checkout(tmp_path)
    before = tip(repo)
    for args in (["runs", "cancel", "nightly--20261201T0700Z", "--reason", "x"],
                 ["runs", "retry", "nightly--20261201T0700Z", "--failed"],
                 ["runs", "cancel", "../etc", "--reason", "x"],
                 ["trigger", "nope"],
                 ["trigger", "nightly", "--input", "novalue"],
                 ["trigger", "nightly", "--request-id", "a\x1bb"],
                 ["trigger", "nightly", "--reason", "x" * 100_000],
                 ["backfill", "nightly", "--from", "yesterday", "--to", "now"]):
        proc = cli(repo, *args)
        assert proc.returncode == 1, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert tip(repo) == before
