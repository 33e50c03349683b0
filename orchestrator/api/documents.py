"""The API's documents built from parsed state (pure): path -> model.

- Paths are relative to the site's root, and so is every ``href``; a name becomes a
  path only through :func:`schedule_file`, :func:`run_file` or :func:`queue_file`,
  which refuse anything that is not an id.
- Track output is what the brief shows: a result's ``summary`` and the newest error
  lines, each cut (:data:`CELL`, :data:`ERROR_LINES`); nothing else of ``result``.
- No file is over :data:`FILE_LIMIT`: a run of many tracks keeps less of each.
- Every list that grows with the history is capped; the rest is reached by pages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..brief.attempts import run_finished, run_started
from ..brief.cuts import CELL, ERROR_LINES
from ..brief.text import as_text, safe_url
from ..config.fieldtypes import check_id, check_run_id
from ..config.models import Schedule
from ..runs import status
from ..runs.views import run_detail, run_row
from ..state import model as state_model
from ..state.layout import check_queue
from ..state.machine import RUN_TERMINAL
from ..state.phases import RunStatus
from ..state.queue import QueueBook
from ..state.queue import describe as describe_queue
from ..state.records import DeadLetter, Run, Track
from ..support.times import iso
from . import models as m

ROOT = "api/v1"
INDEX_SLOTS, SCHEDULE_SLOTS = 3, 20
RATE_RUNS = 30
"""Newest finished runs the success rate counts."""
SCHEDULE_RUNS = 50
TRACKS_PER_RUN = 20
"""Tracks listed per run in a schedule's file (its run's file lists them all)."""
DEAD_LETTERS = 100
PAGE_RUNS = 100
THROUGHPUT_DAYS = 30
HISTORY = 50
"""Newest state transitions kept of a run or a track in its file."""


def schedule_file(schedule_id: str) -> str:
    return f"{ROOT}/schedules/{check_id(schedule_id, 'schedule id')}.json"


def run_file(run_id: str) -> str:
    return f"{ROOT}/runs/{check_run_id(run_id)}.json"


def queue_file(queue: str) -> str:
    return f"{ROOT}/queues/{check_queue(queue)}.json"


def page_file(page: int) -> str:
    return f"{ROOT}/runs/page-{int(page)}.json"


def badge_file(schedule_id: str) -> str:
    return f"badges/{check_id(schedule_id, 'schedule id')}.svg"


@dataclass(frozen=True)
class Inputs:
    """What the API is built from: the state with every run's tracks, the schedules,
    the queues, the last tick and the instant to judge by."""

    state: state_model.State
    schedules: Sequence[Schedule]
    invalid: Sequence[str]
    queues: Mapping[str, QueueBook]
    now: datetime
    last_tick: datetime | None
    max_staleness: timedelta
    cron_lateness: Mapping[str, Any] | None = None
    """The ledger's figures (:func:`orchestrator.cadence.lateness.report`), if any."""

    def report(self) -> dict[str, Any]:
        return status.from_state(self.state, self.last_tick, list(self.schedules),
                                 list(self.invalid), self.now, self.max_staleness)

    def runs_of(self) -> dict[str, list[Run]]:
        """Schedule id -> its runs, newest slot first."""
        found: dict[str, list[Run]] = {}
        for run in newest_first(self.state.runs.values()):
            found.setdefault(run.schedule_id, []).append(run)
        return found


def newest_first(runs: Iterable[Run]) -> list[Run]:
    return sorted(runs, key=lambda r: (r.slot, r.run_id), reverse=True)


def _iso(moment: datetime | None) -> str | None:
    return iso(moment) if moment is not None else None


