"""The brief: one self-contained HTML page per run, an index of runs, a Markdown twin.

The brief is what a person reads instead of N worker logs, on a laptop or a phone, from
GitHub Pages, an artifact or the job summary. Everything a track wrote (result
summaries, error messages, poll notes) is untrusted text: the HTML is rendered by jinja2
with autoescaping forced on, links are kept only for ``http``/``https``/``file`` URLs and
relative paths, and the Markdown escapes HTML and Markdown syntax alike.

Rendering is pure: time comes in as ``generated_at``/``now``; nothing here reads the
clock or the network. :func:`build_view` derives what the template shows (counts, the
timeline's geometry, durations), so a replacement template stays short.

Template context (documented in the README; both templates may be replaced):

``brief.html.j2``
    ``run``, ``schedule`` (``ScheduleSpec`` or ``None``), ``tracks``, ``dead_letters``,
    ``polls`` (list of dicts), ``generated_at``, ``last_tick`` (datetime or ``None``) and
    ``view`` (:class:`BriefView`, derived). Filters: ``when``, ``clock``, ``duration``.
``index.html.j2``
    ``runs`` (list of :class:`IndexRow`, newest first) and ``generated_at``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import jinja2

from . import __version__
from .cron import describe as cron_in_words
from .errors import NotFound, UserError
from .machine import RUN_TERMINAL, TRACK_OPEN
from .models import DeadLetter, Run, RunStatus, ScheduleSpec, Track, TrackPhase, check_run_id
from .state import ROOT, last_tick_at, load, polls_path, run_dir, run_path
from .times import parse_utc

DATA = Path(__file__).resolve().parent / "data"
BRIEF_TEMPLATE = "brief.html.j2"
INDEX_TEMPLATE = "index.html.j2"

DEFAULT_STALE_AFTER = timedelta(minutes=90)
"""As ``orchestrator status``: an idle tick writes its heartbeat line only once an hour
(``--heartbeat-every``), and GitHub's cron runs late; older than this, the clock has
probably stopped."""

MARKDOWN_LIMIT = 1024 * 1024
"""GitHub rejects a step summary larger than 1 MiB."""

SAFE_SCHEMES = frozenset({"http", "https", "file"})

PHASE_LABELS = {
    TrackPhase.PENDING: "pending",
    TrackPhase.DISPATCHED: "dispatched",
    TrackPhase.RUNNING: "running",
    TrackPhase.COMPLETE: "complete",
    TrackPhase.FAILED: "failed",
    TrackPhase.TAPPED_OUT: "tapped out",
    TrackPhase.CANCELLED: "cancelled",
}

# Attention order: what a reader must act on first comes first in every listing.
PHASE_ORDER = {
    TrackPhase.FAILED: 0,
    TrackPhase.TAPPED_OUT: 1,
    TrackPhase.CANCELLED: 2,
    TrackPhase.RUNNING: 3,
    TrackPhase.DISPATCHED: 4,
    TrackPhase.PENDING: 5,
    TrackPhase.COMPLETE: 6,
}


@dataclass(frozen=True)
class BriefContext:
    """Everything one brief is rendered from (read by :func:`context_from_files`)."""

    run: Run
    tracks: list[Track]
    dead_letters: list[DeadLetter]
    polls: list[dict[str, Any]]
    """Lines of ``polls.jsonl``: at least ``at`` (ISO UTC); ``tick``, ``observed``
    ({track: phase}) and ``notes`` ([str]) are shown when present."""
    generated_at: datetime
    last_tick: datetime | None
    schedule: ScheduleSpec | None = None
    """``None`` when the schedule file is gone; the run record carries its description,
    cron and time zone."""
    stale_after: timedelta = DEFAULT_STALE_AFTER


# --------------------------------------------------------------------------- reading


def _read_polls(data: bytes | None) -> list[dict[str, Any]]:
    polls: list[dict[str, Any]] = []
    if not data:
        return polls
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict):
            # One bad line must not cost the reader the whole brief; say so instead.
            entry = {"at": "", "notes": [f"line {number} of polls.jsonl is not a JSON object"]}
        polls.append(entry)
    return polls


def context_from_files(
    files: Mapping[str, bytes],
    run_id: str,
    *,
    now: datetime,
    schedule: ScheduleSpec | None = None,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    last_tick: datetime | None = None,
) -> BriefContext:
    """Read one run's brief context out of a state file map (paths from the repo root).

    ``last_tick`` overrides the last line of ``state/ticks.jsonl``: a tick rendering a
    brief passes its own time, since its heartbeat line is written after the brief.
    """
    check_run_id(run_id)
    if run_path(run_id) not in files:
        raise NotFound(f"no run {run_id!r} on the state branch")
    prefix = run_dir(run_id) + "/"
    dlq_prefix = f"{ROOT}/dlq/{run_id}--"
    # Filter on paths first: a git snapshot loads contents lazily, on access.
    mine = {p: files[p] for p in files
            if p == run_path(run_id) or p.startswith(prefix + "tracks/")
            or p.startswith(dlq_prefix)}
    state = load(mine, all_tracks=True)
    run = state.runs[run_id]
    by_name = state.tracks.get(run_id, {})
    order = {name: i for i, name in enumerate(run.tracks)}
    tracks = sorted(by_name.values(), key=lambda t: (order.get(t.name, len(order)), t.name))
    letters = sorted((d for d in state.dlq.values() if d.run_id == run_id),
                     key=lambda d: d.track)
    return BriefContext(
        run=run,
        tracks=tracks,
        dead_letters=letters,
        polls=_read_polls(files.get(polls_path(run_id))),
        generated_at=now.astimezone(UTC),
        last_tick=last_tick if last_tick is not None else last_tick_at(files),
        schedule=schedule,
        stale_after=stale_after,
    )


# --------------------------------------------------------------------------- formatting


def fmt_duration(delta: timedelta | None) -> str:
    """``45s``, ``3m 12s``, ``1h 04m``, ``2d 3h``; ``-`` for none."""
    if delta is None:
        return "-"
    seconds = int(delta.total_seconds())
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days}d {hours}h"
    if hours:
        return f"{sign}{hours}h {minutes:02d}m"
    if minutes:
        return f"{sign}{minutes}m {secs:02d}s"
    return f"{sign}{secs}s"


def fmt_when(moment: datetime | None) -> str:
    """``2026-12-01 07:03:12 UTC``; ``-`` for none."""
    if moment is None:
        return "-"
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def fmt_clock(moment: datetime | None) -> str:
    """``07:03:12`` (UTC); ``-`` for none."""
    if moment is None:
        return "-"
    return f"{moment.astimezone(UTC):%H:%M:%S}"


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def safe_url(url: str | None) -> str | None:
    """``url`` if it is safe to put in an ``href`` (http, https, file, or relative)."""
    if not url or any(c in url for c in "\x00\r\n\t") or url.strip() != url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme:
        return url if parts.scheme.lower() in SAFE_SCHEMES else None
    # No scheme: a relative path to a local log. "//host" would be scheme-relative.
    return None if url.startswith("//") or ":" in url.split("/", 1)[0] else url


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def describe_cron(expr: str | None) -> str | None:
    """The cron expression in words (``None`` when there is none or it does not parse:
    a run record outlives changes to the cron parser)."""
    if not expr:
        return None
    try:
        return cron_in_words(expr) or None
    except ValueError:
        return None


# --------------------------------------------------------------------------- the view


@dataclass(frozen=True)
class Attempt:
    """One attempt of a track, rebuilt from its ``state_history``."""

    number: int
    dispatched: datetime | None
    started: datetime | None
    finished: datetime | None
    outcome: str
    """The phase the attempt ended in, or the current phase while it is open."""

    @property
    def open(self) -> bool:
        return self.finished is None

    @property
    def run_time(self) -> timedelta | None:
        """Start to finish (from dispatch when no start was observed)."""
        begin = self.started or self.dispatched
        if begin and self.finished:
            return self.finished - begin
        return None


def attempts_of(track: Track) -> list[Attempt]:
    """The track's attempts, oldest first (from its history, else its current fields)."""
    out: list[Attempt] = []
    number = 0
    cur: dict[str, Any] | None = None
    terminal = {p.value for p in TrackPhase if p not in TRACK_OPEN}
    for step in track.state_history:
        if step.to == TrackPhase.DISPATCHED.value:
            if cur is not None and cur.get("finished") is None:
                # Re-dispatch of a lost dispatch: the same attempt starts over.
                cur["dispatched"] = step.at
                continue
            number += 1
            cur = {"number": number, "dispatched": step.at, "started": None, "finished": None,
                   "outcome": step.to}
        elif step.to == TrackPhase.PENDING.value:
            if cur is not None and cur["finished"] is not None:
                out.append(Attempt(**cur))  # a retry or requeue: that attempt is over
                cur = None
        elif cur is None:
            continue  # tapped out or cancelled while waiting for a dispatch: nothing ran
        elif step.to == TrackPhase.RUNNING.value:
            cur["started"] = step.at
            cur["outcome"] = step.to
        elif step.to in terminal:
            cur["finished"] = step.at
            cur["outcome"] = step.to
    if cur is not None:
        out.append(Attempt(**cur))
    if not out and (track.dispatched_at or track.started_at):
        out.append(Attempt(number=track.attempt, dispatched=track.dispatched_at,
                           started=track.started_at, finished=track.finished_at,
                           outcome=track.phase.value))
    if out:
        # The record's own times belong to the current attempt: a backend may report
        # a start it never showed as "running" (dispatched -> complete in one tick).
        last = out[-1]
        started = last.started
        if started is None and track.started_at is not None and (
                last.dispatched is None or track.started_at >= last.dispatched):
            started = track.started_at
        finished = last.finished
        if finished is None and track.phase not in TRACK_OPEN:
            finished = track.finished_at
        # An attempt still open at render time carries the current phase (e.g. running).
        outcome = track.phase.value if finished is None else last.outcome
        out[-1] = Attempt(number=last.number, dispatched=last.dispatched, started=started,
                          finished=finished, outcome=outcome)
    return out


