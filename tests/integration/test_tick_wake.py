"""The tick reports its next due moment (real git, local executor): in ``--json``, in
its summary lines, and after a retry is scheduled, the retry's back-off end."""

from __future__ import annotations

import json
from pathlib import Path

from tests.drive import cli, finished, wait_until
from tests.gitrepo import clone, make_origin

FAILING = {"cron": "0 7 * * *", "tracks": [
    {"name": "flaky", "run": "exit 1", "max_attempts": 2, "retry_backoff_seconds": 600}]}


def test_the_next_due_moment_is_the_slot_then_the_retry(tmp_path: Path) -> None:
    repo = clone(make_origin(tmp_path, {"daily": FAILING}), tmp_path / "repo")
    work = tmp_path / "work"
    first = json.loads(cli(repo, "tick", "--now", "2026-12-01T06:50:00Z", "--json",
                           work=work, check=True).stdout)
    assert first["next_wake"] == {"at": "2026-12-01T07:00:00Z",
                                  "reason": "daily: slot 2026-12-01T07:00Z"}
    text = cli(repo, "tick", "--now", "2026-12-01T07:00:00Z", work=work, check=True).stdout
    assert "daily--20261201T0700Z: fired slot" in text
    # after the slot: the run's deadline (the track's timeout counts once it is seen
    # started), then tomorrow's slot
    # (a local tick waits for no runner: the summary does not speak of one)
    assert text.splitlines()[-1] == (
        "  next due 2026-12-01T11:00:00Z (in 4 h 0 min): daily--20261201T0700Z: run "
        "deadline")
    assert "runner" not in text
    # the attempt exits 1; once a tick sees it, the retry is due after its back-off
    # (the wait is for that end, however long a loaded machine takes to get there)
    wait_until(lambda: finished(work, "daily--20261201T0700Z--flaky--1"), timeout=120)
    seen = json.loads(cli(repo, "tick", "--now", "2026-12-01T07:02:00Z", "--json",
                          work=work, check=True).stdout)
    assert seen["next_wake"] == {"at": "2026-12-01T07:12:00Z",
                                 "reason": "daily--20261201T0700Z: flaky retry"}
