"""The dashboard at the top of ``state/index.html``: what needs attention, then every
schedule with its next slots, its last runs, their success rate and duration trend.

- :func:`build` is pure: the schedules, the parsed state, the last tick's instant, the
  runs to draw and ``now`` are passed in; nothing reads the clock or the branch.
- What needs attention is the status report's (:func:`orchestrator.runs.status.attention`),
  so the page and ``orchestrator status`` name the same items.
- Everything shown is capped (:data:`SCHEDULES_SHOWN`, :data:`STRIP_RUNS`,
  :data:`ATTENTION_SHOWN`): a branch of 10,000 runs and 1,000 schedules renders a
  page of bounded size from a bounded number of records.
- Links are relative to ``state/index.html`` (``runs/<id>/brief.html``), so they work
  from a file and from GitHub Pages alike.
- Every instant on the page has one format, :func:`~.text.fmt_when`'s (whole seconds,
  UTC), whatever the report's text carries.
- Dead letters are grouped by schedule or queue with their count, the keys folded
  inside: many of them never push the rest of the page off a phone's first screen.
- The queue section reads the queues' summaries only (:mod:`.queueboard`).
- The cron lateness section reads the lateness ledger alone (:mod:`.lateboard`).
- A card names the schedules it fires after and those that fire after it, each
  linked to its card (``#schedule-<id>``) when that card is drawn.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ..config.chains import downstreams
from ..config.models import Schedule, ScheduleSpec
from ..runs import status
from ..state import layout
from ..state import model as state_model
from ..state.machine import RUN_TERMINAL
from ..state.phases import RunStatus
from ..state.queue import describe as describe_queue
from ..state.records import Run
from ..support.times import parse_utc
from . import lateboard, queueboard
from .attempts import run_finished, run_started
from .text import fmt_duration, fmt_when, zone

SCHEDULES_SHOWN = 100
"""Schedules drawn on the page, those needing attention first (``status`` lists all)."""
STRIP_RUNS = 20
"""Newest runs per schedule in its strip, its success rate and its trend."""
ATTENTION_SHOWN = 50
"""Items of the attention list drawn (the rest counted, ``status`` lists them)."""
NEXT_SLOTS = 3
SPARK_WIDTH, SPARK_HEIGHT = 120, 24
INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
"""An ISO 8601 instant in the report's text, redrawn in the page's format."""


@dataclass(frozen=True)
class Outcome:
    """One run of a strip."""

    run_id: str
    status: str
    slot: datetime
    duration: timedelta | None
    href: str | None
    """Its brief, relative to the page (finished runs only)."""


@dataclass(frozen=True)
class ChainLink:
    """A schedule chained to a card's by ``after``, and its card on the page."""

    id: str
    href: str | None
    """``#schedule-<id>``, or ``None`` when its card is not drawn."""


@dataclass(frozen=True)
class Card:
    """One schedule as the dashboard draws it."""

    id: str
    when: str
    """Its ``cron`` (or its one ``at``) and zone."""
    state: str
    """``active``, ``paused``, ``disabled``, ``ended`` or ``invalid``."""
    note: str
    """Why (who paused it and why, when it ended, the file's error); may be empty."""
    next_slots: tuple[str, ...]
    """Its next slots in its own zone, as local times with the zone's abbreviation."""
    strip: tuple[Outcome, ...]
    """Its newest runs, oldest first (read left to right)."""
    success: str
    """``18 of 20 finished runs succeeded (90%)``, or empty with no finished run."""
    trend: str
    """Median duration of the newer half against the older half, or empty."""
    spark: str
    """SVG polyline points of the finished runs' durations, oldest first, or empty."""
    attention: bool
    upstreams: tuple[ChainLink, ...] = ()
    """The schedules it fires after (its ``after``)."""
    downstreams: tuple[ChainLink, ...] = ()
    """The schedules that fire after it."""


@dataclass(frozen=True)
class DeadGroup:
    """The dead letters of one schedule (tracks) or one work queue (items) waiting."""

    kind: str
    """``schedule`` or ``queue``."""
    name: str
    count: int
    """All of them waiting, listed or not."""
    items: tuple[dict[str, str], ...]
    """The attention items naming them (the report lists the first few of all)."""
    command: str
    """The ``dlq requeue`` of every one (it asks first, with the count)."""


