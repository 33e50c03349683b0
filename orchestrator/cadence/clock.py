"""The external clock: a scheduler outside GitHub that starts ``tick.yml`` at each slot.

GitHub starts scheduled runs minutes late, and a runner that waits for a slot is
billed. A clock that calls GitHub's API at the minute starts the tick within a
runner's start-up, for one billed minute. This module owns:

- the clock's entries: each schedule's timing as a clock takes it (its cron, zone and
  daylight-saving policy, life span and excluded local dates, calendars' included; or
  a one-shot's instant), schedules with the same timing sharing one entry;
- the exact UTC calls of a span (each slot, plus its run's jitter; one call per
  instant however many schedules share it);
- the clock file ``cron-sync --external`` writes (``.github/orchestrator-clock.json``)
  and its check for ``validate``: every slot of the next year has an entry;
- the two requests GitHub accepts for it, and the one permission each needs;
- :class:`Clock`, the loop of ``serve --clock-only``: at each due moment, one call.

Invariants: the file holds only what the schedules say (no URL, no token), so every
checkout writes the same bytes. The file is read as hostile input: a bad byte costs a
line naming it, and every entry that still reads counts. A due moment gets one call;
a failed call is tried again at the next wake-ups for :data:`RETRY_FOR`, then every
:data:`CONFIRM_AFTER` as below; a call GitHub accepted whose moment the state branch does not show
settled :data:`CONFIRM_AFTER` later is made again (a dispatch that never ran, a tick
that failed), at most :data:`CONFIRM_TRIES` times. The token travels only in the
request's header, never in a message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..config.models import Schedule, ScheduleSpec, TrackSpec
from ..config.repository import Cadence
from ..config.triggers import Trigger, for_spec
from ..cron import DstPolicy
from ..errors import OrchestratorError
from ..github import WorkflowAdmin
from ..planner.fire import jitter
from ..state.layout import run_id_for
from ..state.model import State
from ..support import safejson
from ..support.times import iso, iso_minute
from .wake import Wake, due_moments

CLOCK_FILE = Path(".github/orchestrator-clock.json")
FORMAT = 1
MAX_BYTES = 1024 * 1024
EVENT_TYPE = "orchestrator-tick"
"""The ``event_type`` of the clock's ``repository_dispatch``: tick.yml answers it."""
TICK_WORKFLOW = "tick.yml"
TOKEN_VARIABLE = "ORCHESTRATOR_CLOCK_TOKEN"
"""Where the clock keeps its token: the curl lines read it, ``serve --clock-only`` too."""
TOKEN_FILE_VARIABLE = "ORCHESTRATOR_CLOCK_TOKEN_FILE"
"""A file holding the token instead (systemd's credential, a compose secret): it wins."""
RETRY_FOR = timedelta(minutes=10)
"""How long a failed call is tried again at the next wake-ups."""
CONFIRM_AFTER = timedelta(minutes=5)
"""A moment the state branch still shows unsettled this long after its call is called
for again: GitHub accepted a dispatch that never ran, or the tick failed. Above a
runner's start-up and a tick, so a tick that is merely slow is seldom called twice (a
second tick would find the slot fired and do nothing)."""
CONFIRM_TRIES = 3
"""Calls made again for one moment at most: one the tick cannot act on (a full
concurrency cap) costs three tick jobs, not one every five minutes."""
CONFIRM_FOR = timedelta(hours=1)
"""How far back the clock looks for unsettled moments, on its first look too."""
_COMMENT = ("Written by `orchestrator cron-sync --external` from schedules/ (do not edit "
            "by hand; `orchestrator validate` fails when it misses a slot). An external "
            "clock dispatches tick.yml at each entry's times: a cron in its time zone, "
            "never on its 'exclude' dates nor outside 'start_at' to 'end_at', or a "
            "one-shot's instant. `cron-sync --external` prints the requests and the "
            "exact UTC times.")


# --------------------------------------------------------------------------- entries


