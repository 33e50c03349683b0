"""The tick's dispatch step (dispatch pending tracks whose time has come), and folding the
executor's answers to those dispatches back into the state once they are sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from ..config.models import OverlapPolicy
from ..config.triggers import CronTrigger, for_spec
from ..cron import DstPolicy
from ..executors.base import DispatchRequest, DispatchResult
from ..state import layout, machine
from ..state.model import State
from ..state.phases import RunStatus, TrackPhase
from ..state.records import Run, Track
from ..support.times import iso
from . import approvals, drain, graph
from .capacity import admit
from .context import Context, log_line
from .routing import pick, routable


def dispatch_pending(ctx: Context) -> None:
    if not ctx.obs.executor_available:
        if _any_pending(ctx):
            ctx.decision.log.append(f"{ctx.executor}: circuit breaker open; dispatch deferred")
        return
    for run_id, name in admit(ctx, routable(ctx, _wanting(ctx))):
        run, track = ctx.state.runs[run_id], ctx.state.tracks[run_id][name]
        if drain.is_drain(track):
            # sized now: its workers and their claims are part of this decision
            for worker in drain.size(ctx, run, track):
                dispatch_one(ctx, ctx.state.runs[run_id], worker)
            continue
        dispatch_one(ctx, run, track)


def _any_pending(ctx: Context) -> bool:
    return any(t.phase is TrackPhase.PENDING
               for ts in ctx.state.tracks.values() for t in ts.values())


def _due_to_go(ctx: Context, tracks: dict[str, Track], track: Track) -> bool:
    """Waiting to go, its needs met, and past any ``not_before``."""
    if track.phase not in (TrackPhase.PENDING, TrackPhase.WAITING):
        return False
    if not graph.ready(tracks, track):
        return False
    return track.not_before is None or track.not_before <= ctx.now


def _wanting(ctx: Context) -> list[tuple[str, str]]:
    """(run id, track) of every track due to go, before caps and routing have a say."""
    wanting: list[tuple[str, str]] = []
    for run in ctx.open_runs():
        if run.status is RunStatus.CONSOLIDATING or buffered(ctx, run):
            continue
        tracks = ctx.state.tracks.get(run.run_id, {})
        due = [name for name in sorted(tracks) if _due_to_go(ctx, tracks, tracks[name])]
        wanting += [(run.run_id, name) for name in approvals.let_through(ctx, tracks, due)]
    return wanting


PREVIOUS_SLOT_SPANS = (timedelta(hours=2), timedelta(days=2), timedelta(days=33),
                       timedelta(days=367), timedelta(days=8 * 366))
"""Spans before a slot searched, in turn, for the one before it (a schedule every
minute is answered by the first, a leap day's by the last)."""


def run_environment(ctx: Context, run: Run) -> dict[str, str]:
    """What a track knows about its run, as Airflow gives its tasks the logical date
    and the data interval: the schedule, the slot in UTC and in the schedule's zone,
    and the slot before it (empty for a one-shot or a first slot)."""
    zone = ZoneInfo(run.timezone)
    return {
        "ORCHESTRATOR_SCHEDULE": run.schedule_id,
        "ORCHESTRATOR_SLOT": iso(run.slot),
        "ORCHESTRATOR_SLOT_LOCAL": run.slot.astimezone(zone).isoformat(),
        "ORCHESTRATOR_PREVIOUS_SLOT": _previous_slot(ctx, run),
        **_upstream_environment(run),
        **({"ORCHESTRATOR_EVENT_ID": run.event_id} if run.event_id is not None else {}),
    }


def _upstream_environment(run: Run) -> dict[str, str]:
    """A run fired by ``after``: its upstream runs' ids, and where each one's records
    lie on the state branch (``run.json``, ``tracks/<name>.json`` with every result)."""
    if not run.upstream:
        return {}
    return {"ORCHESTRATOR_UPSTREAM_RUN": " ".join(run.upstream),
            "ORCHESTRATOR_UPSTREAM_RESULTS": " ".join(
                layout.run_dir(r) for r in run.upstream)}


def _previous_slot(ctx: Context, run: Run) -> str:
    schedule = ctx.schedules.get(run.schedule_id)
    if schedule is not None and schedule.spec.cron == run.cron:
        trigger = for_spec(schedule.spec)
    elif run.cron is not None:  # the file changed or went: the cron the run fired with
        trigger = CronTrigger(run.cron, run.timezone, DstPolicy())
    else:
        return ""
    if not trigger.repeats:
        return ""
    until = run.slot - timedelta(microseconds=1)
    for span in PREVIOUS_SLOT_SPANS:
        try:
            before = trigger.slots(run.slot - span, until)
        except ValueError:
            return ""
        if before:
            return iso(before[-1])
    return ""


def dispatch_one(ctx: Context, run: Run, track: Track) -> None:
    tracks = ctx.state.tracks.get(run.run_id, {})
    request = DispatchRequest(run_id=run.run_id, track=track.name, attempt=track.attempt,
                              spec=track.spec, workflow=run.workflow, poll=track.polls,
                              results=graph.results_for(tracks, track),
                              fan_in_job=ctx.fan_in_job(run), env=run_environment(ctx, run))
    if track.work is not None:
        request = replace(request, items=drain.work_items(ctx, track, request.key),
                          queue=track.work.queue, wall_minutes=track.work.wall_minutes,
                          results=None)
        if not request.items:  # every claim of it was released meanwhile
            ctx.move(track, TrackPhase.CANCELLED, "no item of it is still its to work",
                     finished_at=ctx.now)
            return
    go, runner = pick(ctx, run, track, request.key)
    if not go:
        return
    if runner is not None:
        request = replace(request, runs_on=runner)
    what = (f"poll {track.polls + 1} of attempt {track.attempt}" if track.polls
            else f"attempt {track.attempt}")
    ctx.move(track, TrackPhase.DISPATCHED, f"{what} to {ctx.executor}"
             + (f" on {runner}" if runner else ""),
             dispatch_key=request.key, dispatched_at=ctx.now, finished_at=None,
             executor=ctx.executor, handle=None, not_before=None, runner=runner,
             claimed_by=ctx.obs.machine)
    ctx.decision.dispatch.append(request)
    if run.status is RunStatus.SCHEDULED:
        # The deadline counts from the start: a run that waited behind
        # another (buffer_one) gets its whole allowance once it starts.
        allowance = run.deadline - max(run.fire_at, run.created_at)
        run = machine.move_run(run, RunStatus.RUNNING, ctx.now, "first dispatch",
                               deadline=max(run.deadline, ctx.now + allowance))
        ctx.state.runs[run.run_id] = run


def buffered(ctx: Context, run: Run) -> bool:
    """A ``buffer_one`` run waits while an older run of its schedule is open."""
    schedule = ctx.schedules.get(run.schedule_id)
    if schedule is None or schedule.spec.overlap is not OverlapPolicy.BUFFER_ONE:
        return False
    return any(o.slot < run.slot for o in ctx.open_runs(run.schedule_id, active=True))


@dataclass(frozen=True)
class DispatchRecord:
    """One dispatch result folded into the state by :func:`record_dispatch`."""

    run_id: str
    track: str
    outcome: Literal["not_sent", "failed", "started"]
    """``not_sent``: back to pending, retried; ``failed``: the attempt failed;
    ``started``: the executor's handle (and link) recorded."""
    detail: str = ""
    """The executor's error, or the link of a started attempt (may be empty)."""

    @property
    def change(self) -> str:
        """What changed, in words, for the run's poll log."""
        if self.outcome == "not_sent":
            return f"{self.track}: not dispatched, will retry: {self.detail}"
        if self.outcome == "failed":
            return f"{self.track}: dispatch failed: {self.detail}"
        return f"{self.track}: started" + (f", {self.detail}" if self.detail else "")

    def __str__(self) -> str:
        return f"{self.run_id}/{self.change}"


def record_dispatch(state: State, results: Iterable[DispatchResult], now: datetime
                    ) -> list[DispatchRecord]:
    """Fold dispatch results into ``state`` (in place); return what changed.

    Only tracks still ``dispatched`` under the same key are touched: if another
    tick or a report moved the track on meanwhile, its news wins.
    """
    records: list[DispatchRecord] = []
    by_key = {r.key: r for r in results}
    for run_id, tracks in [*state.tracks.items(), *state.undos.items()]:
        for name, track in list(tracks.items()):
            res = by_key.get(track.dispatch_key or "")
            if res is None or track.phase is not TrackPhase.DISPATCHED:
                continue
            folded = _folded(track, res, now)
            if folded is not None:
                tracks[name], outcome, detail = folded
                records.append(DispatchRecord(run_id, name, outcome, detail))
    return records


_Outcome = Literal["not_sent", "failed", "started"]


def _folded(track: Track, res: DispatchResult, now: datetime
            ) -> tuple[Track, _Outcome, str] | None:
    """``track`` with its dispatch result applied, the outcome and its detail; ``None``
    when the result changes nothing."""
    if res.error and res.not_sent:
        return (machine.move_track(track, TrackPhase.PENDING, now, f"not dispatched: {res.error}",
                                   dispatch_key=None, dispatched_at=None, handle=None),
                "not_sent", res.error)
    if res.error:
        log = log_line(track, f"{iso(now)} dispatch failed: {res.error}")
        return (machine.move_track(track, TrackPhase.FAILED, now, "dispatch failed",
                                   error_log=log, finished_at=now),
                "failed", res.error)
    if track.handle != res.handle or track.url != res.url:
        return (track.model_copy(update={"handle": res.handle, "url": res.url}),
                "started", res.url or "")
    return None
