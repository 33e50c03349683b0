"""A bad input costs only itself: beside each hostile file, record or track output, an
every-minute schedule still fires, and the tick's output names the culprit.

Every test runs the real command line (``python -m orchestrator``) against real git,
with a bare origin in a temporary folder, and the local executor.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.builders import spec_data
from tests.drive import cli, cli_tick
from tests.gitrepo import clone, git, make_origin

NOW = "2026-12-01T07:00:30Z"
EVERY = spec_data("* * * * *", run="true", overlap="allow")
BRANCH = "orchestrator-state"


def assert_fired(proc: subprocess.CompletedProcess[str], slot: str = "20261201T0700Z") -> None:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"every--{slot}" in proc.stdout, proc.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return clone(make_origin(tmp_path, {"every": EVERY}), tmp_path / "repo")


# --------------------------------------------------------------------- schedule files

TRACK = [{"name": "a", "run": "true"}]


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data)


BAD_SCHEDULES: dict[str, tuple[str, str]] = {
    # name: (file text, what the error line says)
    "old": (_json({"at": "0999-01-01T00:00:00Z", "tracks": TRACK}), "at: "),
    "edge-new-york": (_json({"at": "9999-12-31T23:59:00", "timezone": "America/New_York",
                             "tracks": TRACK}), "out of range"),
    "edge-tokyo": (_json({"at": "0001-01-01T00:00:00", "timezone": "Asia/Tokyo",
                          "tracks": TRACK}), "out of range"),
    "edge-offset": (_json({"at": "9999-12-31T23:59:00+14:00", "tracks": TRACK}),
                    "out of range"),
    "huge-int": ('{"cron": "* * * * *", "jitter_seconds": ' + "9" * 5000
                 + ', "tracks": [{"name": "a", "run": "true"}]}', "an integer of 5000 digits"),
    "deep": ("[" * 100_000 + "]" * 100_000, "nested deeper than"),
    "long-run": (_json({"cron": "* * * * *", "tracks": [{"name": "a", "run": "x" * 1_000_000}]}),
                 "tracks.0.run: a command of 1000000 bytes"),
}


@pytest.mark.parametrize("name", sorted(BAD_SCHEDULES))
def test_a_bad_schedule_file_is_named_and_the_others_fire(repo: Path, tmp_path: Path,
                                                          name: str) -> None:
    text, problem = BAD_SCHEDULES[name]
    (repo / "schedules" / f"{name}.json").write_text(text)
    proc = cli_tick(repo, NOW, work=tmp_path / "work")
    assert_fired(proc)
    line = next(x for x in proc.stdout.splitlines() if f"schedules/{name}.json" in x)
    assert problem in line
    assert len(line) < 400  # one line, not the whole input echoed back
    again = cli_tick(repo, "2026-12-01T07:01:30Z", work=tmp_path / "work")
    assert_fired(again, "20261201T0701Z")
    check = cli(repo, "validate", work=tmp_path / "work")
    assert check.returncode == 1
    assert f"schedules/{name}.json" in check.stdout + check.stderr
    assert "every" in check.stdout  # the valid file is still previewed


def _loop(path: Path) -> None:
    path.symlink_to(path.name)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _directory(path: Path) -> None:
    path.mkdir()


def _link_to_directory(path: Path) -> None:
    path.symlink_to(path.parent)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _outside(path: Path) -> None:
    target = path.parent.parent.parent / "outside.json"
    target.write_text(_json({"cron": "* * * * *", "tracks": TRACK}))
    path.symlink_to(target)


ODD_FILES = {
    "loop": (_loop, "a symlink loop"),
    "zero": (_dev_zero, "a symlink out of the repository"),
    "dir": (_directory, "not a regular file (a directory)"),
    "dirlink": (_link_to_directory, "not a regular file (a directory)"),
    "fifo": (_fifo, "not a regular file (a FIFO)"),
    "outside": (_outside, "a symlink out of the repository"),
}


@pytest.mark.parametrize("name", sorted(ODD_FILES))
def test_a_schedule_that_is_not_a_regular_file_is_named_and_the_others_fire(
        repo: Path, tmp_path: Path, name: str) -> None:
    make, problem = ODD_FILES[name]
    make(repo / "schedules" / f"{name}.json")
    proc = cli_tick(repo, NOW, work=tmp_path / "work")
    assert_fired(proc)
    line = next(x for x in proc.stdout.splitlines() if f"schedules/{name}.json" in x)
    assert problem in line


@pytest.mark.parametrize("suffix", [".JSON", ".Json"])
def test_a_schedule_beside_its_upper_case_twin_still_fires_and_the_twin_is_named(
        repo: Path, tmp_path: Path, suffix: str) -> None:
    folder = repo / "schedules"
    (folder / f"every{suffix}").write_text((folder / "every.json").read_text())
    proc = cli_tick(repo, NOW, work=tmp_path / "work")
    assert_fired(proc)  # the file with the lower-case suffix is the schedule
    [line] = [x for x in proc.stdout.splitlines() if f"schedules/every{suffix}" in x]
    assert "not read: schedules/every.json is schedule 'every'" in line
    check = cli(repo, "validate", work=tmp_path / "work")
    assert check.returncode == 1  # the pull request that adds the twin fails
    assert f"schedules/every{suffix}: id: not read" in check.stderr
    assert "every  (schedules/every.json)" in check.stdout  # and the schedule is previewed


def test_two_twins_without_a_lower_case_suffix_are_both_named(repo: Path,
                                                              tmp_path: Path) -> None:
    folder = repo / "schedules"
    for suffix in (".JSON", ".Json"):
        (folder / f"twin{suffix}").write_text((folder / "every.json").read_text())
    proc = cli_tick(repo, NOW, work=tmp_path / "work")
    assert_fired(proc)  # the others still fire
    assert sum("duplicate id 'twin'" in x for x in proc.stdout.splitlines()) == 2
    assert "twin--" not in proc.stdout


@pytest.mark.parametrize("encoding", ["C", "C.UTF-8"])
def test_a_schedule_file_name_that_is_not_utf8_is_printed_escaped(
        repo: Path, tmp_path: Path, encoding: str) -> None:
    (repo / "schedules" / os.fsdecode(b"caf\xe9.json")).write_text("{}")
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "--repo", str(repo), "tick", "--now", NOW],
        capture_output=True, timeout=120, env={**os.environ, "LC_ALL": encoding,
                                               "ORCHESTRATOR_WORK_DIR": str(tmp_path / "w")})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode("utf-8")  # strictly: `tick | iconv -f utf-8` reads it
    assert "every--20261201T0700Z" in out
    [line] = [x for x in out.splitlines() if ".json: id:" in x]
    assert "schedules/caf\\udce9.json: id: file name 'caf\\udce9.json'" in line
    check = subprocess.run([sys.executable, "-m", "orchestrator", "--repo", str(repo),
                            "validate"], capture_output=True, timeout=120,
                           env={**os.environ, "LC_ALL": encoding})
    assert "schedules/caf\\udce9.json: id:" in check.stderr.decode("utf-8")


@pytest.mark.parametrize("name", ["fifo", "zero", "outside"])
def test_an_orchestrator_json_that_is_not_a_regular_file_is_named_and_the_others_fire(
        repo: Path, tmp_path: Path, name: str) -> None:
    make, problem = ODD_FILES[name]
    make(repo / "orchestrator.json")
    proc = cli_tick(repo, NOW, work=tmp_path / "work")
    assert_fired(proc)
    line = next(x for x in proc.stdout.splitlines() if "orchestrator.json" in x)
    assert problem in line


def test_validate_does_not_wait_on_a_workflow_file_that_is_a_fifo(repo: Path,
                                                                 tmp_path: Path) -> None:
    workflows = repo / ".github" / "workflows"
    workflows.mkdir(parents=True)
    os.mkfifo(workflows / "track.yml")
    (repo / "schedules" / "cheap.json").write_text(
        _json({"cron": "7 * * * *", "fan_in": "next_tick", "tracks": TRACK}))
    proc = cli(repo, "validate", "--format", "json", work=tmp_path / "work")
    assert proc.returncode == 0, proc.stderr
    [cheap] = [s for s in json.loads(proc.stdout)["schedules"] if s["id"] == "cheap"]
    # a FIFO is no workflow file: the schedule's workflow is said to be missing
    assert any("'track.yml' is not in .github/workflows" in w for w in cheap["warnings"])


# --------------------------------------------------------------------- state records


def edit_state(origin: Path, tmp: Path, files: dict[str, bytes | None]) -> None:
    """Commit ``files`` (``None``: delete) on the state branch of ``origin`` as a person
    with push access would, through an ordinary clone."""
    edit = tmp / "edit"
    if not edit.exists():
        git("clone", "--quiet", "--branch", BRANCH, str(origin), str(edit), cwd=tmp)
    git("pull", "--quiet", "--ff-only", cwd=edit)
    for path, data in files.items():
        target = edit / path
        if data is None:
            git("rm", "--quiet", "-r", path, cwd=edit)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        git("add", path, cwd=edit)
    git("commit", "--quiet", "-m", "hand edit", cwd=edit)
    git("push", "--quiet", "origin", f"HEAD:{BRANCH}", cwd=edit)


def origin_of(repo: Path) -> Path:
    return Path(git("remote", "get-url", "origin", cwd=repo))


OLD_RUN = "every--20261201T0655Z"
"""A run fired by the first tick of the state tests (at 06:55), then vandalised."""


@pytest.fixture
def fired(repo: Path, tmp_path: Path) -> Path:
    """``repo`` after a tick at 06:55 fired ``OLD_RUN`` (and its track completed)."""
    first = cli_tick(repo, "2026-12-01T06:55:30Z", work=tmp_path / "work")
    assert_fired(first, "20261201T0655Z")
    return repo


CORRUPT_RECORDS: dict[str, tuple[dict[str, bytes | None], str]] = {
    "invalid-json": ({f"state/runs/{OLD_RUN}/run.json": b"{not json"},
                     f"state/runs/{OLD_RUN}/run.json: (root): line 1 column 2: invalid JSON"),
    "schema": ({f"state/runs/{OLD_RUN}/run.json": b'{"run_id": "' + OLD_RUN.encode()
                + b'", "status": "exploded"}'},
               f"state/runs/{OLD_RUN}/run.json: "),
    "deep": ({f"state/runs/{OLD_RUN}/tracks/a.json": b"[" * 100_000 + b"]" * 100_000},
             f"state/runs/{OLD_RUN}/tracks/a.json: (root): nested deeper than"),
    "huge-int": ({"state/schedules/every.json": b'{"schedule_id": 1' + b"0" * 5000 + b"}"},
                 "state/schedules/every.json: (root): an integer of 5001 digits"),
    "evil-folder": ({"state/runs/evil/run.json": b"{}"}, "state/runs/'evil': not a run id"),
    "file-entry": ({"state/runs/every--20261201T0650Z": b"x"},
                   "state/runs/every--20261201T0650Z: a file, not a run folder; left alone"),
}


@pytest.mark.parametrize("name", sorted(CORRUPT_RECORDS))
def test_a_corrupt_state_record_is_quarantined_and_the_rest_is_served(
        fired: Path, tmp_path: Path, name: str) -> None:
    files, culprit = CORRUPT_RECORDS[name]
    edit_state(origin_of(fired), tmp_path, files)
    proc = cli_tick(fired, NOW, work=tmp_path / "work")
    if name == "huge-int":  # the schedule's own cursor is held; nothing else is lost
        assert proc.returncode == 0, proc.stderr
    else:
        assert_fired(proc)
    assert f"quarantined {culprit}" in proc.stdout
    status = cli(fired, "status", "--max-staleness", "100000", work=tmp_path / "work")
    assert "Traceback" not in status.stderr
    assert culprit in status.stdout
    again = cli_tick(fired, "2026-12-01T07:01:30Z", work=tmp_path / "work")
    assert f"quarantined {culprit}" in again.stdout  # on every tick, not once
    snap = git("show", f"{BRANCH}:{next(iter(files))}", cwd=origin_of(fired))
    assert snap.encode()[:50] == next(iter(files.values()))[:50]  # left alone


def test_a_schedule_held_by_its_quarantined_record_says_so_in_trigger_and_status(
        fired: Path, tmp_path: Path) -> None:
    edit_state(origin_of(fired), tmp_path, {"state/schedules/every.json": b"{not json"})
    work = tmp_path / "work"
    refused = cli(fired, "trigger", "every", "--now", NOW, work=work)
    assert refused.returncode == 1, refused
    assert "its state record is quarantined (state/schedules/every.json: " in refused.stderr
    assert "no such valid schedule" not in refused.stderr
    report = json.loads(cli(fired, "status", "--now", NOW, "--json", work=work).stdout)
    [row] = report["schedules"]
    assert row["next"] is None and "invalid JSON" in row["held"]
    assert report["next_wake"] is None  # the tick fires none of it: nothing falls due
    text = cli(fired, "status", "--now", NOW, work=work).stdout
    assert "every  HELD: its state record is quarantined" in text


def test_a_run_id_that_climbs_out_of_the_state_tree_is_quarantined(
        fired: Path, tmp_path: Path) -> None:
    path = f"state/runs/{OLD_RUN}/run.json"
    record = json.loads(git("show", f"{BRANCH}:{path}", cwd=origin_of(fired)))
    record["run_id"] = "../../evil"
    edit_state(origin_of(fired), tmp_path, {path: json.dumps(record).encode()})
    proc = cli_tick(fired, NOW, work=tmp_path / "work")
    assert_fired(proc)
    assert f"quarantined {path}: run_id: '../../evil' does not match" in proc.stdout


def plumb(*args: str, cwd: Path, input_text: str) -> str:
    """``git ARGS`` fed ``input_text``: builds trees ``git add`` would refuse."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True, input=input_text).stdout.strip()