@dataclass(frozen=True)
class Bar:
    """A rectangle of the timeline, in viewBox units (x from 0 to 1000)."""

    x: float
    width: float
    kind: str
    """A phase value, or ``queued`` for the wait between dispatch and start."""
    title: str
    open: bool = False


@dataclass(frozen=True)
class TimelineRow:
    name: str
    phase: str
    attempts: int
    y: float
    bars: list[Bar]
    note: str = ""


@dataclass(frozen=True)
class Tick:
    x_pct: float
    label: str


@dataclass(frozen=True)
class Timeline:
    start: datetime
    end: datetime
    rows: list[TimelineRow]
    ticks: list[Tick]
    row_height: int
    height: int
    deadline_x: float | None
    """Position of the deadline line, ``None`` when it lies beyond the right edge."""
    deadline: datetime
    slot_x: float | None
    """Position of the scheduled slot, ``None`` when it lies far before the first bar."""
    slot: datetime
    now_x: float | None
    width: int = 1000


@dataclass(frozen=True)
class TrackRow:
    track: Track
    phase: str
    phase_label: str
    attempts: list[Attempt]
    attempts_label: str
    duration: str
    duration_title: str
    summary: str
    url: str | None
    link_label: str
    errors: list[str]


@dataclass(frozen=True)
class Counts:
    total: int
    complete: int
    failed: int
    tapped_out: int
    cancelled: int
    open: int
    dead_letters: int
    """Dead letters still waiting for a decision (discarded ones are not counted)."""

    @property
    def attention(self) -> int:
        return self.failed + self.tapped_out