def _timing(spec: ScheduleSpec) -> tuple[Any, ...]:
    at = spec.at_utc()
    if at is not None:
        return ("at", iso(at))
    return ("cron", spec.cron, spec.timezone, spec.dst.gap.value, spec.dst.fold.value,
            _bounds(spec))


def _bounds(spec: ScheduleSpec) -> tuple[tuple[str, Any], ...]:
    """What keeps a cron's instants from being calls: its life span, and its excluded
    dates (``exclude`` and the calendars') as local dates in its zone."""
    found = [(name, iso(bound)) for name in ("start_at", "end_at")
             if (bound := spec.bound_utc(name)) is not None]
    dates = sorted(d.isoformat() for d in spec.excluded_dates())
    return (*found, *([("exclude", tuple(dates))] if dates else []))


def entries(schedules: Iterable[Schedule]) -> list[dict[str, Any]]:
    """The clock's entries for the enabled schedules, in the file's order (timing, then
    schedule ids); schedules with the same timing share one. A schedule fired by
    ``after`` alone has no entry: the tick that ends its upstream's run fires it."""
    grouped: dict[tuple[Any, ...], list[str]] = {}
    for schedule in schedules:
        if schedule.spec.enabled and (schedule.spec.cron or schedule.spec.at):
            grouped.setdefault(_timing(schedule.spec), []).append(schedule.id)
    out: list[dict[str, Any]] = []
    for timing, ids in sorted(grouped.items(), key=lambda item: (item[0], item[1])):
        if timing[0] == "at":
            out.append({"at": timing[1], "schedules": sorted(ids)})
        else:
            _, expr, zone, gap, fold, bounds = timing
            out.append({"cron": expr, "timezone": zone, "dst": {"gap": gap, "fold": fold},
                        **{k: list(v) if isinstance(v, tuple) else v for k, v in bounds},
                        "schedules": sorted(ids)})
    return out


def file_text(schedules: Iterable[Schedule]) -> str:
    """The clock file for ``schedules``: the same bytes from the same schedules."""
    data = {"$comment": _COMMENT, "format": FORMAT, "entries": entries(schedules)}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def calls(schedules: Iterable[Schedule], start: datetime, until: datetime) -> list[datetime]:
    """Every instant in ``(start, until]`` the clock must call, UTC, ascending, once each:
    each enabled schedule's slots, each delayed by its run's jitter (the tick at the slot
    would only mark the run; the one at slot plus jitter dispatches it)."""
    found: set[datetime] = set()
    for schedule in schedules:
        spec = schedule.spec
        if not spec.enabled:
            continue
        at = spec.at_utc()
        slots = ([at] if start < at <= until else []) if at is not None else \
            for_spec(spec).slots(start, until)
        for slot in slots:
            found.add(slot + jitter(run_id_for(schedule.id, slot), spec.jitter_seconds))
    return sorted(found)


# --------------------------------------------------------------------------- the file


@dataclass(frozen=True)
class ClockFile:
    """What the clock file holds, as far as it reads."""

    triggers: list[Trigger]
    problems: list[str]
    """One line per part that does not read (the file, or one entry)."""
    readable: bool = True
    """Whether its list of entries read (else nothing in it can be checked)."""


def _entry_trigger(entry: Any) -> Trigger:
    """The trigger of one entry; :class:`ValueError` (in words) for a bad one."""
    if not isinstance(entry, dict):
        raise ValueError("not an object")
    track = [TrackSpec(name="tick", run="true")]
    if "at" in entry:
        return for_spec(ScheduleSpec.model_validate(
            {"at": entry["at"], "timezone": "UTC", "tracks": track}, strict=False))
    dst = entry.get("dst", {})
    spec = ScheduleSpec(cron=entry.get("cron"), timezone=entry.get("timezone", "UTC"),
                        dst=DstPolicy.model_validate(dst, strict=False), tracks=track)
    bounds = {k: entry[k] for k in ("start_at", "end_at", "exclude") if k in entry}
    if bounds:  # read as a schedule file reads them: a bad date is a bad entry
        spec = ScheduleSpec.model_validate({**spec.model_dump(), **bounds}, strict=False)
    return for_spec(spec)