def test_a_tree_entry_named_dot_dot_is_quarantined(fired: Path, tmp_path: Path) -> None:
    origin = origin_of(fired)
    blob = plumb("hash-object", "-w", "--stdin", cwd=origin, input_text="{}")
    runs = git("rev-parse", f"{BRANCH}:state/runs", cwd=origin)
    listing = git("ls-tree", runs, cwd=origin) + f"\n100644 blob {blob}\t..\n"
    new_runs = plumb("mktree", cwd=origin, input_text=listing)
    state = git("ls-tree", f"{BRANCH}:state", cwd=origin)
    state = "\n".join(line if not line.endswith("\truns") else f"040000 tree {new_runs}\truns"
                      for line in state.splitlines()) + "\n"
    top = plumb("mktree", cwd=origin, input_text=f"040000 tree "
                f"{plumb('mktree', cwd=origin, input_text=state)}\tstate\n")
    commit = git("commit-tree", top, "-p", BRANCH, "-m", "a '..' entry", cwd=origin)
    git("update-ref", f"refs/heads/{BRANCH}", commit, cwd=origin)
    proc = cli_tick(fired, NOW, work=tmp_path / "work")
    assert_fired(proc)
    assert "quarantined state/runs/'..': not a run id" in proc.stdout
    # git's index cannot carry a `..`: that commit dropped it, and the quarantine
    # follows the tree, not the index's memory of it
    assert "\t..\n" not in git("ls-tree", f"{BRANCH}:state/runs", cwd=origin) + "\n"
    for minute in (1, 2):
        again = cli_tick(fired, f"2026-12-01T07:0{minute}:30Z", work=tmp_path / "work")
        assert_fired(again, f"20261201T070{minute}Z")
        assert "'..'" not in again.stdout
    status = cli(fired, "status", "--max-staleness", "100000", work=tmp_path / "work")
    assert "'..'" not in status.stdout


