"""``runs retry`` reruns the schedule's current definition of a track, or with
``--as-fired`` the one the run fired with: the real CLI, real git and real track
processes of the local executor."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from orchestrator.state.phases import RunStatus
from tests.builders import spec_data
from tests.drive import cli, read_state, tick
from tests.gitrepo import clone, make_origin

AT = datetime(2026, 12, 1, 14, 12, 30, tzinfo=UTC)
RUN = "nightly--20261201T1412Z-manual-1"


def stamp(at: datetime) -> str:
    return f"{at:%Y-%m-%dT%H:%M:%SZ}"


def define(repo: Path, name: str, run: str) -> None:
    """The checkout's schedule ``nightly`` with one track ``name`` running ``run``."""
    data = spec_data(tracks=[{"name": name, "run": run}])
    (repo / "schedules" / "nightly.json").write_text(json.dumps(data))


def settle(repo: Path, work: Path, start: datetime, status: RunStatus) -> datetime:
    """Tick once a simulated minute until the run is ``status``; the last tick's time."""
    now = start
    for _ in range(40):
        now += timedelta(minutes=1)
        tick(repo, now, work)
        if read_state(repo)[0].runs[RUN].status is status:
            return now
        time.sleep(0.2)  # the tracks run on the real clock
    raise AssertionError(f"the run never became {status.value}")


def retry(repo: Path, work: Path, now: datetime, *options: str) -> Any:
    return cli(repo, "runs", "retry", RUN, "--now", stamp(now), *options, work=work)


def test_retry_reruns_the_current_definition_and_as_fired_the_old(tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    origin = make_origin(tmp_path, {"nightly": spec_data(tracks=[
        {"name": "a", "run": f"echo old >> {log}; exit 1"}])})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    assert cli(repo, "trigger", "nightly", "--now", stamp(AT), work=work).returncode == 0
    now = settle(repo, work, AT, RunStatus.FAILED)

    define(repo, "b", f"echo new >> {log}")  # the track is gone from the schedule
    gone = retry(repo, work, now, "--failed")
    assert gone.returncode == 1
    assert gone.stderr.strip().splitlines() == [
        "orchestrator: schedule nightly no longer has track 'a': retry with --as-fired "
        "to rerun it as the run fired it"]

    define(repo, "a", f"echo new >> {log}")  # fixed
    fired = retry(repo, work, now, "--failed", "--as-fired")
    assert fired.returncode == 0, fired.stderr
    assert f"{RUN}: retrying a by " in fired.stdout
    assert fired.stdout.rstrip().endswith(", as the run fired them")
    now = settle(repo, work, now, RunStatus.FAILED)
    assert log.read_text().split() == ["old", "old"]

    current = retry(repo, work, now, "--failed")
    assert current.returncode == 0, current.stderr
    assert current.stdout.rstrip().endswith(", as the schedule defines them now")
    settle(repo, work, now, RunStatus.COMPLETED)
    assert log.read_text().split() == ["old", "old", "new"]
    state, _ = read_state(repo)
    assert [r.definition for r in state.runs[RUN].retries] == ["as-fired", "current"]
    history = [h.reason for h in state.tracks[RUN]["a"].state_history if h.to == "pending"]
    assert history[-2].endswith("(as-fired definition)")
    assert history[-1].endswith("(current definition)")
    assert "(current definition)" in state.runs[RUN].acts()[-1]
