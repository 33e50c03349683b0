"""The external clock against real git and the fake GitHub: its calls start tick.yml
through both of GitHub's dispatch events, and ticks started that way at once, several
OS processes against one bare origin, fire the slot once; a call before the slot does
nothing and waits for nothing. The clock's file is read as hostile input."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.cadence import clock
from orchestrator.cadence.tickfile import check, read_crons, staleness_limit, sync
from orchestrator.config.files import load_all
from orchestrator.config.models import Schedule
from orchestrator.config.repository import Cadence, RepoConfig
from orchestrator.github import GitHubClient, GitHubError, WorkflowAdmin
from orchestrator.state import layout
from orchestrator.state.model import State
from orchestrator.support.times import iso, iso_minute
from tests.drive import read_state
from tests.fakes.github import WORKFLOWS, FakeGitHub
from tests.gitrepo import clone, make_origin
from tests.workflow_player import Player

EXTERNAL = RepoConfig.model_validate({"cadence": {"mode": "external"}})


def call(fake: FakeGitHub, event: str) -> str:
    """One clock call, as ``serve --clock-only`` makes it."""
    client = GitHubClient(fake.token, api_url=fake.api_url, now=datetime.now(UTC))
    try:
        return clock.dispatch(WorkflowAdmin(client, fake.repository),
                              clock.requests(fake.repository, "main")[event])
    finally:
        client.close()


def track_dispatches(fake: FakeGitHub) -> list[str]:
    """The run ids of the batches ticks dispatched to track.yml."""
    return [r.body["inputs"]["run_id"] for r in fake.dispatches
            if r.path.endswith("/workflows/track.yml/dispatches") and r.status < 300]


@pytest.mark.slow
def test_calls_twice_through_both_events_at_a_slot_fire_it_once(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    slot = (datetime.now(UTC) + timedelta(seconds=12)).replace(microsecond=0)
    origin = make_origin(tmp_path, {"once": {
        "at": iso(slot), "tracks": [{"name": "a", "run": "true"}]}})
    player = Player(fake_github, origin, tmp_path / "play", workflow=WORKFLOWS / "tick.yml")

    # A call before the slot: its tick fires nothing and does not wait for the slot.
    assert call(fake_github, "workflow_dispatch") == "dispatched tick.yml (workflow_dispatch)"
    [early] = fake_github.runs_of("tick.yml")
    played = player.play_tick(early.id)
    assert played.conclusion == "success", played.output
    [step] = played.output
    # It decided before the slot (the slot is what it says falls due next), and did not
    # stay for it: a tick that waited would have fired it.
    assert f"next due {iso(slot)}" in step.stdout, step
    assert "linger" not in step.stderr, step
    assert track_dispatches(fake_github) == []

    time.sleep(max(0.0, (slot - datetime.now(UTC)).total_seconds()) + 0.5)
    # The clock calls twice through each event, at once: four tick.yml runs.
    with ThreadPoolExecutor(4) as pool:
        said = list(pool.map(lambda event: call(fake_github, event),
                             ["workflow_dispatch", "repository_dispatch"] * 2))
    assert sorted(said) == ["dispatched tick.yml (repository_dispatch)"] * 2 + [
        "dispatched tick.yml (workflow_dispatch)"] * 2
    runs = fake_github.runs_of("tick.yml")[1:]
    assert sorted(r.event for r in runs) == ["repository_dispatch"] * 2 + [
        "workflow_dispatch"] * 2
    assert {r.ref for r in runs} == {"main"}  # repository_dispatch: the default branch

    # Their ticks run at once, each an OS process with its own clone: one fires the slot.
    with ThreadPoolExecutor(4) as pool:
        ticks = list(pool.map(player.play_tick, [r.id for r in runs]))
    assert [t.conclusion for t in ticks] == ["success"] * 4, [t.output for t in ticks]
    run_id = layout.run_id_for("once", slot)
    assert track_dispatches(fake_github) == [run_id]
    state, _ = read_state(clone(origin, tmp_path / "check"))
    assert list(state.runs) == [run_id]
    fired = [t for t in ticks if f"{run_id}: fired slot" in t.output[0].stdout]
    assert len(fired) == 1, [t.output[0].stdout for t in ticks]
    # none of them waited: a tick started by the clock is on time already
    assert not any("linger" in t.output[0].stderr for t in ticks)


def test_a_refused_call_says_why_without_the_token(fake_github: FakeGitHub) -> None:
    # what GitHub answers a token without the permission
    fake_github.fail("repository-dispatch", status=403,
                     message="Resource not accessible by personal access token")
    with pytest.raises(GitHubError) as caught:
        call(fake_github, "repository_dispatch")
    assert caught.value.message == ("POST repos/octo-org/widgets/dispatches: 403 Resource "
                                    "not accessible by personal access token")
    bad = GitHubClient(fake_github.token, api_url=fake_github.api_url,
                       now=datetime.now(UTC))
    # a payload GitHub refuses: the fake answers as GitHub does, and says so
    answer = bad.request("POST", f"repos/{fake_github.repository}/dispatches",
                         body={"event_type": "x" * 101})
    assert answer.status_code == 422
    assert fake_github.runs_of("tick.yml") == []


def test_the_clock_s_curl_line_fails_and_prints_github_s_answer(
        fake_github: FakeGitHub) -> None:
    """The line ``cron-sync --external`` prints: a refused call exits non-zero and shows
    why, as GitHub said it (``curl -f`` would print only the status)."""
    fake_github.fail("repository-dispatch", status=403,
                     message="Resource not accessible by personal access token")
    request = clock.requests(fake_github.repository, "main")["repository_dispatch"]
    line = request.curl(fake_github.api_url, "2022-11-28")
    done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=60,
                          env={**os.environ, clock.TOKEN_VARIABLE: fake_github.token})
    assert done.returncode == 22, done.stderr
    assert "Resource not accessible by personal access token" in done.stdout


# --------------------------------------------------------------------------- the file


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "schedules").mkdir(parents=True)
    for sid, cron in (("daily", "0 7 * * *"), ("weekly", "0 9 * * 1")):
        (root / "schedules" / f"{sid}.json").write_text(json.dumps(
            {"cron": cron, "timezone": "Europe/London", "tracks": [{"name": "t",
                                                                    "run": "true"}]}))
    (root / ".github").mkdir()
    return root


START = datetime(2026, 12, 1, tzinfo=UTC)


def _problems(root: Path) -> list[str]:
    schedules = load_all(root / "schedules").schedules
    return check(root, schedules, EXTERNAL, START)[0]


def _unless_it_blocks(work: Callable[[], list[str]]) -> list[str]:
    """``work()`` in a thread given up on after a minute: a read that blocks (on a
    FIFO) never returns, so it fails the test instead of hanging it."""
    done: list[list[str] | BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as exc:  # handed to the test's thread
            done.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert done, "the check is still blocked on the clock file after a minute"
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]


def test_the_clock_file_covers_every_slot_or_validate_says_which(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    schedules = load_all(root / "schedules").schedules
    assert _problems(root) == [
        ".github/orchestrator-clock.json not found: the external clock has no schedule; run "
        "`orchestrator cron-sync --external` and commit it"]
    path = root / clock.CLOCK_FILE
    path.write_text(clock.file_text(schedules))
    assert _problems(root) == []
    only_daily = [s for s in schedules if s.id == "daily"]
    path.write_text(clock.file_text(only_daily))
    [problem] = _problems(root)
    assert problem.startswith(".github/orchestrator-clock.json: no call at 52 slot(s) of "
                              "'weekly' (first 2026-12-07T09:00Z)")


@pytest.mark.parametrize("hostile", ["symlink-out", "fifo", "huge", "deep", "not-json",
                                     "no-list"])
def test_a_clock_file_that_does_not_read_is_one_line(tmp_path: Path, hostile: str) -> None:
    root = _repo(tmp_path)
    path = root / clock.CLOCK_FILE
    if hostile == "symlink-out":
        secret = tmp_path / "secret.json"
        secret.write_text("{}")
        path.symlink_to(secret)
    elif hostile == "fifo":
        os.mkfifo(path)
    elif hostile == "huge":
        path.write_text('{"entries": [' + '{"cron": "0 7 * * *"},' * 100_000 + "{}]}")
    elif hostile == "deep":
        path.write_text('{"entries": ' + "[" * 5000 + "]" * 5000 + "}")
    elif hostile == "not-json":
        path.write_bytes(b"\xff\xfe entries")
    else:
        path.write_text('{"entries": {"cron": "0 7 * * *"}}')
    [problem] = _unless_it_blocks(lambda: _problems(root))  # a FIFO is not waited on
    assert problem.startswith(".github/orchestrator-clock.json: "), problem
    assert "\n" not in problem and len(problem) < 300


def test_a_bad_entry_costs_only_itself(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    schedules = load_all(root / "schedules").schedules
    good = json.loads(clock.file_text(schedules))
    good["entries"].insert(0, {"cron": "61 7 * * *", "timezone": "Europe/London"})
    good["entries"].insert(1, ["not", "an", "entry"])
    good["entries"][3]["timezone"] = "Mars/Olympus"  # the weekly schedule's entry
    (root / clock.CLOCK_FILE).write_text(json.dumps(good))
    problems = _problems(root)
    assert [p.split(":")[1].strip() for p in problems[:3]] == ["entry 0", "entry 1",
                                                                 "entry 3"]
    assert all("(left out)" in p for p in problems[:3])
    # the daily entry still reads and covers its schedule; the weekly one's is gone
    assert problems[3:] == [
        ".github/orchestrator-clock.json: no call at 52 slot(s) of 'weekly' (first "
        "2026-12-07T09:00Z); run `orchestrator cron-sync --external` and commit the file "
        "with the schedule"]


def _synced(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose tick.yml and clock file cron-sync wrote under the clock."""
    root = _repo(tmp_path)
    (root / ".github" / "workflows").mkdir()
    tick = root / ".github" / "workflows" / "tick.yml"
    tick.write_text((WORKFLOWS / "tick.yml").read_text(encoding="utf-8"))
    schedules = load_all(root / "schedules").schedules
    for path, text in sync(root, schedules, EXTERNAL, START).items():
        path.write_text(text, encoding="utf-8")
    return root, tick.read_text(encoding="utf-8")


