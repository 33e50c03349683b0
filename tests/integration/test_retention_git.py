"""The retention the tick applies itself (``keep_finished_runs_days``), against a bare
origin: what is archived and kept, the batching, a racing report, a protected branch."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest

from orchestrator.cli import main
from orchestrator.config.models import TrackSpec
from orchestrator.config.repository import RepoConfig
from orchestrator.runs import retention
from orchestrator.runs.compaction import archive_tag
from orchestrator.state import codec, layout
from orchestrator.state import index as si
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import DeadLetter, Track, run_id_for
from orchestrator.store import ChangeFn, GitStateStore, TransactResult
from tests.builders import run_files, spec_data
from tests.drive import tick
from tests.gitrepo import clone, git, make_origin
from tests.indexcheck import assert_index_agrees

BRANCH = "orchestrator-state"
NOW = datetime(2026, 12, 31, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def rid(schedule: str, slot: datetime) -> str:
    return run_id_for(schedule, slot)


OLD = [rid("daily", NOW - timedelta(days=d)) for d in (45, 40, 33)]
"""Finished an hour after their slot, more than 31 days ago: archived."""
OPEN = rid("stuck", NOW - timedelta(days=40))
WAITING = rid("parked", NOW - timedelta(days=40))
LATE = rid("daily", NOW - timedelta(days=30, hours=12))
"""Slot 30.5 days ago, finished an hour later: past the retention but no candidate yet."""
YOUNG = rid("daily", NOW - timedelta(days=29, hours=12))
RECENT = rid("daily", NOW - 2 * DAY)


def history() -> dict[str, bytes | None]:
    files: dict[str, bytes | None] = {}
    for run_id in [*OLD, LATE, YOUNG, RECENT]:
        slot = layout.run_slot(run_id)
        assert slot is not None
        files.update(run_files(run_id, RunStatus.COMPLETED, slot + timedelta(hours=1),
                               also=("brief", "polls")))
    files.update(run_files(OPEN, RunStatus.RUNNING, None, also=("brief", "polls")))
    slot = layout.run_slot(WAITING)
    assert slot is not None
    files.update(run_files(WAITING, RunStatus.FAILED, slot + timedelta(hours=1),
                           also=("brief", "polls")))
    key = f"{WAITING}--a"
    files[layout.dlq_path(key)] = codec.to_json(DeadLetter(
        key=key, run_id=WAITING, track="a", reason="failed", parked_at=slot, attempts=1,
        payload=TrackSpec(name="a", run="true")))
    return files


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    origin = make_origin(tmp_path, {"quiet": spec_data(cron="0 7 1 1 *", enabled=False)})
    checkout = clone(origin, tmp_path / "repo")
    seed = history()
    GitStateStore(checkout, "origin", BRANCH).transact(
        lambda snap: si.refresh(snap.files, seed, si.build([], set())), "seed")
    os.environ["ORCHESTRATOR_WORK_DIR"] = str(tmp_path / "work")
    try:
        yield checkout
    finally:
        del os.environ["ORCHESTRATOR_WORK_DIR"]


def origin_of(repo: Path) -> Path:
    return repo.parent / "origin.git"


def paths(repo: Path, ref: str = BRANCH) -> set[str]:
    return set(git("ls-tree", "-r", "--name-only", ref, cwd=origin_of(repo)).split())


def folders(repo: Path, ref: str = BRANCH) -> set[str]:
    return {p.split("/")[2] for p in paths(repo, ref) if p.startswith("state/runs/")}


def tags(repo: Path) -> list[str]:
    return git("tag", "--list", cwd=origin_of(repo)).split()


def files_of(repo: Path) -> dict[str, bytes]:
    snap = GitStateStore(repo, "origin", BRANCH).read()
    return {p: snap.files[p] for p in snap.files}


def test_a_tick_archives_the_runs_past_the_retention_under_a_tag(repo: Path) -> None:
    before = paths(repo)
    tip = git("rev-parse", BRANCH, cwd=origin_of(repo))
    result = tick(repo, NOW)

    assert result.retention is not None
    assert result.retention.runs == (*sorted(OLD), LATE)
    tag = archive_tag(NOW)
    assert result.retention.tag == tag
    # everything stays reachable under the tag: the tip as the tick's own work left it
    tagged = git("rev-parse", f"refs/tags/{tag}", cwd=origin_of(repo))
    assert git("merge-base", "--is-ancestor", tip, tagged, cwd=origin_of(repo)) == ""
    assert before <= paths(repo, tagged)
    assert git("rev-list", "--count", BRANCH, cwd=origin_of(repo)) == "1"
    # kept: open when the tick began (it tapped it out: past its deadline), a dead letter
    # waiting, finished within the retention
    assert folders(repo) == {OPEN, WAITING, YOUNG, RECENT}
    assert layout.dlq_path(f"{WAITING}--a") in paths(repo)
    files = files_of(repo)
    assert_index_agrees(files)
    record = retention.read_record(files)
    assert record is not None
    assert (record.at, record.keep_days, record.archived, record.tag) == (NOW, 30, 4, tag)
    assert ("retention: archived 4 run(s) finished more than 30 days ago; previous "
            f"history kept as tag {tag}") in result.log
    assert result.to_json()["retention"]["archived"] == [*sorted(OLD), LATE]


def test_status_shows_the_retention_and_the_last_compaction(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = ["--repo", str(repo), "--remote", "origin", "status", "--now"]
    main([*status, "2026-12-31T12:00:00Z"])
    assert ("retention     archive runs finished more than 30 days ago; no compaction yet"
            in capsys.readouterr().out.splitlines())
    tick(repo, NOW)
    main([*status, "2026-12-31T12:05:00Z", "--json"])
    report = json.loads(capsys.readouterr().out)["retention"]
    assert report["keep_finished_runs_days"] == 30
    assert report["last_compaction"]["archived"] == 4
    assert report["last_compaction"]["tag"] == archive_tag(NOW)


def test_status_tells_of_a_compact_by_hand_and_the_tick_waits_its_batch(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--repo", str(repo), "--remote", "origin"]
    assert main([*base, "compact", "--keep-days", "31", "--now", "2026-12-31T12:00:00Z"]) == 0
    assert "archived 3 run(s)" in capsys.readouterr().out
    main([*base, "status", "--now", "2026-12-31T12:01:00Z", "--json"])
    last = json.loads(capsys.readouterr().out)["retention"]["last_compaction"]
    assert (last["archived"], last["keep_days"], last["tag"]) == (3, 31, archive_tag(NOW))
    tip = git("rev-parse", BRANCH, cwd=origin_of(repo))
    assert main([*base, "compact", "--keep-days", "31", "--now", "2026-12-31T12:02:00Z"]) == 0
    assert "nothing to archive" in capsys.readouterr().out
    assert git("rev-parse", BRANCH, cwd=origin_of(repo)) == tip  # no commit for a record
    result = tick(repo, NOW + timedelta(minutes=3))
    assert result.retention is None  # the day's compaction is done


def test_the_next_compaction_waits_a_day_and_a_day_of_runs(repo: Path) -> None:
    assert tick(repo, NOW).retention is not None
    tip = git("rev-parse", BRANCH, cwd=origin_of(repo))
    later = tick(repo, NOW + timedelta(minutes=30))  # no heartbeat due
    assert later.retention is None
    assert not any(line.startswith("retention") for line in later.log)
    assert git("rev-parse", BRANCH, cwd=origin_of(repo)) == tip  # an idle tick pushes nothing
    # the young run's slot passes retention + 1 day two days later: the next batch
    nxt = tick(repo, NOW + 2 * DAY)
    assert nxt.retention is not None and nxt.retention.runs == (YOUNG,)
    assert folders(repo) == {OPEN, WAITING, RECENT}
    assert len(tags(repo)) == 2
    assert_index_agrees(files_of(repo))


def test_a_recent_compaction_holds_back_candidates_that_stay(repo: Path) -> None:
    # A run whose slot is old but which ended a day ago: a candidate that stays.
    long_run = rid("long", NOW - timedelta(days=40))
    GitStateStore(repo, "origin", BRANCH).transact(
        lambda snap: si.refresh(snap.files, run_files(long_run, RunStatus.COMPLETED, NOW - DAY,
                                                      also=("brief", "polls"))), "a long run")
    assert long_run not in tick(repo, NOW).retention.runs  # type: ignore[union-attr]
    assert tick(repo, NOW + timedelta(hours=6)).retention is None
    assert tick(repo, NOW + timedelta(hours=23)).retention is None
    again = tick(repo, NOW + 2 * DAY)
    assert again.retention is not None and long_run not in again.retention.runs


def test_no_retention_when_the_setting_is_null_or_serve_compacts_itself(repo: Path) -> None:
    assert tick(repo, NOW, retention=False).retention is None
    tip = git("rev-parse", BRANCH, cwd=origin_of(repo))  # with the first heartbeat line
    (repo / "orchestrator.json").write_text(json.dumps({"keep_finished_runs_days": None}))
    assert tick(repo, NOW).retention is None
    assert tags(repo) == []
    assert git("rev-parse", BRANCH, cwd=origin_of(repo)) == tip
    (repo / "orchestrator.json").write_text(json.dumps({"keep_finished_runs_days": 60}))
    assert tick(repo, NOW).retention is None  # none of the slots is 61 days old
    (repo / "orchestrator.json").write_text(json.dumps({"keep_finished_runs_days": 35}))
    result = tick(repo, NOW)
    assert result.retention is not None and result.retention.runs == (OLD[0], OLD[1])


class Racing(GitStateStore):
    """A store whose compaction is overtaken, once, by a track's report."""

    report: ClassVar[list[str]] = []

    def archive(self, change_fn: ChangeFn, message: str, tag: str) -> TransactResult:
        calls = 0

        def racing(snap):  # type: ignore[no-untyped-def]
            nonlocal calls
            calls += 1
            if calls == 1:  # between the compaction's read and its push
                assert main(self.report) == 0
            return change_fn(snap)

        result = super().archive(racing, message, tag)
        assert calls == 2
        return result


