"""Approval gates against real git and the local executor: nothing runs until
``approve``; two ``approve`` processes racing start the track once; ``reject`` ends
it ``rejected`` and its dependants ``skipped``; the wait reaches a webhook once."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.config.track_workflow import SHIPPED
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.builders import spec_data
from tests.drive import cli, finished, launches, start_cli, state_of, tick, wait_until
from tests.gitrepo import clone, make_origin
from tests.receiver import Receiver

RUN = "deploy--20261201T0700Z"
T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
TRACKS = [{"name": "build", "run": "true"},
          {"name": "ship", "run": "true", "needs": ["build"],
           "approval": {"by": ["alice", "bob"], "timeout_minutes": 600}},
          {"name": "smoke", "run": "true", "needs": ["ship"]}]


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def stamp(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%SZ}"


def waiting(tmp: Path, env: dict[str, str] | None = None) -> Path:
    """A checkout whose run waits for ``ship``'s approval: ``build`` ran and completed."""
    repo = clone(make_origin(tmp, {"deploy": spec_data(tracks=TRACKS)}), tmp / "repo")
    if env:
        (repo / "orchestrator.json").write_text(json.dumps(
            {"notify": {"webhooks": [{"url_secret": "ORCHESTRATOR_WEBHOOK"}]}}))
    work = tmp / "work"
    environ = {**os.environ, **(env or {})}
    tick(repo, at(1), work, environ=environ)
    wait_until(lambda: finished(work, f"{RUN}--build--1"))
    tick(repo, at(2), work, environ=environ)
    return repo


def phases(repo: Path) -> dict[str, str]:
    return {n: t.phase.value for n, t in sorted(state_of(repo)[0].tracks[RUN].items())}


@pytest.mark.slow
def test_nothing_runs_until_approve_and_two_racing_approvals_start_it_once(
        tmp_path: Path) -> None:
    repo = waiting(tmp_path)
    work = tmp_path / "work"
    env = {"ORCHESTRATOR_WORK_DIR": str(work)}
    tick(repo, at(30), work)
    assert phases(repo) == {"build": "complete", "ship": "pending", "smoke": "pending"}
    assert launches(work) == [f"{RUN}--build--1"]
    refused = cli(repo, "approve", RUN, "ship", "--by", "mallory", "--reason", "me",
                  "--now", stamp(at(31)), work=work)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (f"orchestrator: {RUN}/ship: not approved: mallory is "
                                      "not in its approval.by (alice, bob)")
    procs = [start_cli(repo, "approve", RUN, "ship", "--by", who, "--reason", "change 42",
                       "--now", stamp(at(32)), env=env) for who in ("alice", "bob")]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    lines = sorted(o[0].strip().splitlines()[-1] for o in outs)
    assert lines[0].startswith(f"{RUN}/ship: already approved by ")
    assert lines[1].startswith(f"{RUN}/ship: approved by ")
    wait_until(lambda: finished(work, f"{RUN}--ship--1"))
    assert launches(work) == [f"{RUN}--build--1", f"{RUN}--ship--1"]
    gate = state_of(repo)[0].tracks[RUN]["ship"].gate
    assert gate is not None and gate.approved is not None
    assert gate.approved.by in lines[1] and gate.approved.reason == "change 42"


def test_reject_ends_the_track_rejected_and_its_dependants_skipped(tmp_path: Path) -> None:
    repo = waiting(tmp_path)
    work = tmp_path / "work"
    refused = cli(repo, "reject", RUN, "ship", "--by", "mallory", "--reason", "no",
                  "--now", stamp(at(3)), work=work)
    assert refused.returncode == 1
    assert f"{RUN}/ship: not rejected: mallory is not in its approval.by" in refused.stderr
    out = cli(repo, "reject", RUN, "ship", "--by", "bob", "--reason", "freeze",
              "--now", stamp(at(3)), work=work, check=True)
    assert out.stdout.strip().splitlines()[-1] == f"{RUN}/ship: rejected by bob: freeze"
    state = state_of(repo)[0]
    assert phases(repo) == {"build": "complete", "ship": "rejected", "smoke": "skipped"}
    assert state.runs[RUN].status is RunStatus.FAILED
    assert state.dlq == {}
    assert launches(work) == [f"{RUN}--build--1"]
    late = cli(repo, "approve", RUN, "ship", "--by", "alice", "--reason", "go",
               "--now", stamp(at(4)), work=work)
    assert late.returncode == 1
    assert late.stderr.strip() == (f"orchestrator: run {RUN} is failed: only an open run's "
                                   "track can be approved")


def test_past_its_wait_the_track_is_tapped_out(tmp_path: Path) -> None:
    repo = waiting(tmp_path)
    tick(repo, at(2 + 600), tmp_path / "work")
    state = state_of(repo)[0]
    assert state.tracks[RUN]["ship"].phase is TrackPhase.TAPPED_OUT
    assert state.tracks[RUN]["smoke"].phase is TrackPhase.SKIPPED


@pytest.mark.slow
def test_the_wait_reaches_a_webhook_once(tmp_path: Path,
                                        receiver: Callable[[str], Receiver]) -> None:
    hook = receiver("ok")
    env = {"ORCHESTRATOR_WEBHOOK": hook.url}
    repo = waiting(tmp_path, env)
    for minute in (3, 4, 5):
        tick(repo, at(minute), tmp_path / "work", environ={**os.environ, **env})
    told = [e for e in hook.events() if e["kind"] == "approval_waiting"]
    assert [e["id"] for e in told] == [f"approval_waiting:{RUN}:ship:1"]
    assert told[0]["run_id"] == RUN and told[0]["details"]["by"] == "alice, bob"
    assert told[0]["details"]["approve"] == f"orchestrator approve {RUN} ship --reason REASON"


def test_validate_fails_on_an_environment_gate_that_track_yml_would_not_hold(
        tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"deploy": {"cron": "0 7 * * *", "tracks": [
        {"name": "ship", "run": "true", "approval": {"environment": "production"}}]}})
    repo = clone(origin, tmp_path / "repo")
    cli(repo, "validate", check=True)  # no track.yml: nothing of it runs on GitHub
    track = repo / ".github" / "workflows" / "track.yml"
    track.parent.mkdir(parents=True)
    shipped = SHIPPED.read_text(encoding="utf-8")
    track.write_text(shipped, encoding="utf-8")  # the line ships commented out
    refused = cli(repo, "validate")
    assert refused.returncode == 1
    assert ("the approval gate of deploy/ship (environment production) would hold "
            "nothing") in refused.stderr
    on = shipped.replace("    # environment: ${{", "    environment: ${{")
    assert on != shipped
    track.write_text(on, encoding="utf-8")
    cli(repo, "validate", check=True)
