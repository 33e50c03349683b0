"""`orchestrator report` and `orchestrator compact` against a bare origin."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.config.models import TrackSpec
from orchestrator.runs.compaction import plan
from orchestrator.state.codec import parse_with_spec, to_json
from orchestrator.state.layout import dlq_path, specs_path, track_path
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import DeadLetter, Track
from orchestrator.store import Change, GitStateStore, Snapshot
from tests.builders import run_files
from tests.gitrepo import bare_origin, empty_clone, git

BRANCH = "orchestrator-state"
RUN = "nightly--20261201T0700Z"
T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _no_track_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A CI leg running this suite may itself carry these.
    for var in ("ORCHESTRATOR_RUN_ID", "ORCHESTRATOR_TRACK", "ORCHESTRATOR_ATTEMPT"):
        monkeypatch.delenv(var, raising=False)


class Origin:
    def __init__(self, tmp_path: Path) -> None:
        self.path = bare_origin(tmp_path, branch=None)
        self.tmp = tmp_path
        self.repo = self.clone("runner")

    def clone(self, name: str) -> Path:
        return empty_clone(self.tmp / name)

    def seed(self, files: dict[str, bytes | None], branch: str = BRANCH) -> None:
        store = GitStateStore(self.clone(f"seed{time.monotonic_ns()}"), str(self.path), branch)
        store.transact(lambda _: files, "seed")

    def tip(self, ref: str = BRANCH) -> str:
        return git("rev-parse", ref, cwd=self.path)

    def show(self, path: str, ref: str = BRANCH) -> str:
        return git("show", f"{ref}:{path}", cwd=self.path)

    def track(self, name: str, run_id: str = RUN) -> Track:
        path = track_path(run_id, name)
        try:
            specs = json.loads(self.show(specs_path(run_id)))
        except subprocess.CalledProcessError:
            specs = {}  # a record written before specs.json carries its own spec
        return parse_with_spec(Track, path, self.show(path).encode(), specs)

    def cli(self, *args: str, repo: Path | None = None) -> int:
        return main(["--repo", str(repo or self.repo), "--remote", str(self.path), *args])


@pytest.fixture
def origin(tmp_path: Path) -> Origin:
    o = Origin(tmp_path)
    o.seed(run_files(RUN, tracks=["a", "b"], phase=TrackPhase.DISPATCHED))
    return o


def _report(origin: Origin, *args: str) -> int:
    return origin.cli("report", "--run", RUN, "--track", "a", *args)


# --------------------------------------------------------------------------- report


def test_report_running_then_complete_with_a_result_file(
        origin: Origin, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _report(origin, "--phase", "running", "--now", "2026-12-01T07:02:00Z") == 0
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"summary": "42 rows loaded", "rows": 42}))
    assert _report(origin, "--phase", "complete", "--result", str(result),
                   "--now", "2026-12-01T07:09:00+00:00") == 0
    track = origin.track("a")
    assert track.phase is TrackPhase.COMPLETE
    assert track.started_at == T0 + timedelta(minutes=2)
    assert track.finished_at == T0 + timedelta(minutes=9)
    assert track.result == {"summary": "42 rows loaded", "rows": 42}
    assert origin.track("b").phase is TrackPhase.DISPATCHED
    assert git("log", "--format=%s", BRANCH, cwd=origin.path).splitlines() == [
        f"report {RUN}/a: complete", f"report {RUN}/a: running", "seed"]
    out = capsys.readouterr().out
    assert f"{RUN}/a: complete (attempt 1)" in out


def test_repeating_a_report_pushes_nothing(origin: Origin,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert _report(origin, "--phase", "failed", "--message", "exit 2") == 0
    tip = origin.tip()
    assert _report(origin, "--phase", "failed", "--message", "exit 2") == 0
    assert origin.tip() == tip
    assert "already failed" in capsys.readouterr().out
    assert origin.track("a").error_log == ["attempt 1: exit 2"]


def test_environment_variables_name_run_track_and_attempt(
        origin: Origin, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ORCHESTRATOR_RUN_ID", RUN)
    monkeypatch.setenv("ORCHESTRATOR_TRACK", "b")
    monkeypatch.setenv("ORCHESTRATOR_ATTEMPT", "2")
    tip = origin.tip()
    assert origin.cli("report", "--phase", "complete") == 1
    assert origin.tip() == tip  # attempt 2 is not the track's attempt: refused
    assert ("orchestrator: refused the complete report of attempt 2 for "
            f"{RUN}/b: the current attempt is 1") in capsys.readouterr().err
    monkeypatch.setenv("ORCHESTRATOR_ATTEMPT", "1")
    assert origin.cli("report", "--phase", "complete") == 0
    assert origin.track("b").phase is TrackPhase.COMPLETE


@pytest.mark.parametrize(("args", "message"), [
    (["--run", "other--20261201T0700Z", "--track", "a", "--phase", "running"],
     "unknown run 'other--20261201T0700Z'"),
    (["--run", RUN, "--track", "zz", "--phase", "running"], "has no track 'zz'"),
    (["--run", "../x", "--track", "a", "--phase", "running"], "invalid run id"),
    (["--run", RUN, "--track", "a", "--phase", "running", "--result", "/nonexistent/r.json"],
     "cannot read result file /nonexistent/r.json"),
    (["--run", RUN, "--track", "a", "--phase", "running", "--now", "2026-12-01T07:00"],
     "--now: give a UTC offset"),
])
def test_bad_reports_exit_1_with_one_line_and_write_nothing(
        origin: Origin, capsys: pytest.CaptureFixture[str], args: list[str],
        message: str) -> None:
    tip = origin.tip()
    assert origin.cli("report", *args) == 1
    err = capsys.readouterr().err
    assert err.startswith("orchestrator: ") and err.count("\n") == 1
    assert message in err
    assert origin.tip() == tip


def test_an_illegal_transition_exits_1_and_writes_nothing(
        origin: Origin, capsys: pytest.CaptureFixture[str]) -> None:
    assert _report(origin, "--phase", "complete") == 0
    tip = origin.tip()
    assert _report(origin, "--phase", "running") == 1
    assert "illegal transition complete -> running" in capsys.readouterr().err
    assert origin.tip() == tip


def test_a_result_that_is_not_an_object_exits_1(origin: Origin, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    result = tmp_path / "r.json"
    result.write_text("[1]")
    tip = origin.tip()
    assert _report(origin, "--phase", "complete", "--result", str(result)) == 1
    assert "must hold a JSON object" in capsys.readouterr().err
    assert origin.tip() == tip


def test_a_declining_hook_exits_3_at_once_naming_branch_and_reason(
        origin: Origin, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    count = tmp_path / "count"
    hook = origin.path / "hooks" / "pre-receive"
    hook.write_text(f'#!/bin/sh\necho x >> "{count}"\n'
                    'echo "state pushes are frozen for maintenance" >&2\nexit 1\n')
    hook.chmod(0o755)
    assert _report(origin, "--phase", "running") == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "'orchestrator-state'" in err and "pre-receive hook declined" in err
    assert "state pushes are frozen for maintenance" in err
    assert count.read_text() == "x\n"


@pytest.mark.slow
def test_thirty_two_concurrent_reports_of_one_run_all_land(tmp_path: Path) -> None:
    origin = Origin(tmp_path)
    names = [f"t{i:02d}" for i in range(32)]
    origin.seed(run_files(RUN, tracks=names, phase=TrackPhase.DISPATCHED))
    procs = []
    for name in names:
        repo = origin.clone(f"leg-{name}")  # one runner per matrix leg
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "--repo", str(repo), "--remote",
             str(origin.path), "report", "--run", RUN, "--track", name, "--phase", "complete",
             "--message", f"{name} done", "--now", "2026-12-01T07:30:00Z"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    for name in names:
        track = origin.track(name)
        assert track.phase is TrackPhase.COMPLETE
        assert track.result == {"summary": f"{name} done"}
    assert git("rev-list", "--count", "--first-parent", BRANCH, cwd=origin.path) == "33"
    assert git("rev-list", "--count", BRANCH, cwd=origin.path) == "33"


# --------------------------------------------------------------------------- compact

NOW = "2026-12-31T12:00:00Z"
OLD = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _history(tmp_path: Path, branch: str = BRANCH) -> Origin:
    o = Origin(tmp_path)
    files = {
        **run_files("old--20261201T0700Z", RunStatus.COMPLETED, OLD, tracks=["a"],
                    phase=TrackPhase.COMPLETE),
        **run_files("open--20261201T0700Z", RunStatus.RUNNING, tracks=["a"],
                    phase=TrackPhase.DISPATCHED),
        **run_files("new--20261230T0700Z", RunStatus.FAILED,
                    datetime(2026, 12, 30, 9, 0, tzinfo=UTC), tracks=["a"],
                    phase=TrackPhase.FAILED),
        dlq_path("old--20261201T0700Z--a"): to_json(DeadLetter(
            key="old--20261201T0700Z--a", run_id="old--20261201T0700Z", track="a",
            reason="failed", parked_at=OLD, attempts=1, payload=TrackSpec(name="a", run="x"),
            discarded=True)),
        "state/ticks.jsonl": b"{}\n",
    }
    o.seed(files, branch)
    o.seed({"state/ticks.jsonl": b"{}\n{}\n"}, branch)
    return o


def _paths(o: Origin, ref: str = BRANCH) -> list[str]:
    return git("ls-tree", "-r", "--name-only", ref, cwd=o.path).split()


def test_compact_archives_old_finished_runs_under_a_tag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    o = _history(tmp_path)
    old_tip = o.tip()
    before = _paths(o)
    assert o.cli("compact", "--keep-days", "7", "--now", NOW) == 0

    tag = "refs/tags/orchestrator-archive/20261231T120000Z"
    assert git("rev-parse", tag, cwd=o.path) == old_tip
    assert _paths(o, old_tip) == before  # the archive keeps everything
    assert git("rev-list", "--count", BRANCH, cwd=o.path) == "1"  # a new root commit
    after = _paths(o)
    assert not any(p.startswith(("state/runs/old--", "state/dlq/old--")) for p in after)
    assert "state/runs/open--20261201T0700Z/run.json" in after
    assert "state/runs/new--20261230T0700Z/run.json" in after
    assert o.show("state/ticks.jsonl") == "{}\n{}"
    assert "archived 1 run(s) and 1 discarded dead letter(s)" in capsys.readouterr().out

    tip = o.tip()
    assert o.cli("compact", "--keep-days", "7", "--now", NOW) == 0
    assert o.tip() == tip
    assert "nothing to archive" in capsys.readouterr().out


def test_compact_in_single_branch_mode_does_not_rewrite_history(tmp_path: Path) -> None:
    o = Origin(tmp_path)
    project = tmp_path / "project"
    git("init", "--quiet", "--initial-branch=main", str(project))
    (project / "README.md").write_text("project\n")
    git("add", ".", cwd=project)
    git("commit", "--quiet", "-m", "project", cwd=project)
    git("push", "--quiet", str(o.path), "main", cwd=project)
    o.seed(run_files("old--20261201T0700Z", RunStatus.COMPLETED, OLD, tracks=["a"],
                     phase=TrackPhase.COMPLETE), "main")
    old_tip = o.tip("main")
    assert main(["--repo", str(o.repo), "--remote", str(o.path), "--state-branch", "main",
                 "compact", "--keep-days", "7", "--now", NOW]) == 0
    assert git("rev-parse", "main^", cwd=o.path) == old_tip
    # the run is gone; the record of the compaction stays, for status
    assert _paths(o, "main") == ["README.md", "state/retention.json"]
    assert git("rev-list", "--count", "main", cwd=o.path) == "3"


def test_a_report_racing_the_compaction_is_not_lost(tmp_path: Path) -> None:
    o = _history(tmp_path)
    o.seed(run_files("open--20261201T0700Z", RunStatus.RUNNING, tracks=["a"],
                     phase=TrackPhase.DISPATCHED))
    store = GitStateStore(o.clone("compactor"), str(o.path))
    now = datetime(2026, 12, 31, 12, 0, tzinfo=UTC)
    calls = 0

    def change(snap: Snapshot) -> Change:
        nonlocal calls
        calls += 1
        if calls == 1:  # a track reports between the compactor's read and its push
            assert main(["--repo", str(o.clone("leg")), "--remote", str(o.path), "report",
                         "--run", "open--20261201T0700Z", "--track", "a", "--phase",
                         "complete"]) == 0
        return plan(snap.files, 7, now).change

    result = store.archive(change, "compact", "orchestrator-archive/x")
    assert result.landed and result.attempts == 2
    assert o.track("a", "open--20261201T0700Z").phase is TrackPhase.COMPLETE
    assert "state/runs/old--20261201T0700Z/run.json" not in _paths(o)
    # The tag holds the tip the winning attempt replaced, which includes the report.
    tagged = git("rev-parse", "orchestrator-archive/x", cwd=o.path)
    assert git("log", "-1", "--format=%s", tagged, cwd=o.path).startswith("report ")


def test_compact_refuses_a_tag_that_already_exists(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    o = _history(tmp_path)
    git("tag", "orchestrator-archive/20261231T120000Z", BRANCH, cwd=o.path)
    tip = o.tip()
    assert o.cli("compact", "--keep-days", "7", "--now", NOW) == 1
    assert "already exists" in capsys.readouterr().err
    assert o.tip() == tip