def _warnings(root: Path) -> list[str]:
    return check(root, load_all(root / "schedules").schedules, EXTERNAL, START)[1]


def test_validate_warns_when_tick_yml_would_not_answer_the_clock(tmp_path: Path) -> None:
    root, text = _synced(tmp_path)
    assert _problems(root) == [] and _warnings(root) == []
    tick = root / ".github" / "workflows" / "tick.yml"
    block = "  repository_dispatch:\n    types: [orchestrator-tick, orchestrator-event]\n"
    assert block in text
    tick.write_text(text.replace(block, ""), encoding="utf-8")
    [warning] = _warnings(root)
    assert warning.startswith(".github/workflows/tick.yml: no `repository_dispatch` "
                              "trigger of type orchestrator-tick"), warning
    tick.write_text(text.replace("[orchestrator-tick, ", "[something-else, "),
                    encoding="utf-8")
    assert [w.split(":")[1].strip() for w in _warnings(root)] == [
        "no `repository_dispatch` trigger of type orchestrator-tick"]


def test_validate_warns_when_tick_yml_lost_its_safety_tick(tmp_path: Path) -> None:
    root, text = _synced(tmp_path)
    tick = root / ".github" / "workflows" / "tick.yml"
    # one weekly tick left: a lost call, a retry or a fan-in would wait days
    lines = read_crons(text)
    assert lines
    weekly = text
    for line in lines:
        weekly = weekly.replace(f'    - cron: "{line}"\n', "")
    weekly = weekly.replace("  schedule:\n", '  schedule:\n    - cron: "0 9 * * 1"\n', 1)
    tick.write_text(weekly, encoding="utf-8")
    [warning] = _warnings(root)
    assert warning.startswith(".github/workflows/tick.yml: no safety tick at least every 6 "
                              "hours"), warning


