"""``clock setup`` as a team sets up its punctual clock, each file run or checked:

- ``--kind http``: the request ``http.json`` holds, sent with httpx to the fake GitHub,
  starts tick.yml (both requests), and its entries are ``cron-sync --external``'s;
- ``--kind systemd``: the unit reads as strict INI with its hardening, ``systemd-analyze
  verify`` accepts it, and its ``ExecStart`` (with its environment and credential) tells
  a notify socket ``READY=1``, ``WATCHDOG=1`` and ``STOPPING=1``;
- ``--kind compose``: the compose file's structure, then its service's exact ``command``
  in the checkout it mounts, with its environment and secret: it dispatches tick.yml at a
  slot, and its health check passes, then fails once the health file is old.
"""

from __future__ import annotations

import configparser
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from orchestrator import __version__
from tests.acceptance.cliuser import User, orchestrator, reaped, terminate, wait
from tests.fakes.github import FakeGitHub

FROM = "2026-12-01T00:00:00Z"


def external(user: User) -> None:
    (user.cwd / "orchestrator.json").write_text(json.dumps({"cadence": {"mode": "external"}}))
    user.run("cron-sync")


def setup(user: User, fake: FakeGitHub, *args: str, expect: int = 0
          ) -> subprocess.CompletedProcess[str]:
    """``clock setup`` as a user on a machine with the fake's API URL (and no token)."""
    return user.run("clock", "setup", "--repository", fake.repository, *args, expect=expect,
                    env={"GITHUB_API_URL": fake.api_url, "GITHUB_TOKEN": ""})


def test_clock_setup_http_writes_the_request_github_accepts_and_each_services_schedule(
        scaffolded: tuple[User, Path], fake_github: FakeGitHub) -> None:
    user, _ = scaffolded
    refused = user.run("clock", "setup", "--kind", "http", expect=1)
    assert "cadence.mode is 'derived'; set \"mode\": \"external\"" in refused.stderr
    external(user)
    user.run("schedules", "add", "ny-night", "--every", "day", "--time", "02:30",
             "--timezone", "America/New_York", "--track", "t=true")
    user.run("cron-sync")
    unnamed = user.run("clock", "setup", "--kind", "http", expect=1)
    assert "name the repository with --repository OWNER/REPO" in unnamed.stderr

    misplaced = setup(user, fake_github, "--kind", "http", "--token-file", "/t", expect=2)
    assert "--token-file is for systemd and compose" in misplaced.stderr
    out = setup(user, fake_github, "--kind", "http", "--from", FROM).stdout
    assert "wrote clock/http.json" in out and "wrote clock/http.md" in out
    assert "`cron(30 2 * * ? *)` in America/New_York" in out
    assert "EventBridge skips a time the clock jumps over" in out
    sent = _send(user, fake_github)
    again = setup(user, fake_github, "--kind", "http", "--from", FROM, expect=1)
    assert "already has http.json, http.md (--force replaces them)" in again.stderr
    setup(user, fake_github, "--kind", "http", "--from", FROM, "--via",
          "repository_dispatch", "--force")
    sent += _send(user, fake_github)
    assert sent == [204, 204]
    assert [run.event for run in fake_github.runs_of("tick.yml")] == [
        "workflow_dispatch", "repository_dispatch"]

    data = json.loads((user.cwd / "clock" / "http.json").read_text())
    report = user.json("cron-sync", "--external", "--json", "--from", FROM)["external"]
    assert [e["schedules"] for e in data["entries"]] == [
        e["schedules"] for e in report["entries"]]
    assert ["nightly" in note for note in data["notes"]] == [False, True]  # its jitter
    for name in ("http.json", "http.md"):
        assert fake_github.token not in (user.cwd / "clock" / name).read_text()


