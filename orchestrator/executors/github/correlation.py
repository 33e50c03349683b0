"""A batch found again on GitHub: its dispatches as handles, by title or by jobs.

A batch is found again by listing ``workflow_dispatch`` runs created since the dispatch
and comparing their ``display_title`` with the batch's run-name. Every matrix leg's job
is named by a hash of its dispatch key (:mod:`.jobnames`), so the jobs of a run tell
exactly which keys it carries.

- A handle with ``ci_run_id`` names its workflow run; one without it is found later by
  its run-name, within the window of its ``dispatched_at``.
- The oldest run with a title wins: a run-name sent twice is adopted, never repeated.
- A run whose title is the batch's run id plus other tracks carries a key only when
  one of its jobs is named by it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from ...support.times import iso, parse_utc
from ..base import DispatchRequest, DispatchResult, Handle
from .batching import Batch, plan_batches
from .jobnames import job_name, match
from .listing import Listing, Window


class Pacing(Protocol):
    """The client's clock: correlating polls sleep on the tick's wait budget."""

    def sleep_for(self, seconds: float) -> bool: ...


def adopt(batch: Batch, ci_run: int, url: Any) -> list[DispatchResult]:
    """Every key of ``batch`` as a leg of the workflow run ``ci_run``."""
    html = url if isinstance(url, str) else None
    return [
        DispatchResult(key=key, handle={"ci_run_id": ci_run, "job_name": job_name(key),
                                        "run_name": batch.run_name,
                                        "workflow": batch.workflow}, url=html)
        for key in batch.keys
    ]


def pending(batch: Batch, now: datetime) -> list[DispatchResult]:
    """Every key of ``batch`` sent at ``now``, its run not yet seen: ``observe`` finds it."""
    sent = iso(now)
    return [
        DispatchResult(key=key, handle={"job_name": job_name(key),
                                        "run_name": batch.run_name,
                                        "workflow": batch.workflow,
                                        "dispatched_at": sent})
        for key in batch.keys
    ]


def correlate(listing: Listing, pacing: Pacing, batch: Batch, window: Window, polls: int,
              now: datetime) -> list[DispatchResult]:
    """Find the batch's run by its run-name, polling a little; else a handle that
    ``observe`` resolves once the run shows up."""
    for poll in range(polls):
        if poll and not pacing.sleep_for(float(2 ** (poll - 1))):
            break
        run = listing.find(batch.workflow, batch.run_name, window)
        if run is not None:
            return adopt(batch, int(run["id"]), run.get("html_url"))
    return pending(batch, now)


def first_titled(runs: list[dict[str, Any]], run_name: str) -> dict[str, Any] | None:
    """The oldest of ``runs`` titled ``run_name``, if any."""
    matches = [r for r in runs if r.get("display_title") == run_name]
    return min(matches, key=lambda r: int(r["id"])) if matches else None


def window_of(handle: Handle, now: datetime) -> Window:
    """Where to look for ``handle``'s run: around its sending, else since its slot."""
    sent = parse_utc(handle.handle.get("dispatched_at"))
    if sent is not None:
        return Window.sent_at(sent)
    return Window.since_slot(str(handle.handle.get("run_name", "")), now)


def lookup_group(listing: Listing, run_id: str, workflow: str,
                 group: list[DispatchRequest], now: datetime) -> dict[str, DispatchResult]:
    """The dispatches of ``group`` (one run, one workflow) that GitHub has: a run titled
    with their batch's run-name, else a run of ``run_id`` whose jobs name them."""
    candidates = sorted((r for r in lookup_runs(listing, workflow, group, now)
                         if _of_run(r, run_id)), key=lambda r: int(r["id"]))
    found, used = _by_title(candidates, group)
    wanted = {r.key: r for r in group if r.key not in found}
    for run in candidates:
        if not wanted:
            break
        if int(run["id"]) not in used:
            found.update(_by_jobs(listing, run, workflow, wanted))
    return found


def _of_run(run: dict[str, Any], run_id: str) -> bool:
    """Whether a workflow run's title names a batch of ``run_id``."""
    title = str(run.get("display_title", ""))
    return title == run_id or title.startswith(run_id + " ")


def _by_title(candidates: list[dict[str, Any]], group: list[DispatchRequest]
              ) -> tuple[dict[str, DispatchResult], set[int]]:
    """The batches of ``group`` whose run-name a candidate carries, and those runs' ids."""
    by_title: dict[str, dict[str, Any]] = {}
    for run in candidates:
        by_title.setdefault(str(run["display_title"]), run)
    found: dict[str, DispatchResult] = {}
    used: set[int] = set()
    batches, _ = plan_batches(group)
    for batch in batches:
        titled = by_title.get(batch.run_name)
        if titled is not None:
            used.add(int(titled["id"]))
            found.update((r.key, r) for r in adopt(batch, int(titled["id"]),
                                                     titled.get("html_url")))
    return found, used


def _by_jobs(listing: Listing, run: dict[str, Any], workflow: str,
             wanted: dict[str, DispatchRequest]) -> dict[str, DispatchResult]:
    """The keys of ``wanted`` that ``run``'s jobs carry, popped from ``wanted``.

    The batch was dispatched with other companions: its jobs say which keys it carries
    (one job per leg, named by a hash of its dispatch key)."""
    found: dict[str, DispatchResult] = {}
    for key in match(listing.jobs(int(run["id"])), list(wanted)):
        request = wanted.pop(key)
        found[request.key] = DispatchResult(
            key=request.key,
            handle={"ci_run_id": int(run["id"]), "job_name": job_name(request.key),
                    "run_name": str(run["display_title"]), "workflow": workflow},
            url=run.get("html_url"))
    return found


def lookup_runs(listing: Listing, workflow: str, group: list[DispatchRequest],
                now: datetime) -> list[dict[str, Any]]:
    """The runs created while the group's dispatches may have been sent: one listing
    per mark time (usually one: a tick marks a run's tracks together)."""
    marks = sorted({r.marked_at for r in group if r.marked_at is not None})
    windows = [Window.marked_at(m) for m in marks]
    if len(marks) < len(group):
        windows.append(Window.since_slot(group[0].run_id, now))
    runs: dict[int, dict[str, Any]] = {}
    for window in windows:
        runs.update((int(r["id"]), r) for r in listing.runs(workflow, window))
    return list(runs.values())