@pytest.mark.slow
def test_an_open_run_whose_folder_became_a_file_is_named_until_it_is_restored(
        repo: Path, tmp_path: Path) -> None:
    origin, work = origin_of(repo), tmp_path / "work"
    first = cli_tick(repo, "2026-12-01T06:55:30Z", work=work)
    assert_fired(first, "20261201T0655Z")  # open: no tick has seen its track end yet
    folder = f"state/runs/{OLD_RUN}"
    saved = {line.split("\t", 1)[1]: git("show", f"{BRANCH}:{line.split(chr(9), 1)[1]}",
                                           cwd=origin).encode() + b"\n"
             for line in git("ls-tree", "-r", BRANCH, folder, cwd=origin).splitlines()}
    edit_state(origin, tmp_path, {folder: None})
    edit_state(origin, tmp_path, {folder: b"not a folder\n"})
    lost = f"quarantined {folder}: the open run (running, slot 2026-12-01T06:55:00Z) lost its"
    for minute in (6, 7, 8):
        proc = cli_tick(repo, f"2026-12-01T06:5{minute}:30Z", work=work)
        assert_fired(proc, f"20261201T065{minute}Z")
        [line] = [x for x in proc.stdout.splitlines() if folder in x]
        assert line.strip().startswith(lost) and "its folder is a file now" in line, line
        assert "restore it from the branch's history" in line
    status = cli(repo, "status", "--max-staleness", "100000", work=work)
    assert lost in status.stdout
    # hours later, still named: nobody acted
    late = cli_tick(repo, "2026-12-01T11:00:30Z", work=work)
    assert lost in late.stdout
    # the records restored by hand: the run is served again, and consolidated
    edit_state(origin, tmp_path, {folder: None})
    edit_state(origin, tmp_path, saved)
    back = cli_tick(repo, "2026-12-01T11:01:30Z", work=work)
    assert folder not in back.stdout.replace(f"{OLD_RUN}:", "")
    assert f"{OLD_RUN}: " in back.stdout  # served: tapped out at its deadline, its brief
    after = cli_tick(repo, "2026-12-01T11:02:30Z", work=work)
    assert "lost its" not in after.stdout


