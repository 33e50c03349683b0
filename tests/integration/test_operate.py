"""init, status, serve and the heartbeat ping against real git, real processes and a
real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrator.cadence import tickfile
from orchestrator.commands import init
from orchestrator.config.repository import RepoConfig
from orchestrator.state import layout
from orchestrator.state import model as state_model
from orchestrator.store import GitStateStore
from tests.drive import cli
from tests.gitrepo import bare_origin, git

BRANCH = "orchestrator-state"


def initialised(tmp: Path) -> Path:
    """``orchestrator init`` in a new folder, with a bare ``origin``."""
    bare_origin(tmp)
    proc = cli(tmp / "repo", "init")
    assert proc.returncode == 0, proc.stderr
    repo = tmp / "repo"
    git("remote", "add", "origin", str(tmp / "origin.git"), cwd=repo)
    return repo


def every_minute(repo: Path, run: str = "true") -> None:
    (repo / "schedules" / "nightly.json").unlink()
    proc = cli(repo, "schedules", "add", "minutely", "--every", "minute", "--track",
               f"t={run}")
    assert proc.returncode == 0, proc.stderr


# --------------------------------------------------------------------------- init


def test_init_into_an_empty_folder_then_validate_and_tick(tmp_path: Path) -> None:
    repo = initialised(tmp_path)
    assert git("rev-parse", "--is-inside-work-tree", cwd=repo) == "true"
    for rel in init.scaffold_files():
        assert (repo / rel).is_file(), rel
    assert not (repo / ".github" / "workflows" / "pages.yml").exists()
    assert "## Scheduled work (orchestrator)" in (repo / "README.md").read_text()
    assert (repo / ".gitignore").read_text() == ".orchestrator/\n"
    proc = cli(repo, "validate", "--preview", "2")
    assert proc.returncode == 0, proc.stderr
    assert "1 schedule valid, 0 invalid" in proc.stdout
    env = {"ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}
    # 2026-12-01 is a Tuesday: the example (02:15 New York on weekdays) is due at 07:15Z
    proc = cli(repo, "tick", "--executor", "local", "--now", "2026-12-01T07:16:00Z", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "nightly--20261201T0715Z: fired slot" in proc.stdout
    files = GitStateStore(repo, "origin", BRANCH).read().files
    assert layout.run_path("nightly--20261201T0715Z") in files


def test_init_local_gives_an_origin_so_tick_status_and_runs_work_out_of_the_box(
        tmp_path: Path) -> None:
    proc = cli(tmp_path, "init", str(tmp_path / "mine"), "--local")
    assert proc.returncode == 0, proc.stderr
    repo, bare = tmp_path / "mine", tmp_path / "mine.git"
    assert (f"created the bare repository {bare} and registered it as origin"
            in proc.stdout)
    assert git("rev-parse", "--is-bare-repository", cwd=bare) == "true"
    assert git("remote", "get-url", "origin", cwd=repo) == str(bare)
    env = {"ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}
    proc = cli(repo, "tick", "--now", "2026-12-01T07:16:00Z", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "nightly--20261201T0715Z: fired slot" in proc.stdout
    assert git("rev-parse", "--verify", "-q", f"refs/heads/{BRANCH}", cwd=bare)
    proc = cli(repo, "status", "--now", "2026-12-01T07:17:00Z")
    assert proc.returncode == 0, proc.stderr
    assert "nightly--20261201T0715Z" in cli(repo, "runs", "list").stdout


def test_init_local_refuses_an_existing_origin_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "mine.git").mkdir()
    proc = cli(tmp_path, "init", str(tmp_path / "mine"), "--local")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"orchestrator: {tmp_path / 'mine.git'} already exists")
    assert not (tmp_path / "mine").exists()
    repo = initialised(tmp_path)  # origin registered by hand
    (repo / "schedules" / "nightly.json").unlink()
    proc = cli(repo, "init", "--local", "--force")
    assert proc.returncode == 1
    assert "already has a remote named origin" in proc.stderr
    assert not (repo / "schedules" / "nightly.json").exists()
    assert not (tmp_path / "repo.git").exists()


def test_init_refuses_beside_existing_schedules_and_writes_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "schedules").mkdir(parents=True)
    (repo / "schedules" / "mine.json").write_text("{}\n")
    proc = cli(repo, "init")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"orchestrator: {repo}/schedules/mine.json already exists")
    assert "--force" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*")) == [
        "schedules", "schedules/mine.json"]
    proc = cli(repo, "init", "--force")
    assert proc.returncode == 0, proc.stderr
    assert (repo / "schedules" / "mine.json").read_text() == "{}\n"  # not ours: untouched
    assert (repo / "schedules" / "nightly.json").is_file()


def test_init_refuses_to_overwrite_a_workflow_and_force_overwrites_it(tmp_path: Path
                                                                      ) -> None:
    repo = tmp_path / "repo"
    tick_yml = repo / ".github" / "workflows" / "tick.yml"
    tick_yml.parent.mkdir(parents=True)
    tick_yml.write_text("name: mine\n")
    (repo / "README.md").write_text("# My project\n")
    proc = cli(tmp_path, "init", str(repo))
    assert proc.returncode == 1 and "tick.yml already exists" in proc.stderr
    assert tick_yml.read_text() == "name: mine\n"
    for _ in range(2):  # twice: the README section and .gitignore line are added once
        proc = cli(tmp_path, "init", str(repo), "--force", "--pages")
        assert proc.returncode == 0, proc.stderr
    assert "overwrote .github/workflows/tick.yml" in proc.stdout
    # the shipped file, with its cron derived from the example schedule (cron-sync)
    shipped = init.scaffold_files()[".github/workflows/tick.yml"]
    written = tick_yml.read_text()
    assert "4,9 6 * 3-11 1-5" in tickfile.read_crons(written)
    assert tickfile.with_crons(written, tickfile.read_crons(shipped),
                              tickfile.tick_comment(RepoConfig())) == shipped
    assert (repo / ".github" / "workflows" / "pages.yml").is_file()
    readme = (repo / "README.md").read_text()
    assert readme.startswith("# My project\n\n## Scheduled work (orchestrator)\n")
    assert readme.count("## Scheduled work (orchestrator)") == 1
    assert (repo / ".gitignore").read_text() == ".orchestrator/\n"


# --------------------------------------------------------------------------- status


def test_status_is_stale_without_ticks_fresh_after_one_and_stale_again_later(
        tmp_path: Path) -> None:
    repo = initialised(tmp_path)
    proc = cli(repo, "status")
    assert proc.returncode == 5
    assert "none recorded" in proc.stdout
    assert proc.stderr == f"orchestrator: no tick recorded on branch {BRANCH!r} of origin\n"

    env = {"ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}
    assert cli(repo, "tick", "--now", "2026-12-01T07:16:00Z", env=env).returncode == 0
    proc = cli(repo, "status", "--now", "2026-12-01T07:17:00Z")
    assert proc.returncode == 0, proc.stderr
    # init's tick.yml ticks before the example's slots and every 6 hours: the default
    # limit is what that cadence needs (its watchdog's), not 90 minutes
    assert "2026-12-01T07:16:00Z  (1m ago; fresh, limit 735m)" in proc.stdout
    assert "nightly--20261201T0715Z  running:" in proc.stdout

    proc = cli(repo, "status", "--now", "2026-12-01T07:47:00Z", "--max-staleness", "30",
               "--json")
    assert proc.returncode == 5
    report = json.loads(proc.stdout)
    assert report["stale"] is True and report["age_minutes"] == 31.0
    assert report["open_runs"][0]["run_id"] == "nightly--20261201T0715Z"
    assert "is 31m old, more than 30 minutes" in proc.stderr


def test_a_brief_and_the_dashboard_judge_staleness_by_the_limit_status_uses(
        tmp_path: Path) -> None:
    repo = initialised(tmp_path)
    env = {"ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}
    assert cli(repo, "tick", "--now", "2026-12-01T07:16:00Z", env=env).returncode == 0
    status = cli(repo, "status", "--now", "2026-12-01T07:17:00Z").stdout
    assert "limit 735m" in status  # init's tick.yml: its watchdog's limit
    page = cli(repo, "render", "nightly--20261201T0715Z", "--now", "2026-12-01T07:17:00Z",
               env=env).stdout
    assert "stale after 12h 15m" in page
    out = tmp_path / "site"
    # 1 h 44 min after the last tick: stale by the default 90 minutes, not by 735
    assert cli(repo, "render", "--index", "--output", str(out / "index.html"),
               "--now", "2026-12-01T09:00:00Z").returncode == 0
    assert '<strong class="bad">stale</strong>' not in (out / "index.html").read_text()


def test_status_cannot_read_the_remote_exits_3(tmp_path: Path) -> None:
    repo = initialised(tmp_path)
    proc = cli(repo, "--remote", str(tmp_path / "nowhere.git"), "status")
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("orchestrator: ") and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- heartbeat


class Monitor:
    """A stand-in for an external monitor (e.g. Healthchecks.io): counts GETs."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.paths: list[str] = []
        monitor = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                monitor.paths.append(self.path)
                self.send_response(monitor.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/ping/abc"


@pytest.fixture
def monitor(request: pytest.FixtureRequest) -> Iterator[Monitor]:
    m = Monitor(getattr(request, "param", 200))
    m.thread.start()
    yield m
    m.server.shutdown()
    m.server.server_close()


def test_a_successful_tick_pings_the_heartbeat_url(tmp_path: Path, monitor: Monitor) -> None:
    repo = initialised(tmp_path)
    env = {"ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}
    proc = cli(repo, "tick", "--now", "2026-12-01T07:00:00Z", "--heartbeat-url", monitor.url,
               env=env)
    assert proc.returncode == 0, proc.stderr
    assert monitor.paths == ["/ping/abc"]
    proc = cli(repo, "tick", "--now", "2026-12-01T07:01:00Z", "--dry-run",
               env={**env, "ORCHESTRATOR_HEARTBEAT_URL": monitor.url})
    assert proc.returncode == 0 and monitor.paths == ["/ping/abc"]  # a dry run does not


@pytest.mark.parametrize("monitor", [500], indirect=True)
def test_a_failed_ping_never_fails_the_tick(tmp_path: Path, monitor: Monitor) -> None:
    repo = initialised(tmp_path)
    env = {"ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")}
    proc = cli(repo, "tick", "--now", "2026-12-01T07:16:00Z", "--heartbeat-url", monitor.url,
               env=env)
    assert proc.returncode == 0, proc.stderr
    assert monitor.paths == ["/ping/abc"]
    assert "heartbeat ping failed: HTTPStatusError" in proc.stdout
    assert "committed" in proc.stdout
    # nobody listening at all
    monitor.server.shutdown()
    monitor.server.server_close()
    proc = cli(repo, "tick", "--now", "2026-12-01T07:17:00Z", "--heartbeat-url", monitor.url,
               env=env)
    assert proc.returncode == 0, proc.stderr
    assert "heartbeat ping failed: ConnectError" in proc.stdout


# --------------------------------------------------------------------------- serve


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_ticks_on_the_real_clock_and_a_signal_ends_it_with_0(tmp_path: Path,
                                                                    sig: int) -> None:
    repo = initialised(tmp_path)
    every_minute(repo)
    work = tmp_path / "work"
    log = tmp_path / "serve.log"
    started = datetime.now(UTC)
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "--repo", str(repo), "serve", "--interval",
             "0.2"], env={**os.environ, "ORCHESTRATOR_WORK_DIR": str(work)},
            stdout=subprocess.DEVNULL, stderr=sink, text=True)
    try:
        # on a loaded machine the first tick may take a while: wait for its launch and
        # for a second wake-up before signalling
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                (work / "launches.log").exists() and " wake-up 2: " in log.read_text()):
            time.sleep(0.1)
        assert (work / "launches.log").exists(), "serve fired nothing"
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    stopped = datetime.now(UTC)
    err = log.read_text()
    assert proc.returncode == 0, err
    lines = err.splitlines()
    assert lines[0].startswith(f"serving {repo} (state branch {BRANCH!r} of origin")
    assert any(" wake-up 2: " in line for line in lines)
    assert f"{signal.Signals(sig).name}: stopping" in err
    assert lines[-1].startswith("stopped after ")
    files = GitStateStore(repo, "origin", BRANCH).read().files
    runs = state_model.load(files).runs
    # a run for some of the minutes serve lasted, no more (on a loaded machine it lasts
    # longer, and crosses more minutes: not a count fixed in advance)
    minutes = {f"minutely--{started + timedelta(minutes=m):%Y%m%dT%H%MZ}" for m in range(
        int((stopped - started).total_seconds() // 60) + 2)}
    assert runs and set(runs) <= minutes, (sorted(runs), started, stopped)


def test_serve_refuses_a_folder_that_is_not_a_repository(tmp_path: Path) -> None:
    proc = cli(tmp_path, "serve", "--interval", "1")
    assert proc.returncode == 1
    assert proc.stderr == f"orchestrator: not a git repository: {tmp_path}\n"


@pytest.mark.slow
def test_serve_compacts_once_at_start_with_compact_keep_days(tmp_path: Path) -> None:
    repo = initialised(tmp_path)
    work = tmp_path / "work"
    env = {"ORCHESTRATOR_WORK_DIR": str(work)}
    # A run that finished long ago (Tuesday 2020-01-07, 02:15 New York = 07:15Z).
    fired = cli(repo, "tick", "--now", "2020-01-07T07:16:00Z", "--json", env=env)
    keys = json.loads(fired.stdout)["dispatched"]
    assert len(keys) == 4
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
            (work / k / "status.json").exists()
            and json.loads((work / k / "status.json").read_text())["state"] == "exited"
            for k in keys):
        time.sleep(0.1)
    done = cli(repo, "tick", "--now", "2020-01-07T07:20:00Z", "--json", env=env)
    assert json.loads(done.stdout)["rendered"] == ["nightly--20200107T0715Z"]

    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "--repo", str(repo), "serve", "--interval",
         "0.5", "--compact-keep-days", "0"], env={**os.environ, **env},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "orchestrator-archive/" not in git(
                "ls-remote", "--tags", "origin", cwd=repo):
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "wake-up 1: started tick, compact" in err
    assert "  compact: archived 1 run(s); previous history kept as tag " \
           "orchestrator-archive/" in err
    assert err.count("compact: archived") == 1  # once a day, not every wake-up
    files = GitStateStore(repo, "origin", BRANCH).read().files
    assert layout.run_path("nightly--20200107T0715Z") not in files


def test_init_inside_another_repository_makes_a_repository_of_its_own(tmp_path: Path
                                                                      ) -> None:
    outer = tmp_path / "outer"
    outer.mkdir()
    subprocess.run(["git", "init", "--quiet", str(outer)], check=True)
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "init", "mine"], cwd=outer,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=outer / "mine",
                         capture_output=True, text=True, check=True).stdout.strip()
    assert Path(top) == (outer / "mine").resolve()  # its workflows sit at a repo root
    assert (outer / "mine" / ".github" / "workflows" / "tick.yml").is_file()
