"""``orchestrator serve``: the tick (and friends) on a local wake-up loop.

For a machine or VM of your own instead of (or beside) GitHub's cron. Consumers:

- ``tick`` on every wake-up: ``make_tick(cfg, executor, now).run()``, exactly what
  ``orchestrator tick`` does; the loop also wakes at the next due moment each tick
  reports (a slot fires within a second of its time, whatever ``--interval``) and,
  with the local executor, within a second or two of a track's end (its next track,
  its retry or its run's brief follow at once);
  several ``serve`` processes (or a ``serve`` and the GitHub workflow) may tick the
  same state branch: compare-and-swap keeps every slot fired once;
- ``heartbeat`` every 15 minutes: warns when the last tick on the state branch is
  older than ``--max-staleness`` (say, pushes are being rejected);
- ``compact`` once a day, with ``--compact-keep-days N``; then this ``serve``'s ticks
  leave ``keep_finished_runs_days`` (:mod:`orchestrator.runs.retention`) alone: the flag
  wins over the setting, so the two never archive on different terms in one process.

SIGINT or SIGTERM stops the wake-ups, lets running consumers finish (a tick in the
middle of its push completes it) and exits 0. A second signal ends the process at
once. Nothing is kept in memory between wake-ups: all state is on the state branch,
so a restarted ``serve`` carries on where the last one stopped.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from types import FrameType

import click

from .. import executors
from ..cadence.serve import Loop, Work
from ..runs.compaction import archive_tag, compact
from ..state.codec import last_tick_at
from ..state.records import TrackPhase
from ..store import GitStateStore
from ..support.times import iso
from ..tick.result import TickResult
from ..tick.shell import Clock
from .context import Config, pass_config
from .status import DEFAULT_MAX_STALENESS
from .tick import make_tick, ping, track_state_branch

HEARTBEAT_CHECK_EVERY = 15 * 60.0
COMPACT_EVERY = 24 * 3600.0
PING_EVERY = 60.0
"""Seconds between heartbeat-URL pings: a 1-second interval must not ping every second."""


def tick_work(cfg: Config, executor: str, heartbeat_every: float,
              heartbeat_url: str | None,
              wake_at: Callable[[datetime], None] | None = None,
              retention: bool = True,
              wake_when: Callable[[Callable[[], bool] | None], None] | None = None) -> Work:
    last_ping: list[float] = []

    def work(now: datetime) -> list[str]:
        result = make_tick(cfg, executor, now, heartbeat_every=heartbeat_every,
                           retention=retention, clock=Clock(machine=now)).run()
        track_state_branch(cfg, result.tip)
        if wake_at is not None and result.wake is not None:
            wake_at(result.wake.at)  # the loop wakes for it, between its intervals
        if wake_when is not None and executor == executors.LOCAL:
            wake_when(local_ends(cfg, result))
        lines = list(result.log) + [f"dispatch failed: {e}" for e in result.dispatch_errors]
        if heartbeat_url and (not last_ping or time.monotonic() - last_ping[0] >= PING_EVERY):
            last_ping[:] = [time.monotonic()]
            problem = ping(heartbeat_url)
            if problem:
                lines.append(problem)
        return lines

    return work


def local_ends(cfg: Config, result: TickResult) -> Callable[[], bool] | None:
    """A watch that fires when a local attempt the tick left open ends (``None``: none
    is open), so the next tick records it at once rather than at the next wake-up."""
    from ..executors.local import ended

    state = result.decision.state if result.decision else None
    if state is None:
        return None
    records = [*state.tracks.values(), *state.undos.values()]
    keys = {t.dispatch_key for tracks in records for t in tracks.values()
            if t.phase in (TrackPhase.DISPATCHED, TrackPhase.RUNNING) and t.dispatch_key
            and t.executor == executors.LOCAL}
    work = executors.local_work_dir(executors.Setup(repo=cfg.repo, now=result.now))
    keys -= ended(work, keys)  # already ended: this tick recorded it, or the next will
    return (lambda: bool(ended(work, keys))) if keys else None


def heartbeat_work(cfg: Config, max_staleness: float) -> Work:
    def work(now: datetime) -> list[str]:
        files = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch).read().files
        last = last_tick_at(files)
        if last is None:
            return ["warning: no tick recorded on the state branch yet"]
        if now - last > timedelta(minutes=max_staleness):
            return [f"warning: the last tick on the state branch is from "
                    f"{iso(last)}, more than {max_staleness:g} minutes ago"]
        return []

    return work


def compact_work(cfg: Config, keep_days: int) -> Work:
    def work(now: datetime) -> list[str]:
        done = compact(GitStateStore(cfg.repo, cfg.remote, cfg.state_branch), keep_days, now)
        if done is None:
            return []
        from ..executors.local import forget

        # the archived runs' local work folders go with them, as after a tick's retention
        forget(executors.local_work_dir(executors.Setup(repo=cfg.repo, now=now)), done.runs)
        return [f"archived {len(done.runs)} run(s); previous history kept as tag "
                f"{archive_tag(now)}"]

    return work


def build_loop(cfg: Config, *, interval: float, executor: str, heartbeat_every: float,
               heartbeat_url: str | None, max_staleness: float,
               compact_keep_days: int | None) -> Loop:
    loop = Loop(interval, log=lambda line: click.echo(line, err=True))
    loop.add("tick", tick_work(cfg, executor, heartbeat_every, heartbeat_url, loop.wake_at,
                               retention=compact_keep_days is None,
                               wake_when=loop.wake_when))
    loop.add("heartbeat", heartbeat_work(cfg, max_staleness), every=HEARTBEAT_CHECK_EVERY,
             initial_delay=HEARTBEAT_CHECK_EVERY)
    if compact_keep_days is not None:
        loop.add("compact", compact_work(cfg, compact_keep_days), every=COMPACT_EVERY)
    return loop


def install_signals(loop: Loop) -> None:
    def handle(signum: int, frame: FrameType | None) -> None:
        # Only flag it here: the loop logs it, outside the handler (a handler that
        # writes could interrupt a write to the same stream).
        loop.stop(signal.Signals(signum).name)
        # The second signal takes the default action: end the process now.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)


@click.command("serve")
@click.option("--interval", type=click.FloatRange(min=0.1), default=60, show_default=True,
              metavar="SECONDS", help="Seconds between wake-ups (aligned to the clock).")
@click.option("--executor", type=click.Choice(executors.NAMES), envvar="ORCHESTRATOR_EXECUTOR",
              default=executors.LOCAL, show_default=True, help=executors.choice_help())
@click.option("--compact-keep-days", type=click.IntRange(min=0), metavar="N",
              help="Once a day, archive runs that finished more than N days ago (wins "
              "over keep_finished_runs_days of orchestrator.json for this serve's ticks).")
@click.option("--heartbeat-url", envvar="ORCHESTRATOR_HEARTBEAT_URL",
              help="URL to GET after a successful tick, at most once a minute.")
@click.option("--heartbeat-every", type=click.FloatRange(min=1), default=60,
              show_default=True,
              help="Minutes after which an idle tick still commits a heartbeat line.")
@click.option("--max-staleness", type=click.FloatRange(min=1), metavar="MINUTES",
              default=DEFAULT_MAX_STALENESS, show_default=True,
              help="Warn when the last tick on the state branch is older than this.")
@pass_config
def command(cfg: Config, interval: float, executor: str, compact_keep_days: int | None,
            heartbeat_url: str | None, heartbeat_every: float, max_staleness: float) -> int:
    """Tick every --interval seconds until SIGINT or SIGTERM (then finish the running
    tick and exit 0). Logs one line per wake-up to stderr."""
    GitStateStore(cfg.repo, cfg.remote, cfg.state_branch)  # fail now on a bad repo/remote
    loop = build_loop(cfg, interval=interval, executor=executor,
                      heartbeat_every=heartbeat_every, heartbeat_url=heartbeat_url,
                      max_staleness=max_staleness, compact_keep_days=compact_keep_days)
    install_signals(loop)
    names = ", ".join(c.name for c in loop.consumers)
    loop.say(f"serving {cfg.repo} (state branch {cfg.state_branch!r} of {cfg.remote}, "
             f"executor {executor}) every {interval:g}s: {names}")
    sys.stderr.flush()
    loop.run()
    loop.say(f"stopped after {loop.wakeups} wake-up(s)")
    return 0