KEEP = RepoConfig().keep_finished_runs_days
"""The default retention (30 days): what the tick applies without orchestrator.json."""


def test_a_report_racing_the_compaction_is_not_lost(repo: Path, tmp_path: Path) -> None:
    leg = clone(origin_of(repo), tmp_path / "leg")
    Racing.report = ["--repo", str(leg), "--remote", "origin", "report", "--run", OPEN,
                     "--track", "a", "--phase", "complete", "--attempt", "1"]
    store = Racing(repo, "origin", BRANCH)
    snap = store.read()
    # the tick's retention step, as the tick calls it after its work (a tick would also
    # tap the open run out: it is past its deadline)
    outcome = retention.retain(store, KEEP, snap.files, si.load(snap.files), NOW)
    assert outcome is not None and outcome.runs == (*sorted(OLD), LATE)
    files = files_of(repo)
    path = layout.track_path(OPEN, "a")
    track = codec.parse_record(Track, path, files[path])
    assert track.phase is TrackPhase.COMPLETE
    assert folders(repo) == {OPEN, WAITING, YOUNG, RECENT}
    assert_index_agrees(files)
    assert OPEN in si.load(files).index.runs
    # the tag holds the tip the winning attempt replaced: the report's commit
    tagged = git("rev-parse", f"refs/tags/{archive_tag(NOW)}", cwd=origin_of(repo))
    assert git("log", "-1", "--format=%s", tagged, cwd=origin_of(repo)).startswith("report ")


