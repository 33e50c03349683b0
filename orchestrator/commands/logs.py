"""``orchestrator logs RUN [TRACK] [--attempt N] [--follow]``: what a track printed.

A local attempt's output is in its work folder (``<run>--<track>--<attempt>/``,
:mod:`orchestrator.executors.local`); this prints its ``stdout.log`` and
``stderr.log``, redacted like everything the orchestrator prints. Without ``TRACK``
every track of the run is shown, each under a header; without ``--attempt``, its
latest attempt. ``--follow`` keeps printing until the attempt's command has ended.
A run that ran on GitHub has no local folder: its track's record names the job page.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import click

from ..errors import NotFound
from ..executors import local
from ..spec.fields import check_id, check_run_id
from ..support.credentials import Redactor, redactor
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
        text = redact(data.decode("utf-8", "replace"))
        if header is not None:
            click.echo(f"== {header} ({stream.removesuffix('.log')}) ==")
            text += "" if text.endswith("\n") else "\n"
        click.echo(text, nl=False)


def _follow(work: Path, folder: Path, redact: Redactor) -> None:
    offsets: dict[str, int] = {}
    while True:
        done = bool(local.ended(work, [folder.name]))
        _print(folder, offsets, redact, None)
        if done:
            return
        time.sleep(FOLLOW_SECONDS)


@click.command("logs")
@click.argument("run_id", metavar="RUN")
@click.argument("track", required=False)
@click.option("--attempt", type=click.IntRange(min=1), help="That attempt (default: the latest).")
@click.option("--follow", is_flag=True, help="Keep printing until the command has ended.")
@pass_config
def command(cfg: Config, run_id: str, track: str | None, attempt: int | None,
            follow: bool) -> int:
    """Print what a local track attempt wrote to stdout and stderr (redacted)."""
    check_run_id(run_id)
    if track is not None:
        check_id(track, "track name")
    if follow and track is None:
        raise click.UsageError("--follow needs a TRACK")
    # as the local executor finds it (executors.local_work_dir)
    work = Path(os.environ.get("ORCHESTRATOR_WORK_DIR") or cfg.repo / ".orchestrator" / "work")
    found = attempts(work, run_id)
    if not found:
        raise NotFound(f"no local output of run {run_id!r} in {work} (a run on GitHub: "
                       f"`orchestrator runs show {run_id}` links each track's job page)")
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
            _follow(work, tried[number], redact)
        else:
            _print(tried[number], {}, redact, f"{name} attempt {number}")
    return 0
