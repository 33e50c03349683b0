"""Events from outside against real git: ``orchestrator event`` from five OS processes
at once fires one run; a payload that breaks the declared inputs fires nothing and
names the field; on the fake GitHub, a ``repository_dispatch`` of type
``orchestrator-event`` starts tick.yml, whose tick fires the schedule."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config.events import event_digest
from orchestrator.github import GitHubClient
from orchestrator.state.model import State
from tests.builders import spec_data
from tests.drive import cli, launches, read_state, start_cli, state_of, wait_until
from tests.fakes.github import WORKFLOWS, FakeGitHub
from tests.gitrepo import clone, make_origin
from tests.workflow_player import Player

INPUTS = {"version": {"type": "string", "required": True, "pattern": r"v\d+(\.\d+)*"},
          "replicas": {"type": "integer"}}
NOTE = 'printf "%s|%s" "$ORCHESTRATOR_EVENT_ID" "$ORCHESTRATOR_INPUTS" > "$OUT"'


def smoke(run: str = "true", **fields: Any) -> dict[str, Any]:
    return spec_data(None, on_event={"inputs": INPUTS}, run=run, **fields)


def event_runs(state: State) -> list[str]:
    return sorted(r for r in state.runs if "-event-" in r)


@pytest.mark.slow
def test_the_same_event_id_sent_five_times_at_once_fires_once(tmp_path: Path) -> None:
    """Five clones of one origin, one machine's work folder: five processes send the
    same event at once, each in a tick of its own; one run fires and its track runs once."""
    out = tmp_path / "out"
    origin = make_origin(tmp_path, {"smoke": smoke(NOTE, overlap="allow")})
    repos = [clone(origin, tmp_path / f"repo{i}") for i in range(5)]
    work = tmp_path / "work"
    env = {"ORCHESTRATOR_WORK_DIR": str(work), "OUT": str(out)}
    procs = [start_cli(r, "event", "smoke", "--id", "deploy-1842", "--input", "version=v1.4",
                       "--input", "replicas=3", env=env) for r in repos]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0] * 5, [o[1] for o in outs]
    lines = [o[0].strip().splitlines()[-1] for o in outs]
    state, _ = state_of(repos[0])
    [run_id] = event_runs(state)
    assert run_id.endswith(f"-event-{event_digest('deploy-1842')}")
    seen = f"smoke: event 'deploy-1842': already seen, it fired {run_id}; nothing fired"
    assert sorted(lines) == sorted([f"{run_id}: fired by event 'deploy-1842'", *[seen] * 4])
    wait_until(lambda: out.exists(), timeout=60)
    assert [k for k in launches(work) if k.startswith("smoke")] == [f"{run_id}--a--1"]
    assert out.read_text() == 'deploy-1842|{"replicas": "3", "version": "v1.4"}'
    assert state.runs[run_id].event_id == "deploy-1842"


def test_a_payload_that_breaks_the_declared_inputs_fires_nothing_and_names_the_field(
        tmp_path: Path) -> None:
    repo = clone(make_origin(tmp_path, {"smoke": smoke()}), tmp_path / "repo")
    work = tmp_path / "work"
    payload = {"schedule": "smoke", "event_id": "deploy-7", "inputs": {"version": "1.4"}}
    bad = cli(repo, "event", "--payload", json.dumps(payload), work=work)
    assert bad.returncode == 1
    assert bad.stderr.strip() == (r"orchestrator: event not fired: inputs.version: does not "
                                  r"match v\d+(\.\d+)*")
    typed = cli(repo, "event", "smoke", "--id", "deploy-7", "--input", "version=v1",
                "--input", "replicas=many", work=work)
    assert typed.returncode == 1
    assert typed.stderr.strip().endswith("inputs.replicas: expected an integer")
    unknown = cli(repo, "event", "smoke", "--id", "deploy-7", "--input", "version=v1",
                  "--input", "region=eu", work=work)
    assert unknown.returncode == 1 and "inputs.region: not an input" in unknown.stderr
    state, _ = state_of(repo)
    assert event_runs(state) == [] and not launches(work)
    # nothing was consumed: the same id, well formed, fires
    good = cli(repo, "event", "smoke", "--id", "deploy-7", "--input", "version=v1", work=work)
    assert good.returncode == 0, good.stderr
    assert len(event_runs(state_of(repo)[0])) == 1


def test_a_paused_schedule_consumes_no_event_and_says_why(tmp_path: Path) -> None:
    repo = clone(make_origin(tmp_path, {"smoke": smoke()}), tmp_path / "repo")
    work = tmp_path / "work"
    cli(repo, "tick", work=work, check=True)
    cli(repo, "schedules", "pause", "smoke", "--reason", "freeze", work=work, check=True)
    proc = cli(repo, "event", "smoke", "--id", "e1", "--input", "version=v1", work=work)
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("orchestrator: smoke: event 'e1': not fired: the schedule "
                                   "is paused (freeze)")
    assert event_runs(state_of(repo)[0]) == []


def dispatch(fake: FakeGitHub, payload: dict[str, Any]) -> int:
    """A ``repository_dispatch`` of type ``orchestrator-event``, as a deploy pipeline
    sends it; GitHub's status code."""
    client = GitHubClient(fake.token, api_url=fake.api_url, now=datetime.now(UTC))
    try:
        answer = client.request("POST", f"repos/{fake.repository}/dispatches", body={
            "event_type": "orchestrator-event", "client_payload": payload})
        return answer.status_code
    finally:
        client.close()


