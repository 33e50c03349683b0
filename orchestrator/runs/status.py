"""The status report: is the clock still ticking, and what is it doing?

The heartbeat is ``state/ticks.jsonl`` on the state branch: every tick that commits
appends a line, and an idle tick still appends one once ``--heartbeat-every``
minutes (default 60) have passed. So the default staleness limit (90 minutes) is
larger than that: a healthy but idle repository is never reported stale.

Pure: :func:`build` turns the state files, the schedules and an instant into a
JSON-able report, :func:`text` into lines; ``orchestrator status`` prints them.
:func:`attention` picks from the report what needs a person; ``state/index.html``
puts the same items first, so the page and ``status`` never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..cadence.wake import Wake, next_wake, settled_after
from ..config.models import Schedule, ScheduleSpec
from ..config.triggers import for_spec
from ..planner.capacity import in_flight
from ..planner.compensation import order
from ..planner.context import Caps
from ..state import codec
from ..state import index as state_index
from ..state import model as state_model
from ..state.health import describe
from ..state.layout import cursor_path
from ..state.machine import RUN_OPEN
from ..state.phases import TrackPhase
from ..state.queue import describe as describe_queue
from ..state.records import Cursor, Run, Track
from ..support.times import iso

AHEAD_TOLERANCE = timedelta(minutes=5)
"""A last tick further ahead of ``now`` than this is from a tick ``--now`` in the future."""

DEFAULT_MAX_STALENESS = 90
"""Minutes. Larger than the tick's default ``--heartbeat-every`` (60) plus its cron
interval (15), so an idle but healthy repository stays fresh."""


def _iso(moment: datetime | None) -> str | None:
    return iso(moment) if moment is not None else None


def next_slots(schedule: Schedule, state: state_model.State, now: datetime,
               n: int = 1) -> list[datetime]:
    """The schedule's next ``n`` slots (UTC) after its cursor and ``now``, honouring
    ``start_at``, ``end_at`` and ``exclude``; none while disabled, done or paused."""
    cursor = state.cursors.get(schedule.id)
    if not schedule.spec.enabled or (cursor is not None and (cursor.done or cursor.paused)):
        return []
    return [s.at for s in for_spec(schedule.spec).next(settled_after(cursor, now), n).found]


def _next_slot(schedule: Schedule, state: state_model.State, now: datetime) -> datetime | None:
    found = next_slots(schedule, state, now)
    return found[0] if found else None


def staleness_for(repo: Path, now: datetime) -> timedelta:
    """How old the last tick may be in ``repo`` before it is stale: what its tick.yml's
    cadence needs (the watchdog's limit), else :data:`DEFAULT_MAX_STALENESS`. One
    answer for ``status``, the briefs and the dashboard."""
    from ..cadence.tickfile import staleness_limit

    return timedelta(minutes=staleness_limit(repo, now) or DEFAULT_MAX_STALENESS)


def _ended(schedule: Schedule, now: datetime) -> datetime | None:
    """``end_at`` once it has passed: the schedule fires no more, by its own file."""
    end = schedule.spec.bound_utc("end_at")
    return end if end is not None and end <= now else None


def build(files: Mapping[str, bytes], schedules: list[Schedule], invalid: list[str],
          now: datetime, max_staleness: timedelta, caps: Caps | None = None, *,
          simulated: bool = False) -> dict[str, Any]:
    """The status report (pure): everything ``status`` prints, as a JSON-able dict.
    ``caps`` are the repository's stampede caps (``orchestrator.json``). On the
    machine's clock the heartbeat is when ticks ran; with a ``simulated`` now, the
    instants the ticks were told (:func:`~orchestrator.state.codec.heartbeat_at`)."""
    state = state_index.load(files).state  # open runs only, like the tick
    last = codec.heartbeat_at(files, simulated)
    return from_state(state, last, schedules, invalid, now,
                      max_staleness, caps)


def _paused(cursor: Cursor | None) -> dict[str, Any] | None:
    if cursor is None or cursor.paused is None:
        return None
    # to the second, as every other instant status prints (a pause records microseconds)
    return {**cursor.paused.model_dump(mode="json"), "at": _iso(cursor.paused.at)}


def _schedule_row(schedule: Schedule, state: state_model.State, now: datetime
                  ) -> dict[str, Any]:
    cursor = state.cursors.get(schedule.id)
    held = state.quarantined.get(cursor_path(schedule.id))
    return {
        "id": schedule.id,
        "enabled": schedule.spec.enabled,
        # a quarantined state record holds the schedule: the tick fires none of it
        "next": None if held else _iso(_next_slot(schedule, state, now)),
        "held": held,
        "last_run_id": cursor.last_run_id if cursor else None,
        "last_error": cursor.last_error if cursor else None,
        "paused": _paused(cursor),
        "ended": _iso(_ended(schedule, now)),
        # the cursor counts failed finishes as runs end: >0, the last one failed
        "failures_in_a_row": cursor.failures_in_a_row if cursor else 0,
    }


def _run_row(run: Run, state: state_model.State, spec: ScheduleSpec | None
             ) -> dict[str, Any]:
    tracks = state.tracks.get(run.run_id, {})
    row: dict[str, Any] = {
        "run_id": run.run_id,
        "schedule": run.schedule_id,
        "status": run.status.value,
        "slot": _iso(run.slot),
        "tracks": {name: tracks[name].phase.value for name in sorted(tracks)},
        "origin": run.origin,
        "acts": run.acts(),
    }
    if spec is not None and spec.max_parallel is not None:
        row["max_parallel"] = spec.max_parallel
    if state.undos.get(run.run_id):  # a saga's, in the order they run
        row["compensations"] = {u.name: u.phase.value
                                for u in order(tracks, state.undos[run.run_id])}
    return row


def _open_runs(state: state_model.State, schedules: list[Schedule]) -> list[dict[str, Any]]:
    """The open runs, oldest slot first."""
    specs = {s.id: s.spec for s in schedules}
    return [_run_row(run, state, specs.get(run.schedule_id))
            for run in sorted(state.runs.values(), key=lambda r: (r.slot, r.run_id))
            if run.status in RUN_OPEN]


def _caps(state: state_model.State, caps: Caps) -> dict[str, int | None]:
    return {"max_concurrent_tracks": caps.max_concurrent_tracks,
            "max_dispatches_per_tick": caps.max_dispatches_per_tick,
            "tracks_in_flight": sum(in_flight(state).values())}


def _ahead(age: timedelta | None) -> bool:
    """A heartbeat from the future (a tick ``--now`` ahead of the clock) vouches for
    nothing: whether real ticks still run is unknown until one writes its own."""
    return age is not None and -age > AHEAD_TOLERANCE


def _stale(age: timedelta | None, max_staleness: timedelta) -> bool:
    return age is None or age > max_staleness or _ahead(age)


def _minutes(age: timedelta | None) -> float | None:
    return round(age.total_seconds() / 60, 1) if age is not None else None


def _dead_waiting(state: state_model.State, queues: list[dict[str, Any]]) -> int:
    """Dead letters of tracks and of queue items waiting for a decision: a dead item
    waits for a person as a dead track does, so they share the count and the alert."""
    return sum(1 for d in state.dlq.values() if not d.discarded) + sum(
        q["dead"] for q in queues)


def _next_wake(state: state_model.State, schedules: list[Schedule], now: datetime
               ) -> Wake | None:
    """The next due moment of the schedules the tick plans: a schedule held by its
    quarantined record fires nothing, so it wakes nothing."""
    held = state.held_schedules()
    return next_wake([s for s in schedules if s.id not in held], state, now)


def from_state(state: state_model.State, last: datetime | None, schedules: list[Schedule],
               invalid: list[str], now: datetime, max_staleness: timedelta,
               caps: Caps | None = None) -> dict[str, Any]:
    """The report of :func:`build` from a parsed ``state`` and the last tick's instant
    (a tick that renders the index passes the state it is about to commit)."""
    age = now - last if last is not None else None
    wake = _next_wake(state, schedules, now)
    queues = [describe_queue(book) for _, book in sorted(state.queues.items())]
    runners = sorted(state.runners.items())
    report: dict[str, Any] = {
        "caps": _caps(state, caps or Caps()),
        "now": _iso(now),
        "next_wake": wake.to_json() if wake else None,
        "last_tick": _iso(last),
        "age_minutes": _minutes(age),
        "max_staleness_minutes": max_staleness.total_seconds() / 60,
        "ahead": _ahead(age),
        "stale": _stale(age, max_staleness),
        "schedules": [_schedule_row(schedule, state, now) for schedule in schedules],
        "invalid_schedules": invalid,
        "quarantined": state.quarantine_lines(),
        "open_runs": _open_runs(state, schedules),
        "dead_letters": _dead_waiting(state, queues),
        "dead_items": sum(q["dead"] for q in queues),
        "dead_letter_keys": _dead_keys(state),
        "approvals": approvals_waiting(state),
        "queues": queues,
        "breakers": {name: b.model_dump(mode="json") for name, b in sorted(state.health.items())},
        "runners": {label: h.model_dump(mode="json") for label, h in runners},
        "runner_lines": [describe(label, h) for label, h in runners],
    }
    report["attention"] = attention(report)
    return report


def approvals_waiting(state: state_model.State) -> list[dict[str, str]]:
    """The tracks that wait for a person, oldest wait first: since when, who may decide,
    and the command (none for a leg its environment's reviewers hold on GitHub)."""
    rows = [_waiting_row(track) for tracks in state.tracks.values()
            for track in tracks.values() if track.awaits_approval]
    return sorted(rows, key=lambda r: (r["since"], r["run_id"], r["track"]))


def _waiting_row(track: Track) -> dict[str, str]:
    gate, approval = track.current_gate, track.spec.approval
    assert gate is not None and gate.since is not None and approval is not None
    run_id, name = track.run_id, track.name
    command = (f"orchestrator approve {run_id} {name} --reason ..."
               if track.phase is TrackPhase.PENDING else "")
    return {"run_id": run_id, "schedule": run_id.partition("--")[0], "track": name,
            "since": iso(gate.since), "by": approval.describe(), "command": command}


DEAD_KEYS_LISTED = 20
"""How many dead letters the report names by key (``dlq list`` names every one)."""


def _dead_keys(state: state_model.State) -> list[str]:
    """The keys of the first :data:`DEAD_KEYS_LISTED` dead letters waiting: tracks',
    then queue items' (``<queue>/<item-id>``), as ``dlq requeue`` takes them."""
    keys = sorted(k for k, d in state.dlq.items() if not d.discarded)[:DEAD_KEYS_LISTED]
    for name, book in sorted(state.queues.items()):
        if len(keys) >= DEAD_KEYS_LISTED:
            break
        keys += [f"{name}/{item}" for item, d in sorted(book.dead.items())
                 if not d.discarded][:DEAD_KEYS_LISTED - len(keys)]
    return keys


def attention(report: dict[str, Any]) -> list[dict[str, str]]:
    """What needs a person, most urgent first: a stale clock, invalid files, failed
    last runs, dead letters and approvals waiting, paused schedules, unreadable records. Each item
    has a ``kind``, the ``subject`` it names, one line of ``text`` and the ``command``
    that handles it (empty when none does)."""
    items: list[dict[str, str]] = []

    def add(kind: str, subject: str, text: str, command: str = "") -> None:
        items.append({"kind": kind, "subject": subject, "text": text, "command": command})

    if report["stale"]:
        add("stale", "tick", _tick_line(report).split(None, 2)[-1],
            "orchestrator tick")
    for line in report["invalid_schedules"]:
        add("invalid", line.split(": ", 1)[0], line)
    for s in report["schedules"]:
        if s["failures_in_a_row"]:
            count = s["failures_in_a_row"]
            add("failed", s["id"], f"the last finished run of {s['id']} failed"
                + (f" ({count} in a row)" if count > 1 else ""),
                f"orchestrator runs list --schedule {s['id']} --status failed")
    for key in report["dead_letter_keys"]:
        add("dead_letter", key, f"dead letter {key} waits for a decision",
            f"orchestrator dlq requeue {key}")
    more = report["dead_letters"] - len(report["dead_letter_keys"])
    if more > 0:
        add("dead_letter", "more", f"{more} more dead letter(s) wait",
            "orchestrator dlq list")
    for a in report["approvals"]:
        add("approval", a["schedule"], f"{a['run_id']}/{a['track']} waits for approval by "
            f"{a['by']} since {a['since']}", a["command"])
    for s in report["schedules"]:
        if s["paused"]:
            p = s["paused"]
            add("paused", s["id"], f"{s['id']} is paused since {p['at']} by {p['by']}: "
                f"{p['reason']}", f"orchestrator schedules resume {s['id']} --reason ...")
    for line in report["quarantined"]:
        add("quarantined", line.split(":", 1)[0], line)
    return items


def age_text(minutes: float) -> str:
    whole = int(minutes)
    return f"{whole // 60}h {whole % 60}m" if whole >= 60 else f"{minutes:g}m"


def text(report: dict[str, Any]) -> list[str]:
    lines = [_tick_line(report), f"now           {report['now']}"]
    lines += _attention_lines(report["attention"])
    wake = report["next_wake"]
    lines.append(f"next wake     {wake['at']}  ({wake['reason']})" if wake else
                 "next wake     nothing will fall due")
    lines += _schedule_lines(report["schedules"])
    lines += [f"  invalid: {problem} (ignored: fires nothing until fixed)"
              for problem in report["invalid_schedules"]]
    lines += [f"state         {line}" for line in report["quarantined"]]
    lines += _run_lines(report["open_runs"])
    lines += _caps_lines(report["caps"])
    lines += _queue_lines(report["queues"])
    items = f" ({report['dead_items']} of them items)" if report["dead_items"] else ""
    lines.append(f"dead letters  {report['dead_letters']}{items}")
    lines.append(f"breakers      {_breakers(report['breakers']) or 'none recorded'}")
    if report["runner_lines"]:  # only schedules with runs_on record runner health
        lines.append("runners")
        lines += [f"  {line}" for line in report["runner_lines"]]
    return lines


def _attention_lines(needs: list[dict[str, str]]) -> list[str]:
    """The heading, then each item with the command that handles it."""
    if not needs:
        return ["attention     nothing needs attention"]
    return ["attention", *(f"  {i['text']}" + (f"  ({i['command']})" if i["command"] else "")
                           for i in needs)]


def _breakers(breakers: dict[str, dict[str, Any]]) -> str:
    return ", ".join(f"{name} {b['state']}" + (f" ({b['failures']} failures)"
                                               if b["failures"] else "")
                     for name, b in breakers.items())


def _tick_line(report: dict[str, Any]) -> str:
    limit = f"{report['max_staleness_minutes']:g}m"
    if report["last_tick"] is None:
        return f"last tick     none recorded (stale; limit {limit})"
    if report.get("ahead"):
        ahead = age_text(-report["age_minutes"])
        return (f"last tick     {report['last_tick']}  ({ahead} AHEAD of this clock: a tick "
                f"--now in the future? STALE until a real tick runs; limit {limit})")
    verdict = "STALE" if report["stale"] else "fresh"
    ago = age_text(report["age_minutes"])
    return f"last tick     {report['last_tick']}  ({ago} ago; {verdict}, limit {limit})"


def _schedule_lines(schedules: list[dict[str, Any]]) -> list[str]:
    if not schedules:
        return ["schedules     none"]
    lines = ["schedules"]
    width = max(len(s["id"]) for s in schedules)
    for s in schedules:
        nxt = _next_text(s)
        last = f"  last {s['last_run_id']}" if s["last_run_id"] else ""
        error = f"  error: {s['last_error']}" if s["last_error"] else ""
        lines.append(f"  {s['id']:<{width}}  {nxt}{last}{error}")
    return lines


def _next_text(s: dict[str, Any]) -> str:
    """What comes next for a schedule: a pause says so first, then an end it reached."""
    if s["paused"]:
        pause = s["paused"]
        return (f"PAUSED since {pause['at']} by {pause['by']}: {pause['reason']} "
                f"(orchestrator schedules resume {s['id']} --reason ...)")
    if not s["enabled"]:
        return "disabled"
    if s.get("held"):
        return f"HELD: its state record is quarantined ({s['held']})"
    if s.get("ended"):
        return f"ENDED at {s['ended']} (its end_at): no more runs"
    return f"next {s['next']}" if s["next"] else "no upcoming run"


def _run_lines(runs: list[dict[str, Any]]) -> list[str]:
    if not runs:
        return ["open runs     none"]
    lines = ["open runs"]
    for run in runs:
        phases = ", ".join(f"{n} {p}" for n, p in run["tracks"].items()) or "no tracks"
        cap = (f"  (at most {run['max_parallel']} in flight)"
               if run.get("max_parallel") else "")
        lines.append(f"  {run['run_id']}  {run['status']}: {phases}{cap}")
        lines += [f"    {act}" for act in run.get("acts", [])]
        if run.get("compensations"):
            undos = ", ".join(f"{n} {p}" for n, p in run["compensations"].items())
            lines.append(f"    compensating (newest first): {undos}")
    return lines


def _queue_lines(queues: list[dict[str, Any]]) -> list[str]:
    """One line per work queue: its backlog, what workers hold, its dead items."""
    if not queues:
        return []
    lines = ["queues"]
    for q in queues:
        counts = q["counts"]
        parts = [f"backlog {q['backlog']}"]
        if counts.get("failed"):
            parts[0] += f" ({counts['failed']} waiting for a retry)"
        held = sum(q["claimed_by"].values())
        if held:
            parts.append(f"{held} claimed by {len(q['claimed_by'])} worker(s)")
        if counts.get("done"):
            parts.append(f"{counts['done']} done")
        if q["dead"]:
            parts.append(f"{q['dead']} dead")
        lines.append(f"  {q['queue']}  {', '.join(parts)}")
    return lines


def _caps_lines(caps: dict[str, Any]) -> list[str]:
    """The caps line, when ``orchestrator.json`` sets a cap."""
    parts = []
    if caps["max_concurrent_tracks"]:
        parts.append(f"{caps['tracks_in_flight']} of at most "
                     f"{caps['max_concurrent_tracks']} tracks in flight")
    if caps["max_dispatches_per_tick"]:
        parts.append(f"at most {caps['max_dispatches_per_tick']} dispatches a tick")
    return [f"caps          {'; '.join(parts)} (orchestrator.json)"] if parts else []