@dataclass(frozen=True)
class Headline:
    level: str
    """``bad``, ``warn``, ``info`` or ``ok``."""
    title: str
    detail: str = ""
    action: str = ""
    command: str = ""
    """A command that starts on the action, shown as code."""


@dataclass(frozen=True)
class BriefView:
    """What the template shows, derived from a :class:`BriefContext`."""

    status: str
    counts: Counts
    headline: Headline
    rows: list[TrackRow]
    timeline: Timeline
    schedule_id: str
    description: str
    cron: str | None
    cron_words: str | None
    timezone: str
    slot_local: str
    started: datetime | None
    finished: datetime | None
    late_by: timedelta | None
    duration: timedelta | None
    duration_is_partial: bool
    last_tick_age: timedelta | None
    stale: bool
    stale_after: timedelta
    errors: list[tuple[str, str, list[str]]]
    """(track, phase label, error lines) for every track with errors, attention first."""
    polls: list[dict[str, Any]]
    """Poll lines made presentable: ``at`` (datetime or None), ``at_raw``, ``tick``,
    ``observed`` (str), ``notes`` (list of str), ``extra`` (str)."""
    version: str = __version__
    notes: list[str] = field(default_factory=list)


def _run_started(run: Run, attempts: Iterable[Attempt]) -> datetime | None:
    for step in run.state_history:
        if step.to == RunStatus.RUNNING.value:
            return step.at
    firsts = [a.dispatched or a.started for a in attempts]
    known = [f for f in firsts if f is not None]
    return min(known) if known else None


def _run_finished(run: Run) -> datetime | None:
    if run.finished_at is not None:
        return run.finished_at
    if run.status in RUN_TERMINAL and run.state_history:
        return run.state_history[-1].at
    return None


