"""The objects the fake GitHub answers with, shaped as GitHub's description requires.

Every field GitHub's description marks as required is present, with a value of the
documented type; what the executor reads (ids, names, status, conclusion, times,
``display_title``, ``run_attempt``) is the fake's state, the rest is plausible filler.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

SHA = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def user(base: str, login: str) -> dict[str, Any]:
    api = f"{base}/users/{login}"
    return {
        "login": login, "id": 41898282, "node_id": "MDM6Qm90NDE4OTgyODI=",
        "avatar_url": f"{base}/avatars/{login}", "gravatar_id": "", "url": api,
        "html_url": f"{base}/html/{login}", "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}", "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions", "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos", "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events", "type": "Bot", "site_admin": False,
    }


_REPO_URLS = (
    "archive_url", "assignees_url", "blobs_url", "branches_url", "collaborators_url",
    "comments_url", "commits_url", "compare_url", "contents_url", "contributors_url",
    "deployments_url", "downloads_url", "events_url", "forks_url", "git_commits_url",
    "git_refs_url", "git_tags_url", "hooks_url", "issue_comment_url", "issue_events_url",
    "issues_url", "keys_url", "labels_url", "languages_url", "merges_url", "milestones_url",
    "notifications_url", "pulls_url", "releases_url", "stargazers_url", "statuses_url",
    "subscribers_url", "subscription_url", "tags_url", "teams_url", "trees_url",
)


def repository(base: str, full_name: str) -> dict[str, Any]:
    owner, name = full_name.split("/", 1)
    api = f"{base}/repos/{full_name}"
    return {
        "id": 123456789, "node_id": "R_kgDOB1234567", "name": name, "full_name": full_name,
        "owner": user(base, owner), "private": True, "html_url": f"{base}/html/{full_name}",
        "description": None, "fork": False, "url": api,
        **{key: f"{api}/{key.removesuffix('_url')}" for key in _REPO_URLS},
    }


def head_commit(at: datetime) -> dict[str, Any]:
    person = {"name": "github-actions[bot]",
              "email": "41898282+github-actions[bot]@users.noreply.github.com"}
    return {"id": SHA, "tree_id": SHA[::-1], "message": "Add schedules",
            "timestamp": iso(at), "author": person, "committer": person}


def annotation(base: str, full_name: str, message: str) -> dict[str, Any]:
    """A check run annotation as GitHub writes one on a cancelled job (at ``.github``,
    line 1, with no column: it belongs to no file of the repository)."""
    return {"path": ".github", "blob_href": f"{base}/html/{full_name}/blob/{SHA}/.github",
            "start_line": 1, "end_line": 1, "start_column": None, "end_column": None,
            "annotation_level": "failure", "title": "", "message": message,
            "raw_details": ""}


def workflow(base: str, full_name: str, number: int, path: str, name: str,
             state: str) -> dict[str, Any]:
    """A workflow as ``GET /repos/{o}/{r}/actions/workflows/{id}`` answers it."""
    api = f"{base}/repos/{full_name}/actions/workflows/{number}"
    return {"id": number, "node_id": f"W_kwDO{number}", "name": name,
            "path": f".github/workflows/{path}", "state": state,
            "created_at": "2026-01-05T10:00:00Z", "updated_at": "2026-01-05T10:00:00Z",
            "url": api, "html_url": f"{base}/html/{full_name}/actions/workflows/{path}",
            "badge_url": f"{base}/html/{full_name}/workflows/{name}/badge.svg"}
