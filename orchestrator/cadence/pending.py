"""The scheduled tick left pending behind a lingering one: cancelled when it would find nothing.

Scheduled runs of ``tick.yml`` share one concurrency group. While one lingers, GitHub
keeps at most one newer run of the group ``pending`` and starts it when the lingering
one ends (GitHub's docs, "Control the concurrency of workflows and jobs"). Started
after the slot already fired, that run ticks, finds nothing and is billed a minute.
So at the end of its last tick a lingering tick on GitHub cancels it
(``POST .../actions/runs/{id}/cancel``), unless ``orchestrator.json`` says
``"cadence": {"cancel_idle_pending": false}``. It cancels a run only when:

- GitHub's cron started it (event ``schedule``): a ``workflow_dispatch`` or
  ``repository_dispatch`` is a person's, the external clock's or the watchdog's
  request, and is never touched; it is not this job's own run (``GITHUB_RUN_ID``);
- it was created before the last tick read the state (:func:`idle_runs`);
- it still waits to start (status ``pending`` or ``queued``), whatever the listing's
  ``status`` filter let through: a running tick is never cancelled;
- nothing falls due before it would tick (:data:`GRACE` from now), and no moment
  worth a waiting runner (a lingering slot, a retry's back-off end, a poll) falls
  before the next scheduled tick or within the linger window, which that run would
  wait for (:func:`keeps`: the linger's own :attr:`~.wake.Wake.linger_target`).

A deadline or a timeout later than :data:`GRACE` does not keep the run: it would
not wait for one (:mod:`.wake`), so the next tick acts on it either way. When in
doubt (no readable cron in ``tick.yml``, a run's creation time unreadable) nothing
is cancelled. The held run cannot start while this job runs, since this job holds
the group, so a cancel never stops a tick at work. GitHub bills no run that never
started. Every failure (the list, a cancel: ``403`` without ``actions: write``,
``409`` for a run no longer cancellable) is one line and never fails the tick.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from ..errors import OrchestratorError
from ..github.admin import WAITING
from ..support.safejson import read_file
from ..support.times import iso_minute, parse_utc
from .derive import utc_spec
from .tickfile import TICK, read_crons
from .wake import Wake, cron_slots

GRACE = timedelta(minutes=5)
"""How soon after this job ends the held run would tick: a runner's start-up and its
set-up, with room to spare. Anything due before then keeps it."""
SCHEDULE_EVENT = "schedule"
TICK_WORKFLOW = TICK.name
MAX_WORKFLOW_BYTES = 256 * 1024
"""A ``tick.yml`` larger than this is not read (real ones are under 10 KB)."""


class PendingAPI(Protocol):
    """What the cancel needs of the workflow admin (:mod:`orchestrator.github.admin`)."""

    def waiting_runs(self, workflow: str, event: str) -> list[dict[str, Any]]: ...

    def cancel_run(self, ci_run: int) -> None: ...


def next_scheduled_tick(root: Path, now: datetime) -> datetime | None:
    """The first instant after ``now`` at which ``root``'s ``tick.yml`` cron fires; None
    when the file is absent, unreadable or has no cron GitHub would run."""
    found = []
    for line in tick_crons(root):
        try:
            found += cron_slots(utc_spec(line), now)
        except ValueError:  # a cron line the evaluator refuses: validate names it
            continue
    return min(found, default=None)


def tick_crons(root: Path) -> list[str]:
    """The cron lines of ``root``'s ``tick.yml``; none when it is absent or unreadable."""
    try:
        text = read_file(root / TICK, max_bytes=MAX_WORKFLOW_BYTES, root=root).decode()
    except (OSError, ValueError):  # absent, hostile (UnsafeJSON is a ValueError), not UTF-8
        return []
    return read_crons(text)


def keeps(wake: Wake | None, now: datetime, next_tick: datetime | None,
          window: timedelta) -> str | None:
    """Why a scheduled tick starting as this job ends would do something (None: it would
    find nothing). ``wake``: the last tick's next due moment; ``window``: ``--linger``."""
    if next_tick is None:
        return "tick.yml names no next scheduled tick"
    if wake is None:
        return None
    if wake.at <= now + GRACE:
        return f"{wake.describe(now)} is due before it would tick"
    target = wake.linger_target
    horizon = max(next_tick, now + window + GRACE)
    if target is not None and target.at <= horizon:
        return (f"it would wait for {target.describe(now)}, before the next scheduled tick "
                f"({iso_minute(next_tick)})")
    return None


def idle_runs(runs: Iterable[dict[str, Any]], *, own_run: int | None,
              read_at: datetime) -> list[int]:
    """The ids of ``runs`` GitHub's cron started before ``read_at`` that still wait to
    start, other than ``own_run`` (a run whose fields cannot be read is left alone)."""
    found = []
    for run in runs:
        ci_run = run.get("id")
        if not _scheduled_and_waiting(run) or not isinstance(ci_run, int) \
                or ci_run == own_run:
            continue
        at = parse_utc(run.get("created_at"))
        if at is not None and at < read_at:
            found.append(ci_run)
    return sorted(set(found))


def _scheduled_and_waiting(run: dict[str, Any]) -> bool:
    """Started by GitHub's cron and not started yet, checked on the run itself: a listing
    that ignored its ``event`` or ``status`` filter must not get a running tick cancelled."""
    return run.get("event") == SCHEDULE_EVENT and run.get("status") in WAITING


def cancel_idle(api: PendingAPI, *, wake: Wake | None, read_at: datetime, now: datetime,
                next_tick: datetime | None, window: timedelta,
                own_run: int | None) -> list[str]:
    """Cancel the held scheduled ticks that would find nothing; one line per thing done
    or failed (none when there was nothing to cancel)."""
    why = keeps(wake, now, next_tick, window)
    if why is not None:
        return [f"pending scheduled tick (if any) left to run: {why}"]
    try:
        runs = api.waiting_runs(TICK_WORKFLOW, SCHEDULE_EVENT)
    except OrchestratorError as exc:
        return [f"listing the pending scheduled ticks failed (nothing cancelled): {exc.message}"]
    lines = []
    until = f"before the next scheduled tick ({iso_minute(next_tick)})" if next_tick else ""
    for ci_run in idle_runs(runs, own_run=own_run, read_at=read_at):
        try:
            api.cancel_run(ci_run)
        except OrchestratorError as exc:
            lines.append(f"cancelling the pending scheduled tick {ci_run} failed: "
                         f"{exc.message}")
        else:
            lines.append(f"cancelled the pending scheduled tick {ci_run}: it would find "
                         f"nothing to do {until}")
    return lines
