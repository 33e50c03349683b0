"""The view model of a brief: counts, headline, attention-first rows, the poll log (pure).

:func:`build_view` derives everything a template shows from a :class:`BriefContext`, so
a replacement template stays short. Time comes in with the context; nothing here reads
the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .. import __version__
from ..config.models import When
from ..config.needs import CONSOLIDATE
from ..state.machine import TRACK_OPEN
from ..state.phases import RunStatus, TrackPhase
from ..state.records import Track
from ..support.times import parse_utc
from .attempts import Attempt, attempts_of, run_finished, run_started
from .causes import Causes, causes
from .context import BriefContext
from .drains import DrainView, drain_views
from .tails import in_work_folder
from .text import (
    PHASE_LABELS,
    as_text,
    describe_cron,
    fmt_duration,
    fmt_when,
    safe_url,
    zone,
)
from .timeline import Timeline, layout

# Attention order: what a reader must act on first comes first in every listing.
PHASE_ORDER = {
    TrackPhase.FAILED: 0,
    TrackPhase.TAPPED_OUT: 1,
    TrackPhase.CANCELLED: 2,
    TrackPhase.REJECTED: 3,
    TrackPhase.SKIPPED: 4,
    TrackPhase.RUNNING: 5,
    TrackPhase.WAITING: 6,
    TrackPhase.DISPATCHED: 7,
    TrackPhase.PENDING: 8,
    TrackPhase.COMPLETE: 9,
}


POLL_COLUMNS = ("tick", "executor", "observed")


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
    tail: str = ""
    """The last lines of its stdout (:mod:`.tails`), ready to show."""
    command: str | None = None
    """For a local track: the command that prints what it wrote (its work folder is on
    the machine that ran it, and no link to it would open for a reader elsewhere)."""


@dataclass(frozen=True)
class Counts:
    total: int
    complete: int
    failed: int
    tapped_out: int
    cancelled: int
    open: int
    dead_letters: int
    """Dead letters still waiting for a decision (discarded ones are not counted): the
    run's dead tracks and the items its drains left dead, as ``dlq list`` shows both."""
    skipped: int = 0
    dead_items: int = 0
    """Of :attr:`dead_letters`, the queue items this run's drains left dead."""
    dead_queues: tuple[str, ...] = ()
    """The queues of those items."""

    @property
    def attention(self) -> int:
        return self.failed + self.tapped_out


@dataclass(frozen=True)
class Headline:
    level: str
    """``bad``, ``warn``, ``info``, ``ok`` or ``neutral`` (a run an operator cancelled)."""
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
    ``executor``, ``observed`` (str), ``notes`` (list of str), ``extra`` (str)."""
    poll_columns: list[str]
    """The optional poll log columns some line fills, of :data:`POLL_COLUMNS`: the tick
    writes ``at``, ``executor`` and ``changes`` (shown as notes), and a column that every
    line leaves empty is not shown."""
    version: str = __version__
    notes: list[str] = field(default_factory=list)
    consolidation: TrackRow | None = None
    """The row of the schedule's ``consolidate`` step, if it has one (shown first)."""
    drains: list[DrainView] = field(default_factory=list)
    """One roll-up per drain track (its workers' rows are in ``rows``)."""
    causes: Causes = field(default_factory=Causes)
    """What fired the run and the runs it fired, with links to their briefs."""
    acts: list[str] = field(default_factory=list)
    tails_left_out: int = 0
    """Tracks that show no stdout tail (:data:`.tails.MAX_TRACKS`)."""
    run_id: str = ""
    """Who triggered, backfilled, cancelled or retried the run, and why (a line each)."""



def _headline(ctx: BriefContext, counts: Counts, rows: list[TrackRow], stale: bool,
              age: timedelta | None) -> Headline:
    tick_note = _tick_note(stale, age)
    if counts.attention or counts.dead_letters:
        return _trouble_headline(counts, rows, tick_note)
    act = ctx.run.cancelled
    if ctx.run.status is RunStatus.CANCELLED and act is not None:
        return Headline("neutral", "Run cancelled", f"{act.describe()}; "
                        f"{counts.complete} of {counts.total} tracks complete.", tick_note)
    if counts.open:
        return _open_headline(counts, rows, stale, tick_note)
    return _ended_headline(counts, rows, stale, tick_note)


