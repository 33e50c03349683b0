"""Orchestrator credentials: kept out of track commands, and out of what tracks write.

A track is arbitrary code, and what it prints ends up in committed records, the brief
(which GitHub Pages may publish) and the job summary. So:

- a track command gets no orchestrator credential in its environment unless its
  schedule names it in the track's ``credentials`` field (:func:`track_environment`);
- every text taken from a track (its result, its error and stderr tail, a report's
  message) passes :func:`redactor` before it is committed or printed;
- what the orchestrator sets in its own environment (:mod:`orchestrator.support.process`) is
  not passed on either: a track's environment is its user's.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from . import process

CREDENTIALS = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "ORCHESTRATOR_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
)
"""Environment variables that hold a credential of the orchestrator (or of its runner)."""

_LOOKS_SECRET = re.compile(r"^ORCHESTRATOR_.*(TOKEN|SECRET|PASSWORD|KEY)$")

MIN_SECRET_LENGTH = 8
"""Shorter values are not redacted: replacing ``1`` or ``true`` everywhere would
garble every text and protect nothing."""


def credential_names(env: Mapping[str, str]) -> list[str]:
    """The names in ``env`` that hold an orchestrator credential."""
    return sorted(name for name in env if name in CREDENTIALS or _LOOKS_SECRET.match(name))


def track_environment(env: Mapping[str, str], allowed: list[str] | tuple[str, ...] = ()
                      ) -> dict[str, str]:
    """``env`` without the credentials a track did not ask for, nor what the
    orchestrator set for itself."""
    keep = set(allowed)
    drop = {name for name in credential_names(env) if name not in keep}
    return {k: v for k, v in process.given(env).items() if k not in drop}


def redactor(env: Mapping[str, str]) -> Redactor:
    """A redactor of every credential value in ``env`` (and its Basic-auth forms)."""
    secrets: list[str] = []
    for name in credential_names(env):
        value = env[name]
        if len(value) < MIN_SECRET_LENGTH:
            continue
        secrets.append(value)
        for user in ("x-access-token", "git"):
            secrets.append(base64.b64encode(f"{user}:{value}".encode()).decode())
    return Redactor(secrets)


def redact_value(value: Any, redact: Redactor) -> Any:
    """``value`` (a parsed JSON value of bounded depth) with every string redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(v, redact) for v in value]
    if isinstance(value, dict):
        return {redact(str(k)): redact_value(v, redact) for k, v in value.items()}
    return value


class Redactor:
    """Removes secrets (the token, its Basic-auth form, URL passwords) from text."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets = sorted({s for s in (secrets or []) if s}, key=len, reverse=True)

    def add(self, secret: str) -> None:
        if secret:
            self._secrets = sorted({*self._secrets, secret}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        # user:password@ in any URL that slipped through
        return re.sub(r"(\b[a-z][a-z0-9+.-]*://)[^/@\s]+@", r"\1***@", text)