def read_clock_file(root: Path) -> ClockFile | None:
    """The clock file at ``root`` (``None`` when there is none), read as hostile input:
    a FIFO, a symlink out of the repository, a huge or deep file is one problem line."""
    where = CLOCK_FILE.as_posix()
    try:
        raw = safejson.read_file(root / CLOCK_FILE, max_bytes=MAX_BYTES, root=root)
        data = safejson.loads(raw, max_bytes=MAX_BYTES)
    except FileNotFoundError:
        return None
    except safejson.UnsafeJSON as exc:
        return ClockFile([], [f"{where}: {exc}"], readable=False)
    listed = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return ClockFile([], [f"{where}: no 'entries' list"], readable=False)
    triggers: list[Trigger] = []
    problems: list[str] = []
    for n, entry in enumerate(listed):
        try:
            triggers.append(_entry_trigger(entry))
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is one
            problem = str(exc).splitlines()[0][:200]
            problems.append(f"{where}: entry {n}: {problem} (left out)")
    return ClockFile(triggers, problems)


def uncovered(triggers: Sequence[Trigger], schedules: Iterable[Schedule], start: datetime,
              until: datetime) -> dict[str, list[datetime]]:
    """Schedule id -> its slots in ``(start, until]`` no entry calls at."""
    called: set[datetime] = set()
    for trigger in triggers:
        called.update(trigger.slots(start, until))
    missing: dict[str, list[datetime]] = {}
    for schedule in schedules:
        if not schedule.spec.enabled:
            continue
        at = schedule.spec.at_utc()
        slots = ([at] if start < at <= until else []) if at is not None else \
            for_spec(schedule.spec).slots(start, until)
        lost = [slot for slot in slots if slot not in called]
        if lost:
            missing[schedule.id] = lost
    return missing


def check(root: Path, schedules: list[Schedule], start: datetime,
          until: datetime) -> list[str]:
    """``validate``'s problems with the clock file: it is missing, does not read, or
    leaves slots of ``(start, until]`` without a call."""
    where = CLOCK_FILE.as_posix()
    found = read_clock_file(root)
    if found is None:
        return [f"{where} not found: the external clock has no schedule; run "
                "`orchestrator cron-sync --external` and commit it"]
    problems = list(found.problems)
    if not found.readable:
        return problems
    for sid, slots in sorted(uncovered(found.triggers, schedules, start, until).items()):
        problems.append(f"{where}: no call at {len(slots)} slot(s) of {sid!r} (first "
                        f"{iso_minute(slots[0])}); run `orchestrator cron-sync --external` "
                        "and commit the file with the schedule")
    return problems


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class Request:
    """One way to start tick.yml through GitHub's API, and the token it needs."""

    event: str
    """``workflow_dispatch`` or ``repository_dispatch``: the run's event."""
    path: str
    """Below the API's URL: ``repos/OWNER/REPO/...``."""
    body: dict[str, str]
    permission: str
    """The one repository permission a fine-grained token needs for it (GitHub's
    "Permissions required for fine-grained personal access tokens")."""

    def url(self, api_url: str) -> str:
        return f"{api_url.rstrip('/')}/{self.path}"

    def curl(self, api_url: str, api_version: str) -> str:
        """The call as a shell line; the token is the variable :data:`TOKEN_VARIABLE`.
        ``--fail-with-body`` (curl 7.76) fails on an error and still prints GitHub's
        answer, which says why (``-f`` would drop it)."""
        body = json.dumps(self.body, separators=(",", ":"))
        return (f'curl -sS --fail-with-body -X POST -H "Authorization: Bearer ${TOKEN_VARIABLE}" '
                f'-H "Accept: application/vnd.github+json" '
                f'-H "X-GitHub-Api-Version: {api_version}" '
                f"{self.url(api_url)} -d '{body}'")

    @property
    def token(self) -> str:
        return (f"a fine-grained personal access token for this repository only, with the "
                f"repository permission {self.permission}: Read and write (and nothing "
                "else; GitHub adds Metadata: Read)")

    def to_json(self, api_url: str, api_version: str) -> dict[str, Any]:
        return {"event": self.event, "method": "POST", "url": self.url(api_url),
                "body": self.body, "permission": f"{self.permission}: write",
                "token": self.token, "curl": self.curl(api_url, api_version)}