def test_a_machines_clock_tells_how_to_declare_it_confirms_and_http_then_refuses(
        scaffolded: tuple[User, Path], fake_github: FakeGitHub, tmp_path: Path) -> None:
    user, _ = scaffolded
    external(user)
    tick_yml = user.cwd / ".github/workflows/tick.yml"
    assert "17 0 * * 1" not in tick_yml.read_text()
    out = setup(user, fake_github, "--kind", "compose", "--token-file",
                str(tmp_path / "token")).stdout
    assert '`"clock_confirms": true`' in out
    (user.cwd / "orchestrator.json").write_text(json.dumps(
        {"cadence": {"mode": "external", "clock_confirms": True}}))
    user.run("cron-sync")
    assert '- cron: "17 0 * * 1"' in tick_yml.read_text()
    assert "weekly backstop tick" in user.run("cron-sync", "--external").stdout
    user.run("validate")
    refused = setup(user, fake_github, "--kind", "http", expect=1)
    assert "a hosted scheduler does not confirm its calls" in refused.stderr
    assert not (user.cwd / "clock" / "http.json").exists()


def _send(user: User, fake: FakeGitHub) -> list[int]:
    """The request of ``http.json`` as a scheduler makes it, the token filled in."""
    request = json.loads((user.cwd / "clock" / "http.json").read_text())["request"]
    headers = {name: value.replace("${ORCHESTRATOR_CLOCK_TOKEN}", fake.token)
               for name, value in request["headers"].items()}
    answer = httpx.request(request["method"], request["url"], headers=headers,
                           content=request["body"], timeout=30)
    return [answer.status_code]


# --------------------------------------------------------------------------- systemd


def _unit(user: User) -> configparser.SectionProxy:
    """The unit read as strict INI: a key twice, or a line that is no key, fails."""
    parser = configparser.ConfigParser(strict=True, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((user.cwd / "clock" / "orchestrator-clock.service").read_text())
    assert parser["Install"]["WantedBy"] == "multi-user.target"
    return parser["Service"]


def test_clock_setup_systemd_writes_a_hardened_unit_with_the_token_as_a_credential(
        scaffolded: tuple[User, Path], fake_github: FakeGitHub, tmp_path: Path) -> None:
    user, _ = scaffolded
    external(user)
    inside = setup(user, fake_github, "--kind", "systemd", "--token-file",
                   str(user.cwd / "token"), expect=1)
    assert "keep the token file out of the repository" in inside.stderr
    setup(user, fake_github, "--kind", "systemd", "--token-file", str(tmp_path / "token"))
    service = _unit(user)
    assert {k: service[k] for k in ("Type", "Restart", "WatchdogSec", "StandardOutput",
                                    "NoNewPrivileges", "ProtectSystem", "ProtectHome",
                                    "PrivateTmp", "CapabilityBoundingSet", "LoadCredential",
                                    "ReadWritePaths")} == {
        "Type": "notify", "Restart": "always", "WatchdogSec": "5min",
        "StandardOutput": "journal", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
        "ProtectHome": "read-only", "PrivateTmp": "yes", "CapabilityBoundingSet": "",
        "LoadCredential": f"clock-token:{tmp_path / 'token'}", "ReadWritePaths": str(user.cwd)}
    assert "ORCHESTRATOR_CLOCK_TOKEN_FILE=%d/clock-token" in service["Environment"]
    assert shlex.split(service["ExecStart"])[1:] == [
        "-m", "orchestrator", "--repo", str(user.cwd), "serve", "--executor", "github",
        "--clock-only"]
    assert "repository permission Actions: Read and write" in (
        user.cwd / "clock" / "systemd.md").read_text()
    # a credential that is not there stops the clock at once, naming the file
    missing = user.run("serve", "--executor", "github", "--clock-only", expect=1, env={
        **fake_github.env(), "ORCHESTRATOR_CLOCK_TOKEN_FILE": str(tmp_path / "token")})
    assert f"ORCHESTRATOR_CLOCK_TOKEN_FILE: cannot read {tmp_path / 'token'}" in missing.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (Debian's systemd package); "
                    "the strict INI reading of the unit still runs")
def test_systemd_analyze_verifies_the_unit(scaffolded: tuple[User, Path],
                                           fake_github: FakeGitHub, tmp_path: Path) -> None:
    user, _ = scaffolded
    external(user)
    # a space in the token file's path: systemd reads LoadCredential='s path whole
    setup(user, fake_github, "--kind", "systemd", "--token-file",
          str(tmp_path / "clock token"))
    unit = user.cwd / "clock" / "orchestrator-clock.service"
    verified = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                              text=True, timeout=120, check=False)
    assert verified.returncode == 0, verified.stderr
    assert "orchestrator-clock" not in verified.stderr, verified.stderr


