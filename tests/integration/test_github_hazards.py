"""GitHub as a first real deployment meets it, end to end: a real bare origin, the fake
GitHub server taught each behaviour first (the source named where it is modelled), and
``track.yml``'s jobs played on this machine (:mod:`tests.workflow_player`).

- an outcome upload that fails (409 on a re-run, a transient FinalizeArtifact error,
  full artifact storage) never turns a track that succeeded into a failed one;
- job names over 100 characters, which GitHub lists cut: legs are named within 100
  and matched by a hash of their key, and ``validate`` warns of a workflow that still
  names them after the whole key;
- a person pressing *Cancel workflow*: GitHub keeps an ``always()`` job running, so the
  fan-in job is ``!cancelled()``, and the cron tick records the legs cancelled, by whom.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import yaml

from orchestrator.cadence.tickfile import with_crons
from orchestrator.errors import PushRejected
from orchestrator.executors.github.artifacts import MISSING_OUTCOME
from orchestrator.executors.github.jobnames import MAX_CHARS
from orchestrator.state import layout
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.store import GitStateStore
from tests.drive import cli, github_cli_tick, github_tick, read_state
from tests.fakes.github import (
    UPLOAD_FAULTS,
    WORKFLOWS,
    FakeGitHub,
    UploadFailed,
    Workflow,
    zip_files,
)
from tests.gitrepo import bare_origin, clone, empty_clone, git, make_origin
from tests.workflow_player import Player

OK = {"name": "publish", "run": "echo published", "max_attempts": 2}


def start(tmp_path: Path, fake: FakeGitHub, tracks: list[dict[str, Any]],
          **schedule: Any) -> tuple[Path, Path, str, int, dict[str, str]]:
    """An origin with a one-shot schedule due a minute ago, and the tick that fired it:
    (origin, clone, run id, workflow run id, the dispatch's inputs)."""
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    origin = make_origin(tmp_path, {"nightly": {"at": f"{slot:%Y-%m-%dT%H:%M}Z",
                                                "tracks": tracks, **schedule}})
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake, datetime.now(UTC))
    fake.now = None  # the legs measure their own times on the real clock
    call = fake.dispatches[-1]
    return origin, repo, call.body["inputs"]["run_id"], max(fake.runs), call.body["inputs"]


# --------------------------------------------------------------------------- uploads


def test_the_fake_refuses_a_second_artifact_of_a_name_unless_overwrite(
        fake_github: FakeGitHub) -> None:
    """Artifacts belong to the workflow run: a re-run leg meets its earlier attempt's."""
    fake_github.add_runs(1, start=datetime.now(UTC), every=timedelta(minutes=1))
    [ci_run] = fake_github.runs
    fake_github.upload(ci_run, "k", {"k.json": b"1"})
    with pytest.raises(UploadFailed, match=r"\(409\) Conflict"):
        fake_github.upload(ci_run, "k", {"k.json": b"2"})
    fake_github.upload(ci_run, "k", {"k.json": b"3"}, overwrite=True)
    assert [a.data for a in fake_github.artifacts.values()] == [zip_files({"k.json": b"3"})]
    assert UPLOAD_FAULTS["quota"].startswith("Artifact storage quota has been hit")


@pytest.mark.parametrize("fault", ["finalize", "quota"])
def test_a_failed_upload_leaves_a_successful_leg_complete_and_the_brief_says_so(
        tmp_path: Path, fake_github: FakeGitHub, fault: str) -> None:
    origin, repo, run_id, ci_run, inputs = start(tmp_path, fake_github, [OK])
    player = Player(fake_github, origin, tmp_path / "play")
    [leg] = player.legs(inputs)
    fake_github.fail_uploads(fault)
    played = player.play_leg(ci_run, inputs, leg)
    assert played.outcomes["Upload the outcome"] == "failure"
    assert played.errors == [UPLOAD_FAULTS[fault]]
    assert played.conclusion == "success"  # the job mirrors the track's exit
    assert fake_github.artifacts == {}

    fan_in = player.play_fan_in(ci_run, inputs)
    assert fan_in.conclusion == "success", [p.stderr for p in fan_in.output]
    state, files = read_state(repo)
    track = state.tracks[run_id]["publish"]
    assert (track.phase, track.attempt) == (TrackPhase.COMPLETE, 1)  # not run again
    assert track.result == {"summary": MISSING_OUTCOME}
    assert state.runs[run_id].status is RunStatus.COMPLETED
    assert MISSING_OUTCOME in files[layout.brief_path(run_id)].decode()


