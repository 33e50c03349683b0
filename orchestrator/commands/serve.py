"""``orchestrator serve``: the tick (and friends) on a local wake-up loop.

For a machine or VM of your own instead of (or beside) GitHub's cron. Consumers:

- ``tick`` on every wake-up: ``build(cfg, now, settings).run()``, exactly what
  ``orchestrator tick`` does; the loop also wakes at the next due moment each tick
  reports (a slot fires within a second of its time, whatever ``--interval``) and,
  with the local executor, within a second or two of a track's end (its next track,
  its retry or its run's brief follow at once);
  several ``serve`` processes (or a ``serve`` and the GitHub workflow) may tick the
  same state branch: compare-and-swap keeps every slot fired once;
- ``heartbeat`` every 15 minutes: warns when the last tick on the state branch is
  older than ``--max-staleness`` (say, pushes are being rejected), and tells the
  channels of ``orchestrator.json`` (``tick_stale``, once per silence; the watchdog's
  issue is closed when ticks resume), as ``status --notify`` does;
- ``compact`` once a day, with ``--compact-keep-days N``; then this ``serve``'s ticks
  leave ``keep_finished_runs_days`` (:mod:`orchestrator.runs.retention`) alone: the flag
  wins over the setting, so the two never archive on different terms in one process.

With ``--executor github --clock-only`` the machine is an external clock instead:
the ``clock`` consumer replaces ``tick`` and, at each due moment (every slot, a
retry's back-off end, a poll), dispatches tick.yml through GitHub's API
(:class:`~orchestrator.cadence.clock.Clock`); the tick runs on GitHub, with GitHub's
token and permissions, and this machine only reads the state branch. It reads there
whether each call's tick fired its slot, and calls again 5 minutes later when it did
not (``cadence.clock_confirms`` lets tick.yml keep only a weekly backstop then).

Under systemd (``Type=notify``) it says ``READY=1`` once the loop starts and
``WATCHDOG=1`` after each wake-up whose tick (or clock) work succeeded; with
``--health-file`` it writes that instant to the file too, for a container's health check.

SIGINT or SIGTERM stops the wake-ups, lets running consumers finish (a tick in the
middle of its push completes it) and exits 0. A second signal ends the process at
once. Nothing is kept in memory between wake-ups: all state is on the state branch,
so a restarted ``serve`` carries on where the last one stopped.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType

import click

from .. import executors
from ..cadence.serve import Loop, Work
from ..config.files import load_all
from ..config.models import Schedule
from ..config.repository import Cadence, RepoSettings
from ..errors import UserError
from ..notify.events import Links
from ..notify.watch import Watcher, rewind_event, stale_event
from ..runs.compaction import archive_tag, compact
from ..runs.status import DEFAULT_MAX_STALENESS, staleness_for
from ..state import index as state_index
from ..state.codec import heartbeat_at
from ..state.model import State
from ..state.phases import TrackPhase
from ..state.records import Track
from ..support.alive import Alive
from ..support.times import iso
from ..tick.result import TickResult
from ..tick.settings import Clock, TickSettings
from .context import Config, pass_config
from .tick import build, ping, track_state_branch

HEARTBEAT_CHECK_EVERY = 15 * 60.0
COMPACT_EVERY = 24 * 3600.0
PING_EVERY = 60.0
"""Seconds between heartbeat-URL pings: a 1-second interval must not ping every second."""


def tick_work(cfg: Config, executor: str, heartbeat_every: float,
              heartbeat_url: str | None,
              wake_at: Callable[[datetime], None] | None = None,
              retention: bool = True,
              wake_when: Callable[[Callable[[], bool] | None], None] | None = None) -> Work:
    pinger = heartbeat_pinger(heartbeat_url)

    def work(now: datetime) -> list[str]:
        result = build(cfg, now, TickSettings(
            executor_name=executor, heartbeat_every=timedelta(minutes=heartbeat_every),
            retention=retention, clock=Clock(machine=now))).run()
        track_state_branch(cfg, result.tip)
        if wake_at is not None and result.wake is not None:
            wake_at(result.wake.at)  # the loop wakes for it, between its intervals
        if wake_when is not None and executors.declared(executor).ended is not None:
            wake_when(local_ends(cfg, result))
        lines = list(result.log) + [f"dispatch failed: {e}" for e in result.dispatch_errors]
        lines += pinger()
        return lines

    return work


def local_ends(cfg: Config, result: TickResult) -> Callable[[], bool] | None:
    """A watch that fires when an attempt the tick left open, of an executor that sees
    its ends from this machine (the local one), ends (``None``: none is open), so the
    next tick records it at once rather than at the next wake-up."""
    state = result.decision.state if result.decision else None
    if state is None:
        return None
    setup = executors.Setup(repo=cfg.repo, now=result.now)
    keys = _open_keys(state)
    for ended, open_keys in keys.items():
        open_keys -= ended(setup, open_keys)  # already ended: recorded now or next tick
    watched = {ended: open_keys for ended, open_keys in keys.items() if open_keys}
    if not watched:
        return None
    return lambda: any(ended(setup, open_keys) for ended, open_keys in watched.items())


_Ended = Callable[[executors.Setup, Iterable[str]], set[str]]


def _open_keys(state: State) -> dict[_Ended, set[str]]:
    """The dispatch keys of the attempts in flight whose ends this machine sees, by the
    executor's watch that sees them."""
    records = [*state.tracks.values(), *state.undos.values()]
    keys: dict[_Ended, set[str]] = {}
    for track in (t for tracks in records for t in tracks.values()):
        ended = executors.declared(track.executor).ended
        if ended is not None and track.dispatch_key and _in_flight(track):
            keys.setdefault(ended, set()).add(track.dispatch_key)
    return keys