@pytest.fixture
def notify_socket() -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket where systemd would listen, at a path short enough for one."""
    folder = tempfile.mkdtemp(prefix="notify-")
    path = os.path.join(folder, "sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(90)
    try:
        yield sock, path
    finally:
        sock.close()
        shutil.rmtree(folder)


@pytest.mark.slow
def test_the_units_exec_start_tells_systemd_it_is_ready_and_alive(
        scaffolded: tuple[User, Path], fake_github: FakeGitHub, tmp_path: Path,
        notify_socket: tuple[socket.socket, str]) -> None:
    user, _ = scaffolded
    external(user)
    setup(user, fake_github, "--kind", "systemd", "--token-file", str(tmp_path / "token"))
    service = _unit(user)
    credentials = tmp_path / "credentials"  # what LoadCredential= makes, %d in the unit
    credentials.mkdir()
    (credentials / "clock-token").write_text(fake_github.token + "\n")
    env = dict(word.split("=", 1) for word in shlex.split(service["Environment"]))
    env = {k: v.replace("%d", str(credentials)) for k, v in env.items()}
    sock, path = notify_socket
    proc = subprocess.Popen(
        shlex.split(service["ExecStart"]), cwd=service["WorkingDirectory"], text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**_without_tokens(os.environ), **env, "NOTIFY_SOCKET": path})
    with reaped(proc):
        assert sock.recv(64) == b"READY=1"
        assert sock.recv(64) == b"WATCHDOG=1"  # its first look at the state branch worked
        proc.send_signal(signal.SIGTERM)
        assert sock.recv(64) == b"STOPPING=1"
        err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 0, err
    assert "clock for tick.yml via workflow_dispatch" in err


def _without_tokens(environ: Any) -> dict[str, str]:
    """This process's environment without a token: the clock must read its file."""
    return {k: v for k, v in environ.items()
            if k not in ("GITHUB_TOKEN", "ORCHESTRATOR_CLOCK_TOKEN", "GH_TOKEN")}


# --------------------------------------------------------------------------- compose


def test_clock_setup_compose_writes_a_pinned_image_a_secret_and_a_health_check(
        scaffolded: tuple[User, Path], fake_github: FakeGitHub, tmp_path: Path) -> None:
    user, _ = scaffolded
    external(user)
    setup(user, fake_github, "--kind", "compose", "--token-file", str(tmp_path / "token"))
    text = (user.cwd / "clock" / "compose.yaml").read_text()
    data = yaml.safe_load(text)
    service = data["services"]["clock"]
    build = service["build"]["dockerfile_inline"]
    assert build.startswith("FROM python:3.12.8-slim-bookworm\n")
    assert f"pip install --no-cache-dir git-orchestrator=={__version__}" in build
    assert service["command"][:5] == ["orchestrator", "serve", "--executor", "github",
                                      "--clock-only"]
    assert service["volumes"] == [f"{user.cwd}:/repo"] and service["working_dir"] == "/repo"
    assert service["secrets"] == ["clock_token"]
    assert data["secrets"] == {"clock_token": {"file": str(tmp_path / "token")}}
    assert service["environment"]["ORCHESTRATOR_CLOCK_TOKEN_FILE"] == "/run/secrets/clock_token"
    assert service["restart"] == "unless-stopped"
    assert service["logging"]["options"] == {"max-size": "10m", "max-file": "3"}
    assert service["healthcheck"]["test"][:2] == ["CMD", "python"]
    assert service["user"] == f"{os.getuid()}:{os.getgid()}"
    assert fake_github.token not in text


