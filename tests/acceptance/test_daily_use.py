"""A week of daily use, as a new user lives it: a schedule broken by an edit, a clock
moved with ``tick --now``, dead letters handled in bulk, the small verbs.

Only the installed CLI, git and the scaffold's own workflow scripts, as subprocesses;
where the trouble was seen on the real clock, the test uses the real clock.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from tests.acceptance.cliuser import User, orchestrator, wait


def step_script(workflow: Path, name: str) -> str:
    """The ``run:`` script of the step called ``name`` in ``workflow``."""
    data = yaml.safe_load(workflow.read_text())
    for job in data["jobs"].values():
        for step in job["steps"]:
            if step.get("name") == name:
                return str(step["run"])
    raise AssertionError(f"no step {name!r} in {workflow}")


def run_watchdog(user: User, summary: Path) -> subprocess.CompletedProcess[str]:
    """watchdog.yml's check, as its runner runs it (bash, the job's env)."""
    script = step_script(user.cwd / ".github" / "workflows" / "watchdog.yml",
                         "Check the heartbeat")
    env = {**os.environ, "ORCHESTRATOR_MAX_STALENESS": "90",
           "GITHUB_STEP_SUMMARY": str(summary),
           "PATH": f"{Path(orchestrator()).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-e", "-c", script], cwd=user.cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow
def test_a_schedule_broken_by_an_edit_fails_status_and_the_watchdog(
        tmp_path: Path, scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "add", "hourly", "--every", "hour", "--track", "t=true")
    user.run("tick")  # the real clock: both schedules are seen, both valid
    assert user.run("status").returncode == 0
    assert run_watchdog(user, tmp_path / "watchdog-ok.md").returncode == 0

    # An edit breaks it; no pull request check runs locally.
    path = user.cwd / "schedules" / "hourly.json"
    data = json.loads(path.read_text())
    data["cron"] = "61 * * * *"
    path.write_text(json.dumps(data))

    summary = tmp_path / "summary.md"
    ticked = user.run("tick", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert "invalid schedule, ignored: schedules/hourly.json" in ticked.stdout
    first = summary.read_text().splitlines()[0]
    assert "Invalid" in first and "schedules/hourly.json" in first, first

    status = user.run("status", expect=7)
    assert "schedules/hourly.json" in status.stderr
    assert "invalid: schedules/hourly.json" in status.stdout
    watched = run_watchdog(user, tmp_path / "watchdog.md")
    assert watched.returncode == 7, watched
    assert "schedules/hourly.json" in (tmp_path / "watchdog.md").read_text()

    path.write_text(json.dumps({**data, "cron": "7 * * * *"}))  # fixed: green again
    assert user.run("status").returncode == 0


@pytest.mark.slow
def test_a_tick_far_in_the_future_is_refused_on_a_real_branch_and_never_misleads(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    user.run("schedules", "add", "minutely", "--every", "minute", "--track", "t=true",
             "--overlap", "allow")
    user.run("tick")  # the real clock: this branch is one real ticks use
    ahead = (datetime.now(UTC) + timedelta(minutes=76)).replace(second=0, microsecond=0)
    future = ahead.strftime("%Y-%m-%dT%H:%M:%SZ")

    refused = user.run("tick", "--now", future, expect=1)
    assert "ahead of this machine's clock" in refused.stderr and "--force" in refused.stderr
    user.run("tick", "--now", future, "--dry-run")  # seeing the decision is harmless
    assert user.json("runs", "list", "--json") == [] or all(
        r["slot"] < future for r in user.json("runs", "list", "--json"))

    user.run("tick", "--now", future, "--force")  # a person insisted: the slots are settled
    status = user.run("status", expect=5)
    assert "AHEAD of this clock" in status.stdout and "ahead of this machine's clock" \
        in status.stderr

    # The next real tick says what happened, and every "next" line agrees with it.
    real = user.run("tick")
    assert "ahead of this machine's clock" in real.stdout
    following = ahead + timedelta(minutes=1)
    stamp = following.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"next due {stamp}" in real.stdout, real.stdout
    report = user.json("status", "--json")
    assert report["next_wake"]["at"] == stamp and not report["stale"]
    assert [s["next"] for s in report["schedules"]] == [stamp]
    shown = user.json("schedules", "show", "minutely", "--json")
    assert shown["next"][0]["utc"] == stamp


@pytest.mark.slow
def test_dead_letters_in_bulk_and_a_requeued_old_run_is_a_repair(
        tmp_path: Path, scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    marks = tmp_path / "marks"
    marks.mkdir()
    # Fails on its first attempt; once requeued, it holds its run open until `go` (its
    # timeout outlasts the next slot: the tick's clock passes an hour, and the track's
    # clock is the tick's).
    flaky = (f'if [ -e "{marks}/$ORCHESTRATOR_TRACK" ]; then while [ ! -e "{marks}/go" ]; '
             f'do sleep 0.1; done; else touch "{marks}/$ORCHESTRATOR_TRACK"; exit 1; fi')
    user.run("schedules", "add", "hourly", "--cron", "0 * * * *", "--overlap", "skip",
             "--timeout-minutes", "120", "--track", f"a={flaky}", "--track", f"b={flaky}")
    user.run("schedules", "add", "other", "--cron", "0 * * * *", "--track", "c=false",
             "--track", "d=false")
    user.tick("2026-12-01T07:01:00Z")
    user.tick("2026-12-01T07:02:00Z")
    user.tick("2026-12-01T07:03:00Z")
    waiting = [d["key"] for d in user.json("dlq", "list", "--json")]
    run = "hourly--20261201T0700Z"
    assert sorted(waiting) == [f"{run}--a", f"{run}--b", "other--20261201T0700Z--c",
                               "other--20261201T0700Z--d"]

    shown = user.run("dlq", "show", f"{run}--a--1", expect=1)
    assert f"its dead letter is '{run}--a'" in shown.stderr and "dead letter key" in shown.stderr

    # Several keys, one commit.
    requeued = user.run("dlq", "requeue", f"{run}--a", f"{run}--b", "--reason", "disk fixed")
    assert f"requeued {run}--a" in requeued.stdout and f"requeued {run}--b" in requeued.stdout
    user.state_file("state/open.json")  # fetches the branch
    log = subprocess.run(["git", "log", "--format=%s", "-1", "FETCH_HEAD"], cwd=user.cwd,
                         capture_output=True, text=True, check=True)
    assert log.stdout.strip() == "dlq: requeue 2 dead letters"

    # A whole schedule, after a confirmation with the count: "n" changes nothing.
    no = user.run("dlq", "discard", "--schedule", "other", "--reason", "obsolete",
                  input="n\n", expect=None)
    assert no.returncode == 1 and "discard 2 dead letter(s) of schedule other?" in no.stderr
    assert len(user.json("dlq", "list", "--json")) == 2
    yes = user.run("dlq", "discard", "--schedule", "other", "--reason", "obsolete",
                   input="y\n")
    assert yes.stdout.count("discarded other--") == 2
    assert user.json("dlq", "list", "--json") == []

    # The requeued run is a repair: the next slot fires beside it despite overlap=skip.
    user.json("tick", "--now", "2026-12-01T07:04:00Z", "--json")  # attempt 2 of a and b
    later = user.json("tick", "--now", "2026-12-01T08:01:00Z", "--json")
    assert not any("still open" in line for line in later["log"]), later["log"]
    runs = {r["run_id"]: r["status"] for r in user.json("runs", "list", "--json")}
    assert runs[run] == "running" and "hourly--20261201T0800Z" in runs
    (marks / "go").touch()


def _seconds(text: str) -> int:
    """``4s`` or ``1m 02s`` as seconds (the brief's and the index's duration)."""
    found = re.fullmatch(r"(?:(\d+)m )?(\d+)s", text.strip())
    assert found, text
    return int(found.group(1) or 0) * 60 + int(found.group(2))


def _measured(work: Path, key: str) -> tuple[datetime, datetime]:
    status = json.loads((work / key / "status.json").read_text())
    return (datetime.fromisoformat(status["started_at"]),
            datetime.fromisoformat(status["finished_at"]))


@pytest.mark.slow
def test_serve_notices_local_track_ends_at_once_and_durations_are_the_tracks(
        tmp_path: Path, scaffolded: tuple[User, Path]) -> None:
    """On the real clock, with an interval of an hour: the run's retry and its end are
    seen within seconds (a watch on the tracks' ends), and the brief and the index give
    the tracks' own durations, not the ticks'."""
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    now = datetime.now(UTC)
    if now.minute == 59:  # the hour's wake-up would tick anyway: keep it out of the way
        time.sleep(61 - now.second)
    at = (datetime.now(UTC) + timedelta(seconds=8)).replace(microsecond=0)
    flaky = f'[ -e "{tmp_path}/once" ] || {{ touch "{tmp_path}/once"; exit 1; }}; sleep 1'
    user.run("schedules", "add", "once", "--at", at.strftime("%Y-%m-%dT%H:%M:%S"),
             "--track", "two=sleep 2", "--track", "four=sleep 4",
             "--track", f"flaky={flaky}", "--max-attempts", "2",
             "--retry-backoff-seconds", "2")
    run = f"once--{at:%Y%m%dT%H%MZ}"
    proc = user.start("serve", "--interval", "3600")
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith("serving "), first
        wait(lambda: any(r["run_id"] == run and r["status"] == "completed"
                         for r in user.json("runs", "list", "--json")),
             "the run did not complete within seconds of its tracks", timeout=90)
    finally:
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=120)[1]
    assert "retry_backoff_seconds" not in first + err  # no false start-up warning
    work = user.cwd / ".orchestrator" / "work"
    spans = {key: _measured(work, key) for key in (
        f"{run}--two--1", f"{run}--four--1", f"{run}--flaky--1", f"{run}--flaky--2")}
    # the retry went soon after its 2 s back-off, not at the next hourly wake-up (the
    # bound leaves room for a loaded machine, where a command starts seconds late)
    assert spans[f"{run}--flaky--2"][0] - spans[f"{run}--flaky--1"][1] < timedelta(seconds=30)
    last_end = max(end for _, end in spans.values())
    # the run's end as the tick that saw it timed it (its wake-up's instant), not as the
    # test saw it: a look at `runs list` costs a process on a loaded machine
    shown_run = user.json("runs", "show", run, "--json")["run"]
    done = datetime.fromisoformat(shown_run["finished_at"].replace("Z", "+00:00"))
    assert done - last_end < timedelta(seconds=20), (done, last_end)

    brief = user.state_file(f"state/runs/{run}/brief.html")
    took = dict(re.findall(r'<td class="name">([a-z]+)</td>.*?'
                           r'data-label="took"[^>]*>([^<]+)</td>', brief, flags=re.S))
    for name, seconds in (("two", 2), ("four", 4)):
        assert abs(_seconds(took[name]) - seconds) <= 1, (name, took)
    real = last_end - min(start for start, _ in spans.values())
    shown = re.search(r"<dt>Duration</dt><dd>([^<]+)", brief)
    assert shown and abs(_seconds(shown.group(1)) - real.total_seconds()) <= 1, shown
    index = user.state_file("state/index.html")
    row = re.search(rf'{run}.*?data-label="Duration">([^<]+)<', index, flags=re.S)
    assert row and abs(_seconds(row.group(1)) - real.total_seconds()) <= 1, row


@pytest.mark.slow
def test_the_brief_and_the_index_give_the_tracks_durations_not_the_ticks(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    at = datetime.now(UTC).replace(microsecond=0)
    user.run("schedules", "add", "once", "--at", at.strftime("%Y-%m-%dT%H:%M:%S"),
             "--track", "one=sleep 1", "--track", "three=sleep 3")
    run = f"once--{at:%Y%m%dT%H%MZ}"
    fired = user.json("tick", "--json")  # the real clock, as a user ticks by hand
    work = user.cwd / ".orchestrator" / "work"
    wait(lambda: all((work / k / "status.json").exists() and json.loads(
        (work / k / "status.json").read_text())["state"] == "exited"
        for k in fired["dispatched"]), "the tracks did not end")
    time.sleep(5)  # the next tick comes later than the tracks' ends, as ticks do
    user.run("tick")
    spans = [_measured(work, f"{run}--{name}--1") for name in ("one", "three")]
    real = max(end for _, end in spans) - min(start for start, _ in spans)

    brief = user.state_file(f"state/runs/{run}/brief.html")
    took = dict(re.findall(r'<td class="name">([a-z]+)</td>.*?'
                           r'data-label="took"[^>]*>([^<]+)</td>', brief, flags=re.S))
    assert abs(_seconds(took["one"]) - 1) <= 1 and abs(_seconds(took["three"]) - 3) <= 1
    shown = re.search(r"<dt>Duration</dt><dd>([^<]+)", brief)
    assert shown and abs(_seconds(shown.group(1)) - real.total_seconds()) <= 1, shown
    index = user.state_file("state/index.html")
    row = re.search(rf'{run}.*?data-label="Duration">([^<]+)<', index, flags=re.S)
    assert row and abs(_seconds(row.group(1)) - real.total_seconds()) <= 1, row
    assert "Last tick</dt><dd>at " in brief  # a time, never an age that goes stale


def test_a_local_repository_has_no_workflows_to_fail_validate(tmp_path: Path) -> None:
    user = User(tmp_path / "mine")
    out = user.run("init", str(user.cwd), "--local", cwd=tmp_path).stdout
    assert not (user.cwd / ".github").exists() and ".github" not in out
    user.run("schedules", "add", "hourly", "--every", "hour", "--minute", "7",
             "--track", "t=true")
    checked = user.run("validate")  # exit 0: no tick.yml, no cadence to check
    assert checked.stdout.rstrip().endswith("2 schedules valid, 0 invalid")
    assert "does not run on GitHub Actions" in user.run("cron-sync").stdout
    # the state branch is there to read with git alone, no fetch first
    user.run("tick")
    shown = subprocess.run(["git", "show", "origin/orchestrator-state:state/ticks.jsonl"],
                           cwd=user.cwd, capture_output=True, text=True, check=False)
    assert shown.returncode == 0 and '"clock":"machine"' in shown.stdout, shown.stderr

    # --github: a local repository that also runs on GitHub gets the workflows, and
    # a summary that never reads as a pass when the check fails
    both = User(tmp_path / "both")
    both.run("init", str(both.cwd), "--local", "--github", cwd=tmp_path)
    assert (both.cwd / ".github" / "workflows" / "tick.yml").is_file()
    both.run("schedules", "add", "hourly", "--every", "hour", "--minute", "7",
             "--track", "t=true")
    stale = both.run("validate", expect=1)
    assert stale.stdout.rstrip().endswith(
        "2 schedules valid, 0 invalid; 1 other problem (on stderr): the check fails")
    assert "❌" in both.run("validate", "--format", "markdown", expect=1).stdout


def test_schedules_add_refuses_flags_that_do_not_apply_and_writes_needs_inputs_timeouts(
        tmp_path: Path) -> None:
    user = User(tmp_path / "repo")
    user.run("init", str(user.cwd), cwd=tmp_path)
    refused = user.run("schedules", "add", "x", "--every", "hour", "--time", "07:10",
                       "--track", "t=true", expect=2)
    assert "--time does not apply to --every hour" in refused.stderr
    assert "--minute goes with --every hour" in user.run(
        "schedules", "add", "x", "--every", "day", "--time", "07:10", "--minute", "5",
        "--track", "t=true", expect=2).stderr
    assert "--time does not apply to --cron or --at" in user.run(
        "schedules", "add", "x", "--cron", "7 * * * *", "--time", "07:10",
        "--track", "t=true", expect=2).stderr
    assert not (user.cwd / "schedules" / "x.json").exists()

    user.run("schedules", "add", "pipe", "--every", "hour", "--minute", "23",
             "--track", "build=make", "--track", "test=make test", "--track", "ship=true",
             "--needs", "test=build", "--needs", "ship=build,test",
             "--input", "build:target=all", "--input", "build:jobs=4",
             "--track-timeout", "test=2.5", "--timeout-minutes", "10")
    tracks = {t["name"]: t for t in json.loads(
        (user.cwd / "schedules" / "pipe.json").read_text())["tracks"]}
    assert tracks["build"]["inputs"] == {"target": "all", "jobs": "4"}
    assert tracks["test"]["needs"] == ["build"] and tracks["ship"]["needs"] == ["build", "test"]
    assert tracks["test"]["timeout_minutes"] == 2.5 and tracks["ship"]["timeout_minutes"] == 10
    assert "'nope' is not a --track" in user.run(
        "schedules", "add", "y", "--every", "minute", "--track", "t=true",
        "--needs", "nope=t", expect=2).stderr


def test_compact_dry_run_names_what_it_would_archive_and_changes_nothing(
        scaffolded: tuple[User, Path]) -> None:
    user, origin = scaffolded
    user.run("schedules", "remove", "nightly")
    user.run("schedules", "add", "quick", "--cron", "15 7 * * *", "--track", "t=true")
    user.tick("2026-12-01T07:16:00Z")
    user.tick("2026-12-01T07:17:00Z")  # records the finished run
    run = "quick--20261201T0715Z"

    def tip() -> str:
        return subprocess.run(["git", "rev-parse", "refs/heads/orchestrator-state"],
                              cwd=origin, capture_output=True, text=True, check=True).stdout

    before = tip()
    args = ("compact", "--keep-days", "1", "--now", "2026-12-05T00:00:00Z")
    out = user.run(*args, "--dry-run").stdout
    assert out.splitlines() == ["would archive 1 run(s) and 0 discarded dead letter(s) "
                                "(--dry-run: nothing changed)", f"  {run}"]
    assert tip() == before
    assert f"  {run}" in user.run(*args).stdout.splitlines()  # and it does what it said
    assert tip() != before


def test_a_manual_pause_with_a_note_needs_no_pull_request_and_shows_where_pauses_show(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    user.run("schedules", "add", "hourly", "--cron", "7 * * * *", "--track", "t=true")
    user.tick("2026-12-01T07:08:00Z")
    paused = user.run("schedules", "pause", "hourly", "--reason", "vendor API down",
                      "--by", "alice", "--now", "2026-12-01T07:30:00Z")
    assert "paused hourly" in paused.stdout
    again = user.run("schedules", "pause", "hourly", "--reason", "x", expect=1)
    assert "already paused since 2026-12-01T07:30:00Z by alice" in again.stderr
    assert user.tick("2026-12-01T08:08:00Z")["dispatched"] == []
    status = user.run("status", "--now", "2026-12-01T08:09:00Z", expect=None).stdout
    assert "PAUSED since 2026-12-01T07:30:00Z by alice: vendor API down" in status
    index = user.state_file("state/index.html")
    assert "vendor API down" in index and "alice" in index
    assert [r["run_id"] for r in user.json("runs", "list", "--json")] == [
        "hourly--20261201T0707Z"]

    user.run("schedules", "unpause", "hourly", "--reason", "vendor back", "--by", "bob",
             "--now", "2026-12-01T08:30:00Z")
    fired = user.tick("2026-12-01T09:08:00Z")["dispatched"]
    assert fired and all(k.startswith("hourly--20261201T0907Z") for k in fired), fired


def test_a_schedule_paused_before_its_first_tick_fires_nothing_then_starts_from_resume(
        scaffolded: tuple[User, Path]) -> None:
    """Kubernetes creates a CronJob suspended, Temporal a schedule paused: here a new
    file is held before any tick, and its resume owes no backlog since it was added."""
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    user.run("schedules", "add", "hourly", "--cron", "7 * * * *", "--track", "t=true",
             "--catchup", "all", "--catchup-window-minutes", "1440", "--overlap", "allow")
    typo = user.run("schedules", "pause", "hourly2", "--reason", "x", expect=1)
    assert typo.stderr.strip().splitlines() == [
        "orchestrator: no schedule 'hourly2': no file schedules/hourly2.json in this "
        "checkout and no state on the state branch"]
    not_paused = user.run("schedules", "resume", "hourly", "--reason", "x", expect=1)
    assert "schedule 'hourly' is not paused" in not_paused.stderr
    user.run("schedules", "pause", "hourly", "--reason", "vendor not ready", "--by",
             "alice", "--now", "2026-12-01T07:00:00Z")
    shown = user.run("schedules", "show", "hourly").stdout
    assert "PAUSED:    paused since 2026-12-01T07:00:00Z by alice: vendor not ready" in shown
    assert user.json("schedules", "show", "hourly", "--json")["paused"]["by"] == "alice"

    ticked = user.tick("2026-12-01T09:08:00Z")  # the first tick ever sees it paused
    assert ticked["dispatched"] == []
    status = user.run("status", "--now", "2026-12-01T09:09:00Z", expect=None).stdout
    assert "PAUSED since 2026-12-01T07:00:00Z by alice: vendor not ready" in status
    assert "vendor not ready" in user.state_file("state/index.html")

    user.run("schedules", "unpause", "hourly", "--reason", "vendor ready", "--by", "bob",
             "--now", "2026-12-01T10:30:00Z")
    fired = user.tick("2026-12-01T12:08:00Z")["dispatched"]
    # catchup=all fires what came due since the resume (11:07, 12:07), nothing before
    assert sorted({k.split("--")[1] for k in fired}) == ["20261201T1107Z",
                                                        "20261201T1207Z"], fired


@pytest.mark.slow
def test_logs_prints_a_track_s_output_redacted_by_attempt_and_follows_it(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    secret = "s3cr3t-t0ken-value-123"
    user.run("schedules", "add", "job", "--cron", "7 * * * *", "--overlap", "allow",
             "--max-attempts", "2", "--retry-backoff-seconds", "1",
             "--track", f"a=echo try $ORCHESTRATOR_ATTEMPT {secret}; "
             "[ $ORCHESTRATOR_ATTEMPT = 2 ] || { echo oops >&2; exit 1; }",
             "--track", "b=echo one; sleep 1.5; echo two")
    run = "job--20261201T0707Z"
    user.run("tick", "--now", "2026-12-01T07:08:00Z")
    followed = user.run("logs", run, "b", "--follow", timeout=60).stdout
    assert followed == "one\ntwo\n"  # waited for the command's end
    wait(lambda: "oops" in user.run("logs", run, "a", expect=None).stdout, "no output of a")
    env = {"GITHUB_TOKEN": secret}
    first = user.run("logs", run, "a", env=env).stdout
    assert "== a attempt 1 (stdout) ==" in first and "== a attempt 1 (stderr) ==\noops" in first
    assert secret not in first and "try 1" in first
    user.tick("2026-12-01T07:09:00Z")  # the retry, after its 1 s back-off
    time.sleep(1.5)
    user.tick("2026-12-01T07:10:00Z")
    both = user.run("logs", run, env=env).stdout  # every track, the latest attempt each
    assert "== a attempt 2 (stdout) ==" in both and "== b attempt 1 (stdout) ==" in both
    page = user.run("render", run, env=env).stdout  # its stdout tail, read here, redacted
    assert "try 2 ***" in page and secret not in page
    assert "<code class=\"cmd\" " in page and f"orchestrator logs {run} a</code>" in page
    assert "try 1" in user.run("logs", run, "a", "--attempt", "1").stdout
    missing = user.run("logs", run, "a", "--attempt", "5", expect=None)
    assert missing.returncode != 0 and "attempts: 1, 2" in missing.stderr
    assert "no such run" in user.run("logs", "other--20261201T0707Z", expect=None).stderr
    unknown = user.run("logs", run, "nosuch", expect=1).stderr  # no token asked for
    assert unknown == f"orchestrator: run {run!r} has no track 'nosuch' (its tracks: a, b)\n"


def test_local_work_folders_go_with_their_runs_by_the_same_retention(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    (user.cwd / "orchestrator.json").write_text('{"keep_finished_runs_days": 1}\n')
    user.run("schedules", "add", "quick", "--cron", "15 7 * * *", "--track", "t=echo hi")
    user.tick("2026-12-01T07:16:00Z")
    user.tick("2026-12-01T07:17:00Z")  # records the finished run
    work = user.cwd / ".orchestrator" / "work"
    old = work / "quick--20261201T0715Z--t--1"
    assert old.is_dir()
    ticked = user.tick("2026-12-03T07:16:00Z")  # retention: the run of the 1st goes
    assert ticked["retention"]["archived"] == ["quick--20261201T0715Z"], ticked["retention"]
    assert not old.exists()
    assert (work / "quick--20261203T0715Z--t--1").is_dir()  # today's run keeps its own
