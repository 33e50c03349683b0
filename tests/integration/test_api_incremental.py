"""``render --api`` onto a folder it rendered before: a real tick of the local executor
finishes one run of a branch of 300, and the render after it rewrites that run's file,
its schedule's and the indexes, byte for byte what a full render writes."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.api.incremental import MANIFEST
from orchestrator.state import codec, layout
from orchestrator.state.phases import RunStatus
from orchestrator.store import GitStateStore
from tests.builders import run_files, spec_data
from tests.drive import STATE_BRANCH, cli, finished, launches, tick, wait_until
from tests.integration.test_render_api import manifest, read_tree

DAY = datetime(2026, 12, 1, tzinfo=UTC)
HOURS = {"early": (1, 7, 13, 19), "noon": (3, 9, 15, 21), "late": (5, 11, 17, 23)}
"""Each schedule fires four times a day: 100 runs each are 25 days, within retention."""
PER_SCHEDULE = 100
RUN = "early--20261201T0700Z"


def at(hour: int, minute: int) -> datetime:
    return DAY + timedelta(hours=hour, minutes=minute)


@pytest.fixture
def repo(repo_with_origin: Callable[..., Path]) -> Path:
    """Three schedules, each with its 100 slots before 07:00 of ``DAY`` run and ended."""
    work = repo_with_origin({sid: spec_data(f"0 {','.join(map(str, hours))} * * *")
                             for sid, hours in HOURS.items()})
    files: dict[str, bytes | None] = {layout.TICKS: codec.json_line({"at": "2026-12-01T06:00:00Z"})}
    for sid, hours in HOURS.items():
        slots = sorted((DAY + timedelta(days=-d, hours=h) for d in range(30) for h in hours
                        if DAY + timedelta(days=-d, hours=h) < at(7, 0)), reverse=True)
        for n, slot in enumerate(slots[:PER_SCHEDULE]):
            status = RunStatus.FAILED if n % 7 == 3 else RunStatus.COMPLETED
            files.update(run_files(f"{sid}--{slot:%Y%m%dT%H%MZ}", status,
                                   slot + timedelta(minutes=3)))
    store = GitStateStore(work, "origin", STATE_BRANCH, sleep=lambda _: None)
    assert store.transact(lambda _snap: files, "300 finished runs").landed
    return work


def render_api(repo: Path, out: Path, now: datetime) -> str:
    done = cli(repo, "render", "--api", str(out), "--now", f"{now:%Y-%m-%dT%H:%M:%SZ}")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_tick_that_finishes_one_run_rewrites_its_file_its_schedules_and_the_indexes(
        repo: Path, tmp_path: Path) -> None:
    work, site = tmp_path / "work", tmp_path / "site"
    tick(repo, at(7, 0), work)  # starts the run of `early`
    assert [k.startswith(RUN) for k in launches(work)] == [True]
    wait_until(lambda: all(finished(work, k) for k in launches(work)), timeout=60)
    first = render_api(repo, site, at(7, 5))
    assert "a full render: no manifest" in first

    tick(repo, at(7, 2), work)  # sees the track ended: the run completes
    assert len(launches(work)) == 1
    assert json.loads(GitStateStore(repo, "origin", STATE_BRANCH).read()
                      .files[layout.run_path(RUN)])["status"] == "completed"
    before = read_tree(site)
    printed = render_api(repo, site, at(7, 5))
    assert "full render" not in printed

    done = manifest(site)
    assert f"api/v1/runs/{RUN}.json" in done["written"]
    assert set(done["written"]) <= {
        f"api/v1/runs/{RUN}.json", "api/v1/schedules/early.json", "badges/early.svg",
        "api/v1/index.json", "api/v1/queues.json", "api/v1/runs/page-4.json",
        "badges/repository.svg"}
    after = read_tree(site)
    assert {p for p in after if before.get(p) != after[p]} == set(done["written"])

    # byte for byte what a full render of the same branch at the same instant writes
    fresh = tmp_path / "fresh"
    assert "a full render: no manifest" in render_api(repo, fresh, at(7, 5))
    assert read_tree(fresh) == after
    assert manifest(fresh)["documents"] == done["documents"]


def test_a_manifest_that_cannot_be_trusted_means_a_full_render(repo: Path, tmp_path: Path
                                                               ) -> None:
    site = tmp_path / "site"
    render_api(repo, site, at(6, 0))
    rendered = read_tree(site)
    run_file = site / "api/v1/runs/early--20261130T0700Z.json"
    run_file.write_bytes(b"edited by hand\n")

    # trusted: the run's folder did not change, so its file is not built again
    assert "full render" not in render_api(repo, site, at(6, 0))
    assert run_file.read_bytes() == b"edited by hand\n"

    for broken, why in ((b"{not json", "its manifest is unreadable"),
                        (json.dumps({**manifest(site), "version": 0}).encode(),
                         "its manifest is of another version"),
                        (json.dumps({**manifest(site), "renderer": "x"}).encode(),
                         "another orchestrator or other credentials rendered it")):
        run_file.write_bytes(b"edited by hand\n")
        (site / MANIFEST).write_bytes(broken)
        printed = render_api(repo, site, at(6, 0))
        assert f"a full render: {why}" in printed and "1 files written" in printed
        assert read_tree(site) == rendered
