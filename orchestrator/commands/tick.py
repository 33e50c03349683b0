"""``orchestrator tick``: one pass of the decide / mark / dispatch / record loop."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from .. import executors
from ..cadence.linger import Linger
from ..config.fieldtypes import check_run_id
from ..errors import OrchestratorError
from ..support.credentials import environment_redactor
from ..support.text import outgoing
from ..support.times import iso, parse_now
from ..tick.consolidate import Templates
from ..tick.settings import Clock, TickSettings
from ..tick.shell import ExecutorFactory, Tick, TickResult
from ._heartbeat import heartbeat_target, ping
from .context import Config, pass_config

if TYPE_CHECKING:
    from ..cadence.lateness import Sample
    from ..cadence.wake import Wake


def executor_factory(cfg: Config, name: str, now: datetime,
                     clock_offset: timedelta = timedelta(0)) -> ExecutorFactory:
    """A function building the chosen executor from the persisted breaker state."""
    info = executors.get(name)
    setup = executors.Setup(repo=cfg.repo, now=now, clock_offset=clock_offset)
    return functools.partial(info.factory, setup)


def build(cfg: Config, now: datetime, settings: TickSettings | None = None, *,
          outcomes: Path | None = None, environ: Mapping[str, str] | None = None) -> Tick:
    """The tick at ``now`` on ``cfg``'s store, as every command builds it: the
    executor's dispatch grace from its registry entry, each template not given looked
    for in the checkout, the outcome files of ``outcomes`` read for ``settings.scope``.
    ``settings.clock`` says where ``now`` came from."""
    settings = TickSettings() if settings is None else settings
    folder = settings.outcomes
    if outcomes is not None:
        from ..executors.outcomes import read_folder

        folder = read_folder(outcomes, settings.scope)
    # The repository's templates are looked up when the tick renders: a tick with
    # nothing to render never imports the brief.
    name, clock = settings.executor_name, settings.clock
    settings = replace(settings, dispatch_grace=executors.get(name).grace,
                       templates=replace(settings.templates, repo=cfg.repo), outcomes=folder)
    # One clock per run: a tick --now T runs its local tracks on T's clock.
    machine = clock.machine if clock is not None else datetime.now(UTC)
    offset = now - machine if clock is None or clock.given else timedelta(0)
    return Tick(cfg.store(), cfg.repo, executor_factory(cfg, name, now, offset), now,
                settings, environ=environ)


_REMOTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def track_state_branch(cfg: Config, tip: str | None) -> None:
    """Point ``refs/remotes/<remote>/<branch>`` at the tip this tick saw or committed,
    so ``git show origin/orchestrator-state:state/...`` works with no fetch first.

    The store never writes that ref itself (its fetches would race on it); this is one
    ``update-ref`` after the tick, and a failure (another process holding the ref's
    lock) costs nothing: like any remote-tracking ref it is as fresh as its last
    update. Only for a remote given by name (``origin``), never a path or URL."""
    if not tip or not _REMOTE_NAME.fullmatch(cfg.remote):
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        known = subprocess.run(["git", "-C", str(cfg.repo), "config", "--get",
                                f"remote.{cfg.remote}.url"], capture_output=True,
                               check=False, timeout=30)
        if known.returncode == 0:
            subprocess.run(["git", "-C", str(cfg.repo), "update-ref",
                            f"refs/remotes/{cfg.remote}/{cfg.state_branch}", tip],
                           capture_output=True, check=False, timeout=30)


def make_tick(cfg: Config, executor: str, now: datetime, *, heartbeat_every: float = 60,
              template: Path | None = None, scope: str | None = None,
              outcomes: Path | None = None, clock: Clock | None = None,
              lateness: Sample | None = None) -> Tick:
    """The tick of ``orchestrator tick``'s options at ``now`` (:func:`build`);
    ``clock`` says where ``now`` came from, ``lateness`` what GitHub's cron made of it."""
    settings = TickSettings(executor_name=executor,
                            heartbeat_every=timedelta(minutes=heartbeat_every),
                            templates=Templates(brief=template), scope=scope, clock=clock,
                            lateness=lateness)
    return build(cfg, now, settings, outcomes=outcomes)


def summary_lines(result: TickResult) -> list[str]:
    """One line per thing decided, for humans (and the GitHub job summary)."""
    lines = [f"tick {iso(result.now)} ({result.executor})"
             + (f" run {result.scope} only" if result.scope else "")
             + (" dry run" if result.dry_run else "")]
    lines += [f"  NEW DEAD LETTER {key}: {why}" for key, why in result.parked.items()]
    lines += [f"  {line}" for line in result.log] or ["  nothing to do"]
    lines += [f"  dispatch failed: {e}" for e in result.dispatch_errors]
    if not result.dry_run:
        lines.append("  committed" if result.mark_landed else "  no change, nothing pushed")
    lines.append(f"  next due {result.wake.describe(result.now)}{_waits(result)}"
                 if result.wake else "  nothing will fall due")
    return lines