def _ended_headline(counts: Counts, rows: list[TrackRow], stale: bool,
                    tick_note: str) -> Headline:
    """The headline of a run whose tracks all ended, none failed nor tapped out."""
    if counts.cancelled:
        return Headline("warn", f"{counts.cancelled} of {counts.total} tracks cancelled",
                        f"{counts.complete} complete.", tick_note)
    rejected = [r.track for r in rows if r.track.phase is TrackPhase.REJECTED]
    if rejected:
        why = "; ".join(map(_rejection, rejected))
        return Headline("warn", f"{len(rejected)} of {counts.total} tracks rejected",
                        f"{why}. {counts.complete} complete, {counts.skipped} skipped.",
                        tick_note)
    return Headline("warn" if stale else "ok",
                    f"All {counts.total} track{'s' if counts.total != 1 else ''} complete",
                    "", tick_note)


def _rejection(track: Track) -> str:
    """``deploy rejected by bob: freeze``: who refused the track's gate, and why."""
    gate = track.current_gate
    act = gate.rejected if gate is not None else None
    return f"{track.name} rejected" + (f" {act.describe()}" if act is not None else "")


def _open_headline(counts: Counts, rows: list[TrackRow], stale: bool,
                   tick_note: str) -> Headline:
    """The headline of a run still open: stopped, waiting for a person, or going on."""
    if stale:
        return Headline("warn", "The run is open but the scheduler looks stopped",
                        tick_note,
                        "Check the tick workflow's recent runs.")
    gated = [r.track for r in rows if r.track.awaits_approval]
    if gated:
        return _approval_headline(gated)
    return Headline("info", "Run in progress",
                    f"{counts.complete} of {counts.total} tracks complete, "
                    f"{counts.open} still open.")


def _approval_headline(gated: list[Track]) -> Headline:
    """The headline of a run whose tracks wait for a person: who, since when, and the
    command for the first (a leg GitHub holds is reviewed on its run's page)."""
    parts = []
    for track in gated:
        gate, approval = track.current_gate, track.spec.approval
        assert gate is not None and approval is not None
        parts.append(f"{track.name} by {approval.describe()} since {fmt_when(gate.since)}")
    first = gated[0]
    command = (f"orchestrator approve {first.run_id} {first.name} --reason ..."
               if first.phase is TrackPhase.PENDING else "")
    return Headline("warn", "Waiting for approval", "; ".join(parts) + ".",
                    "Approve or reject it:" if command else "", command)


def _tick_note(stale: bool, age: timedelta | None) -> str:
    """What the headline says of a scheduler that stopped ticking (empty when it ticks)."""
    if not stale:
        return ""
    if age is None:
        return "No tick has been recorded."
    return (f"When this brief was rendered, the last tick was {fmt_duration(age)} old: "
            "the scheduler may have stopped.")


def _trouble_headline(counts: Counts, rows: list[TrackRow], tick_note: str) -> Headline:
    """The headline of a run with tracks that need attention or dead letters."""
    n = counts.attention
    title = (f"{n} of {counts.total} track{'s' if counts.total != 1 else ''} "
             f"need{'s' if n == 1 else ''} attention" if n else "Dead letters need review")
    detail = ", ".join(_trouble_parts(counts, rows))
    action, command = _dead_letter_action(counts)
    if tick_note:
        action = f"{action} {tick_note}".strip()
    return Headline("bad", title, detail + ("." if detail else ""), action, command)


def _dead_letter_action(counts: Counts) -> tuple[str, str]:
    """What to do about the run's dead letters, and the command that starts on it: a
    dead item of one queue is requeued by its queue, anything else is listed first."""
    tracks = counts.dead_letters - counts.dead_items
    parts = [f"{tracks} dead track{'s' if tracks != 1 else ''}"] if tracks else []
    if counts.dead_items:
        queues = ", ".join(counts.dead_queues)
        parts.append(f"{counts.dead_items} dead item{'s' if counts.dead_items != 1 else ''}"
                     f" of queue {queues}")
    if not parts:
        return "", ""
    action = (f"{' and '.join(parts)} waiting for a decision: review "
              "(orchestrator dlq list), then requeue or discard.")
    if not tracks and len(counts.dead_queues) == 1:
        return action, f"orchestrator dlq requeue --queue {counts.dead_queues[0]}"
    return action, "orchestrator dlq list"


