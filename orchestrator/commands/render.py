"""``orchestrator render RUN``: the brief of one run, from the state branch.

Renders any run, finished or not (an open run's brief says so and draws "now" on its
timeline), as HTML or as the Markdown twin that the tick writes to the job summary.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import click

from .. import brief
from ..brief.tails import with_local_tails
from ..errors import ScheduleError, UserError
from ..spec.files import load_schedule
from ..spec.models import ScheduleSpec
from ..state.layout import parse_run_id
from ..store import GitStateStore
from ..support.atomic import write_text
from ..support.credentials import redactor
from .context import Config, pass_config


def _schedule(cfg: Config, schedule_id: str) -> ScheduleSpec | None:
    path = cfg.schedules_dir / f"{schedule_id}.json"
    if not path.is_file():
        return None  # deleted since: the run record carries what the brief needs
    try:
        return load_schedule(path, cfg.repo).spec
    except ScheduleError:
        return None  # an invalid schedule must not hide the brief of a past run


@click.command("render")
@click.argument("run_id")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to this file instead of standard output.")
@click.option("--format", "fmt", type=click.Choice(["html", "markdown"]), default="html",
              show_default=True, help="HTML page, or Markdown for a CI job summary.")
@click.option("--template", type=click.Path(dir_okay=False, path_type=Path),
              help="Template (default: templates/brief.html.j2, or templates/brief.md.j2 "
                   "with --format markdown, else the built-in one).")
@pass_config
def command(cfg: Config, run_id: str, output: Path | None, fmt: str,
            template: Path | None) -> None:
    """Render the brief of RUN (e.g. nightly--20261201T0700Z)."""
    schedule_id, _ = parse_run_id(run_id)
    snap = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch).read()
    schedule = _schedule(cfg, schedule_id)
    ctx = brief.context_from_files(snap.files, run_id, now=datetime.now(UTC),
                                   schedule=schedule)
    # a local track's stdout tail is read from this machine's work folder, as a tick does
    work = Path(os.environ.get("ORCHESTRATOR_WORK_DIR") or cfg.repo / ".orchestrator" / "work")
    ctx = with_local_tails(ctx, work, redactor(os.environ))
    if fmt == "markdown":
        text = brief.render_markdown(
            ctx, template=brief.repo_template(cfg.repo, brief.MARKDOWN_TEMPLATE, template))
    else:
        text = brief.render_html(
            ctx, brief.repo_template(cfg.repo, brief.BRIEF_TEMPLATE, template))
    if output is None:
        click.echo(text, nl=False)
    else:
        try:
            write_text(output, text)
        except OSError as exc:
            raise UserError(f"cannot write {output}: {exc.strerror or exc}") from None
        click.echo(f"wrote {output}", err=True)
