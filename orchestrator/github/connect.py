"""Where a GitHub call's repository, token and API come from, checked once.

- ``owner/name`` is checked before it becomes part of any request path
  (:func:`valid_repository`).
- The settings are the variables GitHub Actions sets: ``GITHUB_REPOSITORY``,
  ``GITHUB_TOKEN`` (``GH_TOKEN`` is read too) and ``GITHUB_API_URL`` for GitHub
  Enterprise Server; every client of the package reads them here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .client import DEFAULT_API_URL, GitHubClient

_REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/(?!\.\.?$)[A-Za-z0-9_.-]{1,100}")
"""``owner/name`` as GitHub allows them; it becomes part of every request path."""


def valid_repository(name: str) -> bool:
    """Whether ``name`` is ``owner/name`` as GitHub allows them."""
    return bool(_REPO_RE.fullmatch(name or ""))


def token_of(environ: Mapping[str, str]) -> str:
    """The token GitHub Actions hands a job (empty when there is none)."""
    return environ.get("GITHUB_TOKEN") or environ.get("GH_TOKEN") or ""


def api_url_of(environ: Mapping[str, str]) -> str:
    return environ.get("GITHUB_API_URL") or DEFAULT_API_URL


def connect(token: str, environ: Mapping[str, str], *, now: datetime,
            **options: Any) -> GitHubClient:
    """A client of the API ``environ`` names, with ``token``; ``options`` go to
    :class:`~.client.GitHubClient` (time budget, timeout, attempts)."""
    return GitHubClient(token, api_url=api_url_of(environ), now=now, **options)
