"""``orchestrator render --api`` and ``schema --api`` on a real state branch, read from
a local checkout of it as ``pages.yml`` reads it."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from orchestrator.api import models
from orchestrator.api.incremental import MANIFEST
from orchestrator.cli import main
from orchestrator.state import codec, layout
from orchestrator.state.phases import RunStatus
from orchestrator.store import GitStateStore
from tests.builders import run_files, spec_data, track
from tests.drive import cli
from tests.gitrepo import git

BRANCH = "orchestrator-state"
NOW = "2026-12-02T08:00:00Z"
SECRET = "s3cret-token-of-the-runner"
RUNS = ["nightly--20261130T0700Z", "nightly--20261201T0700Z"]


@pytest.fixture
def repo(repo_with_origin: Callable[..., Path]) -> Path:
    """A checkout with a ``nightly`` schedule; its state branch holds two finished runs,
    the newer one's track having printed the runner's token."""
    work = repo_with_origin({"nightly": spec_data("0 7 * * *")})
    files: dict[str, bytes | None] = {layout.TICKS: codec.json_line({"at": "2026-12-01T07:30:00Z"})}
    for run_id in RUNS:
        slot = layout.parse_run_id(run_id)[1]
        files.update(run_files(run_id, RunStatus.COMPLETED, slot + timedelta(minutes=5)))
    files[layout.track_path(RUNS[1], "a")] = codec.to_json(track(
        "a", run_id=RUNS[1], result={"summary": f"logged in with {SECRET}"}))
    store = GitStateStore(work, "origin", BRANCH, sleep=lambda _: None)
    assert store.transact(lambda _snap: files, "state for the test").landed
    return work


def render_api(repo: Path, out: Path) -> str:
    """What ``render --api`` prints, run with the runner's token in its environment."""
    done = cli(repo, "--state-branch", BRANCH, "render", "--api", str(out), "--now", NOW,
               env={"GITHUB_TOKEN": SECRET})
    assert done.returncode == 0, done.stderr
    return done.stdout


def read_tree(folder: Path) -> dict[str, bytes]:
    """The published files under ``folder``: all but the render's own manifest."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}


def manifest(folder: Path) -> dict[str, Any]:
    data = json.loads((folder / MANIFEST).read_bytes())
    assert isinstance(data, dict)
    return data


def test_render_api_writes_valid_redacted_files_and_then_only_what_changed(
        repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    render_api(repo, out)
    first = read_tree(out)
    assert f"api/v1/runs/{RUNS[1]}.json" in first and "badges/nightly.svg" in first
    assert not [p for p, data in first.items() if SECRET.encode() in data]
    run = json.loads(first[f"api/v1/runs/{RUNS[1]}.json"])
    assert run["tracks"]["a"]["result"] == {"summary": "logged in with ***"}
    for path, data in first.items():
        if path.startswith("api/v1/") and "/schemas/" not in path:
            doc = json.loads(data)
            kind = doc["$schema"].rpartition("/")[2].removesuffix(".schema.json")
            jsonschema.validate(doc, models.json_schema(kind))

    # the same branch, the same instant: nothing is written
    assert render_api(repo, out).strip() == f"{out}: 0 files written, 0 removed"

    # the newer run is archived away: its file goes, the indexes change
    store = GitStateStore(repo, "origin", BRANCH, sleep=lambda _: None)
    gone = dict.fromkeys(run_files(RUNS[1]))
    assert store.transact(lambda _snap: gone, "compacted").landed
    render_api(repo, out)
    second = read_tree(out)
    changed = {p for p in first.keys() | second.keys() if first.get(p) != second.get(p)}
    assert changed == {f"api/v1/runs/{RUNS[1]}.json", "api/v1/index.json",
                       "api/v1/schedules/nightly.json", "api/v1/runs/page-1.json",
                       "badges/nightly.svg"}
    done = manifest(out)
    assert done["removed"] == [f"api/v1/runs/{RUNS[1]}.json"]
    assert set(done["written"]) == changed - {f"api/v1/runs/{RUNS[1]}.json"}


def test_render_api_reads_a_local_checkout_of_the_state_branch(
        repo: Path, tmp_path: Path) -> None:
    """What pages.yml does: the state branch checked out alone, the default branch
    beside it, ``--remote`` naming the checkout's folder."""
    state = tmp_path / "state"
    origin = git("remote", "get-url", "origin", cwd=repo)
    git("clone", "--quiet", "--depth", "1", "--branch", BRANCH, f"file://{origin}", str(state),
        cwd=tmp_path)
    out = tmp_path / "site"
    assert main(["--repo", str(repo), "--remote", str(state), "--state-branch", BRANCH,
                 "render", "--api", str(out), "--now", NOW]) == 0
    index = json.loads((out / "api/v1/index.json").read_bytes())
    assert index["schedules"][0]["last_run"]["run_id"] == RUNS[1]


def test_render_api_refuses_a_run_beside_it(repo: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--repo", str(repo), "render", RUNS[0], "--api", str(tmp_path)]) != 0
    assert "--api renders the whole API" in capsys.readouterr().err


def test_schema_api_prints_the_schema_of_every_kind(capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    assert main(["schema", "--api"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == models.json_schemas()
    assert set(printed) == {"index", "schedule", "run", "runs-page", "queues", "queue"}