_NICE_STEPS = [
    timedelta(seconds=s) for s in (
        1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
        43200, 86400, 172800, 604800)
]


def _ticks(start: datetime, end: datetime, x: Any) -> list[Tick]:
    span = end - start
    step = next((s for s in _NICE_STEPS if span / s <= 6), _NICE_STEPS[-1])
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    steps, rest = divmod(start - epoch, step)
    first = epoch + step * (steps + (1 if rest else 0))  # the first multiple of step
    fmt = "%H:%M:%S" if step < timedelta(minutes=1) else "%H:%M"
    if step >= timedelta(days=1):
        fmt = "%m-%d"
    ticks = []
    moment = first
    while moment <= end:
        pct = x(moment) / 10
        if 4 <= pct <= 96:  # labels are centred; keep them inside the axis
            ticks.append(Tick(round(pct, 2), f"{moment.astimezone(UTC):{fmt}}"))
        moment += step
    return ticks


def _timeline(ctx: BriefContext, attempts: dict[str, list[Attempt]]) -> Timeline:
    now = ctx.generated_at
    starts = [a.dispatched or a.started for al in attempts.values() for a in al]
    ends = [a.finished or now for al in attempts.values() for a in al]
    t0 = min([s for s in starts if s is not None] or [ctx.run.fire_at])
    t1 = max([e for e in ends if e is not None] or [t0 + timedelta(minutes=1)])
    finished = _run_finished(ctx.run)
    if finished and finished > t1:
        t1 = finished
    if t1 <= t0:
        t1 = t0 + timedelta(minutes=1)
    deadline = ctx.run.deadline
    # Draw the deadline when it is on (or near) the activity; a 4-hour ceiling over a
    # 5-minute run would squash every bar into a sliver, so then it is named instead.
    if deadline > t1 and deadline - t0 <= (t1 - t0) * 1.5:
        t1 = deadline
    # Likewise the slot: a few minutes of lateness is worth seeing, hours are not.
    slot = ctx.run.slot
    if slot < t0 and t1 - slot <= (t1 - t0) * 1.5:
        t0 = slot
    pad = (t1 - t0) * 0.02
    start, end = t0 - pad, t1 + pad
    if deadline < start:
        start = deadline - pad
    total = (end - start).total_seconds()

    def x(moment: datetime) -> float:
        return round(max(0.0, min(1000.0, (moment - start).total_seconds() / total * 1000)), 2)

    row_h = 26 if len(ctx.tracks) <= 64 else 14
    rows: list[TimelineRow] = []
    for index, track in enumerate(ctx.tracks):
        bars: list[Bar] = []
        for a in attempts[track.name]:
            begin = a.dispatched or a.started
            if begin is None:
                continue
            stop = a.finished or now
            label = f"{track.name} · attempt {a.number} · {a.outcome.replace('_', ' ')}"
            if a.dispatched and a.started and a.started > a.dispatched:
                bars.append(Bar(x(a.dispatched), max(x(a.started) - x(a.dispatched), 1.5),
                                "queued", f"{label} · queued {fmt_clock(a.dispatched)} to "
                                f"{fmt_clock(a.started)} "
                                f"({fmt_duration(a.started - a.dispatched)})"))
            run_from = a.started or begin
            bars.append(Bar(x(run_from), max(x(stop) - x(run_from), 3.0), a.outcome,
                            f"{label} · {fmt_clock(run_from)} to "
                            f"{fmt_clock(a.finished) if a.finished else 'now'} "
                            f"({fmt_duration(stop - run_from)})", open=a.open))
        note = "" if bars else "not dispatched"
        rows.append(TimelineRow(track.name, track.phase.value, len(attempts[track.name]),
                                index * row_h, bars, note))
    in_range = deadline <= end
    slot_x = x(slot) if start <= slot <= end else None
    now_x = x(now) if ctx.run.status not in RUN_TERMINAL and now <= end else None
    return Timeline(start=start, end=end, rows=rows, ticks=_ticks(start, end, x),
                    row_height=row_h, height=max(row_h * len(rows), row_h),
                    deadline_x=x(deadline) if in_range else None, deadline=deadline,
                    slot_x=slot_x, slot=slot, now_x=now_x)