def test_a_lost_run_is_let_go_by_deleting_its_entry(repo: Path, tmp_path: Path) -> None:
    origin, work = origin_of(repo), tmp_path / "work"
    assert_fired(cli_tick(repo, "2026-12-01T06:55:30Z", work=work), "20261201T0655Z")
    edit_state(origin, tmp_path, {f"state/runs/{OLD_RUN}": None})
    gone = cli_tick(repo, "2026-12-01T06:56:30Z", work=work)
    assert f"quarantined state/runs/{OLD_RUN}: " in gone.stdout
    assert "its folder is gone" in gone.stdout
    index = json.loads(git("show", f"{BRANCH}:state/open.json", cwd=origin))
    assert list(index["lost"]) == [OLD_RUN]
    del index["lost"][OLD_RUN]
    index["quarantined"].pop(f"state/runs/{OLD_RUN}", None)
    edit_state(origin, tmp_path, {"state/open.json": json.dumps(index).encode()})
    later = cli_tick(repo, "2026-12-01T06:57:30Z", work=work)
    assert_fired(later, "20261201T0657Z")
    assert OLD_RUN not in later.stdout


def test_a_run_whose_track_record_vanished_ends_at_its_deadline(repo: Path,
                                                                 tmp_path: Path) -> None:
    (repo / "schedules" / "gone.json").write_text(json.dumps(
        spec_data("* * * * *", run="true", deadline_minutes=2)))  # overlap: skip
    work = tmp_path / "work"
    first = cli_tick(repo, "2026-12-01T06:55:30Z", work=work)
    assert "gone--20261201T0655Z: fired" in first.stdout
    edit_state(origin_of(repo), tmp_path,
               {"state/runs/gone--20261201T0655Z/tracks/a.json": None})
    before = cli_tick(repo, "2026-12-01T06:56:30Z", work=work)
    assert_fired(before, "20261201T0656Z")
    assert ("gone--20261201T0655Z: no record of track(s) a; treated as lost, the run ends "
            "at its deadline 2026-12-01T06:57:30Z") in before.stdout
    after = cli_tick(repo, "2026-12-01T06:58:30Z", work=work)
    assert_fired(after, "20261201T0658Z")
    assert "gone--20261201T0655Z: consolidating (1 lost)" in after.stdout
    assert "gone--20261201T0655Z: failed; brief rendered" in after.stdout
    later = cli_tick(repo, "2026-12-01T06:59:30Z", work=work)
    assert "gone--20261201T0659Z: fired" in later.stdout  # overlap: skip no longer blocks


