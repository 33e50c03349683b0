"""``track.yml``'s leg runs where GNU tools are missing (macOS runners).

The leg's steps are played from the workflow file (:mod:`tests.workflow_player`) with a
``PATH`` of a few tools only: no ``timeout``, and a ``date`` that refuses ``%3N`` as
BSD's does. The orchestrator times the command and stops it at its limit itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.state.phases import TrackPhase
from tests.drive import github_tick, read_state
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, make_origin
from tests.workflow_player import Player

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"
ALLOWED = ("bash", "sh", "cat", "sleep", "python3")
BSD_DATE = """#!/bin/sh
for arg in "$@"; do
  case "$arg" in *%3N*|*%N*) echo "date: illegal time format" >&2; exit 1 ;; esac
done
exec {date} "$@"
"""


def _bin(tmp_path: Path) -> Path:
    """Only the tools a macOS runner surely has, and the orchestrator."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ALLOWED:
        found = shutil.which(tool)
        assert found is not None, tool
        (folder / tool).symlink_to(found)
    (folder / "orchestrator").symlink_to(Path(sys.executable).parent / "orchestrator")
    date = folder / "date"
    date.write_text(BSD_DATE.format(date=shutil.which("date")))
    date.chmod(0o755)
    return folder


def test_a_leg_runs_without_gnu_date_or_timeout(tmp_path: Path,
                                                fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": {"cron": "0 7 * * *", "tracks": [
        {"name": "ok", "run": "echo out; echo err >&2"},
        {"name": "broken", "run": "echo nope >&2; exit 3"},
    ]}})
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake_github, T0 + timedelta(minutes=1))
    [call] = fake_github.dispatches
    inputs = call.body["inputs"]
    [ci_run] = fake_github.runs
    player = Player(fake_github, origin, tmp_path / "play", env={"PATH": str(_bin(tmp_path))})
    played = {leg["track"]: player.play_leg(ci_run, inputs, leg)
              for leg in player.legs(inputs)}
    assert played["ok"].outcomes["work"] == "success", played["ok"].output[-1].stderr
    assert "out" in played["ok"].output[-1].stdout
    assert played["broken"].outcomes["work"] == "failure"
    github_tick(repo, fake_github, T0 + timedelta(minutes=5))
    state, _ = read_state(repo)
    tracks = state.tracks[RUN]
    assert tracks["ok"].phase is TrackPhase.COMPLETE
    assert tracks["broken"].phase is TrackPhase.FAILED
    assert tracks["broken"].state_history[-1].reason.endswith(
        "exit code 3; stderr ends with: nope")


def test_the_orchestrator_stops_a_leg_s_command_at_its_limit(tmp_path: Path) -> None:
    """TERM at the limit, as ``timeout`` did: exit 124, and the outcome a tap-out."""
    out = tmp_path / "out"
    env = {**os.environ, "PATH": str(_bin(tmp_path))}
    done = subprocess.run(
        ["orchestrator", "outcome", "--run", RUN, "--track", "slow", "--attempt", "1",
         "--command", "echo started; sleep 60", "--timeout-minutes", "0.02",
         "--stdout", str(tmp_path / "stdout"), "--stderr", str(tmp_path / "stderr"),
         "--output", str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 124, done.stderr
    assert "started" in done.stdout
    outcome = json.loads((out / f"{RUN}--slow--1.json").read_text())
    assert outcome["phase"] == "tapped_out"
    assert (tmp_path / "stdout").read_text() == "started\n"