def _in_flight(track: Track) -> bool:
    """Whether the track's attempt was sent and has not been seen to end."""
    return track.phase in (TrackPhase.DISPATCHED, TrackPhase.RUNNING)


def heartbeat_pinger(url: str | None) -> Callable[[], list[str]]:
    """A ping of ``url`` at most every :data:`PING_EVERY` seconds: the line of a failed
    ping, else nothing (no URL: never a ping)."""
    last: list[float] = []

    def pinger() -> list[str]:
        if not url or (last and time.monotonic() - last[0] < PING_EVERY):
            return []
        last[:] = [time.monotonic()]
        problem = ping(url)
        return [problem] if problem else []

    return pinger


TOKEN_FILE_LIMIT = 4096
"""Bytes read at most from the clock's token file: a token is a line, not a file."""


def clock_token() -> str:
    """The clock's token: the file ``ORCHESTRATOR_CLOCK_TOKEN_FILE`` names (systemd's
    credential, a compose secret), else ``ORCHESTRATOR_CLOCK_TOKEN``, else
    ``GITHUB_TOKEN``."""
    from ..cadence.clock import TOKEN_FILE_VARIABLE, TOKEN_VARIABLE

    path = os.environ.get(TOKEN_FILE_VARIABLE)
    if path:
        try:
            with open(path, "rb") as handle:
                return handle.read(TOKEN_FILE_LIMIT).decode("utf-8", "replace").strip()
        except OSError as exc:
            raise UserError(f"{TOKEN_FILE_VARIABLE}: cannot read {path}: "
                            f"{exc.strerror}") from None
    return os.environ.get(TOKEN_VARIABLE) or os.environ.get("GITHUB_TOKEN") or ""