def _headline(ctx: BriefContext, counts: Counts, rows: list[TrackRow], stale: bool,
              age: timedelta | None) -> Headline:
    tick_note = ""
    if stale:
        tick_note = (f"The last tick ran {fmt_duration(age)} ago: the scheduler may have "
                     "stopped." if age is not None else "No tick has been recorded.")
    if counts.attention or counts.dead_letters:
        parts = []
        if counts.failed:
            retried = sum(1 for r in rows if r.track.phase is TrackPhase.FAILED
                          and len(r.attempts) > 1)
            if retried == counts.failed:
                parts.append(f"{counts.failed} failed after retrying")
            elif retried:
                parts.append(f"{counts.failed} failed ({retried} after retrying)")
            else:
                parts.append(f"{counts.failed} failed")
        if counts.tapped_out:
            parts.append(f"{counts.tapped_out} tapped out")
        n = counts.attention
        title = (f"{n} of {counts.total} track{'s' if counts.total != 1 else ''} "
                 f"need{'s' if n == 1 else ''} attention" if n else "Dead letters need review")
        detail = ", ".join(parts)
        action = command = ""
        if counts.dead_letters:
            action = (f"{counts.dead_letters} dead letter"
                      f"{'s' if counts.dead_letters != 1 else ''} waiting for a decision: "
                      "review, then requeue or discard.")
            command = "orchestrator dlq list"
        if tick_note:
            action = f"{action} {tick_note}".strip()
        return Headline("bad", title, detail + ("." if detail else ""), action, command)
    if counts.open:
        if stale:
            return Headline("warn", "The run is open but the scheduler looks stopped",
                            tick_note,
                            "Check the tick workflow's recent runs.")
        return Headline("info", "Run in progress",
                        f"{counts.complete} of {counts.total} tracks complete, "
                        f"{counts.open} still open.")
    if counts.cancelled:
        return Headline("warn", f"{counts.cancelled} of {counts.total} tracks cancelled",
                        f"{counts.complete} complete.", tick_note)
    return Headline("warn" if stale else "ok",
                    f"All {counts.total} track{'s' if counts.total != 1 else ''} complete",
                    "", tick_note)


def _poll_view(poll: Mapping[str, Any]) -> dict[str, Any]:
    at_raw = poll.get("at", "")
    observed = poll.get("observed")
    if isinstance(observed, Mapping):
        observed_text = ", ".join(f"{k}: {_text(v)}" for k, v in sorted(observed.items()))
    else:
        observed_text = _text(observed)
    note_list: list[str] = []
    for key in ("notes", "changes"):  # the tick writes what it changed as "changes"
        value = poll.get(key)
        if isinstance(value, list):
            note_list += [_text(n) for n in value]
        elif value is not None:
            note_list.append(_text(value))
    shown = {"at", "tick", "observed", "notes", "changes"}
    extra = {k: v for k, v in poll.items() if k not in shown}
    return {
        "at": parse_utc(at_raw),
        "at_raw": _text(at_raw),
        "tick": _text(poll.get("tick")),
        "observed": observed_text,
        "notes": note_list,
        "extra": ", ".join(f"{k}={_text(v)}" for k, v in sorted(extra.items())),
    }