def _trouble_parts(counts: Counts, rows: list[TrackRow]) -> list[str]:
    """One phrase per kind of trouble: failed, tapped out, skipped."""
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
    if counts.skipped:
        parts.append(f"{counts.skipped} skipped")
    return parts


def _poll_view(poll: Mapping[str, Any]) -> dict[str, Any]:
    at_raw = poll.get("at", "")
    observed = poll.get("observed")
    if isinstance(observed, Mapping):
        observed_text = ", ".join(f"{k}: {as_text(v)}" for k, v in sorted(observed.items()))
    else:
        observed_text = as_text(observed)
    note_list: list[str] = []
    for key in ("notes", "changes"):  # the tick writes what it changed as "changes"
        value = poll.get(key)
        if isinstance(value, list):
            note_list += [as_text(n) for n in value]
        elif value is not None:
            note_list.append(as_text(value))
    shown = {"at", "tick", "executor", "observed", "notes", "changes"}
    extra = {k: v for k, v in poll.items() if k not in shown}
    return {
        "at": parse_utc(at_raw),
        "at_raw": as_text(at_raw),
        "tick": as_text(poll.get("tick")),
        "executor": as_text(poll.get("executor")),
        "observed": observed_text,
        "notes": note_list,
        "extra": ", ".join(f"{k}={as_text(v)}" for k, v in sorted(extra.items())),
    }


def _link(run_id: str, track: Track) -> tuple[str | None, str, str | None]:
    """(link, its label, command) of a track's row: a GitHub leg links its job's page
    (or its workflow run's, before a tick saw the job); a local attempt names the
    ``orchestrator logs`` command instead of a ``file://`` folder."""
    url = safe_url(track.url)
    if in_work_folder(track) or (url and url.startswith("file:")):
        return None, "", f"orchestrator logs {run_id} {track.name}"
    if not url:
        return None, "", None
    if not url.startswith(("http://", "https://")):
        return url, "log", None
    return url, "job" if "/job/" in url else "CI run", None


def _duration(now: datetime, last: Attempt | None) -> str:
    """The last attempt's run time; while it is open, the time so far, marked as such."""
    if last is None:
        return fmt_duration(None)
    begin = last.started or last.dispatched
    if last.open and begin:
        return fmt_duration(now - begin) + "…"
    return fmt_duration(last.run_time) + ("…" if last.open else "")


def _duration_title(attempts: list[Attempt]) -> str:
    if len(attempts) <= 1:
        return "time from start to finish"
    total = sum((a.run_time for a in attempts if a.run_time), timedelta())
    return f"{fmt_duration(total)} over {len(attempts)} attempts"


def _row(ctx: BriefContext, track: Track, attempts: list[Attempt]) -> TrackRow:
    url, link_label, command = _link(ctx.run.run_id, track)
    used = max(track.attempt, len(attempts))
    return TrackRow(
        track=track, phase=track.phase.value,
        phase_label="waiting for approval" if track.awaits_approval else PHASE_LABELS[track.phase],
        attempts=attempts, attempts_label=f"{used}/{max(track.max_attempts, used)}",
        duration=_duration(ctx.generated_at, attempts[-1] if attempts else None),
        duration_title=_duration_title(attempts),
        summary=as_text((track.result or {}).get("summary")), url=url,
        link_label=link_label, errors=list(track.error_log),
        tail=ctx.tails.get(track.name, ""), command=command)


def _counts(ctx: BriefContext, drains: list[DrainView]) -> Counts:
    phases = [t.phase for t in ctx.tracks]
    items, queues = _dead_items(drains)
    return Counts(
        total=len(phases),
        complete=phases.count(TrackPhase.COMPLETE),
        failed=phases.count(TrackPhase.FAILED),
        tapped_out=phases.count(TrackPhase.TAPPED_OUT),
        cancelled=phases.count(TrackPhase.CANCELLED),
        skipped=phases.count(TrackPhase.SKIPPED),
        open=sum(1 for p in phases if p in TRACK_OPEN),
        dead_letters=sum(1 for d in ctx.dead_letters if not d.discarded) + items,
        dead_items=items,
        dead_queues=queues,
    )


def _dead_items(drains: list[DrainView]) -> tuple[int, tuple[str, ...]]:
    """How many items the run's drains left dead, and of which queues."""
    dead = [d for d in drains if d.dead]
    return sum(d.dead for d in dead), tuple(sorted({d.queue for d in dead}))