def clock_work(cfg: Config, via: str, heartbeat_url: str | None,
               wake_at: Callable[[datetime], None], started: datetime) -> Work:
    """The ``clock`` consumer: one dispatch of tick.yml per due moment (``via``: the
    event it starts it with), with the token of :func:`clock_token`."""
    from ..cadence.clock import TOKEN_FILE_VARIABLE, TOKEN_VARIABLE, Clock, dispatch, requests
    from ..github import WorkflowAdmin, connect
    from .cron_sync import default_branch, repository_of

    token = clock_token()
    if not token:
        raise UserError(f"--clock-only needs a token: set {TOKEN_VARIABLE}, or "
                        f"{TOKEN_FILE_VARIABLE} to a file holding it (see `orchestrator "
                        "cron-sync --external` for the one it needs)")
    repository = repository_of(cfg)
    if repository == "OWNER/REPO":
        raise UserError("--clock-only: set GITHUB_REPOSITORY to owner/name (the remote is "
                        "not on github.com)")
    request = requests(repository, default_branch(cfg))[via]
    store = cfg.store()

    def read() -> tuple[list[Schedule], State, Cadence]:
        state = state_index.load(store.read().files).state
        return (load_all(cfg.schedules_dir).schedules, state,
                RepoSettings.read(cfg.repo).cadence)

    def call(now: datetime) -> str:
        admin = WorkflowAdmin(connect(token, os.environ, now=now), repository)
        try:
            return dispatch(admin, request)
        finally:
            admin.close()

    loop_clock = Clock(read, call, started)
    pinger = heartbeat_pinger(heartbeat_url)

    def work(now: datetime) -> list[str]:
        lines = loop_clock.work(now)
        if loop_clock.next_at is not None:
            wake_at(loop_clock.next_at)
        lines += pinger()
        return lines

    return work


def beating(work: Work, alive: Alive) -> Work:
    """``work``, followed by a sign of life when it ends without an error."""

    def run(now: datetime) -> list[str] | None:
        lines = work(now)
        alive.beat(now)
        return lines

    return run


def heartbeat_work(cfg: Config, max_staleness: float | None) -> Work:
    """The ``heartbeat`` consumer; ``max_staleness`` None: the repository's own limit
    (``status``'s, from tick.yml and watchdog.yml), read at each check. A clock calls
    only at slots, so a daily schedule's ticks are a day apart, not minutes."""
    watchers: list[Watcher] = []

    def work(now: datetime) -> list[str]:
        store = cfg.store()
        files = store.read().files
        spec = RepoSettings.read(cfg.repo).notify
        if not watchers or watchers[0].spec != spec:  # orchestrator.json changed
            watchers[:] = [Watcher(spec, os.environ, *(
                (watchers[0].sent, watchers[0].stale_told) if watchers else ()))]
        watcher, links = watchers[0], Links.from_env(spec.brief_url, os.environ)
        if store.rewound:
            return [f"warning: {store.rewound}",
                    *watcher.send(rewind_event(store.rewound, now, links), now, once=True)]
        limit = max_staleness if max_staleness is not None else \
            staleness_for(cfg.repo, now).total_seconds() / 60
        return _staleness(watcher, links, heartbeat_at(files), now, limit)

    return work


def _staleness(watcher: Watcher, links: Links, last: datetime | None, now: datetime,
               max_staleness: float) -> list[str]:
    """The heartbeat's lines: a warning (and the channels told) when the last tick is
    missing or too old, the channels told again when ticks resume."""
    if last is None or now - last > timedelta(minutes=max_staleness):
        told = watcher.send(stale_event(last, now, max_staleness, links), now, once=True)
        if last is None:
            return ["warning: no tick recorded on the state branch yet", *told]
        return [f"warning: the last tick on the state branch is from "
                f"{iso(last)}, more than {max_staleness:g} minutes ago", *told]
    return watcher.resumed(last, now) if watcher.stale_told else []


def compact_work(cfg: Config, keep_days: int, executor: str) -> Work:
    forget = executors.declared(executor).forget

    def work(now: datetime) -> list[str]:
        done = compact(cfg.git(), keep_days, now)
        if done is None:
            return []
        if forget is not None:
            # the archived runs' work folders go with them, as after a tick's retention
            built = executors.get(executor).factory(
                executors.Setup(repo=cfg.repo, now=now), None)
            forget(built, done.runs)
        return [f"archived {len(done.runs)} run(s); previous history kept as tag "
                f"{archive_tag(now)}"]

    return work