def _waits(result: TickResult) -> str:
    """What a lingering tick would wait for, when not the next due moment."""
    wake = result.wake
    if wake is None or wake.worth_waiting or not executors.declared(result.executor).lingers:
        return ""  # a local tick waits for no runner
    target = wake.wait_for
    return (f" (not worth a waiting runner; a lingering tick waits for "
            f"{target.describe(result.now)})" if target else
            " (not worth a waiting runner, nor anything after it)")


STEP_SUMMARY_LIMIT = 1024 * 1024
"""GitHub rejects a job summary over 1 MiB (per step)."""


BRIEF_MIN_BYTES = 4096
"""Below this much room a brief is left out (and named) rather than cut to nothing."""


def step_summary(result: TickResult, limit: int = STEP_SUMMARY_LIMIT) -> str:
    """The tick's lines, then the Markdown brief of each run it finished, under ``limit``:
    each brief is rendered within the room the ones before it left (it then summarises
    itself and says what it cut); one with too little room left is named instead."""
    parts = [invalid_alert(result) + "### Orchestrator tick\n\n" + dead_letter_alert(result)
             + "```\n" + "\n".join(summary_lines(result)) + "\n```\n"]
    used = len(parts[0].encode())
    left_out = []
    reserve = 200 + 80 * len(result.summaries)  # the closing note naming left-out runs
    for run_id, render in result.summaries.items():
        room = limit - used - reserve
        if room < BRIEF_MIN_BYTES:
            left_out.append(run_id)
            continue
        try:
            markdown = render(room)
        except Exception:  # the job summary is a courtesy: it never fails the tick
            left_out.append(run_id)
            continue
        parts.append(markdown)
        used += len(markdown.encode()) + 1
    if left_out:
        parts.append(f"_{len(left_out)} brief(s) left out to stay under GitHub's 1 MiB "
                     f"summary limit: {', '.join(left_out)}; see `orchestrator render`._\n")
    return "\n".join(parts)


def invalid_alert(result: TickResult) -> str:
    """The job summary's first lines when schedule files are invalid: the tick ignores
    them, so they fire nothing until someone fixes them."""
    invalid = result.decision.invalid if result.decision else result.schedule_errors
    if not invalid:
        return ""
    from ..brief.text import md  # the file name and the problem are a user's text

    return "".join(f"- **Invalid, fires nothing until fixed:** {md(line, 500)}\n"
                   for line in invalid) + "\n"


def dead_letter_alert(result: TickResult) -> str:
    """The job summary's first lines when the tick parked tracks: each needs a human."""
    if not result.parked:
        return ""
    rows = "".join(f"- `{key}`: {why}\n" for key, why in result.parked.items())
    return (f"**{len(result.parked)} new dead letter(s)**, parked until someone requeues "
            f"or discards them (`orchestrator dlq show KEY`):\n\n{rows}\n")