def build_view(ctx: BriefContext) -> BriefView:
    """Derive everything the brief shows from ``ctx`` (pure)."""
    run = ctx.run
    attempts = {t.name: attempts_of(t) for t in ctx.tracks}
    rows: list[TrackRow] = []
    for track in ctx.tracks:
        al = attempts[track.name]
        last = al[-1] if al else None
        run_time = last.run_time if last else None
        begin = (last.started or last.dispatched) if last else None
        if last and last.open and begin:
            run_time = ctx.generated_at - begin  # so far
        total = sum((a.run_time for a in al if a.run_time), timedelta())
        title = (f"{fmt_duration(total)} over {len(al)} attempts" if len(al) > 1
                 else "time from start to finish")
        summary = _text((track.result or {}).get("summary"))
        url = safe_url(track.url)
        link_label = ""
        if url:
            link_label = "CI run" if url.startswith(("http://", "https://")) else "log"
        used = max(track.attempt, len(al))
        rows.append(TrackRow(
            track=track, phase=track.phase.value, phase_label=PHASE_LABELS[track.phase],
            attempts=al, attempts_label=f"{used}/{max(track.max_attempts, used)}",
            duration=fmt_duration(run_time) + ("…" if last and last.open else ""),
            duration_title=title, summary=summary, url=url, link_label=link_label,
            errors=list(track.error_log)))
    phases = [t.phase for t in ctx.tracks]
    counts = Counts(
        total=len(phases),
        complete=phases.count(TrackPhase.COMPLETE),
        failed=phases.count(TrackPhase.FAILED),
        tapped_out=phases.count(TrackPhase.TAPPED_OUT),
        cancelled=phases.count(TrackPhase.CANCELLED),
        open=sum(1 for p in phases if p in TRACK_OPEN),
        dead_letters=sum(1 for d in ctx.dead_letters if not d.discarded),
    )
    age = ctx.generated_at - ctx.last_tick if ctx.last_tick else None
    stale = age is None or age > ctx.stale_after
    started = _run_started(run, (a for al in attempts.values() for a in al))
    finished = _run_finished(run)
    duration = None
    if started:
        duration = (finished or ctx.generated_at) - started
    late_by = started - run.slot if started and started > run.slot else None
    schedule = ctx.schedule
    description = run.description or (schedule.description if schedule else "")
    cron = run.cron or (schedule.cron if schedule else None)
    timezone = run.timezone or (schedule.timezone if schedule else "UTC")
    slot_local = ("" if timezone == "UTC" else
                  f"{run.slot.astimezone(_zone(timezone)):%Y-%m-%d %H:%M %Z}")
    cron_words = describe_cron(cron)
    notes = []
    if cron and cron_words is None:
        notes.append("cron shown as written")
    errors = [(r.track.name, r.phase_label, r.errors) for r in
              sorted(rows, key=lambda r: (PHASE_ORDER[r.track.phase], r.track.name))
              if r.errors]
    position = {t.name: i for i, t in enumerate(ctx.tracks)}
    view_rows = sorted(rows, key=lambda r: (PHASE_ORDER[r.track.phase], position[r.track.name]))
    return BriefView(
        status=run.status.value,
        counts=counts,
        headline=_headline(ctx, counts, rows, stale, age),
        rows=view_rows,
        timeline=_timeline(ctx, attempts),
        schedule_id=run.schedule_id,
        description=description,
        cron=cron,
        cron_words=cron_words,
        timezone=timezone,
        slot_local=slot_local,
        started=started,
        finished=finished,
        late_by=late_by,
        duration=duration,
        duration_is_partial=finished is None,
        last_tick_age=age,
        stale=stale,
        stale_after=ctx.stale_after,
        errors=errors,
        polls=[_poll_view(p) for p in ctx.polls],
        notes=notes,
    )


# --------------------------------------------------------------------------- HTML


@functools.lru_cache(maxsize=8)
def _environment(folder: str) -> jinja2.Environment:
    """One environment per template folder, so each template is compiled once per process
    (the loader still notices when a file changes)."""
    # autoescape=True for every name: select_autoescape() would not cover ".j2" files.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["when"] = fmt_when
    env.filters["clock"] = fmt_clock
    env.filters["duration"] = fmt_duration
    return env


def _render(name: str, template: Path | None, context: dict[str, Any]) -> str:
    if template is None:
        path = DATA / name
    else:
        path = Path(template)
        if not path.is_file():
            raise NotFound(f"template not found: {path}")
    env = _environment(str(path.parent.resolve()))
    try:
        return env.get_template(path.name).render(context)
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"{path}:{exc.lineno}: template syntax error: {exc.message}") from exc
    except jinja2.UndefinedError as exc:
        raise UserError(f"{path}: template uses an unknown name: {exc.message}") from exc


def render_html(ctx: BriefContext, template: Path | None = None) -> str:
    """The brief as one self-contained HTML page (``template`` replaces the packaged one)."""
    return _render(BRIEF_TEMPLATE, template, {
        "run": ctx.run,
        "schedule": ctx.schedule,
        "tracks": ctx.tracks,
        "dead_letters": ctx.dead_letters,
        "polls": ctx.polls,
        "generated_at": ctx.generated_at,
        "last_tick": ctx.last_tick,
        "view": build_view(ctx),
    })


@dataclass(frozen=True)
class IndexRow:
    run: Run
    status: str
    schedule_id: str
    slot: datetime
    duration: timedelta | None
    href: str | None
    """Link to the run's brief, relative to ``state/index.html`` (terminal runs only)."""


def render_index(runs: list[Run], *, generated_at: datetime,
                 template: Path | None = None) -> str:
    """``state/index.html``: every run, newest first, linking to its brief."""
    rows = []
    for run in sorted(runs, key=lambda r: (r.slot, r.run_id), reverse=True):
        started = _run_started(run, [])
        finished = _run_finished(run)
        duration = finished - started if started and finished else None
        href = f"runs/{run.run_id}/brief.html" if run.status in RUN_TERMINAL else None
        rows.append(IndexRow(run=run, status=run.status.value, schedule_id=run.schedule_id,
                             slot=run.slot, duration=duration, href=href))
    return _render(INDEX_TEMPLATE, template, {"runs": rows, "generated_at": generated_at})