def build_loop(cfg: Config, *, interval: float, executor: str, heartbeat_every: float,
               heartbeat_url: str | None, max_staleness: float | None,
               compact_keep_days: int | None, clock_via: str | None = None,
               alive: Alive | None = None) -> Loop:
    """The loop and its consumers; ``clock_via`` (an event name): the ``clock`` consumer
    instead of the ``tick``; ``alive`` hears of each of their runs that succeeds."""
    loop = Loop(interval, log=lambda line: click.echo(line, err=True))
    alive = alive or Alive({})
    if clock_via is not None:
        loop.add("clock", beating(clock_work(cfg, clock_via, heartbeat_url, loop.wake_at,
                                             datetime.now(UTC)), alive))
    else:
        loop.add("tick", beating(tick_work(cfg, executor, heartbeat_every, heartbeat_url,
                                           loop.wake_at, retention=compact_keep_days is None,
                                           wake_when=loop.wake_when), alive))
    # serve ticks itself every interval; a clock's ticks come at its calls only
    limit = max_staleness if max_staleness is not None or clock_via is not None \
        else DEFAULT_MAX_STALENESS
    loop.add("heartbeat", heartbeat_work(cfg, limit), every=HEARTBEAT_CHECK_EVERY,
             initial_delay=HEARTBEAT_CHECK_EVERY)
    if compact_keep_days is not None:
        loop.add("compact", compact_work(cfg, compact_keep_days, executor),
                 every=COMPACT_EVERY)
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
              help=f"Warn when the last tick on the state branch is older than this "
              f"(default: {DEFAULT_MAX_STALENESS}; with --clock-only, the limit of "
              "watchdog.yml, which follows the clock's calls).")
@click.option("--clock-only", is_flag=True,
              help="With --executor github: do not tick; at each due moment dispatch "
              "tick.yml through GitHub's API (this machine is the external clock).")
@click.option("--clock-via", type=click.Choice(["workflow_dispatch", "repository_dispatch"]),
              default="workflow_dispatch", show_default=True,
              help="With --clock-only: the request that starts tick.yml (the workflow "
              "dispatch needs the narrower token).")
@click.option("--health-file", type=click.Path(dir_okay=False, path_type=Path),
              envvar="ORCHESTRATOR_HEALTH_FILE", metavar="PATH",
              help="Write the time to PATH after each tick (or clock) work that succeeds; "
              "a health check reads its age.")
@pass_config
def command(cfg: Config, interval: float, executor: str, compact_keep_days: int | None,
            heartbeat_url: str | None, heartbeat_every: float, max_staleness: float | None,
            clock_only: bool, clock_via: str, health_file: Path | None) -> int:
    """Tick every --interval seconds until SIGINT or SIGTERM (then finish the running
    tick and exit 0); with --clock-only, dispatch tick.yml at each due moment instead.
    Logs one line per wake-up to stderr."""
    if clock_only and not executors.declared(executor).clock:
        raise click.UsageError("--clock-only starts tick.yml on GitHub: it needs "
                               "--executor github")
    if clock_only and compact_keep_days is not None:
        raise click.UsageError("--clock-only writes nothing to the state branch: "
                               "--compact-keep-days is the ticks' to do")
    cfg.store()  # fail now on a bad repo/remote
    alive = Alive(os.environ, health_file)
    loop = build_loop(cfg, interval=interval, executor=executor,
                      heartbeat_every=heartbeat_every, heartbeat_url=heartbeat_url,
                      max_staleness=max_staleness, compact_keep_days=compact_keep_days,
                      clock_via=clock_via if clock_only else None,
                      alive=alive)
    install_signals(loop)
    names = ", ".join(c.name for c in loop.consumers)
    what = f"clock for tick.yml via {clock_via}" if clock_only else f"executor {executor}"
    loop.say(f"serving {cfg.repo} (state branch {cfg.state_branch!r} of {cfg.remote}, "
             f"{what}) every {interval:g}s: {names}")
    sys.stderr.flush()
    alive.ready()
    loop.run()
    alive.stopping()
    loop.say(f"stopped after {loop.wakeups} wake-up(s)")
    return 0
