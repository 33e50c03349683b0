"""``orchestrator logs`` of a run that ran on GitHub: the leg's job log through the API.

Real git (a bare origin), the CLI in a subprocess, and the fake GitHub, whose job log
answers ``302`` to another host name as GitHub's does (to its log storage).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.executors.github.leglogs import find_job
from orchestrator.github import GitHubClient, joblogs
from orchestrator.state.phases import TrackPhase
from tests.drive import cli, github_tick, read_state
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, make_origin

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"


def _dispatched(tmp_path: Path, fake: FakeGitHub) -> tuple[Path, int]:
    origin = make_origin(tmp_path, {"nightly": {"cron": "0 7 * * *", "tracks": [
        {"name": n, "run": f"make {n}"} for n in ("a", "b")]}})
    repo = clone(origin, tmp_path / "c")
    github_tick(repo, fake, T0 + timedelta(minutes=1))
    [ci_run] = fake.runs
    return repo, ci_run


def _finished(tmp_path: Path, fake: FakeGitHub) -> tuple[Path, int]:
    repo, ci_run = _dispatched(tmp_path, fake)
    fake.now = T0 + timedelta(minutes=4)
    fake.complete_all(ci_run)
    github_tick(repo, fake, T0 + timedelta(minutes=5))
    state, _ = read_state(repo)
    assert state.tracks[RUN]["a"].phase is TrackPhase.COMPLETE
    return repo, ci_run


def _env(fake: FakeGitHub) -> dict[str, str]:
    """The fake's settings, and a work folder with no local attempts in it."""
    return {**fake.env(), "ORCHESTRATOR_WORK_DIR": os.devnull + ".none"}