def test_a_huge_poll_log_is_cut_to_its_newest_lines_in_the_tick_and_the_brief(
        fired: Path, tmp_path: Path) -> None:
    path = f"state/runs/{OLD_RUN}/polls.jsonl"
    line = json.dumps({"at": "2026-12-01T06:55:30Z", "executor": "local",
                       "changes": ["x" * 200]}) + "\n"
    edit_state(origin_of(fired), tmp_path, {path: line.encode() * 20_000})  # 4.6 MB
    proc = cli_tick(fired, NOW, work=tmp_path / "work")
    assert_fired(proc)
    assert f"{OLD_RUN}: completed; brief rendered" in proc.stdout
    origin = origin_of(fired)
    log = git("show", f"{BRANCH}:{path}", cwd=origin).splitlines()
    assert sum(len(x) + 1 for x in log) < 300 * 1024
    assert "older lines cut" in json.loads(log[0])["changes"][0]
    assert "completed; brief rendered" in json.loads(log[-1])["changes"]
    brief = git("show", f"{BRANCH}:state/runs/{OLD_RUN}/brief.html", cwd=origin)
    assert len(brief) < 1024 * 1024
    assert "older lines cut" in brief


# --------------------------------------------------------------------- track output


def wait_finished(work: Path, key: str, timeout: float = 120) -> None:
    """Until the local attempt ``key`` has ended. ``timeout`` only stops a hang: a track
    that writes a hostile result takes what the machine's load makes it take."""
    status = work / key / "status.json"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if status.exists() and json.loads(status.read_text()).get("state") not in (
                "queued", "running"):
            return
        time.sleep(0.1)
    raise AssertionError(f"{key} did not finish")