@dataclass(frozen=True)
class Dashboard:
    attention: tuple[dict[str, str], ...]
    attention_more: int
    cards: tuple[Card, ...]
    cards_more: int
    open_runs: tuple[dict[str, Any], ...]
    last_tick: str | None
    """In the page's format (:func:`~.text.fmt_when`)."""
    dead_groups: tuple[DeadGroup, ...]
    """Drawn in place of the attention list's dead letters, most first."""
    queues: tuple[queueboard.QueueRow, ...]
    queues_more: int
    stale: bool
    caps: tuple[int, int, int]
    """:data:`SCHEDULES_SHOWN`, :data:`STRIP_RUNS`, :data:`ATTENTION_SHOWN`, as the
    page states them."""
    lateness: lateboard.LateBoard | None = None
    """GitHub's cron lateness per week (:mod:`.lateboard`); none without a sample."""


History = Callable[[Sequence[str]], Mapping[str, Sequence[Run]]]
"""Schedule ids -> each one's newest runs, newest first (on a branch:
:func:`orchestrator.state.history.schedule_history`). Asked only for the schedules shown."""


def build(schedules: Sequence[Schedule], invalid: Sequence[str], state: state_model.State,
          last_tick: datetime | None, history: History, now: datetime,
          max_staleness: timedelta = timedelta(minutes=status.DEFAULT_MAX_STALENESS)
          ) -> Dashboard:
    """The dashboard of ``schedules`` (valid) and ``invalid`` (one line per bad file),
    on ``state`` as it stands after the tick's commit (or as read)."""
    report = status.from_state(state, last_tick, list(schedules), list(invalid), now,
                               max_staleness)
    items = [_page_item(i) for i in report["attention"]]
    needs = {i["subject"] for i in items}
    cards = [_card(s, row, s.id in needs)
             for s, row in zip(schedules, report["schedules"], strict=True)]
    cards += _invalid_cards(invalid)
    cards.sort(key=lambda c: (not c.attention, c.id))
    by_id = {s.id: s for s in schedules}
    shown = cards[:SCHEDULES_SHOWN]
    runs = history([c.id for c in shown if c.state != "invalid"])
    shown = [_shown(c, by_id.get(c.id) if c.state != "invalid" else None, state,
                    runs.get(c.id, ()), now) for c in shown]
    shown = _chained(shown, schedules)
    return Dashboard(
        attention=tuple(items[:ATTENTION_SHOWN]),
        attention_more=max(0, len(items) - ATTENTION_SHOWN),
        cards=tuple(shown),
        cards_more=max(0, len(cards) - SCHEDULES_SHOWN),
        open_runs=tuple(report["open_runs"]),
        last_tick=page_times(report["last_tick"]) if report["last_tick"] else None,
        stale=report["stale"], dead_groups=_dead_groups(state, items),
        queues=queueboard.rows(state.queues, now),
        queues_more=max(0, len(state.queues) - queueboard.QUEUES_SHOWN),
        caps=(SCHEDULES_SHOWN, STRIP_RUNS, ATTENTION_SHOWN))


def page_times(text: str) -> str:
    """``text`` with every ISO 8601 instant in the page's format."""
    return INSTANT.sub(_redraw, text)


def _redraw(match: re.Match[str]) -> str:
    moment = parse_utc(match.group(0))
    return fmt_when(moment) if moment is not None else match.group(0)


def _page_item(item: Mapping[str, str]) -> dict[str, str]:
    return {**item, "text": page_times(item["text"])}


def _dead_groups(state: state_model.State, items: Sequence[Mapping[str, str]]
                 ) -> tuple[DeadGroup, ...]:
    """The dead letters waiting, by schedule and by queue, most first, each with the
    attention items that name one of them."""
    counts: Counter[tuple[str, str]] = Counter(
        ("schedule", _schedule_of(d.run_id)) for d in state.dlq.values() if not d.discarded)
    for name, book in state.queues.items():
        counts[("queue", name)] += describe_queue(book)["dead"]
    listed: dict[tuple[str, str], list[dict[str, str]]] = {}
    for item in items:
        if item["kind"] == "dead_letter" and item["subject"] != "more":
            listed.setdefault(_group_of(state, item["subject"]), []).append(dict(item))
    ranked = sorted((-n, group) for group, n in counts.items() if n > 0)
    return tuple(DeadGroup(kind=kind, name=name, count=-n,
                           items=tuple(listed.get((kind, name), ())),
                           command=f"orchestrator dlq requeue --{kind} {name}")
                 for n, (kind, name) in ranked[:ATTENTION_SHOWN])


