"""The issues part of the fake GitHub: issues, their comments and labels.

Served by :class:`~tests.fakes.github.FakeGitHub` under the same checks as the Actions
endpoints (every exchange against GitHub's description, ``tests/data/github-openapi``):

- ``POST /repos/{o}/{r}/issues`` (``201``): ``title`` required; ``labels`` as names
  or objects, created when the repository has none of that name (GitHub creates a
  label a new issue names, with colour ``ededed``: github/docs#35718); a label name
  over 50 characters, a ``body`` over 65,536 characters is ``422 Validation Failed``
  (GitHub: ``name is too long (maximum is 50 characters)``, github/docs#32156;
  ``body is too long (maximum is 65536 characters)``, PyGithub/PyGithub#1906);
- ``GET /repos/{o}/{r}/issues``: ``state`` (``open`` by default, ``closed``, ``all``),
  ``labels`` (comma-separated, an issue must carry all), ``sort=created``,
  ``direction``, paginated with ``Link``; pull requests would be listed too (GitHub
  lists them as issues; the fake has none);
- ``GET`` and ``PATCH /repos/{o}/{r}/issues/{n}`` (``state``, ``state_reason``,
  ``title``, ``body``, ``labels``), ``404`` for an issue that does not exist;
- ``POST`` (``201``) and ``GET /repos/{o}/{r}/issues/{n}/comments`` (oldest first,
  paginated); commenting on a closed issue is allowed, as on GitHub.

``issues_write = False`` answers every write ``403 Resource not accessible by
integration``, as GitHub answers a ``GITHUB_TOKEN`` without ``issues: write``
(jayamanikharyono/airflow-dag-action#23); ``issues_enabled = False`` answers ``410``
(the issues API's documented answer when issues are disabled). :meth:`Issues.close`
closes an issue as a person would in the web interface.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.fakes import github_payloads as payloads

LABEL_LIMIT = 50
BODY_LIMIT = 65_536
_ISSUES_PATH = re.compile(r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/issues(?P<rest>(/.*)?)")
DOCS = "https://docs.github.com/rest/issues/issues"


@dataclass
class FakeComment:
    id: int
    issue: int
    body: str
    created_at: datetime

    def to_json(self, base: str, repository: str) -> dict[str, Any]:
        api = f"{base}/repos/{repository}"
        return {
            "id": self.id, "node_id": f"IC_kwDO{self.id}",
            "url": f"{api}/issues/comments/{self.id}",
            "html_url": f"{base}/html/{repository}/issues/{self.issue}#issuecomment-{self.id}",
            "issue_url": f"{api}/issues/{self.issue}", "body": self.body,
            "user": payloads.user(base, "github-actions[bot]"),
            "created_at": payloads.iso(self.created_at),
            "updated_at": payloads.iso(self.created_at),
            "author_association": "NONE",
        }


@dataclass
class FakeIssue:
    number: int
    title: str
    body: str | None
    labels: list[str]
    created_at: datetime
    state: str = "open"
    state_reason: str | None = None
    closed_at: datetime | None = None
    updated_at: datetime | None = None
    comments: list[FakeComment] = field(default_factory=list)
    closed_by_hand: bool = False

    def to_json(self, base: str, repository: str, labels: dict[str, dict[str, Any]]
                ) -> dict[str, Any]:
        api = f"{base}/repos/{repository}/issues/{self.number}"
        bot = payloads.user(base, "github-actions[bot]")
        return {
            "id": 3_000_000_000 + self.number, "node_id": f"I_kwDO{self.number}",
            "url": api, "repository_url": f"{base}/repos/{repository}",
            "labels_url": f"{api}/labels{{/name}}", "comments_url": f"{api}/comments",
            "events_url": f"{api}/events", "html_url": f"{base}/html/{repository}/issues/"
                                                       f"{self.number}",
            "number": self.number, "state": self.state, "state_reason": self.state_reason,
            "title": self.title, "body": self.body, "user": bot,
            "labels": [labels[name] for name in self.labels],
            "assignee": None, "assignees": [], "milestone": None, "locked": False,
            "active_lock_reason": None, "comments": len(self.comments),
            "closed_at": payloads.iso(self.closed_at),
            "created_at": payloads.iso(self.created_at),
            "updated_at": payloads.iso(self.updated_at or self.created_at),
            "author_association": "NONE",
        }


def route(method: str, path: str) -> tuple[str, dict[str, str] | None]:
    """The issues endpoint ``method path`` calls, with its path parts, or ``other``."""
    found = _ISSUES_PATH.fullmatch(path)
    if found is None:
        return "other", None
    parts = found["rest"].strip("/").split("/") if found["rest"].strip("/") else []
    names = {"owner": found["owner"], "repo": found["repo"]}
    if not parts and method in ("GET", "POST"):
        return "issues", names
    if parts and parts[0].isdigit():
        names["number"] = parts[0]
        if len(parts) == 1 and method in ("GET", "PATCH"):
            return "issue", names
        if parts[1:] == ["comments"] and method in ("GET", "POST"):
            return "comments", names
    return "other", names


class Issues:
    """The fake repository's issues; :class:`~tests.fakes.github.FakeGitHub` owns one."""

    def __init__(self) -> None:
        self.issues: dict[int, FakeIssue] = {}
        self.labels: dict[str, dict[str, Any]] = {}
        self.issues_write = True
        self.issues_enabled = True
        self._comment_ids = iter(range(1_000_000_001, 2_000_000_000))

    # ------------------------------------------------------------------ controls

    def close(self, number: int, at: datetime) -> None:
        """Close an issue by hand, as a person in the web interface would."""
        issue = self.issues[number]
        issue.state, issue.state_reason, issue.closed_at = "closed", "completed", at
        issue.updated_at, issue.closed_by_hand = at, True

    def titled(self, title: str) -> list[FakeIssue]:
        return [i for i in self.issues.values() if i.title == title]

    # ------------------------------------------------------------------ HTTP

    def answer(self, endpoint: str, method: str, names: dict[str, str], query: dict[str, str],
               body: Any, base: str, repository: str, now: datetime,
               page: Any) -> tuple[int, Any, str | None]:
        """(status, JSON body, Link header) for one request; ``page`` is the fake's
        paginator (items, query) -> (chunk, link)."""
        if not self.issues_enabled:
            return 410, {"message": "Issues are disabled for this repo",
                         "documentation_url": DOCS}, None
        write = method in ("POST", "PATCH")
        if write and not self.issues_write:
            return 403, {"message": "Resource not accessible by integration",
                         "documentation_url": f"{DOCS}#create-an-issue"}, None
        if write and not isinstance(body, dict):
            return 400, {"message": "Problems parsing JSON", "documentation_url": DOCS}, None
        if endpoint == "issues":
            if method == "POST":
                return self._create(body, base, repository, now)
            return self._list(query, base, repository, page)
        issue = self.issues.get(int(names["number"]))
        if issue is None:
            return 404, {"message": "Not Found", "documentation_url": DOCS}, None
        if endpoint == "issue":
            if method == "PATCH":
                return self._update(issue, body, base, repository, now)
            return 200, issue.to_json(base, repository, self.labels), None
        if method == "POST":
            return self._comment(issue, body, base, repository, now)
        chunk, link = page([c.to_json(base, repository) for c in issue.comments], query)
        return 200, chunk, link

    def _invalid(self, resource: str, field_name: str, message: str) -> tuple[int, Any, None]:
        return 422, {"message": "Validation Failed", "documentation_url": DOCS,
                     "errors": [{"resource": resource, "code": "custom", "field": field_name,
                                 "message": message}]}, None

    def _label_names(self, given: Any) -> list[str] | tuple[int, Any, None]:
        names = []
        for label in given or []:
            name = label.get("name") if isinstance(label, dict) else label
            if not isinstance(name, str) or not name:
                return self._invalid("Label", "name", "name is missing")
            if len(name) > LABEL_LIMIT:
                return self._invalid("Label", "name",
                                     f"name is too long (maximum is {LABEL_LIMIT} characters)")
            names.append(name)
        return names

    def _ensure_labels(self, names: list[str], base: str, repository: str) -> None:
        for name in names:
            if name not in self.labels:
                ident = 208045946 + len(self.labels)
                self.labels[name] = {
                    "id": ident, "node_id": f"LA_kwDO{ident}", "name": name,
                    "url": f"{base}/repos/{repository}/labels/{name}", "description": None,
                    "color": "ededed", "default": False}

    def _create(self, body: dict[str, Any], base: str, repository: str,
                now: datetime) -> tuple[int, Any, str | None]:
        title = body.get("title")
        if not isinstance(title, (str, int)) or title == "":
            return self._invalid("Issue", "title", "title wasn't supplied")
        text = body.get("body")
        if isinstance(text, str) and len(text) > BODY_LIMIT:
            return self._invalid("Issue", "body",
                                 f"body is too long (maximum is {BODY_LIMIT} characters)")
        names = self._label_names(body.get("labels"))
        if isinstance(names, tuple):
            return names
        self._ensure_labels(names, base, repository)
        issue = FakeIssue(number=len(self.issues) + 1, title=str(title),
                          body=text if isinstance(text, str) else None,
                          labels=list(dict.fromkeys(names)), created_at=now)
        self.issues[issue.number] = issue
        return 201, issue.to_json(base, repository, self.labels), None

    def _list(self, query: dict[str, str], base: str, repository: str,
              page: Any) -> tuple[int, Any, str | None]:
        state = query.get("state", "open")
        if state not in ("open", "closed", "all"):
            return self._invalid("Issue", "state", f"invalid state {state!r}")
        wanted = [n for n in query.get("labels", "").split(",") if n]
        found = [i for i in self.issues.values()
                 if (state == "all" or i.state == state)
                 and all(name in i.labels for name in wanted)]
        found.sort(key=lambda i: (i.created_at, i.number),
                   reverse=query.get("direction", "desc") == "desc")
        chunk, link = page([i.to_json(base, repository, self.labels) for i in found], query)
        return 200, chunk, link

    def _update(self, issue: FakeIssue, body: dict[str, Any], base: str, repository: str,
                now: datetime) -> tuple[int, Any, str | None]:
        state = body.get("state")
        if state is not None and state not in ("open", "closed"):
            return self._invalid("Issue", "state", f"invalid state {state!r}")
        if "labels" in body:
            names = self._label_names(body.get("labels"))
            if isinstance(names, tuple):
                return names
            self._ensure_labels(names, base, repository)
            issue.labels = names
        if isinstance(body.get("title"), str):
            issue.title = body["title"]
        if isinstance(body.get("body"), str):
            issue.body = body["body"]
        if state is not None and state != issue.state:
            issue.state = state
            issue.closed_at = now if state == "closed" else None
            issue.state_reason = (body.get("state_reason") or "completed") \
                if state == "closed" else "reopened"
        issue.updated_at = now
        return 200, issue.to_json(base, repository, self.labels), None

    def _comment(self, issue: FakeIssue, body: dict[str, Any], base: str, repository: str,
                 now: datetime) -> tuple[int, Any, str | None]:
        text = body.get("body")
        if not isinstance(text, str) or not text:
            return self._invalid("IssueComment", "body", "body wasn't supplied")
        if len(text) > BODY_LIMIT:
            return self._invalid("IssueComment", "body",
                                 f"Body is too long (maximum is {BODY_LIMIT} characters)")
        comment = FakeComment(next(self._comment_ids), issue.number, text, now)
        issue.comments.append(comment)
        issue.updated_at = now
        return 201, comment.to_json(base, repository), None
