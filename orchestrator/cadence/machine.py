"""The external clock on a machine a team has: a systemd unit or a compose file
(``clock setup --kind systemd|compose``), both running ``serve --clock-only``.

What it owns: the text of each file, from a :class:`Machine`. Invariants:

- the token is never in a file: the unit loads it as a systemd credential, the compose
  file as a secret, and both hand ``serve`` the path (``ORCHESTRATOR_CLOCK_TOKEN_FILE``);
- the same files from the same machine, byte for byte;
- the unit runs as ``Type=notify`` with a watchdog, which ``serve`` feeds after each
  look that succeeds; the container writes a health file its health check reads;
- logs go to the journal (systemd) or to size-capped files (compose).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .clock import TOKEN_FILE_VARIABLE

UNIT = "orchestrator-clock.service"
COMPOSE = "compose.yaml"
CREDENTIAL = "clock-token"
SECRET = "clock_token"
PYTHON_IMAGE = "python:3.12.8-slim-bookworm"
"""The container's Python, pinned to a patch release (a digest pins it harder)."""
PACKAGE = "git-orchestrator"
HEALTH_FILE = ".orchestrator/clock-alive"
"""Relative to the checkout, which the container mounts and works in."""
WATCHDOG = "5min"
HEALTH_SECONDS = 300
"""How old the last sign of life may be: five wake-ups of ``serve``'s default minute."""
DEFAULT_VIA = "workflow_dispatch"


@dataclass(frozen=True)
class Machine:
    """Where and how the clock runs."""

    repository: str
    """``owner/name`` on GitHub."""
    ref: str
    """The branch tick.yml is dispatched on."""
    repo: Path
    """The checkout, absolute: ``serve`` reads the schedules and fetches the state branch."""
    token_file: Path
    """Where the token is kept, absolute; only its path is written."""
    via: str
    python: str
    """The interpreter with the orchestrator installed (the unit's ``ExecStart``)."""
    user: str
    """The unit's ``User=``: who owns the checkout."""
    uid_gid: str
    """The container's ``user:`` (``uid:gid``), so its git writes stay the owner's."""
    version: str
    api_url: str | None = None
    """``GITHUB_API_URL`` when it is not github.com's (GitHub Enterprise Server)."""

    def serve_args(self) -> list[str]:
        via = [] if self.via == DEFAULT_VIA else ["--clock-via", self.via]
        return ["serve", "--executor", "github", "--clock-only", *via]

    def environment(self, token_path: str) -> dict[str, str]:
        found = {"GITHUB_REPOSITORY": self.repository, "ORCHESTRATOR_DISPATCH_REF": self.ref,
                 TOKEN_FILE_VARIABLE: token_path}
        if self.api_url:
            found["GITHUB_API_URL"] = self.api_url
        return found


# --------------------------------------------------------------------------- systemd


