"""``orchestrator validate``: check every schedule file and preview its next runs.

Made for the pull-request check: every problem is one line naming file and field
(on stderr, whatever the format), valid files are still previewed, and
``--format markdown`` is written for ``$GITHUB_STEP_SUMMARY``. Exit 1 if any file
is invalid.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from .. import cron
from ..brief.text import md
from ..cli import Config, pass_config
from ..errors import EXIT_OK, EXIT_USER
from ..models import Schedule
from ..schedules import LoadResult, load_all
from .schedules import INSTANT, fmt_local, fmt_utc, slot_dict

GITHUB_MIN_INTERVAL = timedelta(minutes=5)
"""GitHub Actions runs scheduled workflows at most every 5 minutes."""

DST_NOTES_SHOWN = 3


@dataclass
class Preview:
    """What ``validate`` says about one valid schedule."""

    schedule: Schedule
    words: str
    upcoming: list[cron.SlotInfo] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        spec = self.schedule.spec
        return {
            "id": self.schedule.id,
            "file": self.schedule.path,
            "enabled": spec.enabled,
            "cron": spec.cron,
            "at": spec.at.isoformat() if spec.at else None,
            "timezone": spec.timezone,
            "description": spec.description,
            "when": self.words,
            "tracks": [t.name for t in spec.tracks],
            "next": [slot_dict(s) for s in self.upcoming],
            "warnings": self.warnings,
        }


def preview(schedule: Schedule, start: datetime, n: int,
            workflows: Path | None = None) -> Preview:
    """The next ``n`` runs after ``start`` and every warning worth a reviewer's eye.

    ``workflows`` is the repository's ``.github/workflows`` folder, when it has one:
    a schedule naming a workflow that is not there would fail every dispatch."""
    spec = schedule.spec
    result = Preview(schedule, cron.describe(spec))
    warn = result.warnings.append
    if workflows is not None and workflows.is_dir():
        if not (workflows / spec.workflow).is_file():
            warn(f"workflow {spec.workflow!r} is not in .github/workflows: every dispatch "
                 "on GitHub Actions would fail")
        elif spec.workflow == "track.yml":
            for track in spec.tracks:
                if track.run is None:
                    warn(f"track {track.name!r} has no 'run': the default track.yml fails "
                         "it on GitHub; name a 'workflow' that handles its inputs")
    if spec.at is not None:
        at = spec.at_utc()
        assert at is not None
        if at <= start:
            warn(f"'at' {fmt_utc(at)} is in the past: a one-shot that never fired fires at "
                 "the next tick")
        shown = cron.explain(spec, at - timedelta(seconds=1), at)
        result.upcoming = shown if n > 0 and at > start else []
        warn_dst = [s for s in shown if s.kind is not cron.SlotKind.NORMAL]
        for slot in warn_dst:
            note = cron.dst_note(slot, spec.timezone)
            if note:
                warn(note)
        return result

    assert spec.cron is not None
    expr = cron.parse_cron(spec.cron)
    sample = cron.next_slots(spec, start, 64)
    if not sample:
        warn("no run in the next ten years")
    if n > 0 and sample:
        until = cron.next_slots(spec, start, n)[-1]
        infos = cron.explain(spec, start, until)
        result.upcoming = [s for s in infos if s.fires]
        notes = [n for n in (cron.dst_note(s, spec.timezone) for s in infos) if n]
        if len(notes) > DST_NOTES_SHOWN + 1:  # an every-minute job: an hour of notes
            notes[DST_NOTES_SHOWN:] = [f"... and {len(notes) - DST_NOTES_SHOWN} more "
                                       "runs changed by daylight saving in the preview"]
        result.warnings += notes
    shortest = cron.min_interval(spec, start)
    if shortest is not None and shortest < GITHUB_MIN_INTERVAL:
        minutes = int(shortest.total_seconds() // 60)
        warn(f"runs as little as {minutes} minute{'s' if minutes != 1 else ''} apart: "
             "GitHub Actions starts scheduled workflows at most every 5 minutes, so "
             f"the tick sees several slots at once (catchup={spec.catchup.value} decides)")
    # A DST shift to 03:00 is not the author's choice of minute.
    plain = cron.explain(spec, start, sample[-1]) if sample else []
    if any(s.at.minute == 0 for s in plain if s.fires and s.kind is not cron.SlotKind.SHIFTED):
        warn("runs at minute 0 (UTC), GitHub's busiest moment, when scheduled workflows "
             "are delayed the most; prefer an odd minute such as 7 or 23")
    if expr.both_days_restricted and len(expr.days) < 31 and len(expr.weekdays) < 7:
        warn(f"both day-of-month ({expr.fields[2]}) and day-of-week ({expr.fields[4]}) "
             "are restricted: cron runs on days matching EITHER field, not both")
    return result


@dataclass
class Report:
    start: datetime
    loaded: LoadResult
    previews: list[Preview]

    @property
    def ok(self) -> bool:
        return not self.loaded.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "from": fmt_utc(self.start),
            "valid": len(self.previews),
            "invalid": len(self.loaded.invalid_files),
            "schedules": [p.to_json() for p in self.previews],
            "errors": [{"file": e.file, "field": e.field, "problem": e.problem,
                        "message": e.message} for e in self.loaded.errors],
        }


def build_report(cfg: Config, start: datetime, n: int) -> Report:
    loaded = load_all(cfg.schedules_dir)
    workflows = cfg.repo / ".github" / "workflows"
    return Report(start, loaded, [preview(s, start, n, workflows) for s in loaded.schedules])


def _summary(report: Report) -> str:
    valid, invalid = len(report.previews), len(report.loaded.invalid_files)
    return f"{valid} schedule{'s' if valid != 1 else ''} valid, {invalid} invalid"


def render_text(report: Report) -> str:
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
    lines.append(_summary(report))
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """Inert Markdown on one line, as the brief writes it: descriptions and problems
    come from files a pull request brings, and the summary is rendered as HTML."""
    return md(text)


_PLAIN = re.compile(r"[\w.@+/ -]*")


def _code(text: str) -> str:
    """A name as code; one with other characters (a newline, a pipe, a backtick, HTML)
    as escaped text instead, since a code span would break the table around it."""
    if not text:
        return ""
    return f"`{text}`" if _PLAIN.fullmatch(text) else md(text)


def render_markdown(report: Report) -> str:
    out = ["## Schedules", ""]
    mark = "✅" if report.ok else "❌"
    out += [f"{mark} {_summary(report)}, previewed from {fmt_utc(report.start)}", ""]
    if report.loaded.errors:
        out += ["### ❌ Invalid files", "", "| File | Field | Problem |", "|---|---|---|"]
        out += [f"| {_code(e.file)} | {_code(e.field)} | {_md(e.problem)} |"
                for e in report.loaded.errors]
        out.append("")
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


@click.command("validate")
@click.option("--preview", "n", type=click.IntRange(0, 1000), default=0, show_default=True,
              metavar="N", help="Show the next N runs of each schedule.")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]),
              default="text", show_default=True,
              help="markdown is made for $GITHUB_STEP_SUMMARY.")
@click.option("--from", "start", type=INSTANT, default=None, metavar="ISO",
              help="Preview from this instant (with offset, e.g. 2026-11-01T00:00:00Z) "
              "instead of now.")
@pass_config
def command(cfg: Config, n: int, fmt: str, start: datetime | None) -> int:
    """Check every schedules/*.json and preview the next runs.

    Exits 1 if any file is invalid; the valid ones are still previewed.
    """
    report = build_report(cfg, start or datetime.now(UTC), n)
    for error in report.loaded.errors:
        click.echo(f"orchestrator: {error.message}", err=True)
    if fmt == "json":
        click.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    elif fmt == "markdown":
        click.echo(render_markdown(report), nl=False)
    else:
        click.echo(render_text(report), nl=False)
    return EXIT_OK if report.ok else EXIT_USER