def track_record(repo: Path, run_id: str, track: str = "a") -> dict[str, Any]:
    return json.loads(git("show", f"{BRANCH}:state/runs/{run_id}/tracks/{track}.json",
                          cwd=origin_of(repo)))


HOSTILE_RESULTS = {
    "surrogate": ("""printf '{"summary": "\\\\ud800"}' > "$ORCHESTRATOR_RESULT\"""",
                  "a lone surrogate"),
    "deep": ("""python3 -c "print('['*30000 + ']'*30000)" > "$ORCHESTRATOR_RESULT\"""",
             "nested deeper than 64 levels"),
    "fifo": ("""rm -f "$ORCHESTRATOR_RESULT"; mkfifo "$ORCHESTRATOR_RESULT\"""",
             "not a regular file (a FIFO)"),
    "dev-zero": ("""ln -sf /dev/zero "$ORCHESTRATOR_RESULT\"""", "a symlink"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_RESULTS))
def test_a_poisonous_result_becomes_that_attempts_error(repo: Path, tmp_path: Path,
                                                        name: str) -> None:
    command, problem = HOSTILE_RESULTS[name]
    (repo / "schedules" / "bad.json").write_text(json.dumps(
        spec_data("* * * * *", run=command, overlap="allow")))
    work = tmp_path / "work"
    assert_fired(cli_tick(repo, NOW, work=work))
    wait_finished(work, "bad--20261201T0700Z--a--1")
    proc = cli_tick(repo, "2026-12-01T07:01:30Z", work=work)
    assert_fired(proc, "20261201T0701Z")
    assert "bad--20261201T0700Z: a: dispatched -> complete" in proc.stdout
    record = track_record(repo, "bad--20261201T0700Z")
    assert problem in record["result"]["error"]
    again = cli_tick(repo, "2026-12-01T07:02:30Z", work=work)
    assert_fired(again, "20261201T0702Z")


