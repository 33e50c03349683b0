"""Orchestrator credentials: kept out of track commands, and out of what tracks write.

A track is arbitrary code, and what it prints ends up in committed records, the brief
(which GitHub Pages may publish) and the job summary. So:

- a track command gets no orchestrator credential in its environment unless its
  schedule names it in the track's ``credentials`` field (:func:`track_environment`);
- every text taken from a track (its result, its error and stderr tail, a report's
  message) passes :func:`redactor` before it is committed or printed, and so does every
  text a notification sends out; a redactor cleans the text first
  (:func:`orchestrator.support.text.clean`), so an escape code inside a token hides
  nothing;
- a webhook URL's path and query are secrets in their own right: a receiver that
  refuses a post may quote the path it was sent to;
- what the orchestrator sets in its own environment (:mod:`orchestrator.support.process`) is
  not passed on either: a track's environment is its user's.
"""

from __future__ import annotations

import base64
import functools
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from . import process
from .text import clean

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
    """A redactor of every credential value in ``env`` (its Basic-auth forms, and a
    URL's path and query)."""
    secrets: list[str] = []
    for name in credential_names(env):
        value = env[name]
        if len(value) < MIN_SECRET_LENGTH:
            continue
        secrets.append(value)
        secrets.extend(url_parts(value))
        for user in ("x-access-token", "git"):
            secrets.append(base64.b64encode(f"{user}:{value}".encode()).decode())
    return Redactor(secrets)


def environment_redactor() -> Redactor:
    """A redactor of the credentials in this process's environment as it is now (built
    once per set of values: a brief asks for it for every value it shows)."""
    return _redactor_of(tuple((name, os.environ[name]) for name in credential_names(os.environ)))


@functools.lru_cache(maxsize=8)
def _redactor_of(pairs: tuple[tuple[str, str], ...]) -> Redactor:
    return redactor(dict(pairs))


SEGMENT_LENGTH = 16
"""A path segment or query value this long is taken for a key of its own (Slack's
last 24 characters); shorter ones (``services``, ``hooks``) are words."""


def url_parts(value: str) -> list[str]:
    """The secret parts of ``value`` when it is an http(s) URL: its path and query,
    each alone and together, and their long segments, as sent and decoded."""
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return []
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return []
    found = set(_parts(parts.path, parts.query))
    found |= {unquote(part) for part in found}
    return sorted(part for part in found if len(part) >= MIN_SECRET_LENGTH)


def _parts(path: str, query: str) -> Iterator[str]:
    yield path
    yield query
    if query:
        yield f"{path}?{query}"
    yield path.strip("/")
    for segment in re.split(r"[/&=]", f"{path}&{query}"):
        if len(segment) >= SEGMENT_LENGTH:
            yield segment


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
        """Redact ``secret`` too, and its path and query when it is a URL."""
        if secret:
            added = {*self._secrets, secret, *url_parts(secret)}
            self._secrets = sorted(added, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        """``text`` cleaned (:func:`~orchestrator.support.text.clean`), then redacted:
        each secret, then a secret's end that starts the text or its start that ends
        it (what a window read from a file's middle may hold), then token shapes."""
        text = _without(clean(text), self._secrets)
        text = TOKEN_SHAPES.sub("***", text)
        # user:password@ in any URL that slipped through
        return _USERINFO.sub(r"\1***@", text)


_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/@\s]+@")


def _without(text: str, secrets: list[str]) -> str:
    """``text`` with every character that any secret covers replaced, each run by one
    ``***``: secrets may overlap, so none is replaced before all are found."""
    spans = sorted((start, end) for secret in secrets
                   for start, end in _spans(text, secret) if end > start)
    kept, at = [], -1
    for start, end in spans:
        if start > at:  # a new run; one that overlaps or touches the last extends it
            kept.append(text[max(at, 0):start] + "***")
        at = max(at, end)
    return "".join(kept) + text[max(at, 0):]


def _spans(text: str, secret: str) -> Iterator[tuple[int, int]]:
    """Where ``secret`` is in ``text``: each whole one, then its pieces at the edges."""
    at = text.find(secret)
    while at != -1:
        yield at, at + len(secret)
        at = text.find(secret, at + 1)
    yield from _edges(text, secret)


def _edges(text: str, secret: str) -> Iterator[tuple[int, int]]:
    """``secret``'s end starting ``text`` and its start ending it, of
    :data:`MIN_SECRET_LENGTH` characters or more: what a window read from a file's
    middle, or a read stopped at a limit, may hold."""
    edge, sizes = MIN_SECRET_LENGTH, range(len(secret) - 1, MIN_SECRET_LENGTH - 1, -1)
    start, end = len(text) - len(text.lstrip()), len(text.rstrip())  # blanks around
    if end - start < edge:
        return
    if text[start:start + edge] in secret:  # the quick test: most texts fail it
        head = next((k for k in sizes if text.startswith(secret[-k:], start)), 0)
        yield start, start + head
    if text[end - edge:end] in secret:
        tail = next((k for k in sizes if text.endswith(secret[:k], 0, end)), 0)
        yield end - tail, end
