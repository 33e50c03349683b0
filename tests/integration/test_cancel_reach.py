"""What ``runs cancel`` can and cannot do, with the real CLI, real git and real track
processes of the local executor: a cancel after the work ended is refused as too late,
and a cancel from another machine is a request the owning machine's next tick carries
out."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.state import machine
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.builders import spec_data
from tests.drive import cli, finished, read_state, tick, wait_until
from tests.gitrepo import clone, make_origin

NOW = "2026-12-01T14:12:30Z"
AT = datetime(2026, 12, 1, 14, 12, 30, tzinfo=UTC)
MANUAL = "nightly--20261201T1412Z-manual-1"


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_cancel_after_every_track_exited_0_is_too_late(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"nightly": spec_data(tracks=["a", "b"], run="true")})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    assert cli(repo, "trigger", "nightly", "--now", NOW, work=work).returncode == 0
    wait_until(lambda: all(finished(work, f"{MANUAL}--{t}--1") for t in "ab"))
    late = cli(repo, "runs", "cancel", MANUAL, "--reason", "stop", "--by", "carol",
               "--now", f"{AT + timedelta(seconds=30):%Y-%m-%dT%H:%M:%SZ}", work=work)
    assert late.returncode == 1
    assert late.stderr.strip() == (f"orchestrator: {MANUAL}: not cancelled: too late, its "
                                   "work ended (complete)")
    state, _ = read_state(repo)
    run = state.runs[MANUAL]
    assert run.status is RunStatus.COMPLETED and run.cancelled is None


def test_a_cancel_from_another_machine_is_carried_out_by_the_owner_s_next_tick(
        tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"nightly": spec_data(tracks=["sleepy"], run="sleep 300")})
    owner, other = clone(origin, tmp_path / "owner"), clone(origin, tmp_path / "other")
    work, elsewhere = tmp_path / "work-owner", tmp_path / "work-other"
    assert cli(owner, "trigger", "nightly", "--now", NOW, work=work).returncode == 0
    status = work / f"{MANUAL}--sleepy--1" / "status.json"
    wait_until(lambda: status.exists() and "pgid" in status.read_text()
               and json.loads(status.read_text())["pgid"])
    pgid = int(json.loads(status.read_text())["pgid"])

    asked = cli(other, "runs", "cancel", MANUAL, "--reason", "wrong data", "--by", "carol",
                "--now", f"{AT + timedelta(seconds=30):%Y-%m-%dT%H:%M:%SZ}", work=elsewhere)
    assert asked.returncode == 0, asked.stderr
    assert f"{MANUAL}: cancel requested by carol: wrong data; still running: sleepy on " \
        in asked.stdout
    assert "their machine's next tick stops them" in asked.stdout
    assert f"{MANUAL}: cancelled by" not in asked.stdout
    assert _alive(pgid)  # the other machine could not stop it, and says so
    state, _ = read_state(owner)
    assert state.runs[MANUAL].cancelled is not None
    assert state.tracks[MANUAL]["sleepy"].phase in machine.TRACK_OPEN

    tick(owner, AT + timedelta(minutes=1), work)  # the owner's next tick stops it
    wait_until(lambda: not _alive(pgid), timeout=5 + 5)  # the grace (5 s) and a margin
    state, _ = read_state(owner)
    assert state.tracks[MANUAL]["sleepy"].phase is TrackPhase.CANCELLED
    tick(owner, AT + timedelta(minutes=2), work)
    assert read_state(owner)[0].runs[MANUAL].status is RunStatus.CANCELLED


def test_a_requested_cancel_whose_track_completed_first_leaves_the_run_completed(
        tmp_path: Path) -> None:
    flag = tmp_path / "go"
    origin = make_origin(tmp_path, {"nightly": spec_data(
        tracks=["waits"], run=f"while [ ! -f {flag} ]; do sleep 0.05; done")})
    owner, other = clone(origin, tmp_path / "owner"), clone(origin, tmp_path / "other")
    work = tmp_path / "work-owner"
    assert cli(owner, "trigger", "nightly", "--now", NOW, work=work).returncode == 0
    asked = cli(other, "runs", "cancel", MANUAL, "--reason", "stop", "--now",
                f"{AT + timedelta(seconds=30):%Y-%m-%dT%H:%M:%SZ}",
                work=tmp_path / "work-other")
    assert asked.returncode == 0 and "cancel requested" in asked.stdout, asked.stderr
    flag.touch()  # the track ends well before the owner's next tick
    wait_until(lambda: finished(work, f"{MANUAL}--waits--1"))
    tick(owner, AT + timedelta(minutes=1), work)
    state, _ = read_state(owner)
    run = state.runs[MANUAL]
    # the cancel stopped nothing: it stays beside the run, which counts as completed
    assert run.status is RunStatus.COMPLETED and run.cancelled is not None
    assert state.tracks[MANUAL]["waits"].phase is TrackPhase.COMPLETE
