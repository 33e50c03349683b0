"""``orchestrator outcome``: a leg writes its outcome file
(:mod:`orchestrator.executors.outcomes`) instead of pushing a report; the batch's fan-in
job records every leg's file at once."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import click

from ..errors import UserError
from ..executors.local_outcome import read_enqueue
from ..executors.outcomes import build, write, write_stdout
from ..runs.reporting import load_result
from ..spec.fields import check_id, check_run_id
from ..state.items import NewItem
from ..support.times import parse_now
from .context import Config, pass_config


def _read_tail(path: Path | None) -> str:
    if path is None or not path.is_file():
        return ""
    with path.open("rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - 64 * 1024))  # only the tail is kept: read no more
        return fh.read().decode("utf-8", "replace")


@click.command("outcome")
@click.option("--run", "run_id", envvar="ORCHESTRATOR_RUN_ID", required=True, metavar="RUN",
              help="Run id [env: ORCHESTRATOR_RUN_ID].")
@click.option("--track", envvar="ORCHESTRATOR_TRACK", required=True, metavar="TRACK",
              help="Track name [env: ORCHESTRATOR_TRACK].")
@click.option("--attempt", type=click.IntRange(min=1), envvar="ORCHESTRATOR_ATTEMPT",
              required=True, help="Attempt number [env: ORCHESTRATOR_ATTEMPT].")
@click.option("--poll", type=click.IntRange(min=0), envvar="ORCHESTRATOR_POLL", default=0,
              show_default=True,
              help="Which poll of a poll track this was [env: ORCHESTRATOR_POLL].")
@click.option("--compensating", is_flag=True, envvar="ORCHESTRATOR_COMPENSATING",
              help="The leg ran the track's compensation [env: ORCHESTRATOR_COMPENSATING].")
@click.option("--exit-code", type=int, help="The command's exit code (omit: it never ran).")
@click.option("--started-at", required=True, metavar="ISO", help="When the command started.")
@click.option("--finished-at", required=True, metavar="ISO", help="When the command ended.")
@click.option("--timeout-minutes", type=click.FloatRange(min=0, min_open=True),
              help="The limit `timeout` enforced: exit 124 or 137 at it is a tap-out.")
@click.option("--stderr", "stderr_file", type=click.Path(dir_okay=False, path_type=Path),
              help="The command's stderr; its last lines go into the error.")
@click.option("--stdout", "stdout_file", type=click.Path(dir_okay=False, path_type=Path),
              help="The command's stdout; its last 16 KiB go beside the outcome, as "
                   "<run>--<track>--<attempt>.stdout, for the brief.")
@click.option("--result", "result_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A file holding a JSON object (ORCHESTRATOR_RESULT); absent or empty: none.")
@click.option("--message", help="Why the attempt failed, when there is more to say than "
                                 "its exit code.")
@click.option("--enqueue", "enqueue_file", type=click.Path(dir_okay=False, path_type=Path),
              envvar="ORCHESTRATOR_ENQUEUE",
              help="A JSON-lines file of items the track asks to enqueue (each with its "
                   "queue) [env: ORCHESTRATOR_ENQUEUE]; absent: none.")
@click.option("--output", "folder", required=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Folder to write <run>--<track>--<attempt>.json into.")
@pass_config
def command(cfg: Config, run_id: str, track: str, attempt: int, poll: int, compensating: bool,
            exit_code: int | None,
            started_at: str, finished_at: str, timeout_minutes: float | None,
            stderr_file: Path | None, stdout_file: Path | None, result_file: Path | None,
            message: str | None, enqueue_file: Path | None, folder: Path) -> int:
    """Write a leg's outcome file (phase, exit code, result, stderr tail, times) and,
    beside it, the tail of its stdout."""
    result = None
    if result_file is not None and result_file.is_file() and result_file.stat().st_size:
        try:
            result = load_result(result_file)
        except UserError as exc:  # the outcome still counts; the result is dropped
            click.echo(f"orchestrator: warning: {exc.message}; result left out", err=True)
    enqueue: tuple[NewItem, ...] = ()
    enqueue_error: str | None = None
    if enqueue_file is not None and exit_code == 0:  # only a track that completed
        enqueue, enqueue_error = read_enqueue(enqueue_file.parent, enqueue_file.name)
        if enqueue_error:
            click.echo(f"orchestrator: warning: {enqueue_error}", err=True)
    outcome = build(run_id=check_run_id(run_id), track=check_id(track, "track name"),
                    attempt=attempt, poll=poll, compensating=compensating, exit_code=exit_code,
                    started_at=parse_now(started_at, "--started-at"),
                    finished_at=parse_now(finished_at, "--finished-at"),
                    limit=timedelta(minutes=timeout_minutes) if timeout_minutes else None,
                    result=result, stderr=_read_tail(stderr_file), message=message,
                    enqueue=list(enqueue), enqueue_error=enqueue_error)
    path = write(folder, outcome)
    if stdout_file is not None:
        try:
            write_stdout(folder, outcome.key, stdout_file)
        except OSError as exc:  # the outcome counts; the brief shows no tail
            click.echo(f"orchestrator: warning: stdout tail not kept: {exc}", err=True)
    click.echo(f"{outcome.key}: {outcome.phase} -> {path}")
    return 0