def test_a_github_leg_s_log_is_printed_redacted_and_the_token_stays_on_the_api(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo, ci_run = _finished(tmp_path, fake_github)
    personal = "ghp_" + "A1b2C3d4" * 5
    fake_github.set_log(ci_run, "a", (
        b"2026-12-01T07:03:00.0000000Z starting\r\n"
        b"\x1b[31mred\x1b[0m and a title \x1b]0;pwned\x07 bell\x07 nul\x00 bad \xff\xfe\n"
        + f"token {fake_github.token} and {personal}\n".encode() + b"the end\n"))
    out = cli(repo, "logs", RUN, "a", env=_env(fake_github), check=True).stdout
    assert "starting\nred and a title  bell nul bad \ufffd\ufffd\n" in out
    assert out.endswith("the end\n")
    assert fake_github.token not in out and personal not in out and "token *** and ***" in out
    assert "\x1b" not in out and "\x07" not in out and "\x00" not in out
    [asked] = fake_github.calls("job-logs")
    assert asked.authorized and asked.status == 302
    [read] = [r for r in fake_github.requests if r.path.startswith("/_log/")]
    assert read.status == 200 and read.host.startswith("localhost:")  # another host
    assert not read.authorized  # no Authorization header went with the redirect

    both = cli(repo, "logs", RUN, env=_env(fake_github), check=True).stdout
    assert "== a attempt 1 (job " in both and "== b attempt 1 (job " in both
    other = cli(repo, "logs", RUN, "a", "--attempt", "2", env=_env(fake_github))
    assert other.returncode != 0 and "only its current attempt's job is known" in other.stderr


def test_a_log_of_50_mb_of_binary_bytes_prints_only_its_end(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo, ci_run = _finished(tmp_path, fake_github)
    block = bytes(range(256)) * 4096  # 1 MiB of every byte value
    fake_github.set_log(ci_run, "a", block * 50 + b"\nlast line\n")
    proc = cli(repo, "logs", RUN, "a", env=_env(fake_github), check=True)
    assert proc.stdout.endswith("last line\n")
    assert len(proc.stdout.encode()) <= 2 * joblogs.MAX_BYTES
    assert "of 52,428,811 bytes of the log are not shown" in proc.stderr
    assert "/actions/runs/" in proc.stderr  # where the whole log is


def test_an_expired_log_and_a_token_without_access_each_say_so_in_one_line(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo, ci_run = _finished(tmp_path, fake_github)
    fake_github.expire_log(ci_run, "a")
    gone = cli(repo, "logs", RUN, "a", env=_env(fake_github))
    assert gone.returncode != 0 and "has expired" in gone.stderr
    assert len(gone.stderr.strip().splitlines()) == 1
    assert [r.status for r in fake_github.calls("job-logs")] == [410]
    fake_github.no_access = True
    hidden = cli(repo, "logs", RUN, "b", env=_env(fake_github))
    assert hidden.returncode != 0 and "actions: read" in hidden.stderr
    no_token = cli(repo, "logs", RUN, "b", env={**_env(fake_github), "GITHUB_TOKEN": ""})
    assert no_token.returncode != 0 and "GITHUB_TOKEN is not set" in no_token.stderr


def test_a_running_job_s_log_waits_for_its_end_with_follow(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    repo, ci_run = _dispatched(tmp_path, fake_github)
    fake_github.now = T0 + timedelta(minutes=2)
    fake_github.start_all(ci_run)
    github_tick(repo, fake_github, T0 + timedelta(minutes=3))  # sees it running
    early = cli(repo, "logs", RUN, "a", env=_env(fake_github))
    assert early.returncode != 0
    assert "GitHub serves a job's log once the job has completed" in early.stderr
    assert fake_github.calls("job-logs") == []  # never asked before its end

    # --follow's wait, with time as a parameter: each "sleep" lets the fake move on
    client = GitHubClient(fake_github.token, api_url=fake_github.api_url, now=T0)
    key = f"{RUN}--a--1"
    job = find_job(client, fake_github.repository, key, ci_run, None)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            fake_github.set_log(ci_run, "a", b"done at last\n")
            fake_github.set_job(ci_run, "a", "completed", "success")

    done = joblogs.wait_completed(client, fake_github.repository, job, sleep)
    assert slept == [joblogs.POLL_SECONDS] * 3 and done["status"] == "completed"
    assert joblogs.download(client, fake_github.repository, done).text == b"done at last\n"


def test_the_log_s_download_link_lasts_a_minute(fake_github: FakeGitHub,
                                                tmp_path: Path) -> None:
    _, ci_run = _finished(tmp_path, fake_github)
    client = GitHubClient(fake_github.token, api_url=fake_github.api_url, now=T0)
    job_id = next(j.id for j in fake_github.runs[ci_run].jobs if j.leg.get("track") == "a")
    answer = client.request("GET", f"repos/{fake_github.repository}/actions/jobs/{job_id}/logs")
    assert answer.status_code == 302
    fake_github.now = (fake_github.now or T0) + timedelta(minutes=2)
    assert client.fetch_signed_tail(answer.headers["location"], 100) is None


def test_a_signed_url_is_read_whole_within_a_limit_or_by_its_tail_without_the_token(
        fake_github: FakeGitHub, tmp_path: Path) -> None:
    _, ci_run = _finished(tmp_path, fake_github)
    artifact = fake_github.upload(ci_run, "blob-check", {"a.txt": b"x" * 5000})
    client = GitHubClient(fake_github.token, api_url=fake_github.api_url, now=T0)
    answer = client.request(
        "GET", f"repos/{fake_github.repository}/actions/artifacts/{artifact.id}/zip")
    assert answer.status_code == 302
    url, size = answer.headers["location"], len(artifact.data)
    assert client.fetch_signed(url, size) == artifact.data  # exactly at the limit
    assert client.fetch_signed(url, size - 1) is None  # one byte more than allowed
    assert client.fetch_signed_tail(url, 10) == (artifact.data[-10:], size)
    assert client.fetch_signed_tail(url, 0) == (b"", size)
    assert client.fetch_signed_tail(url, 10 * size) == (artifact.data, size)
    assert client.fetch_signed(url + "x", size) is None  # a bad signature: 403
    assert client.fetch_signed("file:///etc/passwd", size) is None
    assert client.fetch_signed_tail("ftp://example.com/x", 10) is None
    blobs = fake_github.calls("blob")
    assert len(blobs) == 6 and not any(r.authorized for r in blobs)
