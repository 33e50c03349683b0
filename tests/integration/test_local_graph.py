"""Stages, skips, the consolidate step and poll tracks with the local executor: real
git (a bare origin in a temp folder), real ticks, real processes."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from orchestrator.state import layout
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.support.times import parse_utc
from tests.builders import spec_data
from tests.drive import state_of, tick
from tests.gitrepo import clone, make_origin

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
BRANCH = "orchestrator-state"
RUN = "g--20261201T0700Z"

WRITE = 'printf \'{"summary": "did %s"}\' "$ORCHESTRATOR_TRACK" > "$ORCHESTRATOR_RESULT"'

# The consolidate step of these tests: reads ORCHESTRATOR_RESULTS and reports what it saw.
CONSOLIDATE = (
    "python3 -c 'import json, os; r = json.load(open(os.environ[\"ORCHESTRATOR_RESULTS\"])); "
    "json.dump({\"summary\": \"merged \" + \", \".join(n + \" \" + v[\"phase\"] for n, v in "
    "sorted(r.items())), \"seen\": r}, open(os.environ[\"ORCHESTRATOR_RESULT\"], \"w\"))'"
)


def settled(work: Path, keys: list[str], timeout: float = 20.0) -> None:
    """Wait until every attempt in ``keys`` has exited."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done = [work / k / "status.json" for k in keys]
        if all(p.exists() and json.loads(p.read_text())["state"] == "exited" for p in done):
            return
        time.sleep(0.05)
    raise AssertionError(f"{keys} did not finish")


def drive(repo: Path, work: Path, start: datetime, ticks: int = 12) -> list[Any]:
    """Tick once a (virtual) minute, letting what each tick started finish first,
    until the run is consolidated; the results of every tick."""
    results = []
    now = start
    for _ in range(ticks):
        result = tick(repo, now, work)
        results.append(result)
        if RUN in result.rendered:
            return results
        settled(work, result.dispatched)
        now += timedelta(minutes=1)
    raise AssertionError(f"{RUN} not consolidated after {ticks} ticks")


def launched(work: Path) -> list[dict[str, Any]]:
    lines = (work / "launches.log").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_a_three_stage_graph_runs_stage_by_stage_with_measured_times(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"g": spec_data(tracks=[
        {"name": "fetch", "run": WRITE},
        {"name": "build", "run": WRITE, "needs": ["fetch"]},
        {"name": "check", "run": WRITE, "needs": ["fetch"]},
        {"name": "publish", "run": WRITE, "needs": ["build", "check"]},
    ])})
    repo, work = clone(origin, tmp_path / "repo"), tmp_path / "work"
    results = drive(repo, work, T0 + timedelta(minutes=1))
    stages = [sorted(k.split("--")[2] for k in r.dispatched) for r in results]
    # each stage is dispatched by the tick that sees its needs finish
    assert stages == [["fetch"], ["build", "check"], ["publish"], []]
    state, snap = state_of(repo)
    assert state.runs[RUN].status is RunStatus.COMPLETED
    tracks = state.tracks[RUN]
    assert {n: t.result for n, t in tracks.items()} == {
        n: {"summary": f"did {n}"} for n in ("fetch", "build", "check", "publish")}
    # a stage starts only after what it needs has ended (the commands' own clocks)
    at = {line["key"].split("--")[2]: parse_utc(line["at"]) for line in launched(work)}
    assert tracks["fetch"].finished_at is not None
    assert at["build"] >= tracks["fetch"].finished_at
    assert at["publish"] >= max(tracks["build"].finished_at or T0,
                                tracks["check"].finished_at or T0)
    # times are the commands' own: a `printf` lasts well under a second, not the
    # minute between the ticks that noticed it
    for t in tracks.values():
        assert t.started_at is not None and t.finished_at is not None
        assert timedelta(0) <= t.finished_at - t.started_at < timedelta(seconds=5)
    brief = snap.files[layout.brief_path(RUN)].decode()
    assert "1m" not in brief.split("<table", 1)[1].split("</table>", 1)[0]


def test_a_failure_skips_its_dependants_and_consolidate_sees_every_result(
        tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"g": spec_data(tracks=[
        {"name": "ok", "run": WRITE},
        {"name": "bad", "run": "echo broken >&2; exit 3"},
        {"name": "after", "run": WRITE, "needs": ["bad"]},
        {"name": "last", "run": WRITE, "needs": ["after", "ok"]},
    ], consolidate={"run": CONSOLIDATE})})
    repo, work = clone(origin, tmp_path / "repo"), tmp_path / "work"
    results = drive(repo, work, T0 + timedelta(minutes=1))
    assert [sorted(k.split("--")[2] for k in r.dispatched) for r in results] == [
        ["bad", "ok"], ["consolidate"], []]
    state, snap = state_of(repo)
    tracks = state.tracks[RUN]
    assert {n: t.phase for n, t in tracks.items()} == {
        "ok": TrackPhase.COMPLETE, "bad": TrackPhase.FAILED, "after": TrackPhase.SKIPPED,
        "last": TrackPhase.SKIPPED, "consolidate": TrackPhase.COMPLETE}
    assert state.runs[RUN].status is RunStatus.FAILED
    merged = tracks["consolidate"].result
    assert merged is not None
    assert merged["summary"] == "merged after skipped, bad failed, last skipped, ok complete"
    seen = merged["seen"]
    assert seen["ok"]["result"] == {"summary": "did ok"} and seen["ok"]["attempt"] == 1
    assert "broken" in "\n".join(seen["bad"]["error_tail"])
    assert "consolidate" not in seen
    # skipped tracks never ran
    assert sorted(line["key"].split("--")[2] for line in launched(work)) == [
        "bad", "consolidate", "ok"]
    brief = snap.files[layout.brief_path(RUN)].decode()
    assert "skipped" in brief
    assert brief.index("merged after skipped") < brief.index("did ok")


POLL = (
    'n=$(cat "$COUNTER" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "$COUNTER"; '
    '[ "$n" -ge 3 ] || exit 75; '
    'printf \'{"summary": "ready after %s polls"}\' "$n" > "$ORCHESTRATOR_RESULT"'
)


def test_a_poll_track_waits_twice_then_completes_on_one_attempt(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    origin = make_origin(tmp_path, {"g": spec_data(tracks=[
        {"name": "wait", "run": f'COUNTER="{counter}"; {POLL}', "poll_interval_minutes": 1},
    ])})
    repo, work = clone(origin, tmp_path / "repo"), tmp_path / "work"
    results = drive(repo, work, T0 + timedelta(minutes=1))
    keys = [k for r in results for k in r.dispatched]
    assert keys == [f"{RUN}--wait--1", f"{RUN}--wait--1.1", f"{RUN}--wait--1.2"]
    assert [line["key"] for line in launched(work)] == keys
    state, snap = state_of(repo)
    wait = state.tracks[RUN]["wait"]
    assert (wait.phase, wait.attempt, wait.polls) == (TrackPhase.COMPLETE, 1, 2)
    assert wait.result == {"summary": "ready after 3 polls"}
    assert state.runs[RUN].status is RunStatus.COMPLETED
    assert RUN + "--wait" not in state.dlq
    lines = [json.loads(x) for x in snap.files[layout.polls_path(RUN)].decode().splitlines()]
    polls = [x for x in lines if x.get("track") == "wait"]
    assert [(p["poll"], p["answer"]) for p in polls] == [
        (1, "not yet"), (2, "not yet"), (3, "complete")]
    brief = snap.files[layout.brief_path(RUN)].decode()
    assert brief.count('class="poll-mark"') == 3