def _group_of(state: state_model.State, key: str) -> tuple[str, str]:
    """The group of a dead letter's key: ``<queue>/<item>`` or a track's ``<run>--<track>``."""
    letter = state.dlq.get(key)
    if letter is not None:
        return "schedule", _schedule_of(letter.run_id)
    return "queue", key.partition("/")[0]


def _schedule_of(run_id: str) -> str:
    """A run id is ``<schedule>--<slot>``."""
    return run_id.rpartition("--")[0]


def _when(spec: ScheduleSpec) -> str:
    """The cron as written, a one-shot's instant, or the runs it fires after."""
    if spec.cron:
        return f"{spec.cron} ({spec.timezone})"
    if spec.at:
        return f"at {spec.at} ({spec.timezone})"
    from ..config.triggers import for_spec

    return for_spec(spec).describe()


def _card(schedule: Schedule, row: Mapping[str, Any], attention: bool) -> Card:
    spec = schedule.spec
    state_name, note = _state(row)
    return Card(id=schedule.id, when=_when(spec),
                state=state_name, note=note, next_slots=(), strip=(), success="", trend="",
                spark="", attention=attention)


def _shown(card: Card, schedule: Schedule | None, state: state_model.State,
           runs: Sequence[Run], now: datetime) -> Card:
    """``card`` with what only a card on the page needs: its next slots and its runs."""
    if schedule is None:  # an invalid file
        return card
    tz = zone(schedule.spec.timezone)
    slots = status.next_slots(schedule, state, now, NEXT_SLOTS)
    strip = tuple(_outcome(r) for r in reversed(list(runs)[:STRIP_RUNS]))
    return replace(card, strip=strip, success=_success(strip), trend=_trend(strip),
                   spark=_spark(strip),
                   next_slots=tuple(f"{s.astimezone(tz):%a %Y-%m-%d %H:%M %Z}" for s in slots))


def _chained(cards: list[Card], schedules: Sequence[Schedule]) -> list[Card]:
    """``cards`` with their ``after`` chains: the schedules each fires after, and those
    that fire after it, linked to their cards when these are drawn."""
    ups = {s.id: [a.schedule for a in s.spec.upstreams] for s in schedules}
    downs = downstreams(ups)
    drawn = {c.id for c in cards if c.state != "invalid"}

    def links(ids: Sequence[str]) -> tuple[ChainLink, ...]:
        return tuple(ChainLink(i, f"#schedule-{i}" if i in drawn else None) for i in ids)

    return [replace(c, upstreams=links(ups.get(c.id, [])), downstreams=links(downs.get(c.id, [])))
            if c.state != "invalid" else c for c in cards]


def _state(row: Mapping[str, Any]) -> tuple[str, str]:
    if row["paused"]:
        p = row["paused"]
        return "paused", f"since {page_times(p['at'])} by {p['by']}: {p['reason']}"
    if not row["enabled"]:
        return "disabled", "enabled is false in its file"
    if row["ended"]:
        return "ended", f"at {page_times(row['ended'])} (its end_at)"
    return "active", ""


def _invalid_cards(lines: Sequence[str]) -> list[Card]:
    """One card per invalid file, named by its path, with its errors (one line each
    in ``lines``, ``<file>: <error>``)."""
    problems: dict[str, list[str]] = {}
    for line in lines:
        where, _, problem = line.partition(": ")
        problems.setdefault(where, []).append(problem or line)
    return [Card(id=where, when="-", state="invalid", note="; ".join(found), next_slots=(),
                 strip=(), success="", trend="", spark="", attention=True)
            for where, found in problems.items()]


