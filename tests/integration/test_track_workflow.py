"""The steps of ``.github/workflows/track.yml`` run as a runner would run them.

The tick dispatches to the fake GitHub server; each matrix leg it sent is then played
on this machine: the job's and steps' ``env`` are evaluated from the workflow file
(a small evaluator for the expressions the file uses), and the ``run`` scripts are
executed with ``bash -eo pipefail`` in a fresh clone of the origin, with the installed
``orchestrator`` on ``PATH``. What the legs report lands on the real state branch.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from orchestrator.models import TrackPhase
from tests.fakes.github import WORKFLOWS, FakeGitHub
from tests.integration.test_github_tick import (
    RUN,
    T0,
    clone,
    github_tick,
    make_origin,
    read_state,
)

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _lookup(path: str, ctx: dict[str, Any]) -> Any:
    value: Any = ctx
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _value(text: str, ctx: dict[str, Any]) -> Any:
    text = text.strip()
    if "||" in text:
        first, rest = text.split("||", 1)
        return _value(first, ctx) or _value(rest, ctx)
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1]
    if text.startswith("toJSON(") and text.endswith(")"):
        return json.dumps(_lookup(text[7:-1], ctx))
    return _lookup(text, ctx)


def evaluate(template: Any, ctx: dict[str, Any]) -> str:
    def sub(match: re.Match[str]) -> str:
        value = _value(match.group(1), ctx)
        return "" if value is None else value if isinstance(value, str) else json.dumps(value)

    return _EXPR.sub(sub, str(template))


def play_leg(job: dict[str, Any], ctx: dict[str, Any], checkout: Path) -> dict[str, str]:
    """Run the leg's `run` steps in order (skipping `if:` steps that are false); return
    each step's outcome by id or name."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    job_env = {k: evaluate(v, ctx) for k, v in job["env"].items()}
    outcomes: dict[str, str] = {}
    failed = False
    for step in job["steps"]:
        if "run" not in step:
            continue  # checkout and setup-python: the clone and this interpreter
        if step.get("name") == "Install the orchestrator":
            continue  # installed already (editable)
        condition = str(step.get("if", ""))
        if condition.startswith("vars."):
            continue  # repository variables are unset here
        # `always() && (...outcome == 'success' || ... 'failure')`: here the command
        # always finishes (nothing is cancelled), so the report step always runs
        if failed and not condition.startswith("always()"):
            continue
        env = {**os.environ, **job_env, "PATH": path,
               **{k: evaluate(v, ctx) for k, v in (step.get("env") or {}).items()}}
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               step["run"]], cwd=checkout, env=env, capture_output=True,
                              text=True, timeout=120)
        outcome = "success" if proc.returncode == 0 else "failure"
        outcomes[step.get("id") or step["name"]] = outcome
        ctx["steps"][step.get("id") or step["name"]] = {"outcome": outcome}
        failed = failed or proc.returncode != 0
        if step.get("name") == "Report the outcome":
            assert proc.returncode == 0, proc.stderr
    return outcomes


def test_track_legs_run_their_command_and_report(tmp_path: Path,
                                                 fake_github: FakeGitHub) -> None:
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

    workflow = yaml.safe_load((WORKFLOWS / "track.yml").read_text())
    [job] = workflow["jobs"].values()
    outcomes = {}
    for leg in json.loads(inputs["tracks"]):
        ctx: dict[str, Any] = {"inputs": inputs, "matrix": {"leg": leg}, "vars": {},
                               "secrets": {}, "github": {"token": ""}, "steps": {},
                               "runner": {"temp": str(tmp_path / f"temp-{leg['track']}")}}
        Path(ctx["runner"]["temp"]).mkdir()
        outcomes[leg["track"]] = play_leg(job, ctx, clone(origin, tmp_path / leg["key"]))
        # the job name the tick matches on
        assert evaluate(job["name"], ctx) == leg["key"]

    assert outcomes["build"]["work"] == "success"
    assert outcomes["broken"]["work"] == outcomes["inputs-only"]["work"] == "failure"
    state, _ = read_state(repo)
    tracks = state.tracks[RUN]
    assert tracks["build"].phase is TrackPhase.COMPLETE
    assert tracks["build"].result == {"summary": "built docs"}
    assert tracks["broken"].phase is TrackPhase.FAILED
    assert tracks["inputs-only"].phase is TrackPhase.FAILED
