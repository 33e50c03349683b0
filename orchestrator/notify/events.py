"""The events: what a tick decided, said once, in one stable JSON shape.

- :func:`derive` compares the state before a tick's decision with the state after it
  (the planner's and the consolidation's): a run that became ``failed``, a dead letter
  parked, a queue item gone dead, a runner label gone degraded. It reads no log line
  and no clock.
- ``cron_late`` is the one event not of a transition: the tick hands :func:`derive`
  the ledger's verdict (:class:`CronLate`), and it is told once per episode.
- Queue items dead in one decision are one event each, up to :data:`GROUP_ABOVE` per
  queue; more are one event for the queue, so a bad deploy that kills 500 items sends
  one message, not 500.
- The compare-and-swap makes a transition land once, so each event is derived by the
  one tick whose commit lands (a tick that lost the race plans again on the winner's
  state, where the transition already happened).
- Every event has an id stable across retries (kind and subject), safe in an HTTP
  header and in a Markdown comment: ``[A-Za-z0-9:._-]``.
- A summary is redacted with this process's credentials before it is cut to one
  line: the cut would otherwise leave a secret's tail that no channel recognises.
- :func:`event_json_schema` is what ``orchestrator schema --event`` prints.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import Field

from ..config.channels import EventKind
from ..config.fieldtypes import ID_RE, Frozen, Id, UTCDateTime
from ..config.models import ScheduleSpec
from ..errors import InvalidId
from ..state import layout, machine
from ..state.model import State
from ..state.phases import RunStatus, TrackPhase
from ..state.queue import QueueBook
from ..state.records import Run, Track
from ..support.credentials import environment_redactor
from ..support.text import one_line
from ..support.times import iso

EVENT_ID_RE = re.compile(r"[A-Za-z0-9:._-]{1,200}")
SUMMARY_LIMIT = 300
GROUP_ABOVE = 5
"""More items of one queue dead in one decision than this are told as one event."""
GROUP_NAMES = 5
"""Item ids a grouped event names."""


class Event(Frozen):
    """One thing worth a person's attention."""

    version: Literal[1] = Field(1, description="The shape's version; fields are only added.")
    id: str = Field(pattern=f"^{EVENT_ID_RE.pattern}$",
                    description="Stable per event: a retried delivery carries the same id "
                    "(and the Idempotency-Key header a webhook gets).")
    kind: EventKind
    at: UTCDateTime = Field(description="When it happened, as the tick saw it (UTC).")
    summary: str = Field(max_length=2000, description="One line, for a person.")
    schedule: Id | None = Field(None, description="The schedule it concerns, if one.")
    run_id: str | None = Field(None, max_length=100, description="The run it concerns, if one.")
    brief_url: str | None = Field(None, max_length=1000,
                                  description="Where the run's brief is read, if known.")
    link: str | None = Field(None, max_length=1000,
                             description="Where to look: the CI run of the tick that saw it.")
    details: dict[str, str] = Field(
        default_factory=dict, max_length=20,
        description="What else the kind says: a dead letter's key and the commands to "
        "requeue or discard it, a runner's label, a record's path.")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def event_json_schema() -> dict[str, Any]:
    """The shape receivers get: every field always present (``null`` when it does not
    apply), and room for fields a later version adds."""
    schema = Event.model_json_schema(mode="serialization")
    schema["required"] = list(schema["properties"])
    schema.pop("additionalProperties", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://orchestrator.invalid/event.schema.json",
        "title": "Orchestrator event",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def stamp(moment: datetime) -> str:
    """``20261201T071503Z``: an instant as event ids write it."""
    return moment.strftime("%Y%m%dT%H%M%SZ")


def digest(text: str) -> str:
    """A short, header-safe stand-in for a text that may hold anything (a path)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class Links:
    """Where a person reads more: the brief of a run, the CI run of this tick."""

    brief: str | None = None
    """A template with ``{run_id}`` and ``{schedule}`` (``notify.brief_url``)."""
    run: str | None = None
    """The CI run of the tick (on GitHub Actions: its job summary holds the briefs it
    rendered)."""

    def brief_url(self, run_id: str, schedule: str) -> str | None:
        if self.brief is None:
            return self.run
        return self.brief.replace("{run_id}", run_id).replace("{schedule}", schedule)

    @classmethod
    def from_env(cls, brief: str | None, environ: Mapping[str, str]) -> Links:
        server = environ.get("GITHUB_SERVER_URL") or "https://github.com"
        repo, run = environ.get("GITHUB_REPOSITORY"), environ.get("GITHUB_RUN_ID")
        ci = f"{server.rstrip('/')}/{repo}/actions/runs/{run}" if repo and run else None
        return cls(brief, ci)


@dataclass(frozen=True)
class CronLate:
    """GitHub's cron later than schedules tolerate, as the ticks measured it."""

    schedules: tuple[str, ...]
    """Every schedule at risk; :attr:`new` are those not told in this episode."""
    new: tuple[str, ...]
    tolerance_minutes: float
    """The least tolerance among them (``max_lateness_minutes``)."""
    figures: Mapping[str, Any]
    """``samples``, ``p50_seconds``, ``p95_seconds``, ``max_seconds``, ``dropped``."""
    days: int


CLOCK_SETUP = ('set "cadence": {"mode": "external"} in orchestrator.json, run '
               '`orchestrator cron-sync --external`, then run `orchestrator serve '
               '--executor github --clock-only` on a machine you have')
"""The fix for a late cron: a clock outside GitHub (docs/how-to/cadence.md)."""


@dataclass(frozen=True)
class Seen:
    """What :func:`derive` needs beside the two states."""

    now: datetime
    links: Links
    specs: Mapping[str, ScheduleSpec]
    """Schedule id -> spec, for ``sla_minutes``."""
    failing: Mapping[str, int]
    """Schedule id -> failed runs in its streak so far (:mod:`.record`)."""
    told_sla: frozenset[str] = frozenset()
    """Runs whose SLA miss was told already."""
    told_quarantine: frozenset[str] = frozenset()
    """Quarantined paths told already."""
    cron_late: CronLate | None = None
    """GitHub's cron lateness, when it exceeds what schedules tolerate."""


def derive(before: State, after: State, seen: Seen) -> list[Event]:
    """The events of one decision, in order: dead letters, runs by slot (each failure
    or recovery), then queue items gone dead, pauses, runner labels, SLA misses,
    approvals waiting, quarantines."""
    failing = dict(seen.failing)
    events: list[Event] = []
    for letter_key in sorted(_new_letters(before, after)):
        events.append(_dead_letter(after, letter_key, seen))
    for run in sorted(after.runs.values(), key=lambda r: (r.slot, r.run_id)):
        old = before.runs.get(run.run_id)
        if old is not None and old.status is run.status:
            continue
        event = _run_event(run, failing, seen)
        if event is not None:
            events.append(event)
    for name, book in sorted(after.queues.items()):
        events += _queue_letters(before.queues.get(name), book, after, seen)
    events += _paused(before, after, seen)
    events += _runners(before, after, seen)
    events += sla_misses(after, seen)
    events += _approvals(before, after, seen)
    events += _quarantined(after, seen)
    events += cron_late(seen)
    return events


def _new_letters(before: State, after: State) -> list[str]:
    """Dead letters parked by this decision: new ones, and ones parked again."""
    keys = []
    for key, letter in after.dlq.items():
        old = before.dlq.get(key)
        if not letter.discarded and (old is None or old.discarded
                                     or old.parked_at != letter.parked_at):
            keys.append(key)
    return keys


def _dead_letter(after: State, key: str, seen: Seen) -> Event:
    letter = after.dlq[key]
    schedule = _schedule_of(letter.run_id)
    requeue = f"orchestrator dlq requeue {key} --reason REASON"
    discard = f"orchestrator dlq discard {key} --reason REASON"
    return Event(
        id=f"dead_letter:{key}:{stamp(letter.parked_at)}", kind=EventKind.DEAD_LETTER,
        at=letter.parked_at, schedule=schedule, run_id=letter.run_id, link=seen.links.run,
        brief_url=seen.links.brief_url(letter.run_id, schedule or "") if schedule else None,
        summary=summary_line(f"dead letter {key} ({letter.reason}) waits for `{requeue}` or "
                     f"`{discard}`"),
        details={"key": key, "track": letter.track, "reason": summary_line(letter.reason),
                 "requeue": requeue, "discard": discard})


def _new_dead_items(before: QueueBook | None, after: QueueBook) -> list[str]:
    """Items of ``after`` dead by this decision, oldest first: new ones, and ones dead
    again after a requeue (another time)."""
    if not after.changed:  # nothing moved in this queue: no item can have died
        return []
    old = before.dead if before is not None else {}
    fresh = []
    for item_id, entry in after.dead.items():
        was = old.get(item_id)
        if not entry.discarded and (was is None or was.discarded or was.at != entry.at):
            fresh.append((entry.at, item_id))
    return [item_id for _, item_id in sorted(fresh)]


def _holders(state: State, queue: str, ids: list[str]) -> dict[str, str]:
    """Item id -> the run whose worker held it last (of the runs ``state`` holds)."""
    wanted, found = set(ids), dict[str, str]()
    for run_id in sorted(state.tracks):
        for track in state.tracks[run_id].values():
            if track.work is not None and track.work.queue == queue:
                found.update((i, run_id) for i in track.work.items if i in wanted)
    return found


def _queue_letters(before: QueueBook | None, book: QueueBook, after: State,
                   seen: Seen) -> list[Event]:
    ids = _new_dead_items(before, book)
    if not ids:
        return []
    runs = _holders(after, book.name, ids)
    if len(ids) <= GROUP_ABOVE:
        return [_queue_letter(book, i, runs.get(i), seen) for i in ids]
    return [_queue_letter_group(book, ids, runs, seen)]


def _last_error(book: QueueBook, item_id: str) -> tuple[str, str]:
    """The item's attempts and its last error line (``?`` when it cannot be read)."""
    item = book.item(item_id)
    if item is None:
        return "?", "?"
    return str(item.attempt), summary_line(item.error_log[-1] if item.error_log else "failed")


def _about_run(run_id: str | None, seen: Seen) -> dict[str, Any]:
    schedule = _schedule_of(run_id) if run_id else None
    return {"schedule": schedule, "run_id": run_id if schedule else None,
            "brief_url": seen.links.brief_url(run_id, schedule)
            if run_id and schedule else None}


def _queue_letter(book: QueueBook, item_id: str, run_id: str | None,
                  seen: Seen) -> Event:
    entry, key = book.dead[item_id], f"{book.name}/{item_id}"
    attempts, error = _last_error(book, item_id)
    requeue = f"orchestrator dlq requeue {key} --reason REASON"
    discard = f"orchestrator dlq discard {key} --reason REASON"
    return Event(
        id=f"queue_dead_letter:{book.name}:{item_id}:{stamp(entry.at)}",
        kind=EventKind.QUEUE_DEAD_LETTER, at=entry.at, link=seen.links.run,
        **_about_run(run_id, seen),
        summary=summary_line(f"queue {book.name}: item {item_id} dead after {attempts} attempt(s) "
                     f"({error}); it waits for `{requeue}` or `{discard}`"),
        details={"queue": book.name, "item": item_id, "key": key, "count": "1",
                 "attempts": attempts, "error": error, "reason": summary_line(entry.reason),
                 "requeue": requeue, "discard": discard})


def _queue_letter_group(book: QueueBook, ids: list[str], runs: Mapping[str, str],
                        seen: Seen) -> Event:
    named = ids[:GROUP_NAMES]
    attempts, error = _last_error(book, named[0])
    latest = max(book.dead[i].at for i in ids)
    holders = {runs.get(i) for i in ids}
    run_id = holders.pop() if len(holders) == 1 else None
    listing = "orchestrator dlq list"
    # one command for the whole queue: five keys of 500 would leave 495 behind
    requeue = f"orchestrator dlq requeue --queue {book.name} --reason REASON"
    discard = f"orchestrator dlq discard --queue {book.name} --reason REASON"
    return Event(
        id=f"queue_dead_letter:{book.name}:{len(ids)}x{digest(' '.join(ids))}:"
           f"{stamp(latest)}",
        kind=EventKind.QUEUE_DEAD_LETTER, at=latest, link=seen.links.run,
        **_about_run(run_id, seen),
        # the commands before the error, which a cut summary may lose; the first
        # names are in the details
        summary=summary_line(f"queue {book.name}: {len(ids)} items dead in one tick; `{requeue}` "
                     f"requeues them, `{discard}` gives them up, `{listing}` lists them; "
                     f"the first: {error}"),
        details={"queue": book.name, "count": str(len(ids)), "items": ",".join(named),
                 "attempts": attempts, "error": error, "list": listing,
                 "requeue": requeue, "discard": discard})


def _run_event(run: Run, failing: dict[str, int], seen: Seen) -> Event | None:
    sid, rid = run.schedule_id, run.run_id
    brief = seen.links.brief_url(rid, sid)
    if run.status is RunStatus.FAILED:
        failing[sid] = failing.get(sid, 0) + 1
        times = sum(1 for h in run.state_history if h.to == RunStatus.FAILED.value)
        why = run.state_history[-1].reason if run.state_history else "failed"
        return Event(id=f"run_failed:{rid}:{max(times, 1)}", kind=EventKind.RUN_FAILED,
                     at=run.finished_at or seen.now, schedule=sid, run_id=rid,
                     brief_url=brief, link=seen.links.run,
                     summary=summary_line(f"{rid} failed ({why})"),
                     details={"slot": iso(run.slot), "failed_in_a_row": str(failing[sid])})
    if run.status is RunStatus.COMPLETED and failing.get(sid):
        count = failing.pop(sid)
        return Event(id=f"run_recovered:{rid}", kind=EventKind.RUN_RECOVERED,
                     at=run.finished_at or seen.now, schedule=sid, run_id=rid,
                     brief_url=brief, link=seen.links.run,
                     summary=summary_line(f"{rid} completed: {sid} recovered after {count} failed "
                                  "run(s)"),
                     details={"slot": iso(run.slot), "failed_runs": str(count)})
    return None


def _paused(before: State, after: State, seen: Seen) -> list[Event]:
    events = []
    for sid, cursor in sorted(after.cursors.items()):
        old = before.cursors.get(sid)
        if cursor.paused is None or (old is not None and old.paused is not None):
            continue
        resume = f"orchestrator schedules resume {sid} --reason REASON"
        events.append(Event(
            id=f"schedule_paused:{sid}:{stamp(cursor.paused.at)}",
            kind=EventKind.SCHEDULE_PAUSED, at=cursor.paused.at, schedule=sid,
            link=seen.links.run,
            summary=summary_line(f"{sid} paused: {cursor.paused.reason}; it fires nothing until "
                         f"`{resume}`"),
            details={"reason": summary_line(cursor.paused.reason), "resume": resume}))
    return events


def _runners(before: State, after: State, seen: Seen) -> list[Event]:
    events = []
    for label, health in sorted(after.runners.items()):
        old = before.runners.get(label)
        was = old.status if old is not None else "healthy"
        if health.status == was:
            continue
        kind = (EventKind.RUNNER_RECOVERED if health.status == "healthy"
                else EventKind.RUNNER_DEGRADED)
        at = health.last_checked_at or seen.now
        notes = f": {health.notes}" if health.notes else ""
        events.append(Event(
            id=f"{kind.value}:{label}:{health.status}:{stamp(at)}", kind=kind, at=at,
            link=seen.links.run, summary=summary_line(f"runner label {label} is {health.status} "
                                              f"(was {was}){notes}"),
            details={"label": label, "status": health.status, "was": was}))
    return events


def sla_misses(after: State, seen: Seen) -> list[Event]:
    """Runs not finished ``sla_minutes`` after their slot, not told yet: open ones past
    it, and ones this decision finished after it."""
    events = []
    for run in sorted(after.runs.values(), key=lambda r: (r.slot, r.run_id)):
        spec = seen.specs.get(run.schedule_id)
        if spec is None or spec.sla_minutes is None or run.run_id in seen.told_sla:
            continue
        due = run.slot + timedelta(minutes=spec.sla_minutes)
        finished = run.finished_at if run.status in machine.RUN_TERMINAL else None
        if finished is not None and finished < seen.now:
            continue  # finished before this decision: told then, or in time
        if (finished or seen.now) <= due:
            continue
        state = f"finished {run.status.value} at {iso(finished)}" if finished else "still open"
        events.append(Event(
            id=f"sla_missed:{run.run_id}", kind=EventKind.SLA_MISSED, at=due,
            schedule=run.schedule_id, run_id=run.run_id, link=seen.links.run,
            brief_url=seen.links.brief_url(run.run_id, run.schedule_id) if finished else None,
            summary=summary_line(f"{run.run_id} was not finished {spec.sla_minutes:g} minutes "
                         f"after its slot ({iso(due)}): {state}"),
            details={"slot": iso(run.slot), "sla_minutes": f"{spec.sla_minutes:g}",
                     "due": iso(due)}))
    return events


def _began_waiting(before: State, track: Track) -> bool:
    """Whether ``track`` began to wait for a person in this decision (and still does)."""
    gate = track.current_gate
    if gate is None or gate.since is None or gate.decided is not None:
        return False
    old = before.tracks.get(track.run_id, {}).get(track.name)
    was = old.current_gate if old is not None else None
    return was is None or was.since is None or was.attempt != gate.attempt


def _approvals(before: State, after: State, seen: Seen) -> list[Event]:
    """One ``approval_waiting`` per track and attempt, from the tick that began its wait."""
    return [_approval_waiting(track, seen)
            for run_id in sorted(after.tracks)
            for _, track in sorted(after.tracks[run_id].items())
            if _began_waiting(before, track)]


def _approval_waiting(track: Track, seen: Seen) -> Event:
    approval, gate = track.spec.approval, track.current_gate
    assert approval is not None and gate is not None and gate.since is not None
    where = f"{track.run_id} {track.name}"
    approve = f"orchestrator approve {where} --reason REASON"
    reject = f"orchestrator reject {where} --reason REASON"
    how = (f"`{approve}` or `{reject}`" if track.phase is TrackPhase.PENDING
           else "a review on GitHub")  # a leg held by its environment's reviewers
    schedule = _schedule_of(track.run_id)
    return Event(
        id=f"approval_waiting:{track.run_id}:{track.name}:{track.attempt}",
        kind=EventKind.APPROVAL_WAITING, at=gate.since, schedule=schedule,
        run_id=track.run_id, link=seen.links.run,
        brief_url=seen.links.brief_url(track.run_id, schedule) if schedule else None,
        summary=summary_line(f"{track.run_id}/{track.name} waits for approval by "
                             f"{approval.describe()}: {how}"),
        details={"track": track.name, "since": iso(gate.since),
                 "by": summary_line(approval.describe()),
                 "timeout_minutes": f"{approval.timeout_minutes:g}",
                 "approve": approve, "reject": reject})


def _quarantined(after: State, seen: Seen) -> list[Event]:
    events = []
    for path, why in sorted(after.quarantined.items()):
        if path in seen.told_quarantine:
            continue
        found = layout.locate(path)
        schedule = (found.name if found is not None and found.kind is layout.Kind.CURSOR
                    and ID_RE.fullmatch(found.name) else None)
        events.append(Event(
            id=f"record_quarantined:{digest(path)}", kind=EventKind.RECORD_QUARANTINED,
            at=seen.now, schedule=schedule, link=seen.links.run,
            summary=summary_line(f"quarantined {why}; it is left alone until it is fixed or "
                         "deleted"),
            details={"path": summary_line(path if path.isprintable() else repr(path))}))
    return events


def cron_late(seen: Seen) -> list[Event]:
    """One event when schedules not told in this episode fall at risk."""
    late = seen.cron_late
    if late is None or not late.new:
        return []
    f, names = late.figures, ", ".join(late.schedules)
    p95 = f"{f['p95_seconds'] / 60:.0f} min"
    return [Event(
        id=f"cron_late:{stamp(seen.now)}:{digest(','.join(late.new))}",
        kind=EventKind.CRON_LATE, at=seen.now, link=seen.links.run,
        schedule=late.schedules[0] if len(late.schedules) == 1 else None,
        summary=summary_line(f"GitHub's cron started ticks {p95} late (p95 of {late.days} "
                             f"days, {f['samples']} samples), more than {names} tolerate "
                             f"({late.tolerance_minutes:g} min): {CLOCK_SETUP}"),
        details={"schedules": summary_line(names),
                 "tolerance_minutes": f"{late.tolerance_minutes:g}",
                 **{k: f"{f[k]:g}" for k in ("p50_seconds", "p95_seconds", "max_seconds")},
                 "samples": str(f["samples"]), "dropped": str(f["dropped"]),
                 "days": str(late.days), "fix": CLOCK_SETUP,
                 "fix_sync": "orchestrator cron-sync --external",
                 "fix_clock": "orchestrator serve --executor github --clock-only"})]


def _schedule_of(run_id: str) -> str | None:
    try:
        return layout.parse_run_id(run_id)[0]
    except InvalidId:
        return None


def summary_line(text: str) -> str:
    """``text`` as a summary's one line, redacted before it is cut (each channel
    redacts again, with its own secrets)."""
    return one_line(environment_redactor()(text), SUMMARY_LIMIT)
