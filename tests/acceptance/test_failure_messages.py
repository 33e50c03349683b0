"""A failing track, as its user sees it: every one-line view keeps the point of the
failure (the last line of the command's stderr), and ``dlq show`` says once how many
attempts were made."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acceptance.cliuser import User, new_repository

RUN = "bad--20261201T0900Z"
POINT = "ValueError: column 'price' is missing"
FAILING = f"echo 'reading input.csv' >&2; echo \"{POINT}\" >&2; echo >&2; exit 2"


def _schedule(user: User) -> None:
    (user.cwd / "schedules" / "bad.json").write_text(json.dumps({
        "cron": "0 9 * * *",
        "tracks": [{"name": "load", "run": FAILING, "max_attempts": 2,
                    "retry_backoff_seconds": 60}],
    }) + "\n")


def test_one_line_views_end_with_the_last_line_of_stderr(tmp_path: Path) -> None:
    user, _ = new_repository(tmp_path)
    user.run("schedules", "remove", "nightly")
    _schedule(user)
    user.tick("2026-12-01T09:01:00Z")
    failed = user.tick("2026-12-01T09:02:00Z")
    expected = f"local: exit code 2; stderr ends with: {POINT}"
    # the tick's log: what serve and demo print, one line per thing decided
    assert any(line.endswith(f"({expected})") for line in failed["log"]), failed["log"]
    user.tick("2026-12-01T09:04:00Z")  # attempt 2, after the back-off
    parked = user.tick("2026-12-01T09:05:00Z")
    assert f"{RUN}: load: parked in the dead letter queue (failed after 2 attempt(s))" \
        in parked["log"]

    polls = [json.loads(line)
             for line in user.state_file(f"state/runs/{RUN}/polls.jsonl").splitlines()]
    assert sum(expected in change for p in polls for change in p["changes"]) == 2

    shown = user.run("dlq", "show", f"{RUN}--load").stdout.splitlines()
    assert shown[0] == f"{RUN}--load: failed after 2 attempt(s)"
    history = [line for line in shown if "-> failed" in line]
    assert len(history) == 2 and all(line.endswith(expected) for line in history), shown
    # the error log keeps the whole tail, each entry's lines under its "!"
    assert sum(line.startswith("  ! ") and line.endswith("stderr ends with:")
               for line in shown) == 2
    assert shown.count(f"      {POINT}") == 2

    runs = user.run("runs", "show", RUN).stdout
    assert "track load: failed (attempt 2/2)" in runs