def test_a_report_with_bytes_that_are_not_utf8_exits_1(fired: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable.encode(), b"-m", b"orchestrator", b"--repo", bytes(fired), b"report",
         b"--run", OLD_RUN.encode(), b"--track", b"a", b"--phase", b"failed",
         b"--message", b"bad \xff bytes"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("orchestrator: --message: not valid UTF-8 text")
    assert proc.stderr.count("\n") == 1


# --------------------------------------------------------------------- secrets

TOKEN = "ghs_" + "S3cr3tT0k3n" * 3


def test_a_track_gets_no_token_and_what_it_prints_is_redacted(repo: Path,
                                                               tmp_path: Path) -> None:
    # The track leaks every credential it can find, and one it was handed on purpose.
    leak = ('printf \'{"summary": "token=[%s] given=[%s]"}\' "${GITHUB_TOKEN:-}" '
            '"${#GH_TOKEN}" > "$ORCHESTRATOR_RESULT"; echo "leaked $GITHUB_TOKEN $GH_TOKEN" >&2;'
            ' exit 1')
    spec = spec_data("* * * * *", run=leak, overlap="allow")
    spec["tracks"][0]["credentials"] = ["GH_TOKEN"]
    (repo / "schedules" / "leaky.json").write_text(json.dumps(spec))
    env = {"GITHUB_TOKEN": TOKEN, "GH_TOKEN": TOKEN[::-1]}
    work = tmp_path / "work"
    # a local origin: the token is not sent anywhere, it is only in the environment
    assert_fired(cli_tick(repo, NOW, work=work, env=env))
    wait_finished(work, "leaky--20261201T0700Z--a--1")
    proc = cli_tick(repo, "2026-12-01T07:01:30Z", work=work, env=env)
    assert_fired(proc, "20261201T0701Z")
    assert "leaky--20261201T0700Z: a: dispatched -> failed" in proc.stdout
    record = track_record(repo, "leaky--20261201T0700Z")
    # not passed: the track saw an empty GITHUB_TOKEN; asked for: GH_TOKEN had its length
    assert record["result"]["summary"] == f"token=[] given=[{len(TOKEN)}]"
    assert "leaked  ***" in "\n".join(record["error_log"])
    everything = git("log", "-p", BRANCH, cwd=origin_of(repo)) + proc.stdout + proc.stderr
    assert TOKEN not in everything and TOKEN[::-1] not in everything


# --------------------------------------------------------------------- the job summary


@pytest.mark.slow
def test_validate_markdown_keeps_html_and_links_from_schedules_inert(repo: Path,
                                                                     tmp_path: Path) -> None:
    from markdown_it import MarkdownIt

    hostile = spec_data("* * * * *", run="true", overlap="allow")
    hostile["description"] = ("<script>alert(1)</script> [x](javascript:alert(1)) "
                              "<img src=x onerror=alert(1)>\n| injected | row |")
    (repo / "schedules" / "shiny.json").write_text(json.dumps(hostile))
    (repo / "schedules" / "bad\n| x | y |\n<script>.json").write_text("{}")
    proc = cli(repo, "validate", "--format", "markdown", work=tmp_path / "work")
    assert proc.returncode == 1
    html = MarkdownIt("commonmark", {"html": True}).enable(["table"]).render(proc.stdout)
    assert "<script" not in html and "<img" not in html
    assert 'href="javascript:' not in html
    assert "injected" in html and "<td>injected</td>" not in html
    # the invalid-files table (the first; the estimate's follow): its head and one row
    assert html.split("</table>")[0].count("<tr>") == 2
    assert_fired(cli_tick(repo, NOW, work=tmp_path / "work"))  # and both valid schedules still fire


# --------------------------------------------------------------------- faults


def test_without_git_on_path_commands_exit_3_with_one_line(repo: Path, tmp_path: Path) -> None:
    for args in (["tick", "--now", NOW], ["status"], ["runs", "list"]):
        proc = cli(repo, *args, work=tmp_path / "work", env={"PATH": str(tmp_path / "empty")})
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr == ("orchestrator: cannot run git (No such file or directory): "
                               "install git or put it on PATH\n")


def _read_only(path: Path) -> list[str]:
    """A command prefix that runs its command with ``path`` mounted read-only (a user and
    mount namespace: root in a container can write through any file mode)."""
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("unshare -rm is not allowed here")
    return ["unshare", "-rm", "sh", "-c",
            f'mount --bind "{path}" "{path}" && mount -o remount,bind,ro "{path}" "{path}" '
            '&& exec "$@"', "sh"]


def test_a_read_only_checkout_exits_3_with_one_line(repo: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    assert_fired(cli_tick(repo, "2026-12-01T06:55:30Z", work=work), "20261201T0655Z")
    proc = subprocess.run(
        [*_read_only(repo), sys.executable, "-m", "orchestrator", "--repo", str(repo), "tick",
         "--now", NOW], capture_output=True, text=True, timeout=120,
        env={**os.environ, "ORCHESTRATOR_WORK_DIR": str(work)})
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("orchestrator: ") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


def test_a_report_for_an_attempt_that_is_not_current_is_refused(repo: Path,
                                                                 tmp_path: Path) -> None:
    (repo / "schedules" / "slow.json").write_text(json.dumps(
        spec_data("* * * * *", run="sleep 3", overlap="allow")))
    work = tmp_path / "work"
    assert_fired(cli_tick(repo, NOW, work=work))
    for attempt in ("2", "7"):
        proc = cli(repo, "report", "--run", "slow--20261201T0700Z", "--track", "a",
                   "--phase", "complete", "--attempt", attempt, work=work)
        assert proc.returncode == 1
        assert proc.stderr == (f"orchestrator: refused the complete report of attempt "
                               f"{attempt} for slow--20261201T0700Z/a: the current attempt "
                               "is 1\n")
    assert track_record(repo, "slow--20261201T0700Z")["phase"] == "dispatched"
    assert_fired(cli_tick(repo, "2026-12-01T07:01:30Z", work=work), "20261201T0701Z")


@pytest.mark.parametrize("given", [None, "1"])
def test_a_track_sees_its_users_environment_not_the_orchestrators_own_settings(
        repo: Path, tmp_path: Path, given: str | None) -> None:
    # the orchestrator turns pydantic's plugins off for itself, unless told otherwise
    show = ('printf \'{"summary": "[%s]"}\' "${PYDANTIC_DISABLE_PLUGINS-unset}" '
            '> "$ORCHESTRATOR_RESULT"')
    (repo / "schedules" / "every.json").write_text(json.dumps(spec_data("* * * * *",
                                                                        run=show)))
    env = dict(os.environ)
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    if given is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = given
    work = tmp_path / "work"
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "--repo", str(repo), "tick",
                           "--now", NOW], capture_output=True, text=True, timeout=60,
                          env={**env, "ORCHESTRATOR_WORK_DIR": str(work)})
    assert_fired(proc)
    wait_finished(work, "every--20261201T0700Z--a--1")
    assert_fired(cli_tick(repo, "2026-12-01T07:01:30Z", work=work, env=env), "20261201T0701Z")
    summary = track_record(repo, "every--20261201T0700Z")["result"]["summary"]
    assert summary == f"[{given or 'unset'}]"


