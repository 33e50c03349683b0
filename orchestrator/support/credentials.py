"""Orchestrator credentials: kept out of track commands, and out of what tracks write.

A track is arbitrary code, and what it prints ends up in committed records, the brief
(which GitHub Pages may publish) and the job summary. So:

- a track command gets no orchestrator credential in its environment unless its
  schedule names it in the track's ``credentials`` field (:func:`track_environment`);
- every text taken from a track (its result, its error and stderr tail, a report's
  message) passes :func:`redactor` before it is committed or printed, and so does every
  text a notification sends out;
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
_WEBHOOK = re.compile(r"^[A-Z0-9_]*WEBHOOK[A-Z0-9_]*$")
"""A webhook URL is a credential: whoever has it may post to the channel behind it
(``SLACK_WEBHOOK``, ``ORCHESTRATOR_WEBHOOK_URL``)."""

_U = r"\\?_"
"""An underscore, or Markdown's escaped one (a token inside an escaped text)."""
TOKEN_SHAPES = re.compile(
    # GitHub's prefixes (personal, OAuth, user, server, refresh) on [A-Za-z0-9_], up to
    # 255 characters: github.blog/changelog/2021-03-31-authentication-token-format-updates
    rf"\b(?:gh[pousr]{_U}(?:[A-Za-z0-9]|{_U}){{36,255}}"
    rf"|github{_U}pat{_U}(?:[A-Za-z0-9]|{_U}){{22,255}}"  # a fine-grained access token
    r"|xox[abposr]-[A-Za-z0-9-]{10,250})\b"  # Slack's bot, user and app tokens
    r"|https://hooks\.slack\.com/[A-Za-z0-9/_-]+")  # a Slack webhook URL
"""Text shaped like a token, whatever its origin: a track may print a token the
orchestrator never held (its own, or one it came across)."""

MIN_SECRET_LENGTH = 8
"""Shorter values are not redacted: replacing ``1`` or ``true`` everywhere would
garble every text and protect nothing."""


def credential_names(env: Mapping[str, str]) -> list[str]:
    """The names in ``env`` that hold an orchestrator credential."""
    return sorted(name for name in env if is_credential(name))


def is_credential(name: str) -> bool:
    """Whether the environment variable ``name`` holds a credential: one of
    :data:`CREDENTIALS`, ``ORCHESTRATOR_*TOKEN`` (``SECRET``, ``PASSWORD``, ``KEY``), or a
    name with ``WEBHOOK`` in it."""
    return name in CREDENTIALS or bool(_LOOKS_SECRET.match(name) or _WEBHOOK.match(name))


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
    """Removes secrets (the token, its Basic-auth form, URL passwords) and anything
    shaped like a token (:data:`TOKEN_SHAPES`) from text."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets = sorted({s for s in (secrets or []) if s}, key=len, reverse=True)

    def add(self, secret: str) -> None:
        if secret:
            self._secrets = sorted({*self._secrets, secret}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        text = TOKEN_SHAPES.sub("***", text)
        # user:password@ in any URL that slipped through
        return re.sub(r"(\b[a-z][a-z0-9+.-]*://)[^/@\s]+@", r"\1***@", text)
