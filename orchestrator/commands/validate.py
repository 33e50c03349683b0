"""``orchestrator validate``: check every schedule file and calendar file, and preview
the schedules' next runs.

The previews and warnings are computed by :mod:`orchestrator.config.preview`; this module
reads the options and prints. Made for the pull-request check: every problem is one
line naming file and field (on stderr, whatever the format), valid files are still
previewed, and
``--format markdown`` is written for ``$GITHUB_STEP_SUMMARY``. Exit 1 if any file
is invalid.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..config import preview
from ..config.calendars import Calendars
from ..config.chains import chain_paths, chain_problems
from ..config.files import LoadResult, load_all
from ..config.models import ScheduleSpec
from ..config.preview import Report
from ..config.track_workflow import gate_problems, outdated_notes
from ..errors import EXIT_OK, EXIT_USER, OrchestratorError, ScheduleError
from . import _timing
from .context import Config, pass_config
from .schedules import INSTANT, fmt_local, fmt_utc

if TYPE_CHECKING:
    from ..cadence.change import Change

CHAINS_SHOWN = 50
"""Chains the pull request's comment lists; ``schedules show`` names every link."""
Compared = tuple[str, str, list["Change"]]
"""``--base``'s ref, the commit it names, and every schedule that differs from it."""


@contextlib.contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """Thousands of schedules and their previews are long-lived objects without cycles
    to free: the cyclic collector would only walk them again and again (a tenth of
    validate's time at 5,000 schedules)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def build_report(cfg: Config, start: datetime, n: int) -> Report:
    """Every schedule previewed, and every problem: of a schedule file, and of each
    calendar file, named or not (a pull request may bring one for later)."""
    with _without_cyclic_gc():
        calendars = Calendars(cfg.repo)
        loaded = load_all(cfg.schedules_dir, calendars=calendars)
        loaded.errors += [ScheduleError(e.file, e.field, e.problem)
                          for e in calendars.problems()]
        _check_chains(loaded)
        loaded.errors.sort(key=lambda e: e.file)
        return preview.build_report(loaded, start, n, cfg.repo / ".github" / "workflows")


def _check_chains(loaded: LoadResult) -> None:
    """Refuse ``after`` loops and upstreams no file defines: each is one error on the
    schedule that names it, and such a schedule is not previewed. A file that exists
    but is invalid is no missing upstream (it has its own error)."""
    edges = {s.id: [a.schedule for a in s.spec.upstreams] for s in loaded.schedules}
    edges.update({Path(e.file).stem: [] for e in loaded.errors
                  if Path(e.file).stem not in edges})
    problems = chain_problems(edges)
    paths = {s.id: s.path or s.id for s in loaded.schedules}
    loaded.errors += [ScheduleError(paths.get(sid, sid), "after", line)
                      for sid, line in problems]
    refused = {sid for sid, _ in problems}
    loaded.schedules[:] = [s for s in loaded.schedules if s.id not in refused]


def _summary(report: Report, problems: int = 0) -> str:
    """The last line: how many files are valid, and what else fails the check (so the
    line never reads as a pass when the exit code says otherwise)."""
    valid, invalid = len(report.previews), len(report.loaded.invalid_files)
    line = f"{valid} schedule{'s' if valid != 1 else ''} valid, {invalid} invalid"
    if problems:
        line += (f"; {problems} other problem{'s' if problems != 1 else ''} (on stderr): "
                 "the check fails")
    return line


def render_text(report: Report, problems: int = 0) -> str:
    lines: list[str] = []
    for p in report.previews:
        spec = p.schedule.spec
        state = "" if spec.enabled else "  [disabled: never fires]"
        lines.append(f"{p.schedule.id}  ({p.schedule.path}){state}")
        tracks = ", ".join(t.name for t in spec.tracks)
        lines.append(f"  {p.words}; tracks: {tracks}")
        for i, slot in enumerate(p.upcoming):
            label = "next:" if i == 0 else ""
            lines.append(f"  {label:<6}{fmt_local(slot.local)}   {fmt_utc(slot.at)}")
        lines += [f"  warning: {w}" for w in p.warnings]
    lines.append(_summary(report, problems))
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """Inert Markdown on one line, as the brief writes it: descriptions and problems
    come from files a pull request brings, and the summary is rendered as HTML."""
    from ..brief.text import md  # the brief's package is imported for Markdown only

    return md(text)


_PLAIN = re.compile(r"[\w.@+/ -]*")


def _code(text: str) -> str:
    """A name as code; one with other characters (a newline, a pipe, a backtick, HTML)
    as escaped text instead, since a code span would break the table around it."""
    if not text:
        return ""
    return f"`{text}`" if _PLAIN.fullmatch(text) else _md(text)


def render_markdown(report: Report, problems: int = 0) -> str:
    out = ["## Schedules", ""]
    mark = "✅" if report.ok and not problems else "❌"
    out += [f"{mark} {_summary(report, problems)}, previewed from {fmt_utc(report.start)}",
            ""]
    if report.loaded.errors:
        out += ["### ❌ Invalid files", "", "| File | Field | Problem |", "|---|---|---|"]
        out += [f"| {_code(e.file)} | {_code(e.field)} | {_md(e.problem)} |"
                for e in report.loaded.errors]
        out.append("")
    out += _chains_markdown(report)
    for p in report.previews:
        spec = p.schedule.spec
        title = f"### {_code(p.schedule.id)}: {_md(p.words)}"
        if not spec.enabled:
            title += " (disabled)"
        out += [title, ""]
        if spec.description:
            out += [_md(spec.description), ""]
        tracks = ", ".join(_code(t.name) for t in spec.tracks)
        out += [f"{_code(p.schedule.path)} · tracks: {tracks} · overlap "
                f"{_code(spec.overlap.value)} · catch-up {_code(spec.catchup.value)} "
                f"({spec.catchup_window_minutes} min)", ""]
        if p.upcoming and spec.timezone == "UTC":
            out += ["| Next runs (UTC) |", "|---|"]
            out += [f"| {fmt_local(s.local)} |" for s in p.upcoming]
            out.append("")
        elif p.upcoming:
            out += [f"| Next runs ({_md(spec.timezone)}) | UTC |", "|---|---|"]
            out += [f"| {fmt_local(s.local)} | {fmt_utc(s.at)} |" for s in p.upcoming]
            out.append("")
        out += [f"> ⚠️ {_md(w)}" + "  " for w in p.warnings]
        if p.warnings:
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _chains_markdown(report: Report) -> list[str]:
    """The chains among the valid schedules, upstream first, each schedule with the
    other causes that fire it (a queue, an event); empty when nothing chains."""
    specs = {p.schedule.id: p.schedule.spec for p in report.previews}
    paths, more = _chains(specs)
    if not paths:
        return []
    out = ["### Chains", ""]
    out += [f"- {' → '.join(_link(sid, specs, i == 0) for i, sid in enumerate(path))}"
            for path in paths]
    if more:
        out.append("- more not listed here: `orchestrator schedules show ID` names each "
                   "schedule's upstreams and downstreams")
    return [*out, ""]


def _chains(specs: Mapping[str, ScheduleSpec]) -> tuple[list[list[str]], bool]:
    """The chains to list, then each schedule a queue or an event fires that is in none;
    at most :data:`CHAINS_SHOWN`, and whether there are more."""
    edges = {sid: [a.schedule for a in spec.upstreams] for sid, spec in specs.items()}
    paths, more = chain_paths(edges, CHAINS_SHOWN)
    paths += _fired_alone(specs, {sid for path in paths for sid in path})
    return paths[:CHAINS_SHOWN], more or len(paths) > CHAINS_SHOWN


def _fired_alone(specs: Mapping[str, ScheduleSpec], chained: set[str]) -> list[list[str]]:
    """Each schedule a queue or an event fires that is in no chain, as a chain of one."""
    return [[sid] for sid, spec in specs.items() if sid not in chained and _causes(spec)]


def _causes(spec: ScheduleSpec) -> list[str]:
    """The queue and event that fire a schedule besides its clock and its ``after``."""
    found = [spec.on_queue.describe()] if spec.on_queue is not None else []
    return found + (["on an event"] if spec.on_event is not None else [])


def _link(sid: str, specs: Mapping[str, ScheduleSpec], first: bool) -> str:
    """One schedule of a chain: its other causes before it when it starts the chain,
    after it otherwise."""
    causes = _causes(specs[sid]) if sid in specs else []
    if not causes:
        return _code(sid)
    if first:
        return f"{_md(' or '.join(causes))} → {_code(sid)}"
    return f"{_code(sid)} (also {_md(' or '.join(causes))})"


@click.command("validate")
@click.option("--preview", "n", type=click.IntRange(0, 1000), default=0, show_default=True,
              metavar="N", help="Show the next N runs of each schedule.")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]),
              default="text", show_default=True,
              help="markdown is made for $GITHUB_STEP_SUMMARY.")
@click.option("--from", "start", type=INSTANT, default=None, metavar="ISO",
              help="Preview from this instant (with offset, e.g. 2026-11-01T00:00:00Z) "
              "instead of now.")
@click.option("--strict", is_flag=True,
              help="Fail on a time zone that is a fixed offset or a legacy alias (EST, "
              "US/Eastern, Etc/GMT+5), which is otherwise a warning.")
@click.option("--allow-empty", is_flag=True,
              help="Pass when no schedule file is found (otherwise the check fails: a "
              "wrong working directory must not pass).")
@click.option("--base", metavar="REF",
              help="Compare each schedule with its version at this git revision: slots "
              "of the next 30 days added, removed and moved, daylight saving, the first "
              "tick after merging (at --from) and the cost.")
@pass_config
def command(cfg: Config, n: int, fmt: str, start: datetime | None, strict: bool,
            allow_empty: bool, base: str | None) -> int:
    """Check every schedules/*.json and preview the next runs.

    Exits 1 if any file is invalid; the valid ones are still previewed. Exits 1 too
    if no schedule file is found (unless --allow-empty), or if tick.yml no longer
    ticks before every slot (run cron-sync).
    """
    report = build_report(cfg, start or datetime.now(UTC), n)
    compared = _compared(cfg, base, report)
    timing = _timing.cadence_report(cfg.repo, report.loaded.schedules, report.start)
    outdated = outdated_notes(cfg.repo / ".github" / "workflows")
    broken = template_problems(cfg.repo) + _strict_problems(report, strict) + \
        _empty_problems(cfg, report, allow_empty) + \
        gate_problems(cfg.repo / ".github" / "workflows", _gates(report))
    for error in report.loaded.errors:
        click.echo(f"orchestrator: {error.message}", err=True)
    for problem in timing.problems + broken:
        click.echo(f"orchestrator: {problem}", err=True)
    if fmt == "json":
        click.echo(json.dumps({**report.to_json(), "cadence": timing.to_json(),
                               "workflow_warnings": outdated,
                               **_base_json(compared)},
                              indent=2, ensure_ascii=False))
    elif fmt == "markdown":
        click.echo(render_markdown(report, len(timing.problems)), nl=False)
        click.echo("".join(f"\n> ⚠️ {_md(w)}\n" for w in outdated), nl=False)
        click.echo(_beside_preview(cfg, report, compared), nl=False)
        click.echo("\n" + _timing.markdown(timing, cfg.repo, report.loaded.schedules,
                                           report.start), nl=False)
    else:
        click.echo(_timing.text(timing) + "".join(f"warning: {w}\n" for w in outdated)
                   + _base_text(compared)
                   + render_text(report, len(timing.problems) + len(broken)), nl=False)
    return EXIT_OK if report.ok and not timing.problems and not broken else EXIT_USER


def _compared(cfg: Config, base: str | None, report: Report) -> Compared | None:
    """With ``--base``: the ref, its commit and every schedule that differs from it, as
    if merged at the preview's start (loaded only then: it brings the planner)."""
    if base is None:
        return None
    from . import _change

    commit, found = _change.changes(cfg.repo, base, report.loaded.schedules, report.start)
    return base, commit, found


def _beside_preview(cfg: Config, report: Report, compared: Compared | None) -> str:
    """The Markdown after the preview: what changed since ``--base``, and GitHub's
    cron as measured (when the state branch can be read)."""
    from . import _change, _measured

    parts = [_change.markdown(*compared)] if compared else []
    parts.append(_measured.markdown(cfg, report.loaded.schedules, report.start))
    return "".join(f"\n{part}" for part in parts if part)


def _base_json(compared: Compared | None) -> dict[str, object]:
    from . import _change

    return {"base": _change.to_json(*compared)} if compared else {}


def _base_text(compared: Compared | None) -> str:
    from . import _change

    return _change.text(compared[2]) if compared else ""


def _gates(report: Report) -> list[tuple[str, str]]:
    """``(schedule/track, environment)`` of each track gated by a GitHub environment."""
    return [(f"{s.id}/{t.name}", t.approval.environment)
            for s in report.loaded.schedules for t in s.spec.tracks
            if t.approval is not None and t.approval.environment is not None]


def _strict_problems(report: Report, strict: bool) -> list[str]:
    """With ``--strict``, a zone that is a fixed offset or a legacy alias fails."""
    if not strict:
        return []
    return [f"{p.schedule.path}: {p.zone_advice} (--strict)" for p in report.previews
            if p.zone_advice]


def _empty_problems(cfg: Config, report: Report, allow_empty: bool) -> list[str]:
    """No schedule file at all: a pull-request check run from the wrong folder would
    otherwise pass on nothing."""
    loaded = report.loaded
    if allow_empty or report.previews or loaded.invalid_files or loaded.errors:
        return []
    return [f"no schedule files in {cfg.schedules_dir} (run from the repository or pass "
            "--repo; --allow-empty accepts a repository without schedules)"]


TEMPLATES = (("brief.html.j2", False), ("index.html.j2", False), ("brief.md.j2", True))
"""The repository's templates and whether each is Markdown."""


def template_problems(repo: Path) -> list[str]:
    """One line per template in ``templates/`` that does not compile in the sandbox: the
    tick would keep every run open at its render, so the pull request check says so."""
    found = [(repo / "templates" / name, markdown) for name, markdown in TEMPLATES]
    present = [(path, markdown) for path, markdown in found if path.is_file()]
    if not present:
        return []
    from ..brief.render import load

    problems = []
    for path, markdown in present:
        try:
            load(path.name, path, markdown=markdown)
        except OrchestratorError as exc:
            problems.append(exc.message)
    return problems

