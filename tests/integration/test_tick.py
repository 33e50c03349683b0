"""The tick against real git (a bare origin in a temp folder) and real local processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from orchestrator.state import layout
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.builders import spec_data
from tests.drive import cli, launches, state_of, tick, wait_until
from tests.gitrepo import clone, make_origin
from tests.indexcheck import assert_index_agrees

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
BRANCH = "orchestrator-state"


def tip(origin: Path) -> str | None:
    out = subprocess.run(["git", "rev-parse", "--verify", "-q", f"refs/heads/{BRANCH}"],
                         cwd=origin, capture_output=True, text=True)
    return out.stdout.strip() or None


# The schedule file of these tests: daily at 07:00, tracks a and b running `run`.
spec = partial(spec_data, tracks=("a", "b"))


# ---------------------------------------------------------------------------------------


def test_a_run_goes_from_due_to_brief(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"nightly": spec(
        run='printf \'{"summary": "did %s"}\' "$ORCHESTRATOR_TRACK" > "$ORCHESTRATOR_RESULT"')})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    first = tick(repo, T0 + timedelta(minutes=3), work)
    assert first.mark_landed and first.record_landed
    assert sorted(first.dispatched) == ["nightly--20261201T0700Z--a--1",
                                        "nightly--20261201T0700Z--b--1"]
    wait_until(lambda: all((work / k / "status.json").exists() and json.loads(
        (work / k / "status.json").read_text())["state"] == "exited" for k in first.dispatched))
    second = tick(repo, T0 + timedelta(minutes=4), work)
    assert second.rendered == ("nightly--20261201T0700Z",)
    state, snap = state_of(repo)
    run = state.runs["nightly--20261201T0700Z"]
    assert run.status is RunStatus.COMPLETED
    assert state.tracks[run.run_id]["a"].result == {"summary": "did a"}
    brief = snap.files[layout.brief_path(run.run_id)].decode()
    assert "did a" in brief and "did b" in brief
    assert b"nightly--20261201T0700Z" in snap.files[layout.INDEX]
    polls = snap.files[layout.polls_path(run.run_id)].decode().splitlines()
    assert len(polls) >= 2
    # The brief is rendered after the finishing tick's poll line is appended: it counts
    # every line of polls.jsonl and shows the consolidation itself.
    assert f"{len(polls)} ticks looked at this run" in brief
    assert "completed; brief rendered" in json.loads(polls[-1])["changes"]
    assert "completed; brief rendered" in brief
    assert sorted(launches(work)) == sorted(first.dispatched)
    ticks = snap.files[layout.TICKS].decode().splitlines()
    assert len(ticks) >= 2 and json.loads(ticks[-1])["at"] == "2026-12-01T07:04:00Z"


def test_a_no_op_tick_leaves_the_origin_untouched(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"nightly": spec(cron="0 7 * * *")})
    repo = clone(origin, tmp_path / "repo")
    tick(repo, T0 - timedelta(hours=3), tmp_path / "work")  # first sight: cursor written
    before = tip(origin)
    assert before is not None
    result = tick(repo, T0 - timedelta(hours=2, minutes=59), tmp_path / "work")
    assert not result.mark_landed
    assert tip(origin) == before


def test_dry_run_prints_the_decision_and_changes_nothing(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"nightly": spec()})
    repo = clone(origin, tmp_path / "repo")
    proc = cli(repo, "tick", "--now", "2026-12-01T07:01:00Z", "--dry-run", "--json",
               env={"ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}, check=True)
    out = json.loads(proc.stdout)
    assert out["dry_run"] is True
    assert sorted(out["decision"]["dispatch"]) == ["nightly--20261201T0700Z--a--1",
                                                   "nightly--20261201T0700Z--b--1"]
    assert tip(origin) is None
    assert launches(tmp_path / "work") == []


def test_an_invalid_schedule_is_reported_and_valid_ones_still_fire(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"good": spec(), "bad": {"cron": "61 * * * *",
                                                              "tracks": []}})
    repo = clone(origin, tmp_path / "repo")
    result = tick(repo, T0 + timedelta(minutes=1), tmp_path / "work")
    assert any("bad.json" in e for e in result.schedule_errors)
    assert len(result.dispatched) == 2


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["after-mark", "after-dispatch"])
def test_a_tick_killed_mid_way_is_repaired_without_a_second_launch(tmp_path: Path,
                                                                  fault: str) -> None:
    origin = make_origin(tmp_path, {"nightly": spec(run="sleep 0.2")})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    env = {"ORCHESTRATOR_WORK_DIR": str(work)}
    proc = cli(repo, "tick", "--now", "2026-12-01T07:01:00Z", env=env, check=False,
               crash_at=fault)
    assert proc.returncode == -9, proc.stderr  # SIGKILL at the checkpoint
    state, _ = state_of(repo)
    tracks = state.tracks["nightly--20261201T0700Z"]
    assert {t.phase for t in tracks.values()} == {TrackPhase.DISPATCHED}
    assert all(t.handle is None for t in tracks.values())
    assert len(launches(work)) == (0 if fault == "after-mark" else 2)
    for minute in (2, 3, 4):
        cli(repo, "tick", "--now", f"2026-12-01T07:0{minute}:00Z", env=env, check=True)
        time.sleep(0.5)
    wait_until(lambda: len(launches(work)) == 2)
    for minute in (5, 6):
        cli(repo, "tick", "--now", f"2026-12-01T07:0{minute}:00Z", env=env, check=True)
    state, _ = state_of(repo)
    assert state.runs["nightly--20261201T0700Z"].status is RunStatus.COMPLETED
    assert sorted(launches(work)) == ["nightly--20261201T0700Z--a--1",
                                      "nightly--20261201T0700Z--b--1"]


@pytest.mark.slow
@pytest.mark.parametrize("rewind", ["older-commit", "deleted"])
def test_a_rewound_state_branch_fires_nothing_until_a_person_accepts_it(
        tmp_path: Path, rewind: str) -> None:
    """A tick killed after it launched; then the branch is restored from an older backup
    (or deleted). Ticks from this and from another work folder (another machine) must
    not launch the slot again until ``status --accept-rewind``."""
    origin = make_origin(tmp_path, {"nightly": spec(run="sleep 0.2")})
    repo = clone(origin, tmp_path / "repo")
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    env = {"ORCHESTRATOR_WORK_DIR": str(work)}
    cli(repo, "tick", "--now", "2026-12-01T06:30:00Z", env=env, check=True)  # first sight: a cursor
    backup = tip(origin)
    proc = cli(repo, "tick", "--now", "2026-12-01T07:01:00Z", env=env, check=False,
               crash_at="after-dispatch")
    assert proc.returncode == -9, proc.stderr
    wait_until(lambda: len(launches(work)) == 2)
    if rewind == "deleted":
        subprocess.run(["git", "update-ref", "-d", f"refs/heads/{BRANCH}"], cwd=origin,
                       check=True)
    else:
        subprocess.run(["git", "update-ref", f"refs/heads/{BRANCH}", str(backup)],
                       cwd=origin, check=True)
    # Four ticks race from this and three other work folders (other machines).
    folders = [work, elsewhere, *(tmp_path / f"machine{i}" for i in range(2))]
    procs = [subprocess.Popen([sys.executable, "-m", "orchestrator", "--repo", str(repo),
                               "tick", "--now", "2026-12-01T07:02:00Z"],
                              env={**os.environ, "ORCHESTRATOR_WORK_DIR": str(folder)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for folder in folders]
    for refused in procs:
        _, err = refused.communicate(timeout=120)
        assert refused.returncode == 3, err
        assert err.count("\n") == 1
        assert "behind its high-water mark" in err
        assert "orchestrator status --accept-rewind" in err
    status = cli(repo, "status", "--now", "2026-12-01T07:02:00Z", check=False)
    assert status.returncode == 3 and "was rewound" in status.stderr
    assert all(launches(folder) == [] for folder in folders[1:])
    assert len(launches(work)) == 2
    accepted = cli(repo, "status", "--accept-rewind", "--now", "2026-12-01T07:02:00Z",
                   check=False)
    assert accepted.stdout.startswith("accepted: ")
    assert accepted.returncode in (0, 5)  # fresh, or stale when the heartbeat was deleted
    again = cli(repo, "tick", "--now", "2026-12-01T07:02:00Z", env=env, check=True)
    assert "nightly--20261201T0700Z" in again.stdout  # the person said fire from here
    # Same work folder, same dispatch keys: the attempts are adopted, not launched again.
    assert sorted(launches(work)) == ["nightly--20261201T0700Z--a--1",
                                      "nightly--20261201T0700Z--b--1"]


def test_a_track_that_dies_silently_fails_and_the_run_still_gets_a_brief(tmp_path: Path
                                                                        ) -> None:
    origin = make_origin(tmp_path, {"nightly": spec(tracks=[
        {"name": "ok", "run": "true"},
        {"name": "dies", "run": "kill -9 $$"},
    ])})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    first = tick(repo, T0 + timedelta(minutes=1), work)
    wait_until(lambda: all(json.loads((work / k / "status.json").read_text()).get("state")
                           in ("exited", "lost") for k in first.dispatched
                           if (work / k / "status.json").exists())
               and len(first.dispatched) == 2)
    time.sleep(0.3)
    tick(repo, T0 + timedelta(minutes=2), work)
    state, snap = state_of(repo)
    run = state.runs["nightly--20261201T0700Z"]
    assert state.tracks[run.run_id]["dies"].phase is TrackPhase.FAILED
    assert run.status is RunStatus.FAILED
    assert layout.brief_path(run.run_id) in snap.files
    assert "nightly--20261201T0700Z--dies" in state.dlq


def test_a_run_past_its_deadline_is_tapped_out_and_consolidated(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"nightly": spec(run="sleep 30", deadline_minutes=5)})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    first = tick(repo, T0 + timedelta(minutes=1), work)
    assert len(first.dispatched) == 2
    late = tick(repo, T0 + timedelta(minutes=7), work)
    assert late.rendered == ("nightly--20261201T0700Z",)
    state, _ = state_of(repo)
    assert {t.phase for t in state.tracks["nightly--20261201T0700Z"].values()} == {
        TrackPhase.TAPPED_OUT}
    assert state.runs["nightly--20261201T0700Z"].status is RunStatus.FAILED
    # the processes were killed, not left running
    wait_until(lambda: all(json.loads((work / k / "status.json").read_text())["state"]
                           != "running" for k in first.dispatched))


def pushes_in(trace: Path) -> int:
    """How many ``git push`` commands a process traced to ``trace`` (``GIT_TRACE``) ran."""
    if not trace.exists():
        return 0
    return sum("trace: built-in: git push " in line
               for line in trace.read_text().splitlines())


@pytest.mark.slow
def test_racing_ticks_fire_every_slot_exactly_once(tmp_path: Path) -> None:
    """5 OS processes tick at the same instant, for 7 instants over 15 schedules.

    Seven minutes (06:59 to 07:05) hold two or more slots of every cron below
    (``*/5``: 07:00 and 07:05; ``1-59/4``: 06:57 at first sight, 07:01, 07:05), and the
    state grows by up to 15 runs a minute, so every instant races five pushes of many
    records. The ticks really collide: some of their pushes lose the compare-and-swap
    (a push that lands adds one commit to the linear state branch; the others lost)."""
    crons = ["* * * * *", "*/2 * * * *", "*/3 * * * *", "*/5 * * * *", "1-59/4 * * * *"]
    schedules = {f"s{i:02d}": {"cron": crons[i % len(crons)], "overlap": "allow",
                               "catchup_window_minutes": 2,
                               "tracks": [{"name": "t", "run": "true"}]} for i in range(15)}
    racers, minutes = 5, 6
    origin = make_origin(tmp_path, schedules)
    clones = [clone(origin, tmp_path / f"c{i}") for i in range(racers)]
    work = tmp_path / "work"
    traces = tmp_path / "traces"
    traces.mkdir()
    start = datetime(2026, 12, 1, 6, 59, tzinfo=UTC)
    pushed = lost = 0
    for step in range(minutes + 1):
        now = (start + timedelta(minutes=step)).strftime("%Y-%m-%dT%H:%M:%SZ")
        before = int(tip_count(origin))
        procs = [subprocess.Popen([sys.executable, "-m", "orchestrator", "--repo", str(c),
                                   "tick", "--now", now],
                                  env={**os.environ, "ORCHESTRATOR_WORK_DIR": str(work),
                                       "GIT_TRACE": str(traces / f"{step}-{i}")},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True) for i, c in enumerate(clones)]
        errors = [p.communicate()[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * racers, errors
        assert_index_agrees(state_of(clones[0])[1].files)
        tried = sum(pushes_in(traces / f"{step}-{i}") for i in range(racers))
        landed = int(tip_count(origin)) - before
        assert tried >= landed > 0
        pushed, lost = pushed + tried, lost + tried - landed
    assert lost > 0, f"no push of {pushed} lost a race: the ticks did not collide"
    state, _ = state_of(clones[0])
    from orchestrator.config.files import load_all
    from orchestrator.config.triggers import for_spec

    expected = set()
    for s in load_all(clones[0] / "schedules").schedules:
        # first sight at `start` fires the latest slot of the 2-minute window, then
        # every tick is on time and fires its own slot
        slots = for_spec(s.spec).slots
        first = slots(start - timedelta(minutes=2), start)[-1:]
        for slot in first + slots(start, start + timedelta(minutes=minutes)):
            expected.add(f"{s.id}--{slot:%Y%m%dT%H%MZ}")
    assert set(state.runs) == expected
    wait_until(lambda: len(launches(work)) >= len(expected), timeout=60)
    keys = launches(work)
    assert len(keys) == len(set(keys)) == len(expected)


def tip_count(origin: Path) -> str:
    """The number of commits on the origin's state branch (0 before the first)."""
    if tip(origin) is None:
        return "0"
    return subprocess.run(["git", "rev-list", "--count", f"refs/heads/{BRANCH}"], cwd=origin,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_the_job_summary_gets_the_tick_lines_and_the_finished_run_brief(tmp_path: Path
                                                                       ) -> None:
    origin = make_origin(tmp_path, {"nightly": spec()})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    summary = tmp_path / "summary.md"
    env = {"ORCHESTRATOR_WORK_DIR": str(work), "GITHUB_STEP_SUMMARY": str(summary)}
    cli(repo, "tick", "--now", "2026-12-01T07:01:00Z", env=env, check=True)
    assert "nightly--20261201T0700Z: fired slot" in summary.read_text()
    wait_until(lambda: len(launches(work)) == 2)
    time.sleep(0.5)
    cli(repo, "tick", "--now", "2026-12-01T07:02:00Z", env=env, check=True)
    text = summary.read_text()
    assert text.count("### Orchestrator tick") == 2
    assert "completed; brief rendered" in text
    assert "| a |" in text or "`a`" in text  # the run's Markdown brief lists its tracks


def test_the_job_summary_shares_its_limit_between_briefs_and_says_what_it_left_out(
        ) -> None:
    from orchestrator.commands.tick import BRIEF_MIN_BYTES, step_summary
    from orchestrator.tick.shell import TickResult

    asked: list[int] = []

    def brief(letter: str) -> Any:
        def render(limit: int) -> str:
            asked.append(limit)
            return letter * min(limit, 6000)  # a brief fits itself into its room
        return render

    result = TickResult(now=T0, executor="github", dry_run=False, summaries={
        "a--20261201T0700Z": brief("A"), "b--20261201T0700Z": brief("B"),
        "c--20261201T0700Z": brief("C")})
    limit = 6000 + BRIEF_MIN_BYTES + 1500
    text = step_summary(result, limit=limit)
    assert len(text.encode()) <= limit
    assert "A" * 6000 in text  # the first brief whole
    assert asked[1] < 6000 and "B" * asked[1] in text  # the second cut to the room left
    assert "C" not in text.replace("c--20261201T0700Z", "")
    assert "1 brief(s) left out" in text and "c--20261201T0700Z" in text


def test_a_lingering_tick_s_summaries_stay_under_github_s_1_mib_in_total(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each tick of a lingering run appends to one step's summary file; GitHub drops a
    summary over 1 MiB whole, so the appends together stay under it and say they cut."""
    from orchestrator.commands.tick import STEP_SUMMARY_LIMIT, write_step_summary
    from orchestrator.tick.shell import TickResult

    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))

    def brief(limit: int) -> str:
        return "| row |\n" * (min(limit, 400_000) // 8)  # a brief fills what it is given

    for n in range(5):
        result = TickResult(now=T0 + timedelta(minutes=n), executor="github",
                            dry_run=False, summaries={f"a{n}--20261201T0700Z": brief})
        write_step_summary(result)
        assert summary.stat().st_size <= STEP_SUMMARY_LIMIT
    assert summary.read_text().count("### Orchestrator tick") >= 3
    # nearly full: the tick's own lines are cut, with a line saying so
    summary = tmp_path / "full.md"
    summary.write_text("x" * (STEP_SUMMARY_LIMIT - 1000) + "\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    write_step_summary(TickResult(now=T0 + timedelta(hours=1), executor="github",
                                  dry_run=False, record_log=("a line of the log",) * 100))
    assert summary.stat().st_size <= STEP_SUMMARY_LIMIT
    assert summary.read_text().endswith("this job summary reached GitHub's 1 MiB limit; "
                                        "the job's log has every line._\n")


def test_a_broken_index_or_brief_template_never_blocks_firing(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"nightly": spec(run="true")})
    repo = clone(origin, tmp_path / "repo")
    (repo / "templates").mkdir()
    (repo / "templates" / "index.html.j2").write_text("{{ no_such_name }}\n")
    (repo / "templates" / "brief.html.j2").write_text("{% broken\n")
    work = tmp_path / "work"
    first = tick(repo, T0 + timedelta(minutes=1), work)
    assert len(first.dispatched) == 2  # the slot fired and its tracks started
    assert any("index not rendered" in line for line in first.log)
    wait_until(lambda: len(launches(work)) == 2)
    time.sleep(0.5)
    second = tick(repo, T0 + timedelta(minutes=2), work)
    assert any("brief not rendered, will retry" in line for line in second.log)
    state, _ = state_of(repo)
    assert state.runs["nightly--20261201T0700Z"].status is RunStatus.CONSOLIDATING
    before = tip(origin)
    third = tick(repo, T0 + timedelta(minutes=3), work)  # still broken: nothing to commit
    assert not third.mark_landed and tip(origin) == before
    (repo / "templates" / "brief.html.j2").unlink()
    (repo / "templates" / "index.html.j2").unlink()
    fixed = tick(repo, T0 + timedelta(minutes=4), work)
    assert fixed.rendered == ("nightly--20261201T0700Z",)
    state, snap = state_of(repo)
    assert state.runs["nightly--20261201T0700Z"].status is RunStatus.COMPLETED
    assert layout.INDEX in snap.files


def test_a_malformed_heartbeat_url_never_fails_the_tick(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {"nightly": spec()})
    repo = clone(origin, tmp_path / "repo")
    proc = cli(repo, "tick", "--now", "2026-12-01T06:00:00Z", "--heartbeat-url",
               "http://[::1/", env={"ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}, check=True)
    assert "heartbeat ping failed: InvalidURL" in proc.stdout
