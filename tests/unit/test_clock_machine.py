"""The external clock's systemd unit and compose file as text: a checkout or token
path with spaces, quotes or ``%`` reads back whole, ``--via`` reaches ``serve``, and
neither file has a place for the token itself."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from orchestrator.cadence import machine

ODD = Path('/srv/team a/"x"/100%')


def _machine(**changes: object) -> machine.Machine:
    base = {"repository": "acme/widgets", "ref": "main", "repo": ODD,
            "token_file": Path("/etc/orchestrator/clock token"), "via": "workflow_dispatch",
            "python": "/opt/venv/bin/python", "user": "clock", "uid_gid": "1000:1000",
            "version": "0.1.0"}
    return machine.Machine(**{**base, **changes})  # type: ignore[arg-type]


def _value(unit: str, key: str) -> str:
    [line] = [line for line in unit.splitlines() if line.startswith(f"{key}=")]
    return line.split("=", 1)[1]


def test_unit_paths_read_back_whole_once_systemd_unescapes_them() -> None:
    unit = machine.systemd_unit(_machine())
    words = [w.replace("%%", "%") for w in shlex.split(_value(unit, "ExecStart"))]
    assert words == ["/opt/venv/bin/python", "-m", "orchestrator", "--repo", str(ODD),
                     "serve", "--executor", "github", "--clock-only"]
    assert shlex.split(_value(unit, "ReadWritePaths")) == [str(ODD).replace("%", "%%")]
    # these two take the rest of the line as the path: a quote would be part of it
    assert _value(unit, "WorkingDirectory") == str(ODD).replace("%", "%%")
    assert _value(unit, "LoadCredential") == "clock-token:/etc/orchestrator/clock token"
    assert shlex.split(_value(unit, "Environment")) == [
        "GITHUB_REPOSITORY=acme/widgets", "ORCHESTRATOR_DISPATCH_REF=main",
        "ORCHESTRATOR_CLOCK_TOKEN_FILE=%d/clock-token"]


def test_the_request_and_the_api_reach_serve_in_both_files() -> None:
    spec = _machine(via="repository_dispatch", api_url="https://ghe.example.com/api/v3")
    unit = machine.systemd_unit(spec)
    assert _value(unit, "ExecStart").endswith("--clock-only --clock-via repository_dispatch")
    assert "GITHUB_API_URL=https://ghe.example.com/api/v3" in _value(unit, "Environment")
    service = yaml.safe_load(machine.compose_file(spec))["services"]["clock"]
    assert service["command"] == ["orchestrator", "serve", "--executor", "github",
                                  "--clock-only", "--clock-via", "repository_dispatch",
                                  "--health-file", machine.HEALTH_FILE]
    assert service["environment"]["GITHUB_API_URL"] == "https://ghe.example.com/api/v3"
    assert service["volumes"] == [f"{ODD}:/repo"]


def test_the_same_machine_gives_the_same_bytes() -> None:
    assert machine.systemd_unit(_machine()) == machine.systemd_unit(_machine())
    assert machine.compose_file(_machine()) == machine.compose_file(_machine())