def _described(ctx: BriefContext) -> tuple[str, str | None, str]:
    """The run's description, cron line and time zone, each falling back to its
    schedule's when the run did not record one."""
    run, schedule = ctx.run, ctx.schedule
    if schedule is None:
        return run.description or "", run.cron, run.timezone or "UTC"
    return (run.description or schedule.description, run.cron or schedule.cron,
            run.timezone or schedule.timezone)


def _slot_local(slot: datetime, timezone: str) -> str:
    """The slot in the schedule's own zone (empty for UTC, which the slot shows)."""
    return "" if timezone == "UTC" else f"{slot.astimezone(zone(timezone)):%Y-%m-%d %H:%M %Z}"


def _late_by(slot: datetime, started: datetime | None) -> timedelta | None:
    return started - slot if started and started > slot else None


def _errors(rows: list[TrackRow]) -> list[tuple[str, str, list[str]]]:
    ordered = sorted(rows, key=lambda r: (PHASE_ORDER[r.track.phase], r.track.name))
    return [(r.track.name, r.phase_label, r.errors) for r in ordered if r.errors]


def _is_consolidation(track: Track) -> bool:
    return (track.name == CONSOLIDATE and track.spec.when is When.ALWAYS
            and bool(track.spec.needs))


def _consolidation(rows: list[TrackRow]) -> TrackRow | None:
    """The row of the schedule's consolidate step: it heads the brief, since its outcome
    is the run's answer."""
    return next((r for r in rows if _is_consolidation(r.track)), None)


def _tick_age(ctx: BriefContext) -> tuple[timedelta | None, bool]:
    """How old the last tick was when the brief was rendered, and whether that is stale
    (no tick at all is)."""
    age = ctx.generated_at - ctx.last_tick if ctx.last_tick else None
    return age, age is None or age > ctx.stale_after


def _notes(cron: str | None, cron_words: str | None) -> list[str]:
    return ["cron shown as written"] if cron and cron_words is None else []


def _attention_first(tracks: list[Track], rows: list[TrackRow]) -> list[TrackRow]:
    """``rows`` by :data:`PHASE_ORDER`, each phase in the order of the run's tracks."""
    position = {t.name: i for i, t in enumerate(tracks)}
    return sorted(rows, key=lambda r: (PHASE_ORDER[r.track.phase], position[r.track.name]))


def _poll_columns(polls: list[dict[str, Any]]) -> list[str]:
    return [c for c in POLL_COLUMNS if any(p[c] for p in polls)]


def build_view(ctx: BriefContext) -> BriefView:
    """Derive everything the brief shows from ``ctx`` (pure)."""
    run = ctx.run
    attempts = {t.name: attempts_of(t) for t in ctx.tracks}
    rows = [_row(ctx, track, attempts[track.name]) for track in ctx.tracks]
    drains = drain_views(list(ctx.tracks))
    counts = _counts(ctx, drains)
    age, stale = _tick_age(ctx)
    every = [a for al in attempts.values() for a in al]
    started = run_started(run, every)
    finished = run_finished(run, every)
    duration = (finished or ctx.generated_at) - started if started else None
    description, cron, timezone = _described(ctx)
    cron_words = describe_cron(cron)
    polls = [_poll_view(p) for p in ctx.polls]
    return BriefView(
        status=run.status.value,
        counts=counts,
        headline=_headline(ctx, counts, rows, stale, age),
        rows=_attention_first(ctx.tracks, rows),
        timeline=layout(ctx, attempts),
        schedule_id=run.schedule_id,
        description=description,
        cron=cron,
        cron_words=cron_words,
        timezone=timezone,
        slot_local=_slot_local(run.slot, timezone),
        started=started,
        finished=finished,
        late_by=_late_by(run.slot, started),
        duration=duration,
        duration_is_partial=finished is None,
        last_tick_age=age,
        stale=stale,
        stale_after=ctx.stale_after,
        errors=_errors(rows),
        polls=polls,
        poll_columns=_poll_columns(polls),
        notes=_notes(cron, cron_words),
        consolidation=_consolidation(rows),
        drains=drains,
        causes=causes(run, ctx.downstream, ctx.schedule),
        acts=run.acts(),
        tails_left_out=ctx.tails_left_out,
        run_id=run.run_id,
    )
