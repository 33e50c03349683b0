"""Schedules chained by ``after``, with the local executor and a real git origin: each
link fires once per upstream run, in the tick that records the upstream's end; a list
of upstreams waits for all of them; a failed upstream fires no ``completed`` downstream;
racing ticks fire a downstream once; ``validate`` refuses a loop."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cli import main
from orchestrator.state.layout import brief_path
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus
from orchestrator.support.checkpoints import POINTS
from tests.builders import spec_data
from tests.drive import (
    cli,
    cli_tick,
    github_tick,
    launches,
    run_ticks,
    start_cli,
    state_of,
    tick,
    wait_until,
)
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, make_origin

INGEST = "ingest--20261201T0700Z"


def at(minute: int) -> datetime:
    return datetime.fromisoformat(f"2026-12-01T07:{minute:02d}:30Z")


def after(*upstreams: str, **fields: Any) -> dict[str, Any]:
    """A schedule without a clock, fired after ``upstreams``; its track writes what it
    was told about its upstream into ``$OUT/<schedule>``."""
    ups = [{"schedule": u} for u in upstreams]
    return spec_data(None, after=ups[0] if len(ups) == 1 else ups, **fields)


def noting(name: str) -> str:
    return (f'printf "%s|%s" "$ORCHESTRATOR_UPSTREAM_RUN" "$ORCHESTRATOR_UPSTREAM_RESULTS"'
            f' > "$OUT/{name}"')


def settled(work: Path) -> bool:
    """Whether every attempt launched in ``work`` has ended."""
    return all(json.loads(s.read_text()).get("state") not in ("queued", "running")
               for s in work.glob("*/status.json"))


def tick_at(repo: Path, work: Path, minute: int) -> str:
    """A tick once every launched attempt ended; its log."""
    wait_until(lambda: settled(work), timeout=60)
    return "\n".join(tick(repo, at(minute), work).log)


def runs_of(state: State, schedule_id: str) -> list[str]:
    return sorted(r for r, run in state.runs.items() if run.schedule_id == schedule_id)


def setup(tmp_path: Path, schedules: dict[str, dict[str, Any]]) -> tuple[Path, Path]:
    return clone(make_origin(tmp_path, schedules), tmp_path / "repo"), tmp_path / "work"


def test_a_chain_of_three_fires_each_link_once_in_the_tick_that_ends_the_one_before(
        tmp_path: Path, monkeypatch: Any) -> None:
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("OUT", str(out))
    repo, work = setup(tmp_path, {
        "ingest": spec_data("0 7 * * *"),
        "transform": after("ingest", tracks=[{"name": "a", "run": noting("transform")}]),
        "report": after("transform", tracks=[{"name": "a", "run": noting("report")}]),
    })
    tick_at(repo, work, 0)  # ingest fires and its track runs
    tick_at(repo, work, 1)  # records ingest's end, fires and sends transform
    state, snap = state_of(repo)
    assert state.runs[INGEST].status is RunStatus.COMPLETED
    [transform] = runs_of(state, "transform")
    # the brief rendered in that commit links to the run its end fired
    assert f'href="../{transform}/brief.html"' in snap.files[brief_path(INGEST)].decode()
    assert state.runs[transform].upstream == [INGEST]
    assert state.runs[transform].origin == "after"
    assert transform.startswith("transform--20261201T0700Z-after-")
    assert state.runs[transform].status is not RunStatus.SCHEDULED  # sent in that tick
    assert runs_of(state, "report") == []
    tick_at(repo, work, 2)  # transform ends: report fires in the same tick
    state, _ = state_of(repo)
    [report] = runs_of(state, "report")
    assert state.runs[report].upstream == [transform]
    for minute in (3, 4, 5):
        tick_at(repo, work, minute)
    state, snap = state_of(repo)
    assert runs_of(state, "transform") == [transform] and runs_of(state, "report") == [report]
    assert state.runs[report].status is RunStatus.COMPLETED
    shown = snap.files[brief_path(transform)].decode()
    assert f'href="../{INGEST}/brief.html"' in shown
    assert f'href="../{report}/brief.html"' in shown
    assert (out / "transform").read_text() == f"{INGEST}|state/runs/{INGEST}"
    assert (out / "report").read_text() == f"{transform}|state/runs/{transform}"


def test_a_list_of_upstreams_fires_once_when_both_completed_not_when_one_did(
        tmp_path: Path) -> None:
    repo, work = setup(tmp_path, {
        "left": spec_data("0 7 * * *"),
        "right": spec_data("2 7 * * *"),
        "both": after("left", "right"),
    })
    tick_at(repo, work, 0)
    log = tick_at(repo, work, 1)  # left ended; right has not run yet
    state, _ = state_of(repo)
    assert runs_of(state, "both") == []
    assert state.cursors["both"].after is not None
    assert [e.run_id for e in state.cursors["both"].after.waiting["left"]] == [
        "left--20261201T0700Z"]
    assert "both" not in log or "fired" not in log
    tick_at(repo, work, 2)  # right fires
    tick_at(repo, work, 3)  # right ends: both fires
    for minute in (4, 5):
        tick_at(repo, work, minute)
    state, _ = state_of(repo)
    [both] = runs_of(state, "both")
    assert state.runs[both].upstream == ["left--20261201T0700Z", "right--20261201T0702Z"]
    assert state.runs[both].status is RunStatus.COMPLETED
    assert state.cursors["both"].after is not None
    assert state.cursors["both"].after.waiting == {}


def test_a_failed_upstream_run_fires_no_completed_downstream(tmp_path: Path) -> None:
    repo, work = setup(tmp_path, {
        "ingest": spec_data("0 7 * * *", run="false"),
        "transform": after("ingest"),
        "cleanup": spec_data(None, after={"schedule": "ingest", "status": ["failed"]}),
    })
    tick_at(repo, work, 0)
    log = tick_at(repo, work, 1)
    for minute in (2, 3):
        tick_at(repo, work, minute)
    state, _ = state_of(repo)
    assert state.runs[INGEST].status is RunStatus.FAILED
    assert runs_of(state, "transform") == []
    assert f"transform: after: {INGEST} ended failed, not counted (ingest (completed))" in log
    [cleanup] = runs_of(state, "cleanup")
    assert state.runs[cleanup].upstream == [INGEST]


def test_three_racing_ticks_fire_the_downstream_once(tmp_path: Path) -> None:
    """Three checkouts share one work folder (one machine): each sees the upstream's
    track end, and all three tick at once to record it."""
    origin = make_origin(tmp_path, {"ingest": spec_data("0 7 * * *"),
                                    "transform": after("ingest")})
    repos = [clone(origin, tmp_path / f"repo{i}") for i in range(3)]
    work = tmp_path / "work"
    tick_at(repos[0], work, 0)
    wait_until(lambda: settled(work), timeout=60)
    env = {"ORCHESTRATOR_WORK_DIR": str(work)}
    run_ticks([start_cli(r, "tick", "--now", f"{at(1):%Y-%m-%dT%H:%M:%SZ}", env=env)
               for r in repos])
    for minute in (2, 3, 4):
        tick_at(repos[minute % 3], work, minute)
    state, _ = state_of(repos[0])
    assert state.runs[INGEST].status is RunStatus.COMPLETED
    [transform] = runs_of(state, "transform")
    assert state.runs[transform].upstream == [INGEST]
    assert state.runs[transform].status is RunStatus.COMPLETED


def test_validate_refuses_a_loop_of_three_schedules_in_one_line(tmp_path: Path) -> None:
    repo, _ = setup(tmp_path, {"a": after("c"), "b": after("a"), "c": after("b"),
                               "d": after("nowhere"), "e": spec_data("0 7 * * *")})
    proc = cli(repo, "validate")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    loops = [line for line in lines if "loop" in line]
    assert len(loops) == 1
    assert loops[0].endswith("schedules/a.json: after: a loop of schedules: a -> b -> c -> a "
                             "(a chain must end: remove one 'after')")
    assert any("d.json: after: no schedule 'nowhere'" in line for line in lines)
    shown = cli(repo, "validate", "--format", "text").stdout
    assert "after a (completed)" in shown or "after c (completed)" in shown


def chained_folder(tmp_path: Path) -> Path:
    """A repository whose schedules chain, fired by a clock, a queue and events."""
    drain = [{"name": "work", "run": "true", "drain": {"queue": "jobs"}}]
    folder = tmp_path / "repo" / "schedules"
    folder.mkdir(parents=True)
    for sid, data in {
        "ingest": spec_data("0 7 * * *"), "transform": after("ingest"),
        "report": after("transform"), "audit": after("transform", on_event={}),
        "crawl": spec_data(None, on_queue={"queue": "jobs", "min_ready": 100}, tracks=drain),
        "index": after("crawl"), "smoke": spec_data(None, on_event={}),
        "nightly": spec_data("0 2 * * *"),
    }.items():
        (folder / f"{sid}.json").write_text(json.dumps(data))
    return folder.parent


def test_schedules_show_names_upstreams_and_downstreams(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = str(chained_folder(tmp_path))
    assert main(["--repo", repo, "schedules", "show", "transform"]) == 0
    out = capsys.readouterr().out
    assert "  upstream:  ingest (completed)\n  downstream: audit, report\n" in out
    assert main(["--repo", repo, "schedules", "show", "ingest", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["upstreams"], shown["downstreams"]) == ([], ["transform"])


def test_the_pull_request_s_comment_lists_the_chains_and_names_queue_and_event_causes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--repo", str(chained_folder(tmp_path)), "validate", "--format", "markdown",
                 "--from", "2026-12-01T00:00:00Z"]) == 0
    out = capsys.readouterr().out
    section = out.split("### Chains\n\n")[1].split("\n\n")[0].splitlines()
    assert section == [
        "- on queue jobs (100 ready) → `crawl` → `index`",
        "- `ingest` → `transform` → `audit` (also on an event)",
        "- `ingest` → `transform` → `report`",
        "- on an event → `smoke`",
    ]


def test_on_github_the_tick_that_records_the_upstream_s_end_dispatches_the_downstream(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    """The fake GitHub executor, a tick that reads the legs' ends (``fan_in: next_tick``,
    so no fan-in job records them first): one dispatch per link, no tick between."""
    repo, _ = setup(tmp_path, {
        "ingest": spec_data("0 7 * * *", fan_in="next_tick"),
        "transform": after("ingest", fan_in="next_tick"),
    })
    github_tick(repo, fake_github, at(0))
    [first] = fake_github.runs
    fake_github.complete_all(first)
    github_tick(repo, fake_github, at(2))
    state, _ = state_of(repo)
    assert state.runs[INGEST].status is RunStatus.COMPLETED
    [transform] = runs_of(state, "transform")
    assert [c.body["inputs"]["run_id"] for c in fake_github.dispatches] == [INGEST, transform]
    *_, second = fake_github.runs
    fake_github.complete_all(second)
    github_tick(repo, fake_github, at(4))
    github_tick(repo, fake_github, at(6))
    state, _ = state_of(repo)
    assert state.runs[transform].status is RunStatus.COMPLETED
    assert runs_of(state, "transform") == [transform]
    assert len(fake_github.dispatches) == 2


@pytest.mark.slow
@pytest.mark.parametrize("point", [p for p in POINTS if p != "fetch"])
def test_a_tick_killed_while_it_records_the_upstream_s_end_leaves_one_downstream_run(
        tmp_path: Path, point: str) -> None:
    """The tick that records the upstream's end is killed at each checkpoint; ordinary
    ticks follow. The downstream fires once, whatever the killed tick committed."""
    repo, work = setup(tmp_path, {"ingest": spec_data("0 7 * * *"),
                                  "transform": after("ingest")})
    tick_at(repo, work, 0)
    wait_until(lambda: settled(work), timeout=60)
    proc = cli_tick(repo, f"{at(1):%Y-%m-%dT%H:%M:%SZ}", work=work, crash_at=point,
                    timeout=180)
    assert proc.returncode in (0, -9), proc.stderr
    for minute in (2, 3, 4, 5):
        tick_at(repo, work, minute)
    state, _ = state_of(repo)
    assert state.runs[INGEST].status is RunStatus.COMPLETED
    [transform] = runs_of(state, "transform")
    assert state.runs[transform].status is RunStatus.COMPLETED
    assert sorted(k for k in launches(work) if k.startswith("transform")) == [
        f"{transform}--a--1"]
