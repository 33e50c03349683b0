"""The ``orchestrator`` command line.

A thin layer: the click group declares options; each command lives in
``orchestrator/commands/<name>.py`` and calls into the library. Errors are mapped to
exit codes in exactly one place, :func:`main`.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from pathlib import Path

import click

from . import __version__
from .commands.context import Config
from .errors import EXIT_REMOTE, EXIT_UNEXPECTED, EXIT_USAGE, OrchestratorError
from .support import process
from .support.credentials import redactor
from .support.text import Outgoing


class LazyGroup(click.Group):
    """Imports a command's module only when that command is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from .commands import MODULES

        return sorted(m.replace("_", "-") for m in MODULES)  # cron_sync is cron-sync

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from .commands import load

        return load(cmd_name)


@click.group(cls=LazyGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="orchestrator")
@click.option(
    "--repo",
    envvar="ORCHESTRATOR_REPO",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="The repository checkout holding schedules/ and templates/.",
)
@click.option(
    "--remote",
    envvar="ORCHESTRATOR_REMOTE",
    default="origin",
    show_default=True,
    help="Git remote (name, path or URL) holding the state branch.",
)
@click.option(
    "--state-branch",
    envvar="ORCHESTRATOR_STATE_BRANCH",
    default="orchestrator-state",
    show_default=True,
    help="Branch the orchestrator writes state to; 'main' gives single-branch mode.",
)
@click.pass_context
def cli(ctx: click.Context, repo: Path, remote: str, state_branch: str) -> None:
    """Scheduled, multi-track work on CI runners, with a git repository as the database."""
    explicit = ctx.get_parameter_source("repo") is not click.core.ParameterSource.DEFAULT
    if not explicit and ctx.invoked_subcommand not in CREATES_REPOSITORY:
        repo = find_root(repo.resolve())
    ctx.obj = Config(repo=repo.resolve(), remote=remote, state_branch=state_branch)


CREATES_REPOSITORY = frozenset({"init", "demo"})
"""Commands that make a repository where they are run rather than look for one above."""


def find_root(start: Path) -> Path:
    """The repository around ``start``, as git finds its top level: the first folder
    upwards with ``.git``, ``schedules/`` or ``orchestrator.json``; ``start`` itself
    when there is none (the command then says what it misses)."""
    for folder in (start, *start.parents):
        if any(os.path.exists(folder / name) for name in (".git", "schedules",
                                                          "orchestrator.json")):
            return folder
    return start


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and map every error to one line and one exit code.
    Whatever it prints is cleaned and redacted on its way out (:class:`Outgoing`)."""
    process.settle()
    redact = redactor(os.environ)
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Outgoing(sys.stdout, redact), Outgoing(sys.stderr, redact)
    try:
        return _run(argv)
    finally:
        sys.stdout, sys.stderr = streams


def _run(argv: list[str] | None) -> int:
    try:
        rv = cli.main(args=argv, prog_name="orchestrator", standalone_mode=False)
    except (click.exceptions.Abort, click.ClickException, click.exceptions.Exit) as exc:
        return _click_end(exc)
    except OrchestratorError as exc:
        click.echo(f"orchestrator: {exc.message}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        return _os_error(exc)
    except Exception as exc:
        return _unexpected(exc)
    return rv if isinstance(rv, int) else 0


def _click_end(exc: click.exceptions.Abort | click.ClickException
               | click.exceptions.Exit) -> int:
    """The exit code of a run that click ended: an abort, a usage error, or an exit."""
    if isinstance(exc, click.exceptions.Abort):
        click.echo("orchestrator: aborted", err=True)
        return 130
    if isinstance(exc, click.exceptions.Exit):
        return exc.exit_code
    exc.show()
    return exc.exit_code if exc.exit_code else EXIT_USAGE


def _os_error(exc: OSError) -> int:
    """The exit code of an OS error: one that says a place cannot be written is the
    user's to fix; any other is unexpected."""
    if exc.errno not in _CANNOT_WRITE:
        return _unexpected(exc)
    # A read-only checkout or work folder: like a remote that cannot be written.
    where = f" {exc.filename}" if exc.filename else ""
    click.echo(f"orchestrator: cannot write{where}: {exc.strerror}", err=True)
    return EXIT_REMOTE


_CANNOT_WRITE = (errno.EROFS, errno.EACCES, errno.EPERM)


def _unexpected(exc: Exception) -> int:
    if os.environ.get("ORCHESTRATOR_DEBUG"):
        traceback.print_exc()
    click.echo(
        f"orchestrator: unexpected error: {type(exc).__name__}: {exc} "
        "(set ORCHESTRATOR_DEBUG=1 for a traceback)",
        err=True,
    )
    return EXIT_UNEXPECTED


def run() -> None:  # pragma: no cover - console script shim
    sys.exit(main())
