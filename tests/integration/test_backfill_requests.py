"""Backfill requests with the real CLI and real git: a request is known by what it asks,
so a second backfill by the same person at the same instant is its own request, and a
request the tick did not plan is never a quiet success."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.commands import _operate
from orchestrator.errors import UserError
from orchestrator.planner import BackfillRequest
from orchestrator.state import layout
from orchestrator.state.records import Act
from orchestrator.tick.result import TickResult
from tests.builders import spec_data
from tests.drive import cli, cli_tick, finished, launches, read_state, wait_until
from tests.gitrepo import clone, make_origin

NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)


def stamp(at: datetime) -> str:
    return f"{at:%Y-%m-%dT%H:%M:%SZ}"


def backfill(repo: Path, work: Path, first: int, last: int) -> tuple[int, str]:
    """``backfill nightly`` of December's days ``first`` to ``last``, by alice at NOW."""
    proc = cli(repo, "backfill", "nightly", "--from", f"2026-12-{first:02}T00:00:00Z",
               "--to", f"2026-12-{last:02}T23:59:00Z", "--by", "alice", "--now",
               stamp(NOW), work=work)
    return proc.returncode, proc.stdout + proc.stderr


def test_a_second_backfill_at_the_same_instant_is_its_own_request(tmp_path: Path) -> None:
    flag = tmp_path / "go"
    wait = f"while [ ! -f {flag} ]; do sleep 0.05; done"  # each run holds until the flag
    origin = make_origin(tmp_path, {"nightly": spec_data(tracks=["a"], run=wait)})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    assert cli_tick(repo, stamp(NOW - timedelta(minutes=1)), work=work).returncode == 0
    code, out = backfill(repo, work, 1, 2)
    assert code == 0 and "nightly: backfill of 2 slot(s)" in out, out
    code, out = backfill(repo, work, 4, 5)  # while the 2nd slot of the first still waits
    assert code == 0 and "nightly: backfill of 3 slot(s)" in out, out
    cursor = read_state(repo)[0].cursors["nightly"]
    assert cursor.backfill is not None
    assert [s.day for s in cursor.backfill.slots] == [2, 4, 5]
    # the same request again is known as one: nothing changes
    code, out = backfill(repo, work, 4, 5)
    assert code == 0 and "already planned, 3 slot(s) still to fire" in out, out
    flag.touch()
    now = NOW
    for _ in range(8):
        keys = launches(work)
        wait_until(lambda keys=keys: all(finished(work, k) for k in keys))
        now += timedelta(minutes=1)
        cli_tick(repo, stamp(now), work=work, check=True)
        if read_state(repo)[0].cursors["nightly"].backfill is None:
            break
    state, _ = read_state(repo)
    days = [datetime(2026, 12, d, 7, 0, tzinfo=UTC) for d in (1, 2, 4, 5)]
    runs = [state.runs.get(layout.run_id_for("nightly", d)) for d in days]
    assert all(r is not None and r.origin == "backfill" for r in runs)


def test_a_request_the_tick_did_not_answer_is_an_error() -> None:
    act = Act(by="alice", at=NOW)
    request = BackfillRequest("nightly", (NOW,), act)
    result = TickResult(now=NOW, executor="local", dry_run=False)
    try:
        _operate.answer(result, request)
    except UserError as exc:
        assert exc.message == "backfill nightly: the request was not planned"
    else:
        raise AssertionError("an unanswered request passed")