@pytest.mark.slow
def test_on_github_a_repository_dispatch_fires_the_schedule_once_through_tick_yml(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"smoke": smoke()})
    player = Player(fake_github, origin, tmp_path / "play", workflow=WORKFLOWS / "tick.yml")
    payload = {"schedule": "smoke", "event_id": "deploy-1842",
               "inputs": {"version": "v1.4", "replicas": 2}}
    assert dispatch(fake_github, payload) == 204
    assert dispatch(fake_github, payload) == 204  # a retried step sends it again
    first, second = fake_github.runs_of("tick.yml")
    assert first.event == "repository_dispatch"
    played = [player.play_tick(first.id), player.play_tick(second.id)]
    assert [p.conclusion for p in played] == ["success"] * 2, [p.output for p in played]
    state, _ = read_state(clone(origin, tmp_path / "check"))
    [run_id] = event_runs(state)
    assert f"{run_id}: fired by event 'deploy-1842'" in played[0].output[0].stdout
    assert "already seen" in played[1].output[0].stdout
    [call] = [c for c in fake_github.dispatches if "/workflows/track.yml/" in c.path]
    assert call.body["inputs"]["run_id"] == run_id
    [leg] = json.loads(call.body["inputs"]["tracks"])
    assert leg["env"]["ORCHESTRATOR_EVENT_ID"] == "deploy-1842"
    assert leg["inputs"] == {"replicas": "2", "version": "v1.4"}


def test_on_github_a_hostile_payload_fails_the_tick_in_one_line(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"smoke": smoke()})
    player = Player(fake_github, origin, tmp_path / "play", workflow=WORKFLOWS / "tick.yml")
    hostile = {"schedule": "smoke", "event_id": "x $(touch pwned)",
               "inputs": {"version": "v1; touch pwned2", "extra": "`touch pwned3`"}}
    assert dispatch(fake_github, hostile) == 204
    [run] = fake_github.runs_of("tick.yml")
    played = player.play_tick(run.id)
    assert played.conclusion == "failure"
    [proc] = played.output
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("orchestrator: event not fired: inputs.extra: not an input "
                                   "of the schedule (it takes: replicas, version)")
    assert not list((tmp_path / "play").rglob("pwned*"))
    assert not [c for c in fake_github.dispatches if "/workflows/track.yml/" in c.path]
    # GitHub refuses what its limits forbid before any tick starts
    assert dispatch(fake_github, {f"k{n}": n for n in range(11)}) == 422
    assert dispatch(fake_github, {"schedule": "smoke", "pad": "x" * 65536}) == 422
    assert len(fake_github.runs_of("tick.yml")) == 1


def test_tick_yml_takes_the_event_type_and_passes_the_payload_only_through_env() -> None:
    """The scaffold's tick.yml: the type in ``repository_dispatch``, the payload in the
    Tick step's ``env`` and never in its script."""
    import yaml

    doc = yaml.safe_load((WORKFLOWS / "tick.yml").read_text())
    assert "orchestrator-event" in doc[True]["repository_dispatch"]["types"]
    [step] = [s for s in doc["jobs"]["tick"]["steps"] if s.get("name") == "Tick"]
    assert step["env"]["ORCHESTRATOR_EVENT_PAYLOAD"] == (
        "${{ toJSON(github.event.client_payload) }}")
    assert "client_payload" not in step["run"] and "${{" not in step["run"]
    assert subprocess.run(["bash", "-n"], input=step["run"], text=True).returncode == 0


def test_validate_warns_when_tick_yml_would_not_answer_an_event(tmp_path: Path) -> None:
    repo = clone(make_origin(tmp_path, {"smoke": smoke()}), tmp_path / "repo")
    workflows = repo / ".github" / "workflows"
    workflows.mkdir(parents=True, exist_ok=True)
    text = (WORKFLOWS / "tick.yml").read_text()
    (workflows / "tick.yml").write_text(text)
    assert "orchestrator-event" not in cli(repo, "validate").stderr
    old = text.replace("[orchestrator-tick, orchestrator-event]", "[orchestrator-tick]")
    assert old != text
    (workflows / "tick.yml").write_text(old)
    warned = cli(repo, "validate")
    assert (".github/workflows/tick.yml: no `repository_dispatch` trigger of type "
            "orchestrator-event: an event sent to 'smoke' on GitHub starts nothing; see "
            "docs/how-to/chains.md") in warned.stdout + warned.stderr