# --------------------------------------------------------------------------- Markdown

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~$])")
"""Inline Markdown syntax (emphasis, code, links, tables, strike-through, math). Block
syntax needs no escape: escaped text never starts a line (newlines become ``<br>``)."""
_NEWLINES = re.compile(r"\r\n|\r|\n")


def md(text: Any, limit: int | None = None) -> str:
    """``text`` as inert Markdown: HTML neutralised, Markdown syntax escaped, one line.

    ``limit`` caps the characters kept and says how many were cut.
    """
    value = _text(text)
    cut = ""
    if limit is not None and len(value) > limit:
        cut = f" … ({len(value) - limit:,} more characters in the HTML brief)"
        value = value[:limit]
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    value = _MD_SPECIAL.sub(r"\\\1", value)
    value = _NEWLINES.sub("<br>", value)
    return value + md(cut) if cut else value



@dataclass
class _Budget:
    """Blocks go in while they fit; what did not fit is counted, never dropped silently."""

    limit: int
    used: int = 0
    left_out: dict[str, int] = field(default_factory=dict)
    """What was left out, by kind: by policy (the level) or because it did not fit."""
    overflowed: bool = False

    def fits(self, text: str) -> bool:
        return self.used + len(text.encode()) <= self.limit

    def take(self, text: str) -> None:
        self.used += len(text.encode())


_RESERVE = 4096
"""Bytes kept back for the closing note about what was left out."""


def _size(limit: int) -> str:
    if limit % (1024 * 1024) == 0:
        return f"{limit // (1024 * 1024)} MiB"
    return f"{limit / 1024:,.0f} KiB"


def render_markdown(ctx: BriefContext, limit_bytes: int = MARKDOWN_LIMIT) -> str:
    """The brief as GitHub-flavoured Markdown for ``$GITHUB_STEP_SUMMARY``.

    Stays under ``limit_bytes`` (UTF-8). Three levels, the first that fits whole wins:
    everything with long cells capped; then shorter cells, fewer error lines and the
    newest 20 poll lines; then only the tracks that are not complete, rows added while
    they fit. Whatever is cut is said in the closing paragraph, never dropped silently.
    """
    view = build_view(ctx)
    for level in (0, 1):
        text, overflowed = _markdown(ctx, view, limit_bytes, level)
        if not overflowed:
            return text
    return _markdown(ctx, view, limit_bytes, 2)[0]


