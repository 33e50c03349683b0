"""The tick reports its next due moment (real git, local executor): in ``--json``, in
its summary lines, and after a retry is scheduled, the retry's back-off end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.gitrepo import clone, make_origin

FAILING = {"cron": "0 7 * * *", "tracks": [
    {"name": "flaky", "run": "exit 1", "max_attempts": 2, "retry_backoff_seconds": 600}]}


def cli(repo: Path, work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "--repo", str(repo), *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ORCHESTRATOR_WORK_DIR": str(work)})
    assert proc.returncode == 0, proc.stderr
    return proc


def test_the_next_due_moment_is_the_slot_then_the_retry(tmp_path: Path) -> None:
    repo = clone(make_origin(tmp_path, {"daily": FAILING}), tmp_path / "repo")
    work = tmp_path / "work"
    first = json.loads(cli(repo, work, "tick", "--now", "2026-12-01T06:50:00Z",
                           "--json").stdout)
    assert first["next_wake"] == {"at": "2026-12-01T07:00:00Z",
                                  "reason": "daily: slot 2026-12-01T07:00Z"}
    text = cli(repo, work, "tick", "--now", "2026-12-01T07:00:00Z").stdout
    assert "daily--20261201T0700Z: fired slot" in text
    # after the slot: the run's deadline (the track's timeout counts once it is seen
    # started), then tomorrow's slot
    assert text.splitlines()[-1] == ("  next due 2026-12-01T11:00:00Z (in 4 h 0 min): "
                                     "daily--20261201T0700Z: run deadline")
    # the attempt exits 1; once a tick sees it, the retry is due after its back-off
    for _ in range(100):
        if (work / "daily--20261201T0700Z--flaky--1" / "status.json").exists() and json.loads(
                (work / "daily--20261201T0700Z--flaky--1" / "status.json").read_text()
        ).get("state") not in ("queued", "running"):
            break
        time.sleep(0.1)
    seen = json.loads(cli(repo, work, "tick", "--now", "2026-12-01T07:02:00Z",
                          "--json").stdout)
    assert seen["next_wake"] == {"at": "2026-12-01T07:12:00Z",
                                 "reason": "daily--20261201T0700Z: flaky retry"}
