"""The index of open runs against real git: rebuilt when broken by hand, kept equal to
the records while ticks and reports race, and read without the finished runs' blobs."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest

from orchestrator.state import codec, layout
from orchestrator.state import index as si
from orchestrator.state.history import INDEX_PAGE_RUNS, all_runs
from orchestrator.state.phases import RunStatus
from orchestrator.state.records import Run
from orchestrator.store import GitStateStore, Snapshot
from tests.builders import spec_data
from tests.drive import tick
from tests.gitrepo import clone, git, make_origin
from tests.indexcheck import assert_index_agrees

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
BRANCH = "orchestrator-state"
PAST_TIMEOUT = T0 + timedelta(days=2, minutes=35)
"""Past the 30-minute timeout of the track the third day's tick (at 07:01) started."""


def files_of(repo: Path) -> Snapshot:
    return GitStateStore(repo, "origin", BRANCH).read()


def by_hand(repo: Path, message: str, edit: dict[str, bytes | None]) -> None:
    """Edit the state branch the way a person would: a checkout, a commit, a push."""
    hand = repo.parent / "hand"
    if not hand.exists():
        git("clone", "--quiet", "--branch", BRANCH, str(repo / ".." / "origin.git"),
            str(hand))
    git("pull", "--quiet", "origin", BRANCH, cwd=hand)
    for path, data in edit.items():
        if data is None:
            git("rm", "--quiet", path, cwd=hand)
        else:
            (hand / path).parent.mkdir(parents=True, exist_ok=True)
            (hand / path).write_bytes(data)
            git("add", path, cwd=hand)
    git("commit", "--quiet", "-m", message, cwd=hand)
    git("push", "--quiet", "origin", f"HEAD:{BRANCH}", cwd=hand)


def started(tmp_path: Path, finished: int = 2) -> tuple[Path, Path]:
    """A branch with three runs of `nightly`, the first ``finished`` of them finished."""
    origin = make_origin(tmp_path, {"nightly": spec_data(cron="0 7 * * *", overlap="allow",
                                                         tracks=("a",), run="sleep 30")})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    for day in range(3):
        tick(repo, T0 + timedelta(days=day, minutes=1), work)
    snap = GitStateStore(repo, "origin", BRANCH).read()
    for day in range(finished):  # as a consolidating tick leaves them
        rid = f"nightly--{T0 + timedelta(days=day):%Y%m%dT%H%MZ}"
        run = Run.model_validate_json(snap.files[layout.run_path(rid)])
        change = {layout.run_path(rid): codec.to_json(run.model_copy(
            update={"status": RunStatus.COMPLETED}))}
        GitStateStore(repo, "origin", BRANCH).transact(
            partial(lambda s, c: si.refresh(s.files, c), c=change), f"finish {rid}")
    assert_index_agrees(files_of(repo).files)
    return repo, work


def test_a_hand_deleted_index_is_rebuilt_with_a_note_and_no_run_is_lost(tmp_path: Path) -> None:
    repo, work = started(tmp_path)
    before = set(all_runs(files_of(repo).files))
    by_hand(repo, "remove the index", {si.OPEN_INDEX: None})
    log = tick(repo, PAST_TIMEOUT, work).log
    assert log[0] == "state/open.json is missing: rebuilt from 3 run record(s), 1 open"
    files = files_of(repo).files
    assert_index_agrees(files)
    assert set(all_runs(files)) == before
    # the open run, found by the rebuild, was served (its track is past its timeout on
    # the tick's clock, which its local track started on) and consolidated
    assert "nightly--20261203T0700Z: consolidating (1 tapped_out)" in log
    assert si.load(files).index.runs == {}
    # the next tick trusts it again, and the next slot fires beside the open run
    log = tick(repo, T0 + timedelta(days=3, minutes=1), work).log
    assert not any("open.json" in line for line in log)
    assert_index_agrees(files_of(repo).files)
    assert len(all_runs(files_of(repo).files)) == 4


