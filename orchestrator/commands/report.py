"""``orchestrator report``: a track reports its phase by committing its own status file
(see :mod:`orchestrator.runs.reporting`)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..config.fieldtypes import check_id, check_run_id
from ..errors import UserError
from ..runs.reporting import PHASES, Report, check_message, load_result, report
from ..support.credentials import redact_value, redactor
from ..support.times import parse_now
from .context import Config, pass_config


@click.command("report")
@click.option("--run", "run_id", envvar="ORCHESTRATOR_RUN_ID", required=True, metavar="RUN",
              help="Run id, e.g. nightly--20261201T0700Z [env: ORCHESTRATOR_RUN_ID].")
@click.option("--track", envvar="ORCHESTRATOR_TRACK", required=True, metavar="TRACK",
              help="Track name [env: ORCHESTRATOR_TRACK].")
@click.option("--phase", type=click.Choice(list(PHASES)), required=True,
              help="The phase the track is in now.")
@click.option("--result", "result_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A file holding a JSON object; its 'summary' is shown in the brief.")
@click.option("--message", help="For failed: appended to the error log; for complete "
                                 "without --result: the summary.")
@click.option("--attempt", type=click.IntRange(min=1), envvar="ORCHESTRATOR_ATTEMPT",
              help="The attempt reporting; a report for another attempt than the current "
                   "one is refused (exit 1) [env: ORCHESTRATOR_ATTEMPT; default: the "
                   "current one].")
@click.option("--now", metavar="ISO", help="Time of the report (default: the clock).")
@pass_config
def command(cfg: Config, run_id: str, track: str, phase: str, result_file: Path | None,
            message: str | None, attempt: int | None, now: str | None) -> int:
    """Record a track's phase (running, complete or failed) on the state branch."""
    # What a track says is committed and shown: checked, then redacted of credentials.
    redact = redactor(os.environ)
    result = load_result(result_file) if result_file else None
    rep = Report(run_id=check_run_id(run_id), track=check_id(track, "track name"),
                 phase=PHASES[phase], at=parse_now(now),
                 result=redact_value(result, redact) if result is not None else None,
                 message=redact(check_message(message)) if message else message,
                 attempt=attempt)
    store = cfg.store()
    outcome = report(store, rep)
    name = f"{rep.run_id}/{rep.track}"
    if outcome.verdict == "stale_attempt":
        # The current attempt may still be running: a report from an older (or a
        # future) one must not finish it, and its sender must know it was refused.
        raise UserError(f"refused the {phase} report of attempt {attempt} for {name}: "
                        f"the current attempt is {outcome.track.attempt}")
    if outcome.verdict == "unchanged":
        click.echo(f"{name} is already {phase} (attempt {outcome.track.attempt}); "
                   "nothing to do")
    else:
        click.echo(f"{name}: {phase} (attempt {outcome.track.attempt})")
    return 0