def _markdown(ctx: BriefContext, view: BriefView, limit: int, level: int
              ) -> tuple[str, bool]:
    """The summary at one level of detail, and whether rows had to be cut to fit."""
    cell = (500, 160, 80)[level]
    err_lines = (5, 2, 1)[level]
    run = ctx.run
    c = view.counts
    head: list[str] = []
    head.append(f"## Brief: {md(run.run_id)} ({md(view.status)})\n\n")
    marker = {"bad": "🔴", "warn": "🟠", "info": "🔵", "ok": "🟢"}[view.headline.level]
    line = f"{marker} **{md(view.headline.title)}**"
    if view.headline.detail:
        line += f": {md(view.headline.detail)}"
    if view.headline.action:
        line += f"  \n{md(view.headline.action)}"
    if view.headline.command:
        line += f" `{view.headline.command}`"
    head.append(line + "\n\n")
    head.append("| Failed | Tapped out | Dead letters | Complete | Cancelled | Open | Total |\n"
                "|---:|---:|---:|---:|---:|---:|---:|\n"
                f"| {c.failed} | {c.tapped_out} | {c.dead_letters} | {c.complete} | "
                f"{c.cancelled} | {c.open} | {c.total} |\n\n")
    sched = f"**Schedule** {md(view.schedule_id)}"
    if view.description:
        sched += f": {md(view.description, 300)}"
    if view.cron:
        # A code span shows the cron as written; one with a backtick cannot be a cron.
        cron = f"`{view.cron}`" if "`" not in view.cron else md(view.cron)
        sched += f" · cron {cron}"
        if view.cron_words:
            sched += f" ({md(view.cron_words)})"
    sched += f" · {md(view.timezone)}"
    late = f" ({md(fmt_duration(view.late_by))} late)" if view.late_by else ""
    took = "running for" if view.duration_is_partial else "took"
    head.append(f"{sched}  \n"
                f"**Slot** {md(fmt_when(run.slot))}"
                + (f" ({md(view.slot_local)})" if view.slot_local else "") + " · "
                f"**started** {md(fmt_when(view.started))}{late} · "
                f"**{took}** {md(fmt_duration(view.duration))} · "
                f"**deadline** {md(fmt_when(run.deadline))}  \n")
    if ctx.last_tick:
        tick = (f"**Last tick** {md(fmt_when(ctx.last_tick))} "
                f"({md(fmt_duration(view.last_tick_age))} ago)")
    else:
        tick = "**Last tick** none recorded"
    if view.stale:
        tick += f" · ⚠️ **stale** (older than {md(fmt_duration(view.stale_after))})"
    head.append(tick + "\n")

    budget = _Budget(limit - _RESERVE)
    for block in head:
        budget.take(block)
    out = list(head)

    def section(title: str, header: str, rows: list[str], what: str) -> None:
        if not rows:
            return
        opening = f"\n### {title}\n\n{header}"
        if not budget.fits(opening):
            budget.left_out[what] = budget.left_out.get(what, 0) + len(rows)
            budget.overflowed = True
            return
        budget.take(opening)
        out.append(opening)
        for i, row in enumerate(rows):
            if not budget.fits(row):
                budget.left_out[what] = budget.left_out.get(what, 0) + len(rows) - i
                budget.overflowed = True
                return
            budget.take(row)
            out.append(row)

    track_rows = view.rows
    if level >= 2:
        # Complete tracks are what a reader needs least; count them instead.
        done = [r for r in track_rows if r.track.phase is TrackPhase.COMPLETE]
        track_rows = [r for r in track_rows if r.track.phase is not TrackPhase.COMPLETE]
        if done:
            budget.left_out["complete track rows"] = len(done)
    section("Tracks", "| Track | Phase | Attempts | Duration | Summary | Link |\n"
                      "|---|---|---:|---:|---|---|\n",
            [f"| {md(r.track.name)} | {md(r.phase_label)} | {md(r.attempts_label)} | "
             f"{md(r.duration)} | {md(r.summary, cell)} | {_md_link(r)} |\n"
             for r in track_rows],
            "track rows")
    error_rows = []
    for name, phase, lines in view.errors:
        shown = lines[-err_lines:]
        text = " · ".join(md(e, cell) for e in shown)
        if len(lines) > len(shown):
            text = f"\\({len(lines) - len(shown)} earlier not shown\\) {text}"
        error_rows.append(f"- **{md(name)}** ({md(phase)}): {text}\n")
    section("Errors", "", error_rows, "error entries")
    letters = []
    for d in ctx.dead_letters:
        discarded = " (discarded)" if d.discarded else ""
        letters.append(f"- **{md(d.key)}**{md(discarded)}: {md(d.reason, cell)} · "
                       f"{d.attempts} attempt{'s' if d.attempts != 1 else ''} · parked "
                       f"{md(fmt_when(d.parked_at))}\n")
    section("Dead letters", "", letters, "dead letters")
    polls = list(reversed(view.polls))  # newest first: when rows are cut, old ones go
    if level >= 1 and len(polls) > 20:
        budget.left_out["older poll log lines"] = len(polls) - 20
        polls = polls[:20]
    section("Poll log (newest first)", "| At | Tick | Observed | Notes |\n|---|---|---|---|\n",
            [f"| {md(fmt_when(p['at']) if p['at'] else p['at_raw'])} | {md(p['tick'])} | "
             f"{md(p['observed'], cell)} | "
             f"{md(' · '.join(p['notes'] + ([p['extra']] if p['extra'] else [])), cell)} |\n"
             for p in polls],
            "poll log lines")
    footer = f"\n_Generated {md(fmt_when(ctx.generated_at))} by orchestrator {__version__}\\._\n"
    if budget.left_out or level:
        cut = ", ".join(f"{n:,} {what}" for what, n in budget.left_out.items())
        said = f"**Left out to stay under GitHub's {_size(limit)} summary limit:** "
        if cut:
            said += f"{md(cut)}; "
        said += (f"long texts cut to {cell} characters\\. The HTML brief "
                 f"\\({md(run_dir(run.run_id))}/brief\\.html\\) has everything\\.\n")
        footer = "\n" + said + footer
    out.append(footer)
    return "".join(out), budget.overflowed


def _md_link(row: TrackRow) -> str:
    url = safe_url(row.url)
    if url and url.startswith(("http://", "https://")) and not any(c in url for c in "<> "):
        # Inside <...> a link destination may hold anything but "<", ">" and line breaks.
        # "|" would end the table cell even there (GFM splits cells first).
        return f"[{md(row.link_label)}](<{url.replace('|', '%7C')}>)"
    return md(row.track.url or "", 200)
