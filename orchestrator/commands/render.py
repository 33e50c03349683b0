"""``orchestrator render RUN``: the brief of one run, from the state branch; and
``render --index``: the dashboard page ``state/index.html``, written to a local folder.

Renders any run, finished or not (an open run's brief says so and draws "now" on its
timeline), as HTML or as the Markdown twin that the tick writes to the job summary.
The index is written with the briefs it links to beside it (``runs/<id>/brief.html``),
so its links work from the file as they do from GitHub Pages. ``render --api DIR``
writes the static JSON API and the badges (:mod:`orchestrator.api`), incrementally
onto an earlier rendering (:mod:`orchestrator.api.incremental`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import click

from .. import brief
from ..brief import dashboard
from ..brief.tails import with_local_tails
from ..config.files import load_all, load_schedule
from ..config.models import ScheduleSpec
from ..config.repository import RepoSettings
from ..errors import ScheduleError, UserError
from ..runs.status import staleness_for
from ..state import codec, layout
from ..state import index as state_index
from ..state.history import page_runs
from ..state.layout import parse_run_id
from ..support.atomic import write_bytes, write_text
from ..support.credentials import credential_names, redactor
from ..support.times import parse_now
from .context import Config, pass_config


def _schedule(cfg: Config, schedule_id: str) -> ScheduleSpec | None:
    path = cfg.schedules_dir / f"{schedule_id}.json"
    if not path.is_file():
        return None  # deleted since: the run record carries what the brief needs
    try:
        return load_schedule(path, cfg.repo).spec
    except ScheduleError:
        return None  # an invalid schedule must not hide the brief of a past run


INDEX_OUT = Path(".orchestrator") / "site" / "index.html"
"""Where ``render --index`` writes by default, in the checkout (git ignores it)."""


@click.command("render")
@click.argument("run_id", required=False)
@click.option("--index", "index", is_flag=True,
              help="Render the dashboard (state/index.html) instead of a brief, with the "
                   "briefs it links to beside it; prints the page's path.")
@click.option("--api", "api_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the static JSON API (api/v1/) and the badges (badges/) into "
                   "this folder instead, and remove what else is in those two. Onto an "
                   "earlier rendering, only files whose inputs changed are built again "
                   "(its manifest: .orchestrator-api.json); prints the counts.")
@click.option("-o", "--output", "--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to this file instead of standard output (with --index: "
                   "default .orchestrator/site/index.html).")
@click.option("--now", "now_text", metavar="ISO",
              help="Judge as of this instant (with --index: next slots, staleness).")
@click.option("--format", "fmt", type=click.Choice(["html", "markdown"]), default="html",
              show_default=True, help="HTML page, or Markdown for a CI job summary.")
@click.option("--template", type=click.Path(dir_okay=False, path_type=Path),
              help="Template (default: templates/brief.html.j2, or templates/brief.md.j2 "
                   "with --format markdown, else the built-in one).")
@pass_config
def command(cfg: Config, run_id: str | None, index: bool, output: Path | None, fmt: str,
            template: Path | None, now_text: str | None, api_dir: Path | None) -> None:
    """Render the brief of RUN (e.g. nightly--20261201T0700Z), or with --index the
    dashboard of every schedule and run, or with --api the JSON API and badges."""
    if api_dir is not None:
        if index or run_id is not None:
            raise UserError("--api renders the whole API: give no RUN and no --index")
        _write_api(cfg, api_dir, parse_now(now_text), simulated=now_text is not None)
        return
    if index == (run_id is not None):
        raise UserError("give a RUN or --index, not both" if index else
                        "give a RUN to render its brief, or --index for the dashboard")
    if index:
        if fmt != "html":
            raise UserError("--index renders HTML only")
        _write_index(cfg, output or cfg.repo / INDEX_OUT, template, parse_now(now_text),
                     simulated=now_text is not None)
        return
    assert run_id is not None
    text = _brief_text(cfg, run_id, fmt, template, parse_now(now_text),
                       simulated=now_text is not None)
    if output is None:
        click.echo(text, nl=False)
    else:
        _write(output, text)
        click.echo(f"wrote {output}", err=True)


def _brief_text(cfg: Config, run_id: str, fmt: str, template: Path | None,
                now: datetime, *, simulated: bool = False) -> str:
    """The brief of ``run_id`` from the branch, as HTML or Markdown."""
    schedule_id, _ = parse_run_id(run_id)
    snap = cfg.store().read()
    schedule = _schedule(cfg, schedule_id)
    ctx = brief.context_from_files(snap.files, run_id, now=now, schedule=schedule,
                                   last_tick=codec.heartbeat_at(snap.files, simulated),
                                   stale_after=staleness_for(cfg.repo, now))
    # a local track's stdout tail is read from this machine's work folder, as a tick does
    work = Path(os.environ.get("ORCHESTRATOR_WORK_DIR") or cfg.repo / ".orchestrator" / "work")
    ctx = with_local_tails(ctx, work, redactor(os.environ))
    if fmt == "markdown":
        return brief.render_markdown(
            ctx, template=brief.repo_template(cfg.repo, brief.MARKDOWN_TEMPLATE, template))
    return brief.render_html(ctx, brief.repo_template(cfg.repo, brief.BRIEF_TEMPLATE, template))


def _write(path: Path, text: str | bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            write_bytes(path, text)
        else:
            write_text(path, text)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_index(cfg: Config, out: Path, template: Path | None, now: datetime, *,
                 simulated: bool = False) -> None:
    """The dashboard as the tick renders it, from the branch, into ``out``; each brief
    it links to is copied to ``runs/<id>/brief.html`` beside it."""
    snap = cfg.store().read()
    loaded = load_all(cfg.schedules_dir)
    invalid = _invalid(cfg, [e.message for e in loaded.errors])
    state = state_index.load(snap.files).state
    tick_lines, tolerance = lateness_needs(cfg)
    board = dashboard.from_files(snap.files, loaded.schedules, invalid, now, state=state,
                                 last_tick=codec.heartbeat_at(snap.files, simulated),
                                 max_staleness=staleness_for(cfg.repo, now),
                                 tick_lines=tick_lines, max_lateness_minutes=tolerance)
    runs, older = page_runs(snap.files, state.runs)
    rows = list(runs.values())
    html = brief.render_index(rows, generated_at=now, older=older, board=board,
                              template=brief.repo_template(cfg.repo, brief.INDEX_TEMPLATE,
                                                           template))
    linked = {r.run_id for r in rows} | {o.run_id for c in board.cards for o in c.strip
                                         if o.href}
    _copy_briefs(snap.files, linked, out.parent)
    _write(out, html)
    click.echo(str(out))


def _write_api(cfg: Config, folder: Path, now: datetime, *, simulated: bool) -> None:
    """The API and the badges of the branch, into ``folder`` (see :mod:`orchestrator.api`)."""
    from ..api import incremental, site
    from ..cadence.pending import tick_crons
    from ..store.memory import as_state_files

    snap = cfg.store().read()
    loaded = load_all(cfg.schedules_dir)
    inputs = site.inputs_from_files(
        snap.files, loaded.schedules, _invalid(cfg, [e.message for e in loaded.errors]), now,
        codec.heartbeat_at(snap.files, simulated), staleness_for(cfg.repo, now),
        tick_crons(cfg.repo), all_tracks=False)
    files = as_state_files(snap.files)
    try:
        done = incremental.render(folder, inputs, redactor(os.environ),
                                  incremental.renderer(credential_names(os.environ)),
                                  lambda run_id: files.object_id(layout.run_dir(run_id)),
                                  lambda run_ids: site.load_tracks(files, run_ids))
    except OSError as exc:
        raise UserError(f"cannot write {folder}: {exc.strerror or exc}") from None
    if done.full is not None:
        click.echo(f"{folder}: a full render: {done.full}")
    click.echo(f"{folder}: {len(done.written)} files written, {len(done.removed)} removed")


def lateness_needs(cfg: Config) -> tuple[list[str], float | None]:
    """What the dashboard's cron lateness reads from the checkout: tick.yml's lines and
    orchestrator.json's ``max_lateness_minutes``."""
    from ..cadence.pending import tick_crons

    return tick_crons(cfg.repo), RepoSettings.read(cfg.repo).cadence.max_lateness_minutes


def _invalid(cfg: Config, errors: list[str]) -> list[str]:
    """What the dashboard names as invalid: the schedules' errors, then the caps'."""
    problem = RepoSettings.read(cfg.repo).caps_problem
    return errors + ([problem] if problem else [])


def _copy_briefs(files: Mapping[str, bytes], linked: set[str], folder: Path) -> None:
    """Copy each linked run's brief to ``runs/<id>/brief.html`` under ``folder``."""
    for run_id in sorted(r for r in linked if layout.is_run_id(r)):  # no path of its own
        data = files.get(layout.brief_path(run_id))
        if data is not None:
            _write(folder / "runs" / run_id / "brief.html", data)