def dispatch(admin: WorkflowAdmin, request: Request) -> str:
    """Make ``request`` through the workflow admin; a few words on it, or
    :class:`~orchestrator.github.GitHubError`."""
    admin.dispatch(request.path, request.body)
    return f"dispatched {TICK_WORKFLOW} ({request.event})"


def requests(repository: str, ref: str) -> dict[str, Request]:
    """The two requests, by event. The workflow dispatch needs the narrower token:
    Actions can start and cancel runs, Contents could also push code."""
    return {
        "workflow_dispatch": Request(
            "workflow_dispatch", f"repos/{repository}/actions/workflows/{TICK_WORKFLOW}/"
            "dispatches", {"ref": ref}, "Actions"),
        "repository_dispatch": Request(
            "repository_dispatch", f"repos/{repository}/dispatches",
            {"event_type": EVENT_TYPE}, "Contents"),
    }


# --------------------------------------------------------------------------- the loop


def clock_moments(schedules: Iterable[Schedule], state: State, after: datetime,
                  cadence: Cadence) -> list[Wake]:
    """The due moments after ``after`` worth a call: every slot (a call costs no
    waiting) and what a lingering tick waits for (a retry's back-off end, a poll, a
    run's jitter); not a timeout or a deadline, which the safety tick settles."""
    listed = list(schedules)
    return sorted([*stated(listed, state, after, cadence), *jittered(listed, state, after)])


def stated(schedules: Iterable[Schedule], state: State, after: datetime,
           cadence: Cadence) -> list[Wake]:
    """The moments of :func:`clock_moments` that the state branch knows of: a slot its
    cursor has not settled, a pending track's ``not_before``. One that passed and is
    still listed was not acted on: the tick its call started never ran, or failed."""
    return [m for m in due_moments(list(schedules), state, after, cadence)
            if m.slot or m.worth_waiting]


def jittered(schedules: Iterable[Schedule], state: State, after: datetime) -> list[Wake]:
    """The jitter's end of each jittered slot that passed by less than its jitter, or is
    next: the clock calls then without waiting to read the run its tick created."""
    found = []
    for schedule in schedules:
        spread = timedelta(seconds=schedule.spec.jitter_seconds)
        cursor = state.cursors.get(schedule.id)
        if not spread or (cursor is not None and cursor.paused is not None):
            continue  # a paused schedule's slot gets no call: nor does its jitter
        fire = calls([schedule], after - spread, after + spread)
        found += [Wake(at, f"{schedule.id}: its run's jitter ends {iso(at)}")
                  for at in fire if at > after]
    return found


Read = Callable[[], tuple[list[Schedule], State, Cadence]]
"""The schedules of the checkout, the state branch's open runs and the cadence."""
Call = Callable[[datetime], str]
"""Starts tick.yml once; returns a few words on what it did, raises on failure."""


@dataclass
class _Called:
    """A moment called for and not yet seen settled on the state branch."""

    wake: Wake
    call: datetime
    """The last call made for it."""
    again: int = 0
    """Calls made again for it so far."""