def _cut(value: Any, limit: int) -> str | None:
    """``value`` as the brief shows it (:func:`as_text`), cut to ``limit`` characters."""
    if value is None:
        return None
    text = as_text(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- index


def state_of(row: Mapping[str, Any]) -> str:
    """A schedule's state from its ``status`` row: held, paused, disabled, ended, active."""
    for name, held in (("held", row["held"]), ("paused", row["paused"]),
                       ("disabled", not row["enabled"]), ("ended", row["ended"])):
        if held:
            return name
    return "active"


def success(runs: Sequence[Run]) -> m.SuccessRate:
    done = [r.status for r in runs if r.status in RUN_TERMINAL][:RATE_RUNS]
    good = done.count(RunStatus.COMPLETED)
    bad = done.count(RunStatus.FAILED)
    return m.SuccessRate(runs=len(done), succeeded=good, failed=bad,
                         cancelled=done.count(RunStatus.CANCELLED),
                         rate=round(good / (good + bad), 4) if good + bad else None)


def last_run(run: Run) -> m.LastRun:
    return m.LastRun(run_id=run.run_id, status=run.status.value, slot=iso(run.slot),
                     started_at=_iso(run_started(run, [])),
                     finished_at=_iso(run_finished(run)), href=run_file(run.run_id))


def _entry(schedule: Schedule, row: Mapping[str, Any], runs: Sequence[Run],
           inputs: Inputs) -> m.ScheduleEntry:
    slots = [] if row["held"] else status.next_slots(schedule, inputs.state, inputs.now,
                                                     INDEX_SLOTS)
    return m.ScheduleEntry(
        id=schedule.id, state=state_of(row), next_slots=[iso(s) for s in slots],
        last_run=last_run(runs[0]) if runs else None, success=success(runs),
        failures_in_a_row=row["failures_in_a_row"], href=schedule_file(schedule.id),
        badge=badge_file(schedule.id))


def _lateness(found: Mapping[str, Any] | None) -> m.Lateness | None:
    if not found or not found["samples"]:
        return None  # known only once a scheduled tick left a sample
    return m.Lateness(**{k: found[k] for k in m.Lateness.model_fields})


def index(inputs: Inputs, report: Mapping[str, Any], runs_of: Mapping[str, list[Run]]
          ) -> m.Index:
    rows = {row["id"]: row for row in report["schedules"]}
    total = len(inputs.state.runs)
    pages = pages_of(total)
    return m.Index(
        schema_url=m.schema_url("index"), generated_at=iso(inputs.now),
        heartbeat=m.Heartbeat(last_tick=report["last_tick"], age_minutes=report["age_minutes"],
                              max_staleness_minutes=report["max_staleness_minutes"],
                              stale=report["stale"]),
        cron_lateness=_lateness(inputs.cron_lateness),
        schedules=[_entry(s, rows[s.id], runs_of.get(s.id, []), inputs)
                   for s in inputs.schedules],
        invalid_schedules=list(inputs.invalid),
        runs=m.RunsLink(total=total, pages=pages,
                        newest_page=page_file(pages) if pages else None),
        queues=f"{ROOT}/queues.json")


# --------------------------------------------------------------------------- a schedule


def track_summary(track: Track) -> m.TrackSummary:
    return m.TrackSummary(phase=track.phase.value, attempt=track.attempt,
                          summary=_cut((track.result or {}).get("summary"), CELL[1]),
                          url=safe_url(track.url))


def run_entry(run: Run, tracks: Mapping[str, Track]) -> m.RunEntry:
    shown = sorted(tracks)[:TRACKS_PER_RUN]
    return m.RunEntry(
        run_id=run.run_id, status=run.status.value, slot=iso(run.slot),
        started_at=_iso(run_started(run, [])), finished_at=_iso(run_finished(run)),
        origin=run.origin, href=run_file(run.run_id),
        tracks={name: track_summary(tracks[name]) for name in shown},
        tracks_left_out=len(tracks) - len(shown))


def letter_entry(letter: DeadLetter) -> m.DeadLetterEntry:
    return m.DeadLetterEntry(key=letter.key, run_id=letter.run_id, track=letter.track,
                             reason=_cut(letter.reason, CELL[0]) or "",
                             parked_at=iso(letter.parked_at), attempts=letter.attempts,
                             discarded=letter.discarded)


@dataclass(frozen=True)
class ScheduleView:
    """What a schedule's file is built from: its state and next slots as of the instant,
    its runs and dead letters, newest first (all of them: the file keeps the newest)."""

    schedule: Schedule
    state: str
    slots: Sequence[str]
    runs: Sequence[Run]
    letters: Sequence[DeadLetter]


def schedule_view(schedule: Schedule, row: Mapping[str, Any], runs: Sequence[Run],
                  inputs: Inputs) -> ScheduleView:
    slots = [] if row["held"] else status.next_slots(schedule, inputs.state, inputs.now,
                                                     SCHEDULE_SLOTS)
    letters = sorted((d for d in inputs.state.dlq.values()
                      if d.run_id.rpartition("--")[0] == schedule.id),
                     key=lambda d: (d.parked_at, d.key), reverse=True)
    return ScheduleView(schedule, state_of(row), [iso(s) for s in slots], runs, letters)


def schedule_doc(view: ScheduleView, tracks: Mapping[str, Mapping[str, Track]]
                 ) -> m.ScheduleDoc:
    return m.ScheduleDoc(
        schema_url=m.schema_url("schedule"), id=view.schedule.id, state=view.state,
        definition=view.schedule.spec.model_dump(mode="json", by_alias=True),
        next_slots=list(view.slots),
        runs=[run_entry(r, tracks.get(r.run_id, {})) for r in view.runs[:SCHEDULE_RUNS]],
        runs_total=len(view.runs),
        dead_letters=[letter_entry(d) for d in view.letters[:DEAD_LETTERS]],
        dead_letters_total=len(view.letters))


# --------------------------------------------------------------------------- a run


DETAIL = ("full", "short", "summary")
"""How much of each track a run's file keeps, the first that fits in :data:`FILE_LIMIT`:
what the brief shows; one cut error line and no history; the schedule file's summary."""
FILE_LIMIT = 1024 * 1024


def _track_doc(track: Track, detail: str) -> dict[str, Any]:
    """A track as ``runs show --json`` gives it, with what the brief would not show cut:
    of ``result`` only its summary, the newest error lines, the newest transitions. Its
    spec is the schedule's (in the schedule's file)."""
    if detail == "summary":
        return track_summary(track).model_dump(mode="json")
    cell, lines, history = (CELL[0], ERROR_LINES[0], HISTORY) if detail == "full" else (
        CELL[1], 1, 0)
    data = dict(track.model_dump(mode="json", by_alias=True))
    del data["spec"]
    summary = _cut((track.result or {}).get("summary"), cell)
    data["result"] = {"summary": summary} if summary is not None else None
    data["error_log"] = [_cut(line, cell) for line in track.error_log[-lines:]]
    data["state_history"] = data.get("state_history", [])[-history:] if history else []
    data["url"] = safe_url(track.url)
    return data


def run_doc(run: Run, tracks: Mapping[str, Track], detail: str = "full") -> m.RunDoc:
    data = run_detail(run, {})["run"]
    data["state_history"] = data.get("state_history", [])[-HISTORY:]
    urls = sorted({u for t in tracks.values() if (u := safe_url(t.url))})
    brief = f"runs/{run.run_id}/brief.html" if run.status in RUN_TERMINAL else None
    return m.RunDoc(schema_url=m.schema_url("run"), run=data, detail=detail,
                    tracks={name: _track_doc(t, detail) for name, t in sorted(tracks.items())},
                    links=m.RunLinks(brief=brief, schedule=schedule_file(run.schedule_id),
                                     ci=urls))


def fitted_run_doc(run: Run, tracks: Mapping[str, Track]) -> m.RunDoc:
    """:func:`run_doc` at the first :data:`DETAIL` whose JSON fits in :data:`FILE_LIMIT`."""
    for detail in DETAIL:
        doc = run_doc(run, tracks, detail)
        if len(doc.model_dump_json(by_alias=True)) <= FILE_LIMIT:
            break
    return doc


# --------------------------------------------------------------------------- pages of runs


def pages_of(total: int) -> int:
    return -(-total // PAGE_RUNS)


@dataclass(frozen=True)
class Page:
    """A page of runs before it is built: its number, whether a newer page follows, and
    its runs, newest first."""

    page: int
    newer: bool
    runs: Sequence[Run]


def pages(inputs: Inputs) -> dict[str, Page]:
    """Every run in pages of :data:`PAGE_RUNS`, page 1 the oldest, rows newest first."""
    oldest = list(reversed(newest_first(inputs.state.runs.values())))
    count = pages_of(len(oldest))
    return {page_file(n): Page(n, n < count,
                               oldest[(n - 1) * PAGE_RUNS: n * PAGE_RUNS][::-1])
            for n in range(1, count + 1)}


def page_doc(page: Page, tracks: Mapping[str, Mapping[str, Track]]) -> m.RunsPage:
    """A page's file: nothing in it depends on the instant or on the other pages, so a
    new run changes only the newest page (and the one before when it starts a page)."""
    rows = [m.RunRow(**run_row(r, tracks.get(r.run_id, {})), href=run_file(r.run_id))
            for r in page.runs]
    return m.RunsPage(schema_url=m.schema_url("runs-page"), page=page.page, runs=rows,
                      older=page_file(page.page - 1) if page.page > 1 else None,
                      newer=page_file(page.page + 1) if page.newer else None)


# --------------------------------------------------------------------------- queues


def _queue_numbers(book: QueueBook) -> dict[str, Any]:
    described = describe_queue(book)
    return {"queue": book.name, "counts": described["counts"],
            "backlog": described["backlog"],
            "in_flight": sum(described["claimed_by"].values()), "dead": described["dead"]}


def throughput(book: QueueBook) -> dict[str, int]:
    """UTC day -> items done, from the done chunks' names (``YYYYMMDD-n``)."""
    days: dict[str, int] = {}
    for chunk, n in book.done.items():
        day = f"{chunk[:4]}-{chunk[4:6]}-{chunk[6:8]}"
        days[day] = days.get(day, 0) + n
    return dict(sorted(days.items())[-THROUGHPUT_DAYS:])


def queue_docs(inputs: Inputs) -> dict[str, m.Document]:
    books = [inputs.queues[name] for name in sorted(inputs.queues)]
    found: dict[str, m.Document] = {f"{ROOT}/queues.json": m.QueuesDoc(
        schema_url=m.schema_url("queues"), generated_at=iso(inputs.now),
        queues=[m.QueueEntry(**_queue_numbers(b), href=queue_file(b.name)) for b in books])}
    for book in books:
        found[queue_file(book.name)] = m.QueueDoc(
            schema_url=m.schema_url("queue"), **_queue_numbers(book),
            claimed_by=describe_queue(book)["claimed_by"], throughput_per_day=throughput(book))
    return found


# --------------------------------------------------------------------------- the whole


def summaries(inputs: Inputs) -> tuple[dict[str, m.Document], dict[str, ScheduleView]]:
    """The index and the queues' files; and what each schedule's file is built from."""
    report = inputs.report()
    runs_of = inputs.runs_of()
    rows = {row["id"]: row for row in report["schedules"]}
    found: dict[str, m.Document] = {f"{ROOT}/index.json": index(inputs, report, runs_of)}
    found.update(queue_docs(inputs))
    views = {schedule_file(s.id): schedule_view(s, rows[s.id], runs_of.get(s.id, []), inputs)
             for s in inputs.schedules}
    return found, views
