"""An outside event as a deploy pipeline's last step sends it: declare the inputs, send
the event, send it again by mistake, send a bad one."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acceptance.cliuser import User, wait


def test_a_deploy_fires_its_smoke_tests_once_per_event_id(
        tmp_path: Path, scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    out = tmp_path / "seen.txt"
    spec = {"$schema": "./schedule.schema.json",
            "on_event": {"inputs": {"version": {"type": "string", "required": True},
                                    "canary": {"type": "boolean"}}},
            "tracks": [{"name": "smoke", "run": 'printf "%s %s" "$ORCHESTRATOR_EVENT_ID" '
                        f'"$ORCHESTRATOR_INPUTS" > {out}'}]}
    (user.cwd / "schedules" / "smoke.json").write_text(json.dumps(spec, indent=2) + "\n")
    assert "on an event" in user.run("validate", "--format", "text").stdout

    sent = user.run("event", "smoke", "--id", "deploy-1842", "--input", "version=v1.4.2",
                    "--input", "canary=true", "--now", "2026-12-01T14:00:00Z").stdout
    run_id = sent.splitlines()[-1].split(":")[0]
    assert sent.splitlines()[-1] == f"{run_id}: fired by event 'deploy-1842'"
    assert run_id.startswith("smoke--20261201T1400Z-event-")
    wait(out.exists, "the smoke track did not run")
    assert out.read_text() == 'deploy-1842 {"canary": "true", "version": "v1.4.2"}'

    again = user.run("event", "smoke", "--id", "deploy-1842", "--input", "version=v1.4.2",
                     "--now", "2026-12-01T14:03:00Z").stdout
    assert again.splitlines()[-1] == (f"smoke: event 'deploy-1842': already seen, it fired "
                                      f"{run_id}; nothing fired")

    bad = user.run("event", "--payload", json.dumps({
        "schedule": "smoke", "event_id": "deploy-1843", "inputs": {"canary": "yes"}}),
        expect=1)
    assert bad.stderr.strip() == ("orchestrator: event not fired: inputs.canary: expected a "
                                  "boolean (true or false)")
    shown = user.run("runs", "show", run_id).stdout
    assert "event by " in shown
