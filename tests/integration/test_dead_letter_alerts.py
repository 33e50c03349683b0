"""Dead-letter alerts: a tick that parks a track signals ``<heartbeat>/fail`` and lists
the new dead letter first in its job summary; ``status --fail-on-dead-letters`` exits 6
while one waits for a decision. Real git, real processes, a local stand-in monitor."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_operate import Monitor

from tests.builders import spec_data
from tests.drive import cli, launches, wait_until

KEY = "nightly--20261201T0700Z--bad"
LATE = ("--max-staleness", "100000")  # judged on dead letters, not on the clock


@pytest.fixture
def monitor() -> Iterator[Monitor]:
    m = Monitor(200)
    m.thread.start()
    yield m
    m.server.shutdown()
    m.server.server_close()


def park(repo: Path, work: Path, *tick_args: str, summary: Path | None = None) -> str:
    """Two ticks: the first dispatches `good` and `bad`, the second parks `bad`."""
    env = {"ORCHESTRATOR_WORK_DIR": str(work)}
    cli(repo, "tick", "--now", "2026-12-01T07:01:00Z", *tick_args, env=env, check=True)
    wait_until(lambda: len(launches(work)) == 2)
    time.sleep(0.5)
    if summary is not None:
        env["GITHUB_STEP_SUMMARY"] = str(summary)
    return cli(repo, "tick", "--now", "2026-12-01T07:02:00Z", *tick_args, env=env,
               check=True).stdout


@pytest.fixture
def repo(repo_with_origin: Callable[..., Path]) -> Path:
    return repo_with_origin({"nightly": spec_data(tracks=[
        {"name": "good", "run": "true"}, {"name": "bad", "run": "false"}])})


def test_a_parked_track_signals_failure_and_leads_the_job_summary(
        tmp_path: Path, repo: Path, monitor: Monitor) -> None:
    summary = tmp_path / "summary.md"
    out = park(repo, tmp_path / "work", "--heartbeat-url", monitor.url, summary=summary)
    assert monitor.paths == ["/ping/abc", "/ping/abc/fail"]
    assert f"NEW DEAD LETTER {KEY}: failed after 1 attempt(s)" in out
    text = summary.read_text()
    assert text.index("1 new dead letter(s)") < text.index("```")
    assert f"- `{KEY}`: failed after 1 attempt(s)" in text
    # the next tick parks nothing new: a plain heartbeat again
    cli(repo, "tick", "--now", "2026-12-01T07:03:00Z", "--heartbeat-url", monitor.url,
        env={"ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}, check=True)
    assert monitor.paths[-1] == "/ping/abc"


def test_the_failure_signal_is_configurable(tmp_path: Path, repo: Path,
                                            monitor: Monitor) -> None:
    other = monitor.url.replace("/ping/abc", "/alerts/dlq")
    park(repo, tmp_path / "work", "--heartbeat-url", monitor.url,
         "--heartbeat-fail-url", other)
    assert monitor.paths == ["/ping/abc", "/alerts/dlq"]


def test_none_sends_no_failure_signal(tmp_path: Path, repo: Path, monitor: Monitor) -> None:
    park(repo, tmp_path / "work", "--heartbeat-url", monitor.url,
         "--heartbeat-fail-url", "none")
    assert monitor.paths == ["/ping/abc"]


def test_status_exits_6_while_dead_letters_wait(tmp_path: Path, repo: Path) -> None:
    now = ("--now", "2026-12-01T07:05:00Z")
    park(repo, tmp_path / "work")
    plain = cli(repo, "status", *LATE, *now, check=False)
    assert plain.returncode == 0 and "dead letters  1" in plain.stdout
    failing = cli(repo, "status", *LATE, *now, "--fail-on-dead-letters", check=False)
    assert failing.returncode == 6
    assert "1 dead letter(s) wait for a decision" in failing.stderr
    assert "dead letters  1" in failing.stdout  # the report is printed all the same
    cli(repo, "dlq", "discard", KEY, "--reason", "known flaky", check=True)
    assert cli(repo, "status", *LATE, *now, "--fail-on-dead-letters", check=True).returncode == 0
