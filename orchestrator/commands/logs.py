"""``orchestrator logs RUN [TRACK] [--attempt N] [--follow]``: what a track printed.

A local attempt's output is in its work folder (``<run>--<track>--<attempt>/``,
:mod:`orchestrator.executors.local`); this prints its ``stdout.log`` and
``stderr.log``, redacted like everything the orchestrator prints. Without ``TRACK``
every track of the run is shown, each under a header; without ``--attempt``, its
latest attempt. ``--follow`` keeps printing until the attempt's command has ended.

A run with no local folder here is looked up on the state branch: a track whose
executor declares a log reader (:class:`orchestrator.executors.Capabilities`; GitHub:
its leg's job log, :mod:`orchestrator.executors.github.leglogs`) has its log's end
printed, redacted and stripped of control characters. GitHub serves a job's log once
the job has completed, so ``--follow`` there waits for that, then prints it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import click

from .. import executors
from ..config.fieldtypes import check_id, check_run_id
from ..errors import NotFound
from ..executors.base import LogReader
from ..state import layout
from ..state.records import Track
from ..support.credentials import Redactor, redactor
from ..support.text import decode, outgoing, past_first_word
from .context import Config, pass_config

STREAMS = ("stdout.log", "stderr.log")
FOLLOW_SECONDS = 0.5
"""How often ``--follow`` looks for more output."""

_ATTEMPT = re.compile(r"^(?P<track>.+?)--(?P<attempt>\d+)(?:\.\d+)?$")


def attempts(work: Path, run_id: str) -> dict[str, dict[int, Path]]:
    """Track -> attempt -> its folder, for ``run_id``'s local attempts in ``work``
    (compensations, ``--undo``, are left out)."""
    found: dict[str, dict[int, Path]] = {}
    prefix = f"{run_id}--"
    if not work.is_dir():
        return found
    for folder in sorted(work.iterdir()):
        if not folder.name.startswith(prefix) or not folder.is_dir() or folder.is_symlink():
            continue
        match = _ATTEMPT.match(folder.name[len(prefix):])
        if match and "--" not in match["track"]:
            found.setdefault(match["track"], {})[int(match["attempt"])] = folder
    return found


def _print(folder: Path, offsets: dict[str, int], redact: Redactor, header: str | None
           ) -> None:
    for stream in STREAMS:
        path = folder / stream
        try:
            with path.open("rb") as handle:
                handle.seek(offsets.get(stream, 0))
                data = handle.read()
        except OSError:
            continue
        offsets[stream] = offsets.get(stream, 0) + len(data)
        if not data:
            continue
        text = outgoing(data, redact)
        if header is not None:
            click.echo(f"== {header} ({stream.removesuffix('.log')}) ==")
            text += "" if text.endswith("\n") else "\n"
        click.echo(text, nl=False)


def _follow(setup: executors.Setup, folder: Path, redact: Redactor) -> None:
    ended = executors.declared(executors.LOCAL).ended
    assert ended is not None, "the local executor declares which attempts ended"
    offsets: dict[str, int] = {}
    while True:
        done = bool(ended(setup, [folder.name]))
        _print(folder, offsets, redact, None)
        if done:
            return
        time.sleep(FOLLOW_SECONDS)


def _recorded_tracks(cfg: Config, run_id: str) -> dict[str, Track]:
    """The run's track records on the state branch (only the run's files are read)."""
    from ..state.model import load

    files = cfg.store().read().files
    prefix = layout.tracks_dir(run_id) + "/"
    mine = {p: files[p] for p in files if p.startswith(prefix)
            or p in (layout.run_path(run_id), layout.specs_path(run_id))}
    if layout.run_path(run_id) not in mine:
        raise NotFound(f"no local output of run {run_id!r}, and no such run on the state "
                       "branch (`orchestrator runs list` lists the runs)")
    state = load(mine, all_tracks=True)
    if run_id not in state.runs:  # quarantined: a record is unreadable
        raise NotFound("; ".join(state.quarantine_lines()))
    return state.tracks.get(run_id, {})


def _check_known(tracks: Mapping[str, Track], run_id: str, track: str | None) -> None:
    """A track the run does not have is named as such, before any credential is asked
    for (a local repository has none to give)."""
    if track is not None and track not in tracks:
        raise NotFound(f"run {run_id!r} has no track {track!r} (its tracks: "
                       f"{', '.join(sorted(tracks)) or 'none'})")


def _elsewhere(cfg: Config, run_id: str, track: str | None, attempt: int | None,
               follow: bool, work: Path) -> None:
    """Print the logs of the run's tracks whose executor reads them from where they ran
    (GitHub: the legs' job logs)."""
    from datetime import UTC, datetime

    tracks = _recorded_tracks(cfg, run_id)
    _check_known(tracks, run_id, track)
    names = [track] if track is not None else sorted(
        n for n, t in tracks.items() if executors.declared(t.executor).logs is not None)
    if not names:
        raise NotFound(f"run {run_id!r} has no local output in {work} and no track that "
                       "ran on GitHub")
    env = os.environ
    readers: dict[str, LogReader] = {}
    for ran in tracks.values():  # the token is asked for before any track is read
        opens = executors.declared(ran.executor).logs
        if ran.name in names and opens is not None and str(ran.executor) not in readers:
            readers[str(ran.executor)] = opens(env, datetime.now(UTC))
    redact = redactor(env)
    for name in names:
        record = tracks.get(name)
        read = readers.get(str(record.executor)) if record is not None else None
        if record is None or read is None:
            raise NotFound(f"track {name!r} of {run_id!r} has no local attempt in {work} "
                           "and did not run on GitHub")
        if attempt is not None and attempt != record.attempt:
            raise NotFound(f"track {name!r}: only its current attempt's job is known "
                           f"(attempt {record.attempt}); earlier ones are on the "
                           "repository's Actions page")
        _print_log(read, record, follow, redact, header=track is None)


def _print_log(read: LogReader, record: Track, follow: bool, redact: Redactor,
               header: bool) -> None:
    log = read(record, follow, lambda line: click.echo(line, err=True))
    if header:
        click.echo(f"== {record.name} attempt {record.attempt} ({log.source}) ==")
    if log.cut:
        click.echo(f"orchestrator: the first {log.cut:,} of {log.size:,} bytes of the log "
                   f"are not shown; the whole log: {log.whole}", err=True)
    # a log shown from its middle starts inside a word: a secret's tail, maybe
    text = outgoing(past_first_word(decode(log.text)) if log.cut else log.text, redact)
    click.echo(text + ("" if text.endswith("\n") or not text else "\n"), nl=False)


@click.command("logs")
@click.argument("run_id", metavar="RUN")
@click.argument("track", required=False)
@click.option("--attempt", type=click.IntRange(min=1), help="That attempt (default: the latest).")
@click.option("--follow", is_flag=True, help="Keep printing until the command has ended "
              "(GitHub: wait until the job has completed, then print its log).")
@pass_config
def command(cfg: Config, run_id: str, track: str | None, attempt: int | None,
            follow: bool) -> int:
    """Print what a track attempt wrote: a local one's stdout and stderr, a GitHub
    leg's job log (redacted)."""
    check_run_id(run_id)
    if track is not None:
        check_id(track, "track name")
    if follow and track is None:
        raise click.UsageError("--follow needs a TRACK")
    setup = executors.Setup(repo=cfg.repo, now=datetime.now(UTC))
    work = executors.local_work_dir(setup)
    found = attempts(work, run_id)
    if not found or (track is not None and track not in found):
        _elsewhere(cfg, run_id, track, attempt, follow, work)
        return 0
    names = [track] if track is not None else sorted(found)
    redact = redactor(os.environ)
    for name in names:
        tried = found.get(name)
        if not tried:
            raise NotFound(f"run {run_id!r} has no local attempt of track {name!r}")
        number = attempt if attempt is not None else max(tried)
        if number not in tried:
            raise NotFound(f"track {name!r} of {run_id!r} has no attempt {number} "
                           f"(attempts: {', '.join(map(str, sorted(tried)))})")
        if follow:
            _follow(setup, tried[number], redact)
        else:
            _print(tried[number], {}, redact, f"{name} attempt {number}")
    return 0
