"""The memo of quiet schedules (``state/quiet.json``): a tick that leaves a schedule
unread until its next slot fires exactly what a tick reading everything fires, says the
same next due moment, rides only on commits made anyway, and never hides a broken file."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.cadence import wake
from orchestrator.commands.context import Config
from orchestrator.commands.tick import executor_factory
from orchestrator.config.files import load_all
from orchestrator.config.repository import Cadence
from orchestrator.config.triggers import for_spec
from orchestrator.state import index as state_index
from orchestrator.state.records import run_id_for
from orchestrator.store import GitStateStore, InMemoryStateStore, StateStore
from orchestrator.tick import memo as quiet
from orchestrator.tick.shell import Tick
from tests.builders import spec_data
from tests.drive import tick
from tests.gitrepo import clone, git, make_origin

BRANCH = "orchestrator-state"
# Saturday evening before the United States leave standard time (2026-03-08 02:00 local):
# New York's 02:30 does not exist that Sunday.
T0 = datetime(2026, 3, 7, 20, 0, tzinfo=UTC)
SPECS = {
    "berlin": spec_data(cron="0 3 * * *", timezone="Europe/Berlin"),
    "new-york": spec_data(cron="30 2 * * *", timezone="America/New_York"),
    "three-hourly": spec_data(cron="15 */3 * * *"),
    "tokyo": spec_data(cron="0 12 * * *", timezone="Asia/Tokyo"),
    "off": spec_data(cron="*/5 * * * *", enabled=False),
    "once": spec_data(cron=None, at="2026-03-08T01:00:00Z"),
}


@pytest.fixture(autouse=True)
def work_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_WORK_DIR", str(tmp_path / "work"))


def write_schedules(repo: Path, specs: dict[str, dict[str, object]]) -> None:
    (repo / "schedules").mkdir(parents=True, exist_ok=True)
    for sid, spec in specs.items():
        (repo / "schedules" / f"{sid}.json").write_text(json.dumps(spec, indent=2) + "\n")


def reference_wake(repo: Path, files: object, now: datetime) -> wake.Wake | None:
    """The next due moment with every schedule parsed and every cursor read."""
    state = state_index.load(files).state  # type: ignore[arg-type]
    return wake.next_wake(load_all(repo / "schedules").schedules, state, now, Cadence())


def same_wake(got: wake.Wake | None, want: wake.Wake | None) -> None:
    assert (got is None) == (want is None)
    if got is not None and want is not None:
        assert (got.at, got.reason, got.worth_waiting) == (want.at, want.reason,
                                                           want.worth_waiting)
        same_wake(got.wait_for, want.wait_for)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "hours"), [("memory", 30), ("git", 12)])
def test_a_memo_of_quiet_schedules_fires_every_slot_once_and_says_the_same_next_due(
        tmp_path: Path, kind: str, hours: int) -> None:
    """``memory``: a folder outside git, its files vouched for one by one. ``git``: a
    clean clone, where the whole folder is vouched for at once whenever every schedule
    in it is quiet (half a day: it spans the four zones' slots and New York's gap)."""
    if kind == "git":
        repo = clone(make_origin(tmp_path, SPECS), tmp_path / "repo")
        store: StateStore = GitStateStore(repo, "origin", BRANCH)
    else:
        repo = tmp_path / "repo"
        write_schedules(repo, SPECS)
        store = InMemoryStateStore()
    cfg = Config(repo=repo, remote="origin", state_branch=BRANCH)
    now, skipped, ticks, whole = T0, 0, 0, 0
    steps = itertools.cycle([timedelta(minutes=m) for m in (4, 13, 9, 1, 11, 7)])
    end = T0 + timedelta(hours=hours)
    while now < end:
        tick = Tick(store, repo, executor_factory(cfg, "local", now), now)
        result = tick.run()
        assert not result.schedule_errors
        same_wake(result.wake, reference_wake(repo, store.read().files, now))
        assert result.memo is not None
        skipped += len(result.memo.left_out)
        whole += result.memo.whole is not None
        ticks += 1
        last, now = now, now + next(steps)
    files = store.read().files
    fired = sorted(state_index.run_folders(files))
    expected = sorted(
        [run_id_for(s.id, slot) for s in load_all(repo / "schedules").schedules
         if s.spec.enabled and s.spec.at_utc() is None
         for slot in for_spec(s.spec).slots(T0, last)]
        + [run_id_for("once", datetime(2026, 3, 8, 1, 0, tzinfo=UTC))])
    assert fired == expected
    # most schedules were left unread on most ticks; in a clean clone, often all of them
    assert skipped > 3 * ticks
    assert (whole > ticks // 3) if kind == "git" else whole == 0
    assert quiet.QUIET in files


def tip(repo: Path) -> str:
    return git("ls-remote", "origin", f"refs/heads/{BRANCH}", cwd=repo).split()[0]


def test_the_memo_rides_on_commits_and_never_hides_a_broken_or_edited_file(
        tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"daily": spec_data(cron="0 3 * * *"),
                                    "other": spec_data(cron="30 4 * * *")})
    repo = clone(origin, tmp_path / "repo")
    t0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    first = tick(repo, t0)
    assert first.mark_landed  # the cursors, and the memo beside them
    written = tip(repo)

    result = tick(repo, t0 + timedelta(minutes=10))
    assert result.memo is not None and set(result.memo.left_out) == {"daily", "other"}
    assert not result.mark_landed and tip(repo) == written  # never a commit of its own
    assert result.wake is not None and result.wake.reason == "daily: slot 2026-12-02T03:00Z"

    daily = repo / "schedules" / "daily.json"
    daily.write_text('{"cron": "0 3 * * *", "tracks": [}')
    result = tick(repo, t0 + timedelta(minutes=20))
    assert [e for e in result.schedule_errors if "schedules/daily.json" in e]
    assert result.memo is not None and set(result.memo.left_out) == {"other"}

    daily.write_text(json.dumps(spec_data(cron="0 13 * * *")))
    result = tick(repo, t0 + timedelta(minutes=30))
    assert not result.schedule_errors
    assert result.memo is not None and set(result.memo.left_out) == {"other"}
    assert result.wake is not None and result.wake.reason == "daily: slot 2026-12-01T13:00Z"

    # the slot comes: the edited schedule fires, on time, once
    result = tick(repo, t0 + timedelta(minutes=61))
    assert result.mark_landed
    snap = GitStateStore(repo, "origin", BRANCH).read()
    assert sorted(state_index.run_folders(snap.files)) == ["daily--20261201T1300Z"]
    memo = json.loads(snap.files[quiet.QUIET])["schedules"]
    assert "daily" not in memo  # its run is open: parsed until it ends
    assert memo["other"]["until"] == "2026-12-02T04:30:00Z"


def test_an_unreadable_or_forged_memo_makes_the_tick_read_everything(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"daily": spec_data(cron="0 3 * * *")})
    repo = clone(origin, tmp_path / "repo")
    t0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    tick(repo, t0)
    store = GitStateStore(repo, "origin", BRANCH)
    memo = json.loads(store.read().files[quiet.QUIET])
    folder = json.loads(store.read().files[quiet.FOLDER])
    # entries that would keep `daily` unread for a year, their keys not matching
    memo["schedules"]["daily"].update(until="2027-12-01T00:00:00Z", key="0" * 64)
    folder["soonest"][0].update(until="2027-12-01T00:00:00Z")
    folder["key"] = "0" * 64
    store.transact(lambda s: {quiet.QUIET: json.dumps(memo).encode(),
                              quiet.FOLDER: json.dumps(folder).encode()}, "by hand")
    result = tick(repo, t0 + timedelta(minutes=10))
    assert result.memo is not None and not result.memo.left_out
    assert result.wake is not None and result.wake.reason == "daily: slot 2026-12-02T03:00Z"

    store.transact(lambda s: {quiet.QUIET: b"{not json", quiet.FOLDER: b"{not json"},
                   "by hand")
    result = tick(repo, t0 + timedelta(minutes=20))
    assert result.memo is not None and not result.memo.left_out
    assert result.wake is not None and result.wake.reason == "daily: slot 2026-12-02T03:00Z"