def _outcome(run: Run) -> Outcome:
    started = run_started(run, [])
    finished = run_finished(run)
    done = run.status in RUN_TERMINAL
    return Outcome(run_id=run.run_id, status=run.status.value, slot=run.slot,
                   duration=finished - started if started and finished else None,
                   href=f"runs/{run.run_id}/brief.html" if done else None)


def _finished(strip: Sequence[Outcome]) -> list[Outcome]:
    terminal = {s.value for s in RUN_TERMINAL}
    return [o for o in strip if o.status in terminal]


def _success(strip: Sequence[Outcome]) -> str:
    """The success rate of the finished runs. A cancelled run is neither a success nor a
    failure: it is left out of the rate and counted beside it."""
    finished = _finished(strip)
    cancelled = sum(1 for o in finished if o.status == RunStatus.CANCELLED.value)
    done = [o for o in finished if o.status != RunStatus.CANCELLED.value]
    aside = f"; {cancelled} cancelled, not counted" if cancelled else ""
    if not done:
        return f"no run succeeded or failed{aside}" if cancelled else ""
    good = sum(1 for o in done if o.status == RunStatus.COMPLETED.value)
    return (f"{good} of {len(done)} finished runs succeeded "
            f"({round(100 * good / len(done))}%){aside}")


def _trend(strip: Sequence[Outcome]) -> str:
    """The median duration of the newer half of the finished runs against the older
    half's: a slowdown shows before it times out. Under a second either way, the change
    is noise and no percentage is given."""
    durations = [o.duration for o in _finished(strip) if o.duration is not None]
    if len(durations) < 2:
        return f"took {fmt_duration(durations[0])}" if durations else ""
    half = len(durations) // 2
    older = statistics.median(d.total_seconds() for d in durations[:half])
    newer = statistics.median(d.total_seconds() for d in durations[half:])
    change = "" if min(older, newer) < 1 else f" ({(newer - older) / older:+.0%})"
    return (f"median {fmt_duration(timedelta(seconds=newer))} lately, "
            f"{fmt_duration(timedelta(seconds=older))} before{change}")


def _spark(strip: Sequence[Outcome]) -> str:
    """The ``points`` of an SVG polyline of the durations, oldest left, longest top."""
    seconds = [o.duration.total_seconds() for o in _finished(strip) if o.duration is not None]
    if len(seconds) < 2:
        return ""
    top = max(seconds) or 1.0
    step = SPARK_WIDTH / (len(seconds) - 1)
    return " ".join(f"{i * step:.1f},{SPARK_HEIGHT - 2 - (s / top) * (SPARK_HEIGHT - 4):.1f}"
                    for i, s in enumerate(seconds))


def from_files(files: Mapping[str, bytes], schedules: Sequence[Schedule],
               invalid: Sequence[str], now: datetime, *,
               state: state_model.State | None = None,
               last_tick: datetime | None = None,
               max_staleness: timedelta | None = None, tick_lines: Sequence[str] = (),
               max_lateness_minutes: float | None = None) -> Dashboard:
    """The dashboard of the branch ``files``: its state read through the index of open
    runs (or ``state``, the one a writer is about to commit, with ``last_tick``), and
    the strips' runs read from the run folders, only for the schedules shown.
    ``max_staleness``: the limit ``status`` judges the repository by (default: its
    default). The cron lateness counts drops of ``tick_lines`` (tick.yml's), and
    ``max_lateness_minutes`` (orchestrator.json's) is the tolerance of a schedule
    that names none."""
    from ..state import codec
    from ..state import index as state_index
    from ..state.history import schedule_history

    if state is None:
        state = state_index.load(files).state
        last_tick = codec.heartbeat_at(files)
    also = dict(state.runs)

    def history(ids: Sequence[str]) -> Mapping[str, Sequence[Run]]:
        return schedule_history(files, ids, also, STRIP_RUNS)

    board = build(schedules, invalid, state, last_tick, history, now,
                  max_staleness or timedelta(minutes=status.DEFAULT_MAX_STALENESS))
    needs = {s.id: s.spec.max_lateness_minutes or max_lateness_minutes for s in schedules}
    return replace(board, lateness=lateboard.section(
        files.get(layout.LATENESS), tick_lines, needs, now))
