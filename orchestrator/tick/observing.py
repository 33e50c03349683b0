"""What the executor says about open attempts, folded in before the tick plans.

Everything a track wrote (a result, stderr, an outcome file a fan-in job downloaded)
passes here and is made safe to commit and print: redacted, and a result that could not
be written back as JSON replaced by ``{"error": why}``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from ..errors import ExecutorError
from ..executors.base import (
    DispatchRequest,
    DispatchResult,
    Executor,
    Handle,
    Observation,
)
from ..planner import Observations
from ..planner.drain import unsettled
from ..state import model as state_model
from ..state.items import ItemReport, NewItem
from ..state.machine import TRACK_OPEN
from ..state.phases import RunStatus, TrackPhase
from ..state.records import Run, Track
from ..support import safejson
from ..support.credentials import Redactor, redact_value, redactor
from . import scope as run_scope

log = logging.getLogger(__name__)

T = TypeVar("T")


def _from_track(seen: Observation, redact: Redactor) -> Observation:
    """``seen`` with what the track wrote made safe to commit and print: redacted, and
    a result that cannot be written back as JSON replaced by ``{"error": why}``."""
    result = _safe_result(seen.result, redact)
    safe = dataclasses.replace(
        seen, result=result, error=redact(seen.error) if seen.error else seen.error,
        items=seen.items and tuple(_item_report(r, redact) for r in seen.items),
        enqueue=tuple(_new_item(n, redact) for n in seen.enqueue),
        enqueue_error=redact(seen.enqueue_error) if seen.enqueue_error else None)
    return seen if result is seen.result and safe == seen else safe


def _safe(value: Any, redact: Redactor) -> Any:
    try:
        safejson.check_text(value)
        return redact_value(value, redact)
    except safejson.UnsafeJSON as exc:
        return {"error": f"result ignored: {exc}"}


def _safe_result(value: Any, redact: Redactor) -> Any:
    """A result as :func:`_safe` makes it, or ``None`` for none."""
    return _safe(value, redact) if value is not None else None


def _item_report(report: ItemReport, redact: Redactor) -> ItemReport:
    """A worker's report on one item, as safe to commit as a track's result."""
    result = _safe_result(report.result, redact)
    error = redact(report.error) if report.error else report.error
    if result == report.result and error == report.error:
        return report
    return report.model_copy(update={"result": result, "error": error})


def _new_item(item: NewItem, redact: Redactor) -> NewItem:
    payload = _safe(item.payload, redact)
    return item if payload == item.payload else item.model_copy(update={"payload": payload})


def _ask(what: str, call: Callable[[], Mapping[str, T]]) -> tuple[dict[str, T], bool]:
    """What ``call`` answered, and whether it did (``{}`` and ``False`` when it raised)."""
    try:
        return dict(call()), True
    except ExecutorError as exc:
        log.warning("%s: %s", what, exc)
        return {}, False


def _open_tracks(state: state_model.State) -> Iterator[tuple[str, Run, Track]]:
    """The open tracks (compensations too) of the runs still going, and the drain
    workers stopped there whose account of their items is still to be read."""
    for run_id, tracks in [*state.tracks.items(), *state.undos.items()]:
        run = state.runs.get(run_id)
        if run is None or run.status not in (RunStatus.SCHEDULED, RunStatus.RUNNING):
            continue
        for track in tracks.values():
            if track.phase in TRACK_OPEN or unsettled(track, state.queues):
                yield run_id, run, track


def _to_ask(executor: Executor, track: Track, key: str,
            known: Mapping[str, Observation] | None) -> bool:
    """Whether ``executor`` is the one to ask about ``track``'s dispatch ``key``."""
    if track.executor not in (None, executor.name):
        return False  # dispatched by another backend; that one observes it
    if track.claimed_by not in (None, executor.machine):
        return False  # another machine's: only it can see what it launched
    return not known or key not in known


def _observe(executor: Executor, handles: list[Handle], lost: list[DispatchRequest]
             ) -> tuple[dict[str, Observation], dict[str, DispatchResult | None], bool]:
    """What observing ``handles`` and looking up ``lost`` found, and whether the
    executor is available for new dispatches."""
    # Asked apart: a failing look-up keeps what observing learned, and the other way
    # round. Either failing holds back new dispatches for this tick.
    seen, observed = _ask(f"{executor.name} observe", lambda: executor.observe(handles)
                          ) if handles else ({}, True)
    found, looked_up = _ask(f"{executor.name} lookup", lambda: executor.lookup(lost)
                            ) if lost else ({}, True)
    breaker = executor.health()
    return seen, found, observed and looked_up and (breaker is None
                                                    or breaker.state != "open")


def _questions(executor: Executor, state: state_model.State,
               known: Mapping[str, Observation] | None
               ) -> tuple[list[Handle], list[DispatchRequest]]:
    """The handles of the open attempts to observe, and the dispatches nobody recorded
    (no handle yet) to look up."""
    handles: list[Handle] = []
    lost: list[DispatchRequest] = []
    for run_id, run, track in _open_tracks(state):
        key = track.dispatch_key
        if key is None or not _to_ask(executor, track, key, known):
            continue
        if track.handle is not None:
            handles.append(Handle(key=key, handle=track.handle,
                                  timeout_minutes=track.spec.timeout_minutes))
        elif track.phase is TrackPhase.DISPATCHED:
            lost.append(DispatchRequest(run_id=run_id, track=track.name,
                                        attempt=track.attempt, spec=track.spec,
                                        workflow=run.workflow, poll=track.polls,
                                        marked_at=track.dispatched_at,
                                        compensating=track.compensating))
    return handles, lost


def gather(executor: Executor, state: state_model.State,
           known: Mapping[str, Observation] | None = None,
           redact: Redactor | None = None) -> Observations:
    """Observe open attempts and look up unrecorded dispatches.

    Attempts in ``known`` (outcome files a fan-in job downloaded) are not asked about:
    what they say is taken as it is.

    These calls change nothing on the state branch; a backend may still repair its
    own bookkeeping here (the local executor restarts a supervisor whose dispatcher
    died, and records an attempt whose supervisor vanished). What a track wrote passes
    ``redact`` (default: a redactor of the credentials in this process's environment).
    """
    seen, found, available = _observe(executor, *_questions(executor, state, known))
    if known:
        seen = run_scope.merge(known, seen)
    # Everything a track wrote (an outcome file, a result, stderr) is made safe to
    # commit and print, whichever way it arrived.
    scrub = redactor(os.environ) if redact is None else redact
    seen = {key: _from_track(o, scrub) for key, o in seen.items()}
    return Observations(seen=seen, found=found, executor_available=available,
                        machine=executor.machine)