def write_step_output(result: TickResult) -> None:
    """``rendered=<run ids>`` for the steps after the tick's (``$GITHUB_OUTPUT``): the
    fan-in job publishes the briefs it rendered."""
    path = os.environ.get("GITHUB_OUTPUT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"rendered={' '.join(result.rendered)}\n")


def write_step_summary(result: TickResult) -> None:
    """Append this tick's summary within what the file left of GitHub's limit: a
    lingering tick appends once per tick, and GitHub drops a whole summary over it."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        used = os.fstat(fh.fileno()).st_size
        room = max(0, STEP_SUMMARY_LIMIT - used)
        fh.write(fit_summary(outgoing(step_summary(result, room), environment_redactor()),
                             used))


SUMMARY_CUT = ("\n_The rest is left out: this job summary reached GitHub's 1 MiB limit; "
               "the job's log has every line._\n")


def fit_summary(text: str, used: int, limit: int = STEP_SUMMARY_LIMIT) -> str:
    """What of ``text`` may follow ``used`` bytes of a job summary: all of it, or its
    first whole lines and :data:`SUMMARY_CUT`; nothing when even that has no room."""
    data = text.encode()
    if used + len(data) <= limit:
        return text
    fence = "```\n"
    keep = limit - used - len(SUMMARY_CUT.encode()) - len(fence)
    if keep < 0:
        return ""
    head = data[:keep].decode(errors="ignore")
    head = head[:head.rfind("\n") + 1]
    # a cut inside a code block closes it, so the note is not shown as code
    return head + (fence if head.count("```") % 2 else "") + SUMMARY_CUT


@click.command("tick")
@click.option("--now", "now_text", metavar="ISO", help="Decide as of this instant (default: now).")
@click.option("--executor", type=click.Choice(executors.NAMES), envvar="ORCHESTRATOR_EXECUTOR",
              default=executors.LOCAL, show_default=True, help=executors.choice_help())
@click.option("--dry-run", is_flag=True, help="Decide and print; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the decision as JSON.")
@click.option("--heartbeat-url", envvar="ORCHESTRATOR_HEARTBEAT_URL",
              help="URL to GET after a successful tick (a failed ping never fails the tick).")
@click.option("--heartbeat-fail-url", envvar="ORCHESTRATOR_HEARTBEAT_FAIL_URL",
              metavar="URL", help="URL to GET instead when a tick parks a dead letter "
              "(default: the heartbeat URL + '/fail', as Healthchecks.io reads it; 'none': "
              "no signal).")
@click.option("--heartbeat-every", type=click.FloatRange(min=1), default=60, show_default=True,
              help="Minutes after which an idle tick still commits a heartbeat line.")
@click.option("--template", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Brief template (default: templates/brief.html.j2, else the built-in one).")
@click.option("--linger", type=click.FloatRange(min=0), default=0, show_default=True,
              metavar="MINUTES", help="After the tick, wait for the next due moment and tick "
              "again while it falls within MINUTES (SIGTERM stops the wait).")
@click.option("--max-linger", type=click.FloatRange(min=0), default=60, show_default=True,
              metavar="MINUTES", help="Never linger past this many minutes after the first tick.")
@click.option("--run", "scope", metavar="RUN", help="Advance only this run and fire no "
              "slot: what a batch's fan-in job runs.")
@click.option("--outcomes", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="With --run: a folder of leg outcome files (<dispatch key>.json) to record.")
@click.option("--force", is_flag=True, help="Tick at a --now more than 5 minutes ahead of "
              "this machine's clock on a state branch that real ticks use (it settles every "
              "slot up to that now: they fire nothing until then).")
@pass_config
def command(cfg: Config, now_text: str | None, executor: str, dry_run: bool, as_json: bool,
            heartbeat_url: str | None, heartbeat_fail_url: str | None,
            heartbeat_every: float, template: Path | None,
            linger: float, max_linger: float, scope: str | None,
            outcomes: Path | None, force: bool) -> int:
    """Read schedules and state, decide what is due, commit, dispatch, record."""
    if linger and (now_text or dry_run or as_json or scope):
        raise click.UsageError("--linger waits on the real clock: it cannot be combined "
                               "with --now, --dry-run, --json or --run")
    if outcomes is not None and scope is None:
        raise click.UsageError("--outcomes needs --run: outcome files are recorded by "
                               "the tick of their run")
    if scope is not None:
        check_run_id(scope)

    last: list[tuple[Tick, TickResult]] = []
    started = parse_now(now_text)
    sample = cron_sample(cfg, executor, started, scoped=scope is not None, dry_run=dry_run)

    def once(now: datetime) -> Wake | None:
        clock = Clock(machine=datetime.now(UTC), given=now_text is not None, force=force)
        tick = make_tick(cfg, executor, now, heartbeat_every=heartbeat_every,
                         template=template, scope=scope, outcomes=outcomes, clock=clock,
                         lateness=sample)
        result = tick.run(dry_run=dry_run)
        if not dry_run and scope is None:
            result = result.with_lines(keep_workflows_enabled(executor, tick, result, now))
        track_state_branch(cfg, result.tip)
        target = (heartbeat_target(heartbeat_url, heartbeat_fail_url, bool(result.parked))
                  if heartbeat_url and not dry_run else None)
        if target:
            problem = ping(target)
            if problem:
                result = result.with_lines([problem])
        last[:] = [(tick, result)]
        if as_json:
            click.echo(json.dumps(result.to_json(), indent=2, sort_keys=True))
        else:
            click.echo("\n".join(summary_lines(result)))
        if not dry_run:
            write_step_summary(result)
            write_step_output(result)
        return result.wake

    if not linger:
        once(started)
        return 0
    loop = Linger(timedelta(minutes=linger), timedelta(minutes=max_linger),
                  log=lambda line: click.echo(line, err=True))
    install_stop_signals(loop.stop)
    loop.run(once)
    for line in cancel_idle_pending(cfg, executor, loop, last):
        click.echo(f"linger: {line}", err=True)
    return 0


def cron_sample(cfg: Config, executor: str, started: datetime, *, scoped: bool = False,
                dry_run: bool = False, environ: Mapping[str, str] | None = None
                ) -> Sample | None:
    """This run's lateness sample when GitHub's cron started it, on an engine with a
    workflow admin (the run's creation is asked of it); a failure costs only the sample.
    A fan-in's tick (``scoped``) and a dry run record none. An idle tick that GitHub's
    cron did not start loads none of it (the clock's modules pull in the planner)."""
    from ..cadence import lateness

    if scoped or dry_run:
        return None
    env = os.environ if environ is None else environ
    admin, fired = executors.declared(executor).admin, lateness.scheduled_run(env)
    if admin is None or fired is None:
        return None
    cron, run = fired
    try:
        with admin(env, started) as api:
            created = api.run_created_at(run)
    except OrchestratorError:
        return None
    from ..cadence import pending

    return lateness.sample(cron, pending.tick_crons(cfg.repo), created, started,
                           run) if created is not None else None


def cancel_idle_pending(cfg: Config, executor: str, loop: Linger,
                        last: list[tuple[Tick, TickResult]],
                        environ: Mapping[str, str] | None = None) -> list[str]:
    """After a lingering tick's last tick on an engine with a workflow admin (GitHub;
    not stopped by a signal): cancel the scheduled tick.yml run it holds behind this
    job when it would find nothing (:mod:`orchestrator.cadence.pending`); one line per
    thing done or failed."""
    from ..cadence import pending

    admin = executors.declared(executor).admin
    if admin is None or not last or loop.stop_reason is not None:
        return []
    _, result = last[0]
    env = os.environ if environ is None else environ
    cadence = result.cadence
    if cadence is None or not cadence.cancel_idle_pending or result.snapshot is None:
        return []  # off, or the last tick never read the state
    if env.get("GITHUB_EVENT_NAME") != pending.SCHEDULE_EVENT:
        return []  # not a scheduled run: the held run waits in another group
    own = env.get("GITHUB_RUN_ID", "")
    now = datetime.now(UTC)
    try:
        api = admin(env, now)
    except OrchestratorError as exc:
        return [f"cancelling the pending scheduled tick failed: {exc.message}"]
    with api:
        return pending.cancel_idle(
            api, wake=result.wake, read_at=result.now, now=now,
            next_tick=pending.next_scheduled_tick(cfg.repo, now), window=loop.window,
            own_run=int(own) if own.isdigit() else None)


def keep_workflows_enabled(executor: str, tick: Tick, result: TickResult, now: datetime,
                           environ: Mapping[str, str] | None = None) -> list[str]:
    """On an engine with a workflow admin (GitHub), once a week, check the scheduled
    workflows the cadence needs, re-enable one only as the user opted in, tell the
    channels when GitHub's 60 days are near (:mod:`orchestrator.cadence.keepalive`);
    every tick warns of a disabled one and of the 60 days."""
    admin = executors.declared(executor).admin
    if admin is None:
        return []
    from ..cadence import keepalive
    from ..errors import OrchestratorError

    env = os.environ if environ is None else environ
    activity = keepalive.last_activity(tick.repo)
    record = keepalive.read_record(result.snapshot.files) if result.snapshot else \
        keepalive.Record()
    soon = [f"warning: {line}" for line in keepalive.inactivity_warning(activity, now)]
    if not keepalive.due(record, now):
        return [f"warning: {line}" for line in keepalive.warnings(record)] + soon
    reenable = result.cadence is not None and result.cadence.reenable_workflows
    try:
        with admin(env, now) as api:
            fresh = keepalive.check(api, now, reenable=reenable)
        # a racing tick that recorded its check first leaves nothing to commit
        tick.store.transact(lambda snap: {keepalive.RECORD: fresh.dump()} if keepalive.due(
            keepalive.read_record(snap.files), now) else None,
            "orchestrator: checked the scheduled workflows")
    except OrchestratorError as exc:
        return [f"checking the scheduled workflows failed: {exc.message}"]
    done = [f"enabled {', '.join(fresh.enabled)} (next check in 7 days)"] if fresh.enabled \
        else []
    return done + [f"warning: {line}" for line in keepalive.warnings(fresh)] + soon + \
        tell_inactivity(tick.repo, activity, now, env)


def tell_inactivity(repo: Path, activity: datetime | None, now: datetime,
                    environ: Mapping[str, str]) -> list[str]:
    """At the weekly check: ``keepalive_due`` to the channels while GitHub's 60 days are
    near, else close the keep-alive issue; one line per delivery."""
    from ..cadence import keepalive
    from ..config.repository import RepoSettings
    from ..notify.events import Links
    from ..notify.watch import Watcher, keepalive_event

    spec = RepoSettings.read(repo).notify
    if activity is None or not spec.enabled:
        return []
    watcher = Watcher(spec, environ)
    by = keepalive.due_by(activity, now)
    if by is None:
        return watcher.active(activity, now)
    return watcher.send(keepalive_event(activity, by, now, Links.from_env(spec.brief_url,
                                                                          environ)), now)


def install_stop_signals(stop: Callable[[str], None]) -> None:
    """SIGINT and SIGTERM end the wait (a running tick finishes); a second one ends the
    process at once, as under ``serve``."""

    def handle(signum: int, frame: FrameType | None) -> None:
        stop(signal.Signals(signum).name)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