@pytest.mark.slow
def test_the_compose_services_command_dispatches_at_a_slot_and_its_health_check_runs(
        scaffolded: tuple[User, Path], fake_github: FakeGitHub, tmp_path: Path) -> None:
    user, _ = scaffolded
    # the example's slot of the last hour, unfired, would be called for at the first look
    user.run("schedules", "remove", "nightly")
    external(user)
    later = datetime.now(UTC) + timedelta(days=1)  # moved to a few seconds ahead below
    user.run("schedules", "add", "once", "--at", f"{later:%Y-%m-%dT%H:%M:%SZ}", "--track",
             "t=true")
    (tmp_path / "token").write_text(fake_github.token + "\n")
    setup(user, fake_github, "--kind", "compose", "--token-file", str(tmp_path / "token"))
    data = yaml.safe_load((user.cwd / "clock" / "compose.yaml").read_text())
    service = data["services"]["clock"]
    # What the container sees, mapped back to this machine: the secret's file, a home.
    mounts = {"/run/secrets/clock_token": data["secrets"]["clock_token"]["file"],
              "/tmp": str(tmp_path)}
    env = {k: mounts.get(v, v) for k, v in service["environment"].items()}
    [volume] = service["volumes"]
    checkout = volume.split(":")[0]
    argv = [orchestrator(), *service["command"][1:]]  # the same program, installed here
    proc = subprocess.Popen(argv, cwd=checkout, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            env={**_without_tokens(os.environ), **env})
    with reaped(proc):
        assert proc.stderr is not None
        assert "clock for tick.yml via workflow_dispatch" in proc.stderr.readline()
        assert "wake-up 1" in proc.stderr.readline()
        slot = (datetime.now(UTC) + timedelta(seconds=2)).replace(microsecond=0)
        _move_once(user, slot)
        # the next whole minute's wake-up reads the schedule and calls for its slot
        wait(lambda: bool(fake_github.runs_of("tick.yml")), "no dispatch", timeout=150)
        alive = Path(checkout) / ".orchestrator" / "clock-alive"
        # the wake-up that called writes its instant (at or after the slot) once done
        wait(lambda: _alive_since(alive, slot), "no sign of life after the call", timeout=60)
        health = service["healthcheck"]["test"][1:]
        assert subprocess.run(health, cwd=checkout, check=False).returncode == 0
        alive.write_text(f"{datetime.now(UTC) - timedelta(minutes=10):%Y-%m-%dT%H:%M:%SZ}\n")
        assert subprocess.run(health, cwd=checkout, check=False).returncode == 1
        err = terminate(proc)
    assert proc.returncode == 0, err
    assert "clock: dispatched tick.yml (workflow_dispatch) for once: one-shot at" in err


def _alive_since(alive: Path, moment: datetime) -> bool:
    """Whether the health file holds an instant at or after ``moment``."""
    try:
        written = datetime.fromisoformat(alive.read_text().strip().replace("Z", "+00:00"))
    except (OSError, ValueError):
        return False
    return written >= moment


def _move_once(user: User, slot: datetime) -> None:
    """The one-shot's instant moved, its file replaced whole."""
    path, new = user.cwd / "schedules" / "once.json", user.cwd.parent / "once.json"
    spec = json.loads(path.read_text())
    spec["at"] = f"{slot.replace(microsecond=0):%Y-%m-%dT%H:%M:%SZ}"
    new.write_text(json.dumps(spec))
    os.replace(new, path)
