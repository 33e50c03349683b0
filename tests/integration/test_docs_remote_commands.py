"""The local page's list of the commands that need a git remote is the truth: in a
repository without one, each command it names fails naming the missing remote, and
the commands it leaves out work from the files alone."""

from __future__ import annotations

import re
from pathlib import Path

from tests.acceptance.cliuser import User
from tests.docs import REPO
from tests.gitrepo import git

RUN = "nightly--20261201T0715Z"
# one invocation per command that could read the state branch
PROBES: dict[str, tuple[str, ...]] = {
    "tick": ("tick", "--now", "2026-12-01T07:00Z"),
    "serve": ("serve", "--interval", "0.1"),
    "status": ("status",),
    "runs": ("runs", "list"),
    "dlq": ("dlq", "list"),
    "render": ("render", RUN),
    "report": ("report", "--run", RUN, "--track", "ingest", "--phase", "running"),
    "compact": ("compact", "--keep-days", "30", "--dry-run"),
    "schedules runs": ("schedules", "runs", "nightly"),
    "schedules pause": ("schedules", "pause", "nightly", "--reason", "holiday"),
    "schedules resume": ("schedules", "resume", "nightly", "--reason", "back"),
    "trigger": ("trigger", "nightly", "--reason", "rerun"),
    "backfill": ("backfill", "nightly", "--from", "2026-11-30T00:00Z",
                 "--to", "2026-12-01T00:00Z", "--reason", "gap"),
    "queue": ("queue", "stats"),
    "validate": ("validate",),
    "schedules list": ("schedules", "list"),
    "schedules next": ("schedules", "next", "nightly"),
    "schedules show": ("schedules", "show", "nightly"),
    "estimate": ("estimate",),
}
NO_REMOTE = "no remote named 'origin'"


def documented() -> set[str]:
    """The commands local.md names as needing a remote (the list in parentheses)."""
    page = (REPO / "docs" / "get-started" / "local.md").read_text(encoding="utf-8")
    found = re.search(r"every command that\s+reads or writes state \(([^)]*)\)", page)
    assert found, "local.md lists the commands that need a remote"
    names = set(re.findall(r"`([a-z -]+)`", found.group(1)))
    if "schedules pause/resume" in found.group(1).replace("`", ""):
        names |= {"schedules pause", "schedules resume"}
    return names


def test_the_commands_local_md_says_need_a_remote_are_those_that_do(tmp_path: Path) -> None:
    user = User(tmp_path / "repo")
    user.run("init", str(user.cwd), cwd=tmp_path)
    git("add", ".", cwd=user.cwd)
    git("commit", "--quiet", "-m", "Scaffold", cwd=user.cwd)
    needs = {name for name, args in PROBES.items()
             if NO_REMOTE in user.run(*args, expect=None, timeout=60).stderr}
    assert documented() & set(PROBES) == needs