def test_a_corrupted_index_is_rebuilt_with_a_note(tmp_path: Path) -> None:
    repo, work = started(tmp_path)
    by_hand(repo, "break the index", {si.OPEN_INDEX: b'{"format": 1, "runs": {"x": 1}'})
    log = tick(repo, T0 + timedelta(days=2, minutes=5), work).log
    assert log[0].startswith("state/open.json is unreadable (state/open.json: (root): ")
    assert "invalid JSON" in log[0]
    assert log[0].endswith("rebuilt from 3 run record(s), 1 open")
    assert_index_agrees(files_of(repo).files)


@pytest.mark.slow
def test_racing_ticks_and_reports_keep_the_index_equal_to_the_records(tmp_path: Path
                                                                      ) -> None:
    schedules = {f"s{i}": spec_data(cron="* * * * *", overlap="allow", tracks=("a", "b"),
                                    run="sleep 10", catchup_window_minutes=2)
                 for i in range(3)}
    origin = make_origin(tmp_path, schedules)
    # one clone a process: processes sharing a clone is another test's subject
    clones = [clone(origin, tmp_path / f"c{i}") for i in range(16)]
    env = {**os.environ, "ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}
    fired: list[str] = []
    for step in range(5):
        now = T0 + timedelta(minutes=step)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        cmds = [["tick", "--now", stamp] for _ in range(3)]
        # every open run's tracks report at the same moment, one a step
        cmds += [["report", "--run", rid, "--track", "ab"[step % 2],
                  "--phase", "complete" if step % 2 else "failed"] for rid in fired]
        assert len(cmds) <= len(clones)
        procs = [subprocess.Popen([sys.executable, "-m", "orchestrator", "--repo",
                                   str(clones[i]), *cmd], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
                 for i, cmd in enumerate(cmds)]
        errors = [(p.wait(), p.communicate()[1]) for p in procs]
        assert all(code in (0, 1) for code, _ in errors), errors  # 1: an illegal move
        assert all(code == 0 for code, _ in errors[:3]), errors
        files = files_of(clones[0]).files
        assert_index_agrees(files)
        runs = all_runs(files)
        fired = sorted(si.load(files).index.runs)
    assert len(runs) == 3 * 5


@pytest.mark.slow
def test_a_shallow_runner_fetches_no_blob_of_a_finished_run(tmp_path: Path) -> None:
    repo, work = started(tmp_path, finished=3)
    origin = tmp_path / "origin.git"
    git("config", "uploadpack.allowFilter", "true", cwd=origin)
    runner = tmp_path / "runner"
    git("clone", "--quiet", "--depth=1", f"file://{origin}", str(runner))
    assert git("rev-parse", "--is-shallow-repository", cwd=runner) == "true"
    before = git("ls-remote", str(origin), f"refs/heads/{BRANCH}", cwd=runner)
    assert tick(runner, T0 + timedelta(days=2, minutes=5), work).log == []  # nothing to do
    assert git("ls-remote", str(origin), f"refs/heads/{BRANCH}", cwd=runner) == before
    tip = git("ls-remote", str(origin), f"refs/heads/{BRANCH}", cwd=runner).split()[0]
    missing = git("rev-list", "--objects", "--missing=print", tip, cwd=runner).split("\n")
    absent = {line[1:] for line in missing if line.startswith("?")}
    finished = [f"{layout.run_dir(f'nightly--{T0 + timedelta(days=d):%Y%m%dT%H%MZ}')}/{name}"
                for d in range(3) for name in ("run.json", "tracks/a.json")]
    blobs = {git("rev-parse", f"{tip}:{path}", cwd=runner) for path in finished}
    assert blobs <= absent  # never fetched
    # and the runner's tick still fires the next slot, writing through the partial clone
    tick(runner, T0 + timedelta(days=3, minutes=1), work)
    files = files_of(repo).files
    assert_index_agrees(files)
    assert layout.run_path("nightly--20261204T0700Z") in files


def traced_tick(repo: Path, now: datetime, work: Path, trace: Path) -> list[str]:
    """:func:`tick`, with every git command it runs written to ``trace``."""
    trace.unlink(missing_ok=True)
    os.environ["GIT_TRACE"] = str(trace)
    try:
        return tick(repo, now, work).log
    finally:
        del os.environ["GIT_TRACE"]


def lists_the_runs(trace: Path) -> bool:
    """Whether a traced git command listed ``state/runs`` itself (not one run's folder)."""
    return any("ls-tree" in line and " state/runs/" in f"{line} "
               and " state/runs/ " in f"{line} " for line in trace.read_text().splitlines())


def runs_tree(repo: Path) -> str:
    """The id of ``state/runs``'s tree at the tip of the origin's state branch."""
    return git("rev-parse", f"refs/heads/{BRANCH}:state/runs", cwd=repo.parent / "origin.git")


@pytest.mark.slow
def test_a_no_op_tick_does_not_list_the_runs_while_their_tree_is_the_one_the_index_names(
        tmp_path: Path) -> None:
    repo, work = started(tmp_path, finished=3)
    trace = tmp_path / "trace"
    index = si.load(files_of(repo).files).index
    assert index.runs_tree == runs_tree(repo)  # the last writer named the tree it made
    assert index.oldest_finished == "nightly--20261201T0700Z"

    assert traced_tick(repo, T0 + timedelta(days=2, minutes=5), work, trace) == []
    assert not lists_the_runs(trace)
    loaded = si.load(files_of(repo).files)
    assert loaded.vouched and loaded.note is None
    assert isinstance(loaded.state.known_runs, si.RunFolders)
    assert not loaded.state.known_runs.listed

    # a slot due asks which runs exist (never fire one twice): the runs are listed
    traced_tick(repo, T0 + timedelta(days=3, minutes=1), work, trace)
    assert lists_the_runs(trace)
    files = files_of(repo).files
    assert_index_agrees(files)
    assert si.load(files).index.runs_tree == runs_tree(repo)
    # the same slot again: its run is on the branch, it does not fire twice
    tick(repo, T0 + timedelta(days=3, minutes=2), work)
    assert len(all_runs(files_of(repo).files)) == 4


@pytest.mark.slow
def test_a_report_moves_the_tree_and_the_next_tick_checks_the_index_by_listing(
        tmp_path: Path) -> None:
    repo, work = started(tmp_path, finished=2)
    open_run = "nightly--20261203T0700Z"
    subprocess.run([sys.executable, "-m", "orchestrator", "--repo", str(repo), "report",
                    "--run", open_run, "--track", "a", "--phase", "running",
                    "--now", f"{T0 + timedelta(days=2, minutes=2):%Y-%m-%dT%H:%MZ}"],
                   check=True, capture_output=True)
    files = files_of(repo).files
    assert si.read(files)[0].runs_tree != runs_tree(repo)  # type: ignore[union-attr]
    loaded = si.load(files)
    assert not loaded.vouched and loaded.note is None  # listed, checked, and it holds
    assert loaded.index.runs_tree == runs_tree(repo)
    assert loaded.state.runs[open_run].status is RunStatus.RUNNING
    # the tick that writes the run next (it taps the track out) names the tree again
    tick(repo, PAST_TIMEOUT, work)
    assert si.load(files_of(repo).files).vouched


@pytest.mark.slow
def test_a_run_added_by_hand_is_found_although_the_index_named_a_tree(
        tmp_path: Path) -> None:
    repo, work = started(tmp_path, finished=3)
    files = files_of(repo).files
    run = Run.model_validate_json(files[layout.run_path("nightly--20261201T0700Z")])
    added = "nightly--20261130T0700Z"
    by_hand(repo, "a run behind the index's back", {layout.run_path(added): codec.to_json(
        run.model_copy(update={"run_id": added, "status": RunStatus.RUNNING,
                               "slot": T0 - timedelta(days=1)}))})
    log = tick(repo, T0 + timedelta(days=2, minutes=5), work).log
    assert log[0] == ("state/open.json was written for 3 run folder(s), state/runs holds 4: "
                      "rebuilt from 4 run record(s), 1 open")
    assert_index_agrees(files_of(repo).files)


@pytest.mark.slow
def test_a_folder_that_is_no_run_id_is_still_named_when_the_runs_are_not_listed(
        tmp_path: Path) -> None:
    repo, work = started(tmp_path, finished=3)
    by_hand(repo, "a stray folder", {"state/runs/not-a-run/x.json": b"{}\n"})
    lines = [tick(repo, T0 + timedelta(days=2, minutes=m), work).quarantined for m in (5, 6)]
    named = "quarantined state/runs/'not-a-run': not a run id; that folder is left alone"
    assert lines == [(named,), (named,)]
    assert si.load(files_of(repo).files).vouched  # the second one did not list the runs


@pytest.mark.slow
def test_checking_the_index_again_is_never_a_commit_of_its_own(tmp_path: Path) -> None:
    repo, work = started(tmp_path, finished=3)
    track = f"{layout.run_dir('nightly--20261201T0700Z')}/tracks/a.json"
    by_hand(repo, "reformat a finished track", {track: files_of(repo).files[track] + b"\n"})
    tip = git("rev-parse", f"refs/heads/{BRANCH}", cwd=tmp_path / "origin.git")
    assert tick(repo, T0 + timedelta(days=2, minutes=5), work).log == []  # nothing to do
    assert git("rev-parse", f"refs/heads/{BRANCH}", cwd=tmp_path / "origin.git") == tip
    loaded = si.load(files_of(repo).files)
    assert not loaded.vouched and loaded.note is None  # listed and checked: it holds
    tick(repo, T0 + timedelta(days=3, minutes=1), work)  # fires: names the tree again
    assert si.load(files_of(repo).files).vouched


@pytest.mark.slow
def test_a_firing_tick_on_a_runner_fetches_only_the_newest_runs_for_the_page(
        tmp_path: Path) -> None:
    repo, work = started(tmp_path, finished=3)
    older = [T0 - timedelta(days=1, minutes=i) for i in range(INDEX_PAGE_RUNS)]
    finished = {}
    for slot in older:  # as a consolidating tick leaves them, in one commit
        run = Run(run_id=f"old--{slot:%Y%m%dT%H%MZ}", schedule_id="old", slot=slot,
                  fire_at=slot, created_at=slot, deadline=slot + timedelta(hours=1),
                  status=RunStatus.COMPLETED, tracks=["a"], finished_at=slot)
        finished[layout.run_path(run.run_id)] = codec.to_json(run)
    GitStateStore(repo, "origin", BRANCH).transact(
        lambda s: si.refresh(s.files, finished), "older runs")
    origin = tmp_path / "origin.git"
    git("config", "uploadpack.allowFilter", "true", cwd=origin)
    runner = tmp_path / "runner"
    git("clone", "--quiet", "--depth=1", f"file://{origin}", str(runner))
    tick(runner, T0 + timedelta(days=3, minutes=1), work)  # fires: the page is rendered
    tip = git("ls-remote", str(origin), f"refs/heads/{BRANCH}", cwd=runner).split()[0]
    page = git("show", f"{tip}:state/index.html", cwd=origin)
    assert "nightly--20261204T0700Z" in page  # the new run is listed
    # 204 runs: the newest 200 the tick read, with the one it fired on top
    assert "201 runs" in page and "3 older not listed here" in page
    # the three oldest runs are not on the page, and their records were never fetched
    oldest = [f"old--{slot:%Y%m%dT%H%MZ}" for slot in older[-3:]]
    assert not any(run_id in page for run_id in oldest)
    missing = git("rev-list", "--objects", "--missing=print", tip, cwd=runner).split("\n")
    absent = {line[1:] for line in missing if line.startswith("?")}
    assert {git("rev-parse", f"{tip}:{layout.run_path(r)}", cwd=origin) for r in oldest} <= absent
