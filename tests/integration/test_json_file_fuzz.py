"""Every reader of a JSON file, and the commands above them, fed random bytes, hostile
shapes and files that are not regular files.

A reader returns or says why in one line; a command exits 0 or 1 (never 4), prints no
traceback, and finishes in bounded time.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cli import main
from orchestrator.config.files import load_all
from orchestrator.errors import UserError
from orchestrator.executors.local_outcome import read_result
from orchestrator.runs.reporting import load_result
from orchestrator.state import model as state_model
from orchestrator.store import GitStateStore
from orchestrator.support import safejson
from tests.builders import spec_data
from tests.gitrepo import clone, make_origin
from tests.hostile import VALID_RECORDS, hostile_texts, json_values, shapes

FUZZ = settings(max_examples=60, deadline=timedelta(seconds=5),
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])
SCHEDULES = [spec_data("* * * * *"), spec_data("0 7 * * *", tracks=["a", "b"]),
             {"at": "2026-12-01T07:00:00", "timezone": "Asia/Tokyo",
              "tracks": [{"name": "a", "run": "true", "inputs": {"k": "v"}}]}]
RESULTS = [{"summary": "done", "rows": 3}, {"summary": "", "details": {"a": [1, 2]}}]


def cli(*args: str) -> tuple[int, str, str]:
    """``orchestrator ARGS`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, err: str, allowed: tuple[int, ...] = (0, 1)) -> None:
    assert code in allowed, err
    assert "Traceback" not in err and "unexpected error" not in err


@FUZZ
@given(data=st.one_of(st.binary(max_size=4000), shapes.map(lambda s: s.encode(
    "utf-8", "surrogatepass")), json_values.map(lambda v: json.dumps(v).encode())))
def test_read_file_and_load_file_return_or_say_why(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(data)
    try:
        safejson.load_file(path, max_bytes=64 * 1024)
    except safejson.UnsafeJSON as exc:
        assert "\n" not in str(exc)


# validate in three formats, the Markdown one with the month's cost estimate: bounded,
# but a loaded machine needs more than the readers' 5 seconds
@pytest.mark.slow
@settings(FUZZ, deadline=timedelta(seconds=30))
@given(data=hostile_texts(SCHEDULES))
def test_the_schedule_loader_and_validate(tmp_path: Path, data: bytes) -> None:
    folder = tmp_path / "schedules"
    folder.mkdir(exist_ok=True)
    (folder / "fuzz.json").write_bytes(data)
    # the good neighbour is the daily schedule: a minutely one costs the Markdown
    # estimate seconds per example, the same seconds whatever the fuzzed file holds
    (folder / "good.json").write_text(json.dumps(SCHEDULES[1]))
    loaded = load_all(folder)
    assert "good" in [s.id for s in loaded.schedules]
    assert all("\n" not in e.message for e in loaded.errors)
    for fmt in ("text", "markdown", "json"):
        code, _, err = cli("--repo", str(tmp_path), "validate", "--preview", "2",
                           "--format", fmt)
        assert_clean(code, err)


@FUZZ
@given(data=hostile_texts(RESULTS))
def test_result_readers(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "result.json").write_bytes(data)
    try:
        load_result(tmp_path / "result.json")
    except UserError as exc:
        assert "\n" not in exc.message
    result, why = read_result(tmp_path)
    assert result is not None
    if why is not None:
        assert result == {"error": why} and "\n" not in why


ODD = {
    "fifo": lambda p: os.mkfifo(p),
    "dev-zero": lambda p: p.symlink_to("/dev/zero"),
    "loop": lambda p: p.symlink_to(p.name),
    "directory": lambda p: p.mkdir(),
    "dangling": lambda p: p.symlink_to("nowhere"),
}


@pytest.mark.parametrize("kind", sorted(ODD))
def test_files_that_are_not_regular_files(tmp_path: Path, kind: str) -> None:
    ODD[kind](tmp_path / "result.json")
    with pytest.raises(safejson.UnsafeJSON):
        safejson.load_file(tmp_path / "result.json")
    with pytest.raises(UserError):
        load_result(tmp_path / "result.json")
    result, why = read_result(tmp_path)
    assert why is not None and result == {"error": why}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("fuzz")
    checkout = clone(make_origin(tmp, {"every": spec_data("* * * * *", overlap="allow")}),
                     tmp / "repo")
    os.environ["ORCHESTRATOR_WORK_DIR"] = str(tmp / "work")
    try:
        code, _, err = cli("--repo", str(checkout), "tick", "--now",
                             "2026-12-01T06:55:30Z")
    finally:
        del os.environ["ORCHESTRATOR_WORK_DIR"]
    assert code == 0, err
    return checkout


@pytest.mark.slow
@settings(FUZZ, max_examples=25)
@given(path=st.sampled_from(["state/runs/every--20261201T0655Z/run.json",
                             "state/runs/every--20261201T0655Z/tracks/a.json",
                             "state/runs/every--20261201T0655Z/polls.jsonl",
                             "state/schedules/every.json", "state/health.json",
                             "state/ticks.jsonl", "state/dlq/every--20261201T0655Z--a.json"]),
       bad=hostile_texts(VALID_RECORDS))
def test_a_tick_and_status_over_a_hostile_record(repo: Path, path: str, bad: bytes) -> None:
    store = GitStateStore(repo, "origin", "orchestrator-state")
    store.transact(lambda _snap: {path: bad}, "fuzz")
    code, out, err = cli("--repo", str(repo), "tick", "--dry-run", "--now",
                         "2026-12-01T07:00:30Z")
    assert_clean(code, err, (0,))
    assert "every--20261201T0700Z" in out or "quarantined state/schedules/every.json" in out
    code, out, err = cli("--repo", str(repo), "status", "--max-staleness", "100000",
                         "--now", "2026-12-01T07:00:30Z")
    assert_clean(code, err, (0, 5))
    for run in ("list", "show every--20261201T0655Z"):
        code, out, err = cli("--repo", str(repo), "runs", *run.split())
        assert_clean(code, err)
    store.transact(lambda snap: {path: None} if path in snap.files else None, "unfuzz")
    state_model.load(store.read().files)