def test_two_ticks_that_read_the_same_tip_compact_once(repo: Path) -> None:
    store = GitStateStore(repo, "origin", BRANCH)
    snap = store.read()
    loaded = si.load(snap.files)
    first = retention.retain(store, KEEP, snap.files, loaded, NOW)
    assert first is not None and len(first.runs) == 4
    # the other tick read the tip before the first compacted, and compacts a minute later
    later = NOW + timedelta(minutes=1)
    second = retention.retain(store, KEEP, snap.files, loaded, later)
    assert second is not None
    assert (second.runs, second.problem, second.lines()) == ((), None, [])
    record = retention.read_record(files_of(repo))
    assert record is not None and (record.at, record.archived) == (NOW, 4)
    assert tags(repo) == [archive_tag(NOW)]


REFUSE_FORCE_PUSH = """#!/bin/sh
# a protected branch: no update of it that is not a fast-forward
while read old new ref; do
  if [ "$ref" = "refs/heads/orchestrator-state" ] \\
     && [ "$old" != 0000000000000000000000000000000000000000 ] \\
     && ! git merge-base --is-ancestor "$old" "$new"; then
    echo "protected branch: force pushes are not allowed" >&2
    exit 1
  fi
done
"""


@pytest.mark.slow
def test_a_protected_branch_gets_an_ordinary_commit_and_one_line(repo: Path) -> None:
    hook = origin_of(repo) / "hooks" / "pre-receive"
    hook.write_text(REFUSE_FORCE_PUSH)
    hook.chmod(0o755)
    tip = git("rev-parse", BRANCH, cwd=origin_of(repo))
    result = tick(repo, NOW)

    assert result.mark_landed  # the tick's own work is done all the same
    kept = result.retention
    assert kept is not None and kept.refused and kept.problem is None
    assert kept.runs == (*sorted(OLD), LATE) and kept.tag is None
    lines = [line for line in result.log if line.startswith("retention")]
    assert len(lines) == 2
    assert lines[0].startswith("retention: the force push of the compaction was refused (")
    assert "force pushes are not allowed" in lines[0]
    assert lines[1] == ("retention: archived 4 run(s) finished more than 30 days ago; the "
                        "branch's history keeps them")
    assert folders(repo) == {OPEN, WAITING, YOUNG, RECENT}
    assert tags(repo) == []
    # history keeps the archived runs: the old tip is an ancestor of the new one
    assert git("merge-base", "--is-ancestor", tip, BRANCH, cwd=origin_of(repo)) == ""
    files = files_of(repo)
    assert_index_agrees(files)
    record = retention.read_record(files)
    assert record is not None and record.refused and record.refused_at == NOW

    # within the week, the next batch goes straight to an ordinary commit: no refusal
    nxt = tick(repo, NOW + 2 * DAY)
    assert nxt.retention is not None and nxt.retention.runs == (YOUNG,)
    assert nxt.retention.refused is None and nxt.retention.tag is None
    assert not any("refused" in line for line in nxt.log)
    assert tags(repo) == []


def test_a_tick_that_need_not_compact_decides_so_without_listing_the_runs(
        repo: Path, tmp_path: Path) -> None:
    assert tick(repo, NOW).retention is not None  # the waiting dead letter's run stays
    index = si.load(GitStateStore(repo, "origin", BRANCH).read().files).index
    assert index.oldest_finished == WAITING  # ripe by its slot, but kept
    trace = tmp_path / "trace"
    os.environ["GIT_TRACE"] = str(trace)
    try:
        later = tick(repo, NOW + timedelta(hours=6))
    finally:
        del os.environ["GIT_TRACE"]
    assert later.retention is None
    listings = [line for line in trace.read_text().splitlines()
                if "ls-tree" in line and line.endswith(" state/runs/")]
    assert listings == []  # the record said a compaction ran within the day
    assert "state/retention.json" in files_of(repo)