CONFIRMING = RepoConfig.model_validate({"cadence": {"mode": "external",
                                                   "clock_confirms": True}})


def test_a_clock_that_confirms_leaves_tick_yml_a_backstop_that_validate_and_status_agree_with(
        tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / ".github/workflows").mkdir()
    for name in ("tick.yml", "watchdog.yml"):
        (root / ".github/workflows" / name).write_text(
            (WORKFLOWS / name).read_text(encoding="utf-8"), encoding="utf-8")
    schedules = load_all(root / "schedules").schedules
    for path, text in sync(root, schedules, CONFIRMING, START).items():
        path.write_text(text, encoding="utf-8")
    tick_yml = (root / ".github/workflows/tick.yml").read_text(encoding="utf-8")
    assert read_crons(tick_yml) == ["17 0 * * 1"] and "weekly backstop tick" in tick_yml
    assert check(root, schedules, CONFIRMING, START) == ([], [])
    # `status` takes the limit cron-sync wrote for the watchdog, from the clock's calls
    assert staleness_limit(root, START) == 2895
    # a clock that does not confirm: the same repository wants its safety ticks back
    problems, warnings = check(root, schedules, EXTERNAL, START)
    assert problems == [] and any("no safety tick" in w for w in warnings)


@pytest.mark.slow
def test_a_call_github_accepted_whose_tick_never_ran_is_made_again(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    slot = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    origin = make_origin(tmp_path, {"once": {
        "at": iso(slot), "tracks": [{"name": "a", "run": "true"}]}})
    checkout = clone(origin, tmp_path / "clock")
    player = Player(fake_github, origin, tmp_path / "play", workflow=WORKFLOWS / "tick.yml")

    def read() -> tuple[list[Schedule], State, Cadence]:
        state, _ = read_state(clone(origin, tmp_path / f"look-{len(looks)}"))
        looks.append(state)
        return load_all(checkout / "schedules").schedules, state, CONFIRMING.cadence

    looks: list[State] = []
    loop = clock.Clock(read, lambda now: call(fake_github, "workflow_dispatch"),
                       slot - timedelta(minutes=1))
    now = datetime.now(UTC)
    assert loop.work(now)[0].startswith("dispatched tick.yml")
    [lost] = fake_github.runs_of("tick.yml")  # accepted; no runner ever plays it
    assert loop.next_at == now + clock.CONFIRM_AFTER
    assert loop.work(now + timedelta(minutes=4)) == []
    again = loop.work(now + clock.CONFIRM_AFTER)
    assert again == ["dispatched tick.yml (workflow_dispatch) for once: one-shot at "
                     f"{iso_minute(slot)} again: not fired 5 min after the last call"], again
    second = fake_github.runs_of("tick.yml")[1]
    played = player.play_tick(second.id)
    assert played.conclusion == "success", played.output
    assert track_dispatches(fake_github) == [layout.run_id_for("once", slot)]
    # the state branch now shows it fired: no call more
    assert loop.work(now + 2 * clock.CONFIRM_AFTER) == []
    assert len(fake_github.runs_of("tick.yml")) == 2 and lost.id != second.id