def test_a_pydantic_plugin_installed_beside_the_orchestrator_is_never_loaded(
        repo: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "spy-1.0.dist-info").mkdir(parents=True)
    (site / "spy-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: spy\n"
                                                         "Version: 1.0\n")
    (site / "spy-1.0.dist-info" / "entry_points.txt").write_text("[pydantic]\nspy = spy:plugin\n")
    marker = tmp_path / "loaded"
    (site / "spy.py").write_text(f"open({str(marker)!r}, 'a').write('loaded\\n')\n"
                                 "class _P:\n    def new_schema_validator(self, *a, **k):\n"
                                 "        return None, None, None\nplugin = _P()\n")
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env["PYTHONPATH"] = str(site)
    # pydantic loads it for any other program that validates a model...
    subprocess.run([sys.executable, "-c", "import pydantic\nclass M(pydantic.BaseModel):\n"
                    "    x: int\nM(x=1)\n"], env=env, check=True, timeout=60)
    assert marker.read_text() == "loaded\n"
    marker.unlink()
    # ...never for the orchestrator, whose tick validates many: it does not even read
    # an entry point (an audit hook sees every file the process opens)
    seen = ("import atexit, runpy, sys\n"
            "opened = []\n"
            "sys.addaudithook(lambda event, args: opened.append(str(args[0]))"
            " if event == 'open' else None)\n"
            "atexit.register(lambda: print('ENTRY POINTS READ', any(p.endswith("
            "'entry_points.txt') for p in opened), file=sys.stderr))\n"
            "sys.argv = ['orchestrator', *sys.argv[1:]]\n"
            "runpy.run_module('orchestrator', run_name='__main__')\n")
    work = tmp_path / "work"
    proc = subprocess.run([sys.executable, "-c", seen, "--repo", str(repo), "tick", "--now",
                           NOW], capture_output=True, text=True, timeout=60,
                          env={**env, "ORCHESTRATOR_WORK_DIR": str(work)})
    assert_fired(proc)
    assert not marker.exists()
    assert "ENTRY POINTS READ False" in proc.stderr
    # unless the environment turns plugins on: pydantic's own loader then loads it
    proc = subprocess.run([sys.executable, "-c", seen, "--repo", str(repo), "tick", "--now",
                           "2026-12-01T07:01:30Z"], capture_output=True, text=True,
                          timeout=60, env={**env, "ORCHESTRATOR_WORK_DIR": str(work),
                                           "PYDANTIC_DISABLE_PLUGINS": ""})
    assert_fired(proc, "20261201T0701Z")
    assert marker.read_text() == "loaded\n"
    assert "ENTRY POINTS READ True" in proc.stderr