class Clock:
    """The loop of ``serve --clock-only``: one call for each due moment that passed, and
    again for one the state branch does not show settled :data:`CONFIRM_AFTER` later.

    It remembers the instant of its last look (a moment in ``(last, now]`` is due now)
    and the moments it called for until they read settled. A failed call leaves the look
    where it was, so the next wake-up tries again, until :data:`RETRY_FOR` after the
    moment. A clock that starts (or restarts) takes the moments of the last
    :data:`CONFIRM_FOR` still unsettled as called at their instant: a slot missed while
    it was down is called for at once."""

    def __init__(self, read: Read, call: Call, started: datetime) -> None:
        self._read = read
        self._call = call
        self.last = started
        self.next_at: datetime | None = None
        """The next moment worth a call after the last look (the loop wakes for it)."""
        self.calls = 0
        self._called: dict[tuple[datetime, str], _Called] | None = None

    def work(self, now: datetime) -> list[str]:
        schedules, state, cadence = self._read()
        due = [m for m in clock_moments(schedules, state, self.last, cadence) if m.at <= now]
        lines: list[str] = []
        listed = stated(schedules, state, now - CONFIRM_FOR, cadence)
        again = self._unconfirmed(listed, now, lines)
        if (due or again) and not self._make(due, again, listed, now, lines):
            self._plan(schedules, state, cadence, now)  # the look stays: tried again
            return lines
        self.last = now
        self._plan(schedules, state, cadence, now)
        return lines

    def _make(self, due: list[Wake], again: list[_Called], listed: list[Wake],
              now: datetime, lines: list[str]) -> bool:
        """One call for the ``due`` moments and those called ``again``; False when it
        failed and the next wake-up tries the ``due`` ones again."""
        try:
            done = self._call(now)
        except OrchestratorError as exc:
            if due and now - due[0].at < RETRY_FOR:
                lines.append(f"call failed ({exc.message}); trying again at the next wake-up")
                return False
            # past RETRY_FOR, a failed call counts as a call: its moments are called
            # for again every CONFIRM_AFTER, as a call whose tick never ran
            lines.append(f"call failed ({exc.message}); trying {_what(due, again)} again "
                         f"in {_minutes(CONFIRM_AFTER)}")
        else:
            self.calls += 1
            lines.append(f"{done} for {_what(due, again)}" + ("" if due else
                         f" again: not fired {_minutes(now - again[0].call)} after the "
                         "last call"))
        for called in again:
            called.call, called.again = now, called.again + 1
        known = {(m.at, m.reason) for m in listed}
        for wake in due:  # a jitter's end is confirmed by its pending track
            if (wake.at, wake.reason) in known:
                self._known()[(wake.at, wake.reason)] = _Called(wake, now)
        return True

    def _known(self) -> dict[tuple[datetime, str], _Called]:
        if self._called is None:
            self._called = {}
        return self._called

    def _unconfirmed(self, listed: list[Wake], now: datetime,
                     lines: list[str]) -> list[_Called]:
        """The called moments still unsettled :data:`CONFIRM_AFTER` after their last
        call; forgets the settled ones, and gives up (one line) after
        :data:`CONFIRM_TRIES` calls again."""
        unsettled = {(m.at, m.reason): m for m in listed if m.at <= self.last}
        if self._called is None:  # the first look: what passed unsettled before it
            self._called = {key: _Called(m, m.at) for key, m in unsettled.items()}
        again: list[_Called] = []
        for key, called in list(self._called.items()):
            if key not in unsettled:
                del self._called[key]  # settled (fired, skipped or missed), or too old
            elif now - called.call >= CONFIRM_AFTER:
                if called.again < CONFIRM_TRIES:
                    again.append(called)
                    continue
                del self._called[key]
                lines.append(f"{called.wake.reason}: still not fired "
                             f"{_minutes(now - called.wake.at)} after it, after "
                             f"{CONFIRM_TRIES + 1} calls; left to the next tick (is "
                             "tick.yml failing, or a cap holding it?)")
        return again

    def _plan(self, schedules: list[Schedule], state: State, cadence: Cadence,
              now: datetime) -> None:
        upcoming = clock_moments(schedules, state, now, cadence)
        times = [m.at for m in upcoming[:1]]
        times += [c.call + CONFIRM_AFTER for c in self._known().values()]
        self.next_at = min(times) if times else None


def _what(due: list[Wake], again: list[_Called]) -> str:
    """The first moment a call is for, in words."""
    return due[0].reason if due else again[0].wake.reason


def _minutes(delta: timedelta) -> str:
    return f"{max(0, int(delta.total_seconds() // 60))} min"
