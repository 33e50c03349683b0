"""Signs of life for a supervisor: systemd's notify socket and a health file.

- :meth:`Alive.ready`, :meth:`Alive.beat` and :meth:`Alive.stopping` send ``READY=1``,
  ``WATCHDOG=1`` and ``STOPPING=1`` to ``$NOTIFY_SOCKET`` when systemd set one
  (``Type=notify``, ``WatchdogSec=``); without it they send nothing;
- :meth:`Alive.beat` also writes the instant to the health file, when there is one:
  its age is what a container's health check compares with its limit;
- nothing here raises: a supervisor that cannot be told is no reason to stop working.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from .times import iso


def _address(env: Mapping[str, str]) -> str | None:
    """The notify socket's address; ``@`` starts a name in the abstract namespace."""
    named = env.get("NOTIFY_SOCKET")
    if not named:
        return None
    return "\0" + named[1:] if named.startswith("@") else named


class Alive:
    """Tells systemd (and a health file) that the process works."""

    def __init__(self, env: Mapping[str, str], health_file: Path | None = None) -> None:
        self._address = _address(env)
        self._health_file = health_file

    def _notify(self, message: str) -> None:
        if self._address is None:
            return
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto(message.encode(), self._address)
        except OSError:
            pass  # systemd gone or the socket unwritable: the watchdog will say so

    def ready(self) -> None:
        self._notify("READY=1")

    def stopping(self) -> None:
        self._notify("STOPPING=1")

    def beat(self, now: datetime) -> None:
        """One sign of life: the watchdog's ping, and ``now`` in the health file."""
        self._notify("WATCHDOG=1")
        if self._health_file is None:
            return
        try:
            self._health_file.parent.mkdir(parents=True, exist_ok=True)
            self._health_file.write_text(iso(now) + "\n", encoding="utf-8")
        except OSError:
            pass  # a stale file is the health check's failure to see
