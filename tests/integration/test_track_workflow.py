"""A repository whose ``track.yml`` predates the fan-in job keeps working.

Its legs (``tests/data/workflows/track-v1.yml``, the file as it was shipped before)
commit their own report to the state branch; the tick still accepts those reports and
consolidates the run, and ``validate`` says the workflow is out of date and how to
update it. The legs are played by :mod:`tests.workflow_player`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.config.track_workflow import SHIPPED
from orchestrator.state import layout
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.drive import github_tick, read_state
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, git, make_origin
from tests.workflow_player import Player

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"
OLD = Path(__file__).resolve().parents[1] / "data" / "workflows" / "track-v1.yml"


@pytest.mark.slow
def test_old_style_legs_that_report_by_push_are_still_accepted(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": {"cron": "0 7 * * *", "tracks": [
        {"name": "build", "inputs": {"target": "docs"},
         "run": 'python3 -c "import json,os; json.dump({\'summary\': \'built \' + '
                'json.loads(os.environ[\'ORCHESTRATOR_INPUTS\'])[\'target\']}, '
                'open(os.environ[\'ORCHESTRATOR_RESULT\'], \'w\'))"'},
        {"name": "broken", "run": "echo nope >&2; exit 3"},
        {"name": "inputs-only", "inputs": {"x": "1"}},
    ]}})
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake_github, T0 + timedelta(minutes=1))
    [call] = fake_github.dispatches
    inputs = call.body["inputs"]
    [ci_run] = fake_github.runs

    player = Player(fake_github, origin, tmp_path / "play", workflow=OLD)
    played = {leg["track"]: player.play_leg(ci_run, inputs, leg)
              for leg in player.legs(inputs)}
    assert played["build"].outcomes["work"] == "success"
    assert played["broken"].outcomes["work"] == played["inputs-only"].outcomes["work"] == \
        "failure"
    assert fake_github.artifacts == {}  # old legs upload nothing: they pushed
    state, _ = read_state(repo)
    tracks = state.tracks[RUN]
    assert tracks["build"].phase is TrackPhase.COMPLETE
    assert tracks["build"].result == {"summary": "built docs"}
    assert tracks["broken"].phase is TrackPhase.FAILED
    assert tracks["inputs-only"].phase is TrackPhase.FAILED

    # the cron tick finds every track terminal and consolidates the run
    result = github_tick(repo, fake_github, T0 + timedelta(minutes=5))
    assert result.rendered == (RUN,)
    state, files = read_state(repo)
    assert state.runs[RUN].status is RunStatus.FAILED
    assert layout.brief_path(RUN) in files


def _validate(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", "--repo", str(repo),
                           "validate"], capture_output=True, text=True, env=os.environ,
                          timeout=120)


def test_validate_says_an_old_track_workflow_is_out_of_date(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"nightly": {"cron": "0 7 * * *",
                                                "tracks": [{"name": "a", "run": "true"}]}})
    repo = clone(origin, tmp_path / "repo")
    workflows = repo / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "track.yml").write_text(OLD.read_text())
    old = _validate(repo)
    assert "track.yml is out of date" in old.stdout
    assert f"cp {SHIPPED} .github/workflows/track.yml" in old.stdout

    (workflows / "track.yml").write_text(SHIPPED.read_text())
    git("add", ".", cwd=repo)
    current = _validate(repo)
    assert "out of date" not in current.stdout + current.stderr