def test_without_a_fan_in_job_the_cron_tick_records_it_complete_too(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin, repo, run_id, ci_run, inputs = start(tmp_path, fake_github, [OK],
                                                 fan_in="next_tick")
    player = Player(fake_github, origin, tmp_path / "play")
    [leg] = player.legs(inputs)
    fake_github.fail_uploads("finalize")
    assert player.play_leg(ci_run, inputs, leg).conclusion == "success"

    github_tick(repo, fake_github, datetime.now(UTC))
    state, _ = read_state(repo)
    track = state.tracks[run_id]["publish"]
    assert (track.phase, track.attempt, track.result) == (
        TrackPhase.COMPLETE, 1, {"summary": MISSING_OUTCOME})


def test_a_re_run_leg_replaces_its_earlier_attempt_s_artifact(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    """A person re-runs the batch on GitHub: without ``overwrite`` the upload would
    answer 409, and the job fail."""
    origin, _repo, _run_id, ci_run, inputs = start(tmp_path, fake_github, [OK])
    player = Player(fake_github, origin, tmp_path / "play")
    [leg] = player.legs(inputs)
    player.play_leg(ci_run, inputs, leg)
    fake_github.rerun(ci_run)
    again = player.play_leg(ci_run, inputs, leg)
    assert again.outcomes["Upload the outcome"] == "success", again.errors
    assert len(fake_github.artifacts) == 1


# --------------------------------------------------------------------------- job names

LONG_TRACK = "t" * 64


def test_legs_of_keys_over_100_characters_are_found_where_github_cuts_their_names(
        tmp_path: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    long_id = "s" * 50
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    origin = make_origin(tmp_path, {long_id: {"at": f"{slot:%Y-%m-%dT%H:%M}Z", "tracks": [
        {"name": LONG_TRACK, "run": "echo first"},
        {"name": LONG_TRACK[:-1] + "u", "run": "echo second"}]}})
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake_github, datetime.now(UTC))
    fake_github.now = None
    [ci_run] = fake_github.runs
    inputs = fake_github.dispatches[-1].body["inputs"]
    run_id = inputs["run_id"]
    player = Player(fake_github, origin, tmp_path / "play")
    legs = player.legs(inputs)
    assert all(len(leg["key"]) > MAX_CHARS >= len(leg["job"]) for leg in legs)
    for leg in legs:
        player.play_leg(ci_run, inputs, leg)
    fake_github.set_job(ci_run, "fan-in", "completed", "cancelled")  # the cron tick's turn

    github_tick(repo, fake_github, datetime.now(UTC))
    state, _ = read_state(repo)
    assert {t.phase for t in state.tracks[run_id].values()} == {TrackPhase.COMPLETE}
    assert state.runs[run_id].status is RunStatus.COMPLETED


def test_validate_warns_where_a_workflow_names_jobs_after_a_key_github_would_cut(
        tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "schedules").mkdir(parents=True)
    (repo / ".github" / "workflows").mkdir(parents=True)
    shipped = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "track.yml"
    old = shipped.read_text().replace("${{ matrix.leg.job }}", "${{ matrix.leg.key }}")
    (repo / ".github" / "workflows" / "old.yml").write_text(old)
    (repo / ".github" / "workflows" / "track.yml").write_text(shipped.read_text())
    for sid, workflow in (("s" * 40, "old.yml"), ("t" * 40, "track.yml")):
        (repo / "schedules" / f"{sid}.json").write_text(json.dumps(
            {"cron": "7 3 * * *", "workflow": workflow,
             "tracks": [{"name": "x" * 40, "run": "true", "max_attempts": 3}]}))
    done = cli(repo, "validate")
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stdout.splitlines() if "names its jobs after" in line]
    assert len(warned) == 1 and "old.yml" in warned[0] and "reaches 104 characters" in warned[0]


# --------------------------------------------------------------------------- cancel

STAGES = [{"name": "build", "run": "sleep 30"},
          {"name": "deploy", "run": "echo deploy", "needs": ["build"]},
          {"name": "cleanup", "run": "echo cleanup", "needs": ["build"], "when": "always"}]


def _fan_in_jobs(fake: FakeGitHub, ci_run: int) -> list[tuple[str, str | None]]:
    fake.settle()
    return [(j.status, j.conclusion) for j in fake.runs[ci_run].latest_jobs
            if j.name == "fan-in"]


def test_github_keeps_an_always_job_running_when_a_person_cancels_the_run(
        tmp_path: Path) -> None:
    """The fake as GitHub documents it ("Workflow cancellation reference"): the old
    ``if: always()`` fan-in job still starts after *Cancel workflow*."""
    old = tmp_path / "track.yml"
    old.write_text((WORKFLOWS / "track.yml").read_text().replace(
        "if: ${{ !cancelled() && inputs.fan_in != 'next_tick' }}",
        "if: always() && inputs.fan_in != 'next_tick'"))
    workflow = Workflow.load(old)
    assert workflow is not None and "fan-in" in workflow.on_cancel
    with FakeGitHub(workflows={"track.yml": workflow}) as fake:
        fake.cancel_delay = timedelta(0)
        legs = '[{"key": "r--20261201T0700Z--a--1", "job": "a--1 0123456789"}]'
        answer = httpx.post(
            f"{fake.api_url}/repos/{fake.repository}/actions/workflows/track.yml/dispatches",
            json={"ref": "main", "inputs": {"run_id": "r--20261201T0700Z", "batch": "b",
                                            "tracks": legs}},
            headers={"Authorization": f"Bearer {fake.token}"})
        assert answer.status_code == 204
        [ci_run] = fake.runs
        fake.cancel_by(ci_run, "octocat")
        assert _fan_in_jobs(fake, ci_run) == [("queued", None)]
        assert fake.runs[ci_run].status == "in_progress"  # until the fan-in job ends
        fake.set_job(ci_run, "fan-in", "completed", "success")
        assert (fake.runs[ci_run].status, fake.runs[ci_run].conclusion) == (
            "completed", "cancelled")
        assert fake.contract_violations() == []


def test_a_person_cancelling_a_batch_cancels_its_tracks_and_the_record_names_who(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    _origin, repo, run_id, ci_run, _inputs = start(tmp_path, fake_github, STAGES)
    fake_github.cancel_delay = timedelta(0)
    fake_github.cancel_by(ci_run, "octocat")
    # `!cancelled()`: GitHub does not start the fan-in job of a cancelled run
    assert _fan_in_jobs(fake_github, ci_run) in ([], [("completed", "skipped")])
    assert fake_github.runs[ci_run].conclusion == "cancelled"

    github_tick(repo, fake_github, datetime.now(UTC))  # the cron tick's safety net
    state, _ = read_state(repo)
    tracks = state.tracks[run_id]
    assert tracks["build"].phase is TrackPhase.CANCELLED
    assert "cancelled on GitHub by @octocat" in tracks["build"].error_log[-1]
    assert tracks["deploy"].phase is TrackPhase.SKIPPED  # its need was cancelled
    assert tracks["cleanup"].phase is TrackPhase.DISPATCHED  # `when: always` runs anyway
    assert len(fake_github.dispatches) == 2
    assert len(fake_github.calls("annotations")) == 1


# --------------------------------------------------------------------------- access


def test_a_404_from_a_token_without_access_fails_nothing_a_deleted_run_still_does(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    _origin, repo, run_id, ci_run, _inputs = start(tmp_path, fake_github, [OK])
    fake_github.no_access = True  # a wrong or narrowed token: GitHub answers 404
    github_tick(repo, fake_github, datetime.now(UTC))
    state, _ = read_state(repo)
    assert state.tracks[run_id]["publish"].phase is TrackPhase.DISPATCHED
    listed = [r for r in fake_github.calls("runs") if r.query == {"per_page": "1"}]
    assert [r.status for r in listed] == [404]  # it asked before failing anything

    fake_github.no_access = False
    fake_github.delete_run(ci_run)
    github_tick(repo, fake_github, datetime.now(UTC))
    state, _ = read_state(repo)
    track = state.tracks[run_id]["publish"]
    assert track.phase in (TrackPhase.FAILED, TrackPhase.PENDING)  # its retry waits
    assert "no longer exists (deleted)" in track.error_log[-1]


# --------------------------------------------------------------------------- rulesets

GH013 = """ref=refs/heads/orchestrator-state
echo "error: GH013: Repository rule violations found for $ref." >&2
echo "Review all repository rules at https://github.com/octo-org/widgets/rules" >&2
echo "" >&2
echo "- Commits must have verified signatures." >&2
echo "  Found 1 violation:" >&2
exit 1
"""
"""What a pre-receive check of an organization ruleset requiring signed commits says
(as users report it, e.g. github/gh-aw #29301); GitHub prints it after ``remote:``."""


def test_a_ruleset_requiring_signed_commits_is_named_with_what_to_do(
        tmp_path: Path) -> None:
    origin = bare_origin(tmp_path)
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\n" + GH013)
    hook.chmod(0o755)
    store = GitStateStore(empty_clone(tmp_path / "repo"), str(origin), sleep=lambda _: None)
    with pytest.raises(PushRejected) as info:
        store.transact(lambda _: {"state/a": b"1"}, "one")
    message = info.value.message
    assert "GH013: Repository rule violations" in message
    assert "requires signed commits" in message and "exclude the state branch" in message


# --------------------------------------------------------------------------- keep-alive

T_KEEP = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _workflow_calls(fake: FakeGitHub) -> list[tuple[str, str]]:
    return [(r.method, r.path.rsplit("/workflows/", 1)[1]) for r in fake.requests
            if r.endpoint in ("workflow", "enable")]


def _commit_at(repo: Path, when: datetime, config: dict[str, Any] | None = None) -> None:
    """The default branch's last commit, made at ``when`` (GitHub's activity)."""
    (repo / "orchestrator.json").write_text(json.dumps(config or {}))
    git("add", "orchestrator.json", cwd=repo)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    dated = {**os.environ, "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_DATE": stamp}
    subprocess.run(["git", "commit", "--quiet", "--allow-empty", "-m", "settings"], cwd=repo,
                   check=True, env=dated)


@pytest.mark.slow
def test_the_tick_never_enables_an_active_workflow_and_checks_them_once_a_week(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    """GitHub disabled a project for enabling active workflows to restart the 60 days:
    the weekly check only reads them, and one GitHub disabled stays so by default."""
    origin = make_origin(tmp_path, {"nightly": {"cron": "7 3 * * *", "tracks": [OK]}})
    repo = clone(origin, tmp_path / "repo")
    _commit_at(repo, T_KEEP - timedelta(days=3))
    fake_github.disable("watchdog.yml")  # the 60-day rule struck the watchdog
    out = github_cli_tick(repo, T_KEEP, fake_github)
    assert _workflow_calls(fake_github) == [("GET", "tick.yml"), ("GET", "watchdog.yml")]
    assert fake_github.workflow_states["watchdog.yml"] == "disabled_inactivity"
    assert "warning: watchdog.yml is disabled by GitHub for inactivity" in out
    _state, files = read_state(repo)
    record = json.loads(files["state/workflows.json"])
    assert record["checked_at"] == "2026-12-01T09:00:00Z"
    assert record["states"] == {"tick.yml": "active", "watchdog.yml": "disabled_inactivity"}

    github_cli_tick(repo, T_KEEP + timedelta(days=6), fake_github)
    assert len(_workflow_calls(fake_github)) == 2  # not due: not a call
    github_cli_tick(repo, T_KEEP + timedelta(days=7, minutes=1), fake_github)
    assert _workflow_calls(fake_github)[2:] == [("GET", "tick.yml"), ("GET", "watchdog.yml")]


def test_a_workflow_github_disabled_is_enabled_again_only_when_the_user_opted_in(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": {"cron": "7 3 * * *", "tracks": [OK]}})
    repo = clone(origin, tmp_path / "repo")
    _commit_at(repo, T_KEEP - timedelta(days=3), {"cadence": {"reenable_workflows": True}})
    fake_github.disable("watchdog.yml")
    out = github_cli_tick(repo, T_KEEP, fake_github)
    assert _workflow_calls(fake_github) == [
        ("GET", "tick.yml"), ("GET", "watchdog.yml"), ("PUT", "watchdog.yml/enable")]
    assert fake_github.workflow_states["watchdog.yml"] == "active"
    assert "watchdog.yml had been disabled by GitHub for inactivity" in out


def test_the_tick_status_and_an_issue_warn_before_github_s_60_days(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    """52 days without a commit: the tick's summary and ``status`` warn, and the
    weekly check tells the channels once (``keepalive_due``); a commit closes the issue."""
    origin = make_origin(tmp_path, {"nightly": {"cron": "7 3 * * *", "tracks": [OK]}})
    repo = clone(origin, tmp_path / "repo")
    _commit_at(repo, T_KEEP - timedelta(days=52), {"notify": {"github_issues": True}})
    out = github_cli_tick(repo, T_KEEP, fake_github)
    assert "warning: no commit on the default branch since 2026-10-10T09:00:00Z" in out
    assert "GitHub disables tick.yml and watchdog.yml at 2026-12-09T09:00:00Z" in out
    [issue] = fake_github.issues.issues.values()
    assert issue.title == ("orchestrator: scheduled workflows stop at 2026-12-09T09:00:00Z "
                           "without a commit")
    assert not any(r.endpoint == "enable" for r in fake_github.requests)
    later = github_cli_tick(repo, T_KEEP + timedelta(hours=1), fake_github)
    assert "warning: no commit on the default branch" in later
    assert len(fake_github.issues.issues) == 1  # told at the weekly check only
    status = cli(repo, "status", "--now", "2026-12-01T10:00:00Z", env=fake_github.env())
    assert "warning: no commit on the default branch since 2026-10-10" in status.stdout

    _commit_at(repo, T_KEEP + timedelta(days=2), {"notify": {"github_issues": True}})
    quiet = github_cli_tick(repo, T_KEEP + timedelta(days=7, minutes=1), fake_github)
    assert "no commit on the default branch" not in quiet
    assert issue.state == "closed"


def test_a_workflow_a_person_disabled_stays_so_and_tick_and_status_warn(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    origin = make_origin(tmp_path, {"nightly": {"cron": "7 3 * * *", "tracks": [OK]}})
    repo = clone(origin, tmp_path / "repo")
    fake_github.disable("watchdog.yml", "disabled_manually")
    out = github_cli_tick(repo, T_KEEP, fake_github)
    assert ("PUT", "watchdog.yml/enable") not in _workflow_calls(fake_github)
    assert fake_github.workflow_states["watchdog.yml"] == "disabled_manually"
    assert "warning: watchdog.yml is disabled manually" in out
    # every later tick's summary says so too, from the record, without asking GitHub
    later = github_cli_tick(repo, T_KEEP + timedelta(hours=1), fake_github)
    assert "warning: watchdog.yml is disabled manually" in later

    status = cli(repo, "status", "--now", "2026-12-01T10:00:00Z", env=fake_github.env())
    assert "workflows     tick.yml active, watchdog.yml disabled_manually (now)" in status.stdout
    assert "warning: watchdog.yml is disabled manually" in status.stdout


# --------------------------------------------------------------------------- watchdog


class _Heard(http.server.BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_failing_watchdog_signals_the_heartbeat_url_s_fail_and_a_passing_one_nothing(
        tmp_path: Path) -> None:
    """GitHub mails a failed scheduled run only to the last editor of its cron."""
    _Heard.paths = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Heard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/ping/abc"
    try:
        origin = make_origin(tmp_path, {"nightly": {"cron": "7 3 * * *", "tracks": [OK]}})
        repo = clone(origin, tmp_path / "repo")
        env = {"ORCHESTRATOR_HEARTBEAT_URL": url}
        stale = cli(repo, "status", "--now", "2026-12-01T09:00:00Z", env=env)
        assert stale.returncode == 5, stale.stderr
        assert _Heard.paths == ["/ping/abc/fail"]
        assert "alert: signalled the failure (5)" in stale.stderr
        cli(repo, "tick", "--now", "2026-12-01T09:00:00Z", check=True,
            work=tmp_path / "work")
        fresh = cli(repo, "status", "--now", "2026-12-01T09:01:00Z", env=env)
        assert fresh.returncode == 0, fresh.stderr
        assert _Heard.paths == ["/ping/abc/fail"]  # never a success ping
    finally:
        server.shutdown()
        server.server_close()


def test_the_watchdog_passes_its_heartbeat_secret_and_may_read_workflow_states() -> None:
    doc = yaml.safe_load((WORKFLOWS / "watchdog.yml").read_text())
    job = doc["jobs"]["watchdog"]
    assert job["permissions"] == {"contents": "read", "actions": "read",
                                  "issues": "write"}  # the watchdog's issue (notify)
    [step] = [s for s in job["steps"] if s.get("name") == "Check the heartbeat"]
    assert step["env"]["ORCHESTRATOR_HEARTBEAT_URL"] == "${{ secrets.ORCHESTRATOR_HEARTBEAT_URL }}"


def test_validate_fails_on_a_template_the_tick_could_not_render(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "schedules").mkdir(parents=True)
    (repo / "schedules" / "nightly.json").write_text(json.dumps(
        {"cron": "7 3 * * *", "tracks": [OK]}))
    (repo / "templates").mkdir()
    (repo / "templates" / "index.html.j2").write_text("{% for run in runs %}\n")
    done = cli(repo, "validate")
    assert done.returncode == 1
    assert "index.html.j2:" in done.stderr and "template syntax error" in done.stderr
    (repo / "templates" / "index.html.j2").write_text("{% for run in runs %}{% endfor %}\n")
    assert cli(repo, "validate").returncode == 0


# --------------------------------------------------------------------------- timezone:


def _zoned_repo(tmp_path: Path, entries: list[str]) -> Path:
    repo = tmp_path / "repo"
    (repo / "schedules").mkdir(parents=True)
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / "schedules" / "nightly.json").write_text(json.dumps(
        {"cron": "0 7 * * *", "timezone": "America/New_York", "tracks": [OK]}))
    shipped = (WORKFLOWS / "tick.yml").read_text()
    (repo / ".github" / "workflows" / "tick.yml").write_text(
        with_crons(shipped, entries, ["hand-written, in New York time"]))
    return repo


def test_a_tick_entry_with_a_timezone_is_read_in_that_zone_by_validate_and_estimate(
        tmp_path: Path) -> None:
    """GitHub accepts ``timezone:`` on a schedule entry since 2026-03 (changelog,
    2026-03-19): read as UTC, 06:50 New York would cover no 07:00 New York slot."""
    repo = _zoned_repo(tmp_path, ["TZ=America/New_York 45,50,55 6 * * *"])
    text = (repo / ".github" / "workflows" / "tick.yml").read_text()
    assert '- cron: "45,50,55 6 * * *"\n      timezone: "America/New_York"\n' in text
    done = cli(repo, "validate", "--from", "2026-10-20T00:00:00Z")
    assert done.returncode == 0, done.stderr
    assert "no tick in the" not in done.stderr
    # the month's estimate: a lead tick before every slot, so each fires on time
    estimate = json.loads(cli(repo, "estimate", "--json", check=True).stdout)["orchestrator"]
    assert estimate["missed"] == 0 and estimate["lateness_seconds"]["p95"] < 60

    wrong = _zoned_repo(tmp_path / "utc", ["45,50,55 6 * * *"])
    assert "no tick in the" in cli(wrong, "validate").stderr
    late = json.loads(cli(wrong, "estimate", "--json", check=True).stdout)["orchestrator"]
    assert late["missed"] > 0 or late["lateness_seconds"]["p95"] > 600


def test_cron_sync_writes_utc_and_says_which_zoned_entry_it_replaced(tmp_path: Path) -> None:
    repo = _zoned_repo(tmp_path, ["TZ=America/New_York 45,50,55 6 * * *"])
    done = cli(repo, "cron-sync", check=True)
    assert "note: .github/workflows/tick.yml's entry '45,50,55 6 * * *' in " \
           "America/New_York is replaced by UTC entries" in done.stderr
    assert "timezone:" not in (repo / ".github" / "workflows" / "tick.yml").read_text()


def test_an_unknown_zone_on_a_tick_entry_fails_validate(tmp_path: Path) -> None:
    repo = _zoned_repo(tmp_path, ["TZ=America/New_York 45,50,55 6 * * *"])
    tick = repo / ".github" / "workflows" / "tick.yml"
    tick.write_text(tick.read_text().replace('"America/New_York"', '"America/Springfield"'))
    done = cli(repo, "validate")
    assert done.returncode == 1
    assert "timezone 'America/Springfield' of a schedule entry is not an IANA zone" in done.stderr


# --------------------------------------------------------------------------- queue


def test_a_leg_github_cancels_after_a_day_in_a_self_hosted_queue_is_retried(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    """No runner took it: GitHub cancels it, and it must not stay `cancelled` unheard."""
    fake_github.runner = "my-self-hosted"  # the repository's ORCHESTRATOR_RUNNER
    start_at = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
    origin = make_origin(tmp_path, {"nightly": {
        "at": "2026-12-01T07:00Z", "deadline_minutes": 3000,
        "tracks": [{**OK, "retry_backoff_seconds": 60}]}})
    repo = clone(origin, tmp_path / "repo")
    fake_github.now = start_at + timedelta(minutes=1)
    github_tick(repo, fake_github, fake_github.now)
    later = start_at + timedelta(hours=25)
    fake_github.now = later
    github_tick(repo, fake_github, later)
    state, _ = read_state(repo)
    track = state.tracks["nightly--20261201T0700Z"]["publish"]
    assert track.phase is not TrackPhase.CANCELLED
    assert "waited a day in the queue without a runner" in track.error_log[-1]
    assert track.phase is TrackPhase.PENDING and track.attempt == 2  # its retry


# --------------------------------------------------------------------------- pages


@pytest.mark.parametrize("pages", [True, False])
def test_the_fan_in_job_that_lands_a_brief_starts_pages_when_the_repository_has_it(
        tmp_path: Path, fake_github: FakeGitHub, pages: bool) -> None:
    """A push with GITHUB_TOKEN starts no workflow: pages.yml on `workflow_run` of the
    tick alone published a fan-in's brief only after the next tick."""
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    origin = make_origin(tmp_path, {"nightly": {"at": f"{slot:%Y-%m-%dT%H:%M}Z",
                                                "tracks": [OK]}})
    if pages:
        seed = clone(origin, tmp_path / "with-pages")
        (seed / ".github" / "workflows").mkdir(parents=True)
        (seed / ".github" / "workflows" / "pages.yml").write_text(
            (WORKFLOWS / "pages.yml").read_text())
        git("add", ".", cwd=seed)
        git("commit", "--quiet", "-m", "pages", cwd=seed)
        git("push", "--quiet", "origin", "HEAD:main", cwd=seed)
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake_github, datetime.now(UTC))
    fake_github.now = None
    [ci_run] = fake_github.runs
    inputs = fake_github.dispatches[-1].body["inputs"]
    player = Player(fake_github, origin, tmp_path / "play")
    for leg in player.legs(inputs):
        player.play_leg(ci_run, inputs, leg)
    played = player.play_fan_in(ci_run, inputs)
    assert played.conclusion == "success", [p.stderr for p in played.output]
    assert played.outputs["fan_in"] == {"rendered": inputs["run_id"]}
    to_pages = [r for r in fake_github.dispatches if "/workflows/pages.yml/" in r.path]
    assert [(r.status, r.body) for r in to_pages] == (
        [(204, {"ref": "main"})] if pages else [])
