"""Driving the product from integration tests: a tick in this process, the CLI as a
subprocess, and reading back what they left on the state branch.

Plain functions, written once, for every test module that ticks a checkout of a bare
origin (:mod:`tests.gitrepo`) with the local or the GitHub executor:

- :func:`tick`: one tick in this process, built as the commands build it
  (:func:`~orchestrator.commands.tick.build`), with the local executor;
- :func:`github_tick`: the same with the GitHub executor against the fake server;
- :func:`cli`: ``orchestrator --repo REPO ARGS`` to the end, in this process as a
  subprocess would see it, or in one where the process is the subject (a kill);
  :func:`cli_tick` is its ``tick --now``, :func:`github_cli_tick` the same with the
  GitHub executor in a subprocess; :func:`start_cli` and :func:`start_github_tick`
  start one without waiting (ticks that race), and :func:`run_ticks` waits for them;
- :func:`state_of`, :func:`read_state`, :func:`launches`, :func:`finished`,
  :func:`wait_until`: what a tick left behind, on the state branch and in the local
  work folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from orchestrator.commands.context import Config
from orchestrator.commands.tick import build
from orchestrator.executors.github import GitHubExecutor
from orchestrator.state import model as state_model
from orchestrator.state.breaker import Breaker, BreakerPolicy
from orchestrator.store import GitStateStore, Snapshot
from orchestrator.tick.result import TickResult
from orchestrator.tick.settings import TickSettings
from orchestrator.tick.shell import Tick
from tests import inprocess
from tests.fakes.github import FakeGitHub
from tests.indexcheck import assert_index_agrees

STATE_BRANCH = "orchestrator-state"
"""The state branch every test checkout writes to (the CLI's default)."""

CRASHPOINT = Path(__file__).resolve().parent / "crashpoint.py"
"""Runs the CLI and kills it at a tick's checkpoint (:func:`cli`'s ``crash_at``)."""


# --------------------------------------------------------------------------- in process


@contextlib.contextmanager
def _work_dir(work: Path | None) -> Iterator[None]:
    """``ORCHESTRATOR_WORK_DIR`` set to ``work`` for the block (the local executor reads
    it when the tick builds it); left as it was when ``work`` is ``None``."""
    if work is None:
        yield
        return
    before = os.environ.get("ORCHESTRATOR_WORK_DIR")
    os.environ["ORCHESTRATOR_WORK_DIR"] = str(work)
    try:
        yield
    finally:
        if before is None:
            del os.environ["ORCHESTRATOR_WORK_DIR"]
        else:
            os.environ["ORCHESTRATOR_WORK_DIR"] = before


def tick(repo: Path, now: datetime, work: Path | None = None, *, dry_run: bool = False,
         environ: Mapping[str, str] | None = None, **settings: Any) -> TickResult:
    """One tick of ``repo`` at ``now`` in this process, with the local executor (its
    attempts in ``work``; default: the checkout's ``.orchestrator/work``). ``settings``
    go to :class:`~orchestrator.tick.settings.TickSettings` (``retention``,
    ``requests``, ...), ``environ`` to the tick."""
    cfg = Config(repo=repo, remote="origin", state_branch=STATE_BRANCH)
    with _work_dir(work):
        return build(cfg, now, TickSettings(**settings), environ=environ).run(dry_run=dry_run)


class Sleeper:
    """An executor's ``sleep`` that moves the fake's clock instead of waiting."""

    def __init__(self, fake: FakeGitHub, start: datetime) -> None:
        self.fake = fake
        self.start = start

    def __call__(self, seconds: float) -> None:
        self.fake.now = (self.fake.now or self.start) + timedelta(seconds=seconds)


def github_tick(repo: Path, fake: FakeGitHub, now: datetime,
                environ: Mapping[str, str] | None = None) -> TickResult:
    """A tick in this process with the GitHub executor against ``fake``, whose clock is
    set to ``now``; the executor sleeps on the fake's clock. ``environ``: the tick's
    environment (its notifications' channels), default this process's."""
    policy = BreakerPolicy(threshold=5, cooldown=timedelta(minutes=15))
    fake.now = now

    def make(breaker: Breaker | None) -> GitHubExecutor:
        return GitHubExecutor(fake.repository, fake.token, api_url=fake.api_url, now=now,
                              breaker=breaker, sleep=Sleeper(fake, now), policy=policy)

    store = GitStateStore(repo, "origin", STATE_BRANCH)
    settings = TickSettings(executor_name="github", dispatch_grace=timedelta(minutes=10))
    return Tick(store, repo, make, now, settings, environ=environ).run()


# --------------------------------------------------------------------------- the CLI


def _environment(work: Path | None, env: Mapping[str, str] | None) -> dict[str, str]:
    """This process's environment, then the work folder, then ``env``."""
    folder = {"ORCHESTRATOR_WORK_DIR": str(work)} if work is not None else {}
    return {**os.environ, **folder, **(env or {})}


def cli(repo: Path, *args: str, work: Path | None = None, env: Mapping[str, str] | None = None,
        cwd: Path | None = None, check: bool = False, timeout: float = 120,
        crash_at: str | None = None, process: bool = False
        ) -> subprocess.CompletedProcess[str]:
    """``orchestrator --repo REPO ARGS``, in this process's environment with
    ``ORCHESTRATOR_WORK_DIR=work`` and ``env`` on top, run in this process as a
    subprocess would see it (:mod:`tests.inprocess`). ``check``: fail the test on a
    non-zero exit, with its stderr. ``crash_at``: in a subprocess, killed with SIGKILL
    when a tick reaches that checkpoint (:mod:`tests.crashpoint`). ``process``: in a
    subprocess anyway. ``timeout`` bounds either (in this process, a hang guard that
    ends the test run's worker with every thread's stack)."""
    environ = _environment(work, env)
    if crash_at is None and not process:
        proc = inprocess.run(["--repo", str(repo), *args], env=environ, cwd=cwd,
                             timeout=timeout)
    else:
        entry = ["-m", "orchestrator"] if crash_at is None else [str(CRASHPOINT), crash_at]
        proc = subprocess.run([sys.executable, *entry, "--repo", str(repo), *args],
                              capture_output=True, text=True, cwd=cwd, timeout=timeout,
                              env=environ)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


def cli_tick(repo: Path, now: str, *options: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """``orchestrator tick --now NOW OPTIONS`` through :func:`cli` (same keywords)."""
    return cli(repo, "tick", "--now", now, *options, **kw)


def start_cli(repo: Path, *args: str, env: Mapping[str, str] | None = None
              ) -> subprocess.Popen[str]:
    """:func:`cli` started and not waited for (:func:`run_ticks` waits)."""
    return subprocess.Popen([sys.executable, "-m", "orchestrator", "--repo", str(repo), *args],
                            env=_environment(None, env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def start_github_tick(repo: Path, now: datetime | None, fake: FakeGitHub, *options: str,
                      **env: str) -> subprocess.Popen[str]:
    """``orchestrator tick --executor github --now NOW OPTIONS`` against ``fake``,
    started (``now=None``: no ``--now``, the real clock)."""
    at = ["--now", f"{now:%Y-%m-%dT%H:%M:%SZ}"] if now is not None else []
    return start_cli(repo, "tick", "--executor", "github", *at, *options,
                     env={**fake.env(), **env})


def github_cli_tick(repo: Path, now: datetime, fake: FakeGitHub, **env: str) -> str:
    """One :func:`start_github_tick` run to its end, with the fake's clock set to
    ``now`` first; its stdout."""
    fake.now = now
    return run_ticks([start_github_tick(repo, now, fake, **env)])[0]


def run_ticks(procs: list[subprocess.Popen[str]]) -> list[str]:
    """Wait for every process; each must exit 0. Their stdout, in order."""
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), [o[1] for o in outs]
    return [o[0] for o in outs]


# --------------------------------------------------------------------------- reading back


def state_of(repo: Path) -> tuple[state_model.State, Snapshot]:
    """The state branch as ``repo``'s origin holds it: every record, and the snapshot."""
    snap = GitStateStore(repo, "origin", STATE_BRANCH).read()
    return state_model.load(snap.files, all_tracks=True), snap


def read_state(repo: Path) -> tuple[state_model.State, dict[str, bytes]]:
    """:func:`state_of`, with the files as a dict, after checking that the index of open
    runs agrees with the records."""
    snap = GitStateStore(repo, "origin", STATE_BRANCH).read()
    assert_index_agrees(snap.files)
    return state_model.load(snap.files, all_tracks=True), dict(snap.files)


def finished(work: Path, key: str) -> bool:
    """Whether the local attempt ``key`` in ``work`` has ended: its ``status.json`` says
    neither ``queued`` nor ``running``."""
    try:
        status = json.loads((work / key / "status.json").read_text())
    except (FileNotFoundError, ValueError):
        return False
    return isinstance(status, dict) and status.get("state") not in ("queued", "running")


def launches(work: Path) -> list[str]:
    """The dispatch keys the local executor launched in ``work``, in launch order."""
    log = work / "launches.log"
    if not log.exists():
        return []
    return [json.loads(line)["key"] for line in log.read_text().splitlines() if line.strip()]


def wait_until(predicate: Callable[[], object], timeout: float = 20.0) -> None:
    """Poll ``predicate`` until it is true, or fail the test after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")
