"""A repository's issues and comments through the REST client: the paths, the pages
and what each answer means.

- Creating an issue or a comment is never retried: twice is worse than missing one.
  A read is retried as the client retries any.
- A token GitHub refuses the issues to (``403 Resource not accessible``), or a
  repository with issues disabled (``410`` on create), raises :class:`IssuesRefused`:
  the caller stops trying for the rest of its work. Any other refusal is a
  :class:`GitHubError` for that call alone.
- Pull requests are not issues here: the listing leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .client import GitHubClient, GitHubError, message

NO_PERMISSION = ("the token cannot write issues: give the job `issues: write` "
                 "(docs/how-to/notifications.md); nothing else is affected")

Timeout = Callable[[str, str], float]
"""Seconds a call may take, given its method and path; it raises :class:`GitHubError`
when no time is left."""


class IssuesRefused(Exception):
    """GitHub refused the repository's issues to this token: the rest is not tried."""


class IssuesAPI:
    """The issues of ``repository`` (``owner/name``, checked by the caller)."""

    def __init__(self, client: GitHubClient, repository: str) -> None:
        self.client = client
        self.repository = repository

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, *,
             params: dict[str, str] | None = None, expect: int = 200,
             timeout: float) -> Any:
        """``method`` on ``repos/<repository>/<path>``: the answer's JSON when its status
        is ``expect``, else :class:`IssuesRefused` or :class:`GitHubError`."""
        response = self.client.request(method, f"repos/{self.repository}/{path}",
                                       params=params, body=body, retry=method == "GET",
                                       timeout=timeout)
        if response.status_code == expect:
            try:
                return response.json()
            except ValueError:
                raise GitHubError(f"{method} {path}: the answer is not JSON") from None
        said = message(response)
        if response.status_code == 403 and "not accessible" in said.lower():
            raise IssuesRefused(f"{NO_PERMISSION} ({response.status_code} {said})")
        if response.status_code == 410 and method == "POST" and path == "issues":
            raise IssuesRefused(f"issues are disabled in {self.repository} (410 {said})")
        raise GitHubError(f"{method} {path}: {response.status_code} {said}".strip(),
                          status=response.status_code)

    def listed(self, query: dict[str, str], path: str, *, pages: int,
               timeout: Timeout) -> list[dict[str, Any]]:
        """The issues (or comments) of ``path`` matching ``query``, up to ``pages`` pages
        of 100, pull requests left out."""
        items: list[dict[str, Any]] = []
        for page in range(1, pages + 1):
            data = self.call("GET", path, params={**query, "per_page": "100",
                                                  "page": str(page)},
                             timeout=timeout("GET", path))
            if not isinstance(data, list):
                raise GitHubError(f"GET {path}: unexpected answer (no list)")
            items += [i for i in data if _an_issue(i)]
            if len(data) < 100:
                break
        return items


def _an_issue(entry: object) -> bool:
    """An issue or a comment as listed: an object with a whole number, no pull request."""
    return isinstance(entry, dict) and "pull_request" not in entry and isinstance(
        entry.get("number", 0), int)
