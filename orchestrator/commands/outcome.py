"""``orchestrator outcome``: a leg writes its outcome file
(:mod:`orchestrator.executors.outcomes`) instead of pushing a report; the batch's fan-in
job records every leg's file at once. With ``--command`` it first runs the track's
command itself, timed and stopped at its limit (:mod:`orchestrator.executors.leg_command`),
and exits with its code.

The stderr, stdout and result files are the track's: each is opened once, without
following a link or blocking on a FIFO, and only its tail is read. One that is refused
costs a warning line, never the outcome."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from ..config.fieldtypes import check_id, check_run_id
from ..errors import UserError
from ..executors import leg_command
from ..executors.leg_command import Ran
from ..executors.local_outcome import read_enqueue
from ..executors.outcomes import STDOUT_BYTES, build, write, write_stdout
from ..runs.reporting import MAX_RESULT_BYTES, parse_result
from ..state.items import NewItem
from ..support import safejson
from ..support.credentials import redactor
from ..support.text import decode, past_first_word
from ..support.times import parse_now
from .context import Config, pass_config

STDERR_READ = 64 * 1024
"""The end of stderr read: the outcome keeps its last lines, never more."""


def _warn(text: str) -> None:
    click.echo(f"orchestrator: warning: {text}", err=True)


def _read_tail(path: Path | None, keep: int, option: str) -> tuple[bytes, str | None]:
    """The last ``keep`` bytes of the file a track left, and a line saying what was
    wrong or cut, if anything. The track wrote it and may have made it a symlink to any
    file on the runner, a FIFO or gigabytes: it is read as untrusted input, tail only."""
    if path is None:
        return b"", None
    try:
        data, size = safejson.read_tail(path, keep)
    except FileNotFoundError:
        return b"", None  # the command never wrote one
    except safejson.UnsafeJSON as exc:
        return b"", f"{option} {path} not read: {exc}"
    if size > keep:
        return data, f"{option} {path} holds {size:,} bytes: only its last {keep:,} are kept"
    return data, None


def _stderr(data: bytes, note: str | None) -> str:
    """What the outcome's error quotes of stderr: its end, or why it was refused."""
    if note and not data:  # refused: the error says so instead of a tail
        return f"orchestrator: {note}"
    if len(data) >= STDERR_READ:  # the end of a longer file: its first piece is cut
        return past_first_word(decode(data))
    return decode(data)


def _read_result(path: Path | None) -> dict[str, Any] | None:
    """The result object in ``path``; ``None`` when there is none or it is refused
    (then a warning says why: the outcome still counts)."""
    if path is None:
        return None
    try:
        data = safejson.read_file(path, max_bytes=MAX_RESULT_BYTES)
        return parse_result(data, path) if data else None
    except FileNotFoundError:
        return None
    except safejson.UnsafeJSON as exc:
        _warn(f"--result {path} not read: {exc}; result left out")
    except UserError as exc:
        _warn(f"{exc.message}; result left out")
    return None


def _read_items(path: Path | None, exit_code: int | None
                ) -> tuple[tuple[NewItem, ...], str | None]:
    """The items a track that completed asks to enqueue, and what was wrong with its
    file (said on stderr too)."""
    if path is None or exit_code != 0:  # only a track that completed
        return (), None
    enqueue, error = read_enqueue(path.parent, path.name)
    if error:
        click.echo(f"orchestrator: warning: {error}", err=True)
    return enqueue, error


def _stderr_text(path: Path | None) -> str:
    """The tail of the command's stderr for the error, or the line saying why it was
    refused (also said on stderr)."""
    data, note = _read_tail(path, STDERR_READ, "--stderr")
    if note:
        _warn(note)
    return _stderr(data, note)


# --stderr, --stdout and --result are not checked by click (it would stat through a
# link and stop at a directory): _read_tail and _read_result refuse them, one line each.
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
@click.option("--command", "track_command", metavar="RUN",
              help="Run this with `sh -c`, stop it at --timeout-minutes (SIGTERM, SIGKILL "
                   "30 s later), copy its output to --stdout and --stderr, and exit with "
                   "its code; --exit-code and the times are then its own.")
@click.option("--exit-code", type=int, help="The command's exit code (omit: it never ran).")
@click.option("--started-at", metavar="ISO", help="When the command started (default: now).")
@click.option("--finished-at", metavar="ISO", help="When the command ended (default: now).")
@click.option("--timeout-minutes", type=click.FloatRange(min=0, min_open=True),
              help="The command's limit: exit 124 or 137 at it is a tap-out.")
@click.option("--stderr", "stderr_file", type=click.Path(path_type=Path), metavar="FILE",
              help="The command's stderr; its last lines go into the error.")
@click.option("--stdout", "stdout_file", type=click.Path(path_type=Path), metavar="FILE",
              help="The command's stdout; its last 16 KiB go beside the outcome, as "
                   "<run>--<track>--<attempt>.stdout, for the brief.")
@click.option("--result", "result_file", type=click.Path(path_type=Path), metavar="FILE",
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
            track_command: str | None, exit_code: int | None,
            started_at: str | None, finished_at: str | None, timeout_minutes: float | None,
            stderr_file: Path | None, stdout_file: Path | None, result_file: Path | None,
            message: str | None, enqueue_file: Path | None, folder: Path) -> int:
    """Write a leg's outcome file (phase, exit code, result, stderr tail, times) and,
    beside it, the tail of its stdout; with --command, run the command first."""
    limit = timedelta(minutes=timeout_minutes) if timeout_minutes else None
    ran = _run(track_command, limit, stdout_file, stderr_file) if track_command is not None \
        else _given(exit_code, started_at, finished_at)
    exit_code = ran.code
    result = _read_result(result_file)
    enqueue, enqueue_error = _read_items(enqueue_file, exit_code)
    stderr = _stderr_text(stderr_file)
    stdout_bytes, stdout_note = _read_tail(stdout_file, STDOUT_BYTES, "--stdout")
    if stdout_note:
        _warn(stdout_note)
    if message:  # the workflow's, and it may quote anything
        message = redactor(os.environ)(message)
    outcome = build(run_id=check_run_id(run_id), track=check_id(track, "track name"),
                    attempt=attempt, poll=poll, compensating=compensating, exit_code=exit_code,
                    started_at=ran.started, finished_at=ran.finished, limit=limit,
                    result=result, stderr=stderr, message=message,
                    enqueue=list(enqueue), enqueue_error=enqueue_error)
    path = write(folder, outcome)
    try:
        write_stdout(folder, outcome.key, stdout_bytes)
    except OSError as exc:  # the outcome counts; the brief shows no tail
        _warn(f"stdout tail not kept: {exc}")
    click.echo(f"{outcome.key}: {outcome.phase} -> {path}")
    return (exit_code or 0) if track_command is not None else 0


def _given(exit_code: int | None, started_at: str | None, finished_at: str | None) -> Ran:
    """The command the leg ran itself: its code and times as given (default: now)."""
    started = parse_now(started_at, "--started-at")
    finished = parse_now(finished_at, "--finished-at") if finished_at else started
    return Ran(exit_code, started, finished)


def _run(track_command: str, limit: timedelta | None, stdout_file: Path | None,
         stderr_file: Path | None) -> Ran:
    if stdout_file is None or stderr_file is None:
        raise click.UsageError("--command needs --stdout and --stderr: the files its "
                               "output is kept in")
    return leg_command.run(track_command, limit, stdout_file, stderr_file)
