"""A leg's outcome file, written with ``orchestrator outcome`` and recorded by the tick of
its run (``tick --run RUN --outcomes DIR``), as track.yml's legs and fan-in job do on
GitHub. Here a user does both by hand for a track the local executor started."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acceptance.cliuser import User

RUN = "gate--20261201T0900Z"


def test_an_outcome_file_recorded_by_the_run_s_own_tick(tmp_path: Path,
                                                          scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    go = tmp_path / "go"
    wait_for_go = f"for i in $(seq 600); do [ -e '{go}' ] && exit 0; sleep 0.1; done; exit 1"
    (user.cwd / "schedules" / "gate.json").write_text(json.dumps({
        "cron": "0 9 * * *", "tracks": [{"name": "approve", "run": wait_for_go}]}) + "\n")
    user.run("cron-sync")
    fired = user.json("tick", "--now", "2026-12-01T09:01:00Z", "--json")
    assert fired["dispatched"] == [f"{RUN}--approve--1"]

    outcomes = tmp_path / "outcomes"
    stderr = tmp_path / "stderr.log"
    stderr.write_text("warming up\nTimeoutError: the approver did not answer\n")
    written = user.run("outcome", "--run", RUN, "--track", "approve", "--attempt", "1",
                       "--exit-code", "124", "--started-at", "2026-12-01T09:01:05Z",
                       "--finished-at", "2026-12-01T09:03:05Z", "--timeout-minutes", "2",
                       "--stderr", str(stderr), "--output", str(outcomes)).stdout
    path = outcomes / f"{RUN}--approve--1.json"
    assert written.strip() == f"{RUN}--approve--1: tapped_out -> {path}"
    # a stray file beside it is named and skipped; the good one is still recorded
    (outcomes / "notes.json").write_text("{}")

    result = user.json("tick", "--now", "2026-12-01T09:04:00Z", "--run", RUN,
                       "--outcomes", str(outcomes), "--json")
    assert result["finished"] == [RUN] and result["run"] == RUN
    assert any(line.startswith("outcome notes.json skipped:") for line in result["log"])
    shown = user.run("runs", "show", RUN).stdout
    assert shown.startswith(f"{RUN}  failed")
    assert "tapped_out" in shown
    assert "TimeoutError: the approver did not answer" in user.run("render", RUN).stdout
    go.touch()  # the waiting process may end now

    # --outcomes belongs to one run's tick
    misuse = user.run("tick", "--outcomes", str(outcomes), expect=2)
    assert "--outcomes needs --run" in misuse.stderr
