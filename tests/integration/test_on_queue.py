"""``on_queue`` as a user runs it: ``queue add`` from the command line, ticks at given
instants (``tick --now``), the local executor and a real git origin; and ``validate``
on a schedule whose queue no track drains."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.state.model import State
from tests import queues
from tests.builders import spec_data
from tests.drive import STATE_BRANCH, cli, cli_tick, launches, run_ticks, start_cli, state_of
from tests.gitrepo import clone, git, make_origin

ON_QUEUE = {"queue": "jobs", "min_ready": 100, "max_wait_minutes": 30}


def drain(**on_queue: object) -> dict[str, object]:
    return spec_data(None, on_queue={**ON_QUEUE, **on_queue}, tracks=[
        {"name": "work", "run": "true", "drain": {"queue": "jobs", "task_cap": 50}}])


def add(repo: Path, count: int, at: str, tmp_path: Path, *options: str,
        work: Path | None = None) -> str:
    """``queue add`` of ``count`` items at ``at``; its stdout."""
    lines = tmp_path / f"items-{at}.jsonl"
    lines.write_text("".join(json.dumps({"payload": {"n": n}}) + "\n" for n in range(count)))
    return cli(repo, "queue", "add", "jobs", "--file", str(lines), "--now", at, *options,
               work=work, check=True).stdout


def drains(state: State) -> list[str]:
    return sorted(r for r, run in state.runs.items() if run.schedule_id == "crawl")


def test_the_100th_item_fires_one_drain_and_99_fire_nothing(tmp_path: Path) -> None:
    repo = clone(make_origin(tmp_path, {"crawl": drain()}), tmp_path / "repo")
    work = tmp_path / "work"
    cli_tick(repo, "2026-12-01T07:00:00Z", work=work, check=True)
    add(repo, 99, "2026-12-01T07:01:00Z", tmp_path)
    cli_tick(repo, "2026-12-01T07:02:00Z", work=work, check=True)
    assert drains(state_of(repo)[0]) == []
    add(repo, 1, "2026-12-01T07:02:30Z", tmp_path)
    out = cli_tick(repo, "2026-12-01T07:03:00Z", work=work, check=True).stdout
    assert drains(state_of(repo)[0]) == ["crawl--20261201T0703Z-queue-100"]
    assert "fired on queue jobs: 100 ready (min_ready 100)" in out
    cli_tick(repo, "2026-12-01T07:04:00Z", work=work, check=True)
    assert len(drains(state_of(repo)[0])) == 1


def test_queue_add_with_an_executor_fires_the_drain_in_the_enqueue_commit(
        tmp_path: Path) -> None:
    """No tick between: the 100th item and the drain it calls for land in one commit,
    and the drain's worker is sent by ``queue add`` itself."""
    repo = clone(make_origin(tmp_path, {"crawl": drain()}), tmp_path / "repo")
    work = tmp_path / "work"
    cli_tick(repo, "2026-12-01T07:00:00Z", work=work, check=True)
    out = add(repo, 99, "2026-12-01T07:01:00Z", tmp_path, "--executor", "local", work=work)
    assert out.splitlines()[-1] == "jobs: 99 added, 0 already there"
    assert drains(state_of(repo)[0]) == []
    out = add(repo, 1, "2026-12-01T07:02:00Z", tmp_path, "--executor", "local", work=work)
    assert out.splitlines()[-1] == "jobs: 1 added, 0 already there"
    fired = "crawl--20261201T0702Z-queue-100"
    assert drains(state_of(repo)[0]) == [fired]
    git("fetch", "--quiet", "origin", STATE_BRANCH, cwd=repo)
    decide = git("log", "--format=%H", "--grep", "decide", "-1", "FETCH_HEAD",
                 cwd=repo).strip()
    changed = git("show", "--name-only", "--format=", decide, cwd=repo).split()
    assert f"state/runs/{fired}/run.json" in changed
    assert "state/queues/jobs.json" in changed
    assert {f"{fired}--work-w1--1", f"{fired}--work-w2--1"} <= set(launches(work))
    again = [json.loads(cli(repo, "queue", "add", "jobs", "--payload", "1", "--key", "k",
                            "--executor", "local", "--json", "--now", "2026-12-01T07:03:00Z",
                            work=work, check=True).stdout) for _ in range(2)]
    assert [len(a["added"]) for a in again] == [1, 0]
    assert again[1]["existing"] == again[0]["added"]  # the same key adds nothing


def test_max_wait_minutes_fires_a_smaller_backlog(tmp_path: Path) -> None:
    repo = clone(make_origin(tmp_path, {"crawl": drain()}), tmp_path / "repo")
    work = tmp_path / "work"
    cli_tick(repo, "2026-12-01T07:00:00Z", work=work, check=True)
    add(repo, 7, "2026-12-01T07:01:00Z", tmp_path)
    cli_tick(repo, "2026-12-01T07:30:59Z", work=work, check=True)
    assert drains(state_of(repo)[0]) == []
    cli_tick(repo, "2026-12-01T07:31:00Z", work=work, check=True)
    assert drains(state_of(repo)[0]) == ["crawl--20261201T0731Z-queue-7"]


def test_validate_refuses_an_on_queue_whose_queue_no_track_drains(tmp_path: Path) -> None:
    bad = spec_data(None, on_queue=ON_QUEUE)
    repo = clone(make_origin(tmp_path, {"crawl": bad, "ok": drain(),
                                        "named": drain(queue="Bad Name")}),
                 tmp_path / "repo")
    proc = cli(repo, "validate")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert any(line.endswith('schedules/crawl.json: on_queue: no track drains the queue '
                             'jobs (add a track with "drain": {"queue": "jobs"})')
               for line in lines), lines
    assert any("schedules/named.json: on_queue.queue" in line for line in lines), lines
    assert not any("ok.json" in line for line in lines)
    shown = cli(repo, "validate", "--format", "text").stdout
    assert "on queue jobs (100 ready or 30 min)" in shown


def test_racing_enqueues_and_ticks_fire_one_drain_for_one_crossing(tmp_path: Path) -> None:
    """97 ready; then four ``queue add --executor local`` of one item each and two
    ticks, all at once from their own checkouts: the enqueue that makes 100 fires the
    drain, and no process fires a second one."""
    origin = make_origin(tmp_path, {"crawl": drain(max_wait_minutes=None)})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    cli_tick(repo, "2026-12-01T07:00:00Z", work=work, check=True)
    add(repo, 97, "2026-12-01T07:01:00Z", tmp_path)
    env = {"ORCHESTRATOR_WORK_DIR": str(work)}
    now = ["--now", "2026-12-01T07:02:00Z"]
    procs = [start_cli(clone(origin, tmp_path / f"adder{i}"), "queue", "add", "jobs",
                       "--payload", str(i), "--executor", "local", *now, env=env)
             for i in range(4)]
    procs += [start_cli(clone(origin, tmp_path / f"ticker{i}"), "tick", *now, env=env)
              for i in range(2)]
    run_ticks(procs)
    state, snap = state_of(repo)
    assert drains(state) == ["crawl--20261201T0702Z-queue-100"]
    assert queues.book_of(snap.files, "jobs").next_seq == 101