def systemd_word(text: str) -> str:
    """One word of a unit's command line or list: ``%`` doubled (specifiers), quoted
    when it holds a space, a quote or a backslash."""
    text = text.replace("%", "%%")
    if not any(c in text for c in ' \t"\\'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_path(path: Path) -> str:
    """A path as ``WorkingDirectory=`` and ``LoadCredential=`` take it: whole, never
    quoted (a quote would be read as part of it), ``%`` doubled."""
    return str(path).replace("%", "%%")


_HARDENING = """\
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictSUIDSGID=yes
RestrictRealtime=yes
RestrictNamespaces=yes
LockPersonality=yes
SystemCallArchitectures=native
CapabilityBoundingSet=
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
UMask=0077
"""


def systemd_unit(machine: Machine) -> str:
    """The service: ``serve --clock-only`` as the checkout's owner, restarted always,
    restarted too when it stops beating for :data:`WATCHDOG`."""
    command = [machine.python, "-m", "orchestrator", "--repo", str(machine.repo),
               *machine.serve_args()]
    env = machine.environment("")
    words = " ".join([*(systemd_word(f"{k}={v}") for k, v in env.items()
                        if k != TOKEN_FILE_VARIABLE),
                      f"{TOKEN_FILE_VARIABLE}=%d/{CREDENTIAL}"])  # %d: its credentials
    return f"""\
# Written by `orchestrator clock setup --kind systemd`: the external clock of
# {machine.repository}. It dispatches tick.yml at each slot; systemd.md says how to install it.
[Unit]
Description=orchestrator external clock for {machine.repository}
Wants=network-online.target
After=network-online.target

[Service]
Type=notify
ExecStart={" ".join(systemd_word(w) for w in command)}
User={systemd_word(machine.user)}
WorkingDirectory={systemd_path(machine.repo)}
Environment={words}
# The token stays in its file: systemd copies it to a folder only this service reads.
LoadCredential={CREDENTIAL}:{systemd_path(machine.token_file)}
Restart=always
RestartSec=10
WatchdogSec={WATCHDOG}
TimeoutStartSec=2min
StandardOutput=journal
StandardError=journal
SyslogIdentifier=orchestrator-clock
# git fetches the state branch into the checkout: the one place it writes.
ReadWritePaths={systemd_word(str(machine.repo))}
{_HARDENING}
[Install]
WantedBy=multi-user.target
"""


# --------------------------------------------------------------------------- compose


def compose_command(machine: Machine) -> list[str]:
    return ["orchestrator", *machine.serve_args(), "--health-file", HEALTH_FILE]


def health_command() -> list[str]:
    """The container's health check: the instant in the health file is younger than the
    limit. The instant serve wrote, not the file's mtime: a volume's mtime comes from
    another clock (a host, a network file system). No file, or no instant in it, fails."""
    probe = (f"import sys, time, datetime as d; sys.exit(time.time() - d.datetime."
             f"fromisoformat(open({HEALTH_FILE!r}).read().strip()).timestamp() "
             f"> {HEALTH_SECONDS})")
    return ["CMD", "python", "-c", probe]


def _q(value: object) -> str:
    """A YAML scalar or flow sequence: JSON is valid YAML."""
    return json.dumps(value)


def compose_file(machine: Machine) -> str:
    """The compose file: an image built from a pinned Python with the running version
    installed, the checkout mounted, the token a secret."""
    env = machine.environment(f"/run/secrets/{SECRET}")
    env["HOME"] = "/tmp"  # git wants a home; the root file system is read-only
    environment = "".join(f"      {k}: {_q(v)}\n" for k, v in env.items())
    return f"""\
# Written by `orchestrator clock setup --kind compose`: the external clock of
# {machine.repository}. It dispatches tick.yml at each slot; compose.md says how to start it.
name: orchestrator-clock
services:
  clock:
    build:
      context: .
      dockerfile_inline: |
        FROM {PYTHON_IMAGE}
        RUN apt-get update && apt-get install -y --no-install-recommends git \\
            && rm -rf /var/lib/apt/lists/*
        RUN pip install --no-cache-dir {PACKAGE}=={machine.version}
    image: {_q(f"orchestrator-clock:{machine.version}")}
    command: {_q(compose_command(machine))}
    working_dir: /repo
    user: {_q(machine.uid_gid)}
    environment:
{environment}    volumes:
      - {_q(f"{machine.repo}:/repo")}
    secrets:
      - {SECRET}
    restart: unless-stopped
    healthcheck:
      test: {_q(health_command())}
      interval: 60s
      timeout: 10s
      start_period: 120s
      retries: 3
    logging:
      driver: json-file
      options:
        max-size: "10m"
        max-file: "3"
    read_only: true
    tmpfs:
      - /tmp
    cap_drop:
      - ALL
    security_opt:
      - "no-new-privileges:true"
secrets:
  {SECRET}:
    file: {_q(str(machine.token_file))}
"""
