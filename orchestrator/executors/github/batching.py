"""How the requests of one run become ``workflow_dispatch`` runs, and how those are named.

GitHub runs at most 256 jobs from one matrix and rejects ``workflow_dispatch``
inputs longer than 65,535 characters, so the requests of one run are split into
several *batches*, each dispatched as its own workflow run with the inputs
``run_id``, ``batch`` and ``tracks`` (a JSON list of matrix legs).

The track workflow sets ``run-name: <run_id> <batch>``, where ``batch`` is a short
hash of the batch's dispatch keys (its *digest*). The REST API returns the run-name
as a workflow run's ``display_title`` (it never returns a run's inputs), so a batch
is found again by its title; batching is deterministic so that a later tick computes
the same titles.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...config.github_limits import MAX_INPUTS_CHARS, MAX_LEGS, SETUP_MINUTES
from ..base import DispatchRequest, DispatchResult
from .jobnames import job_name


def leg_timeout_minutes(minutes: float) -> int:
    """A track's timeout as its leg's job ``timeout-minutes``: whole minutes, at least
    one, plus :data:`SETUP_MINUTES`."""
    return max(1, math.ceil(minutes)) + SETUP_MINUTES


def _leg(request: DispatchRequest) -> dict[str, Any]:
    """One matrix leg: everything ``track.yml`` needs to run the track."""
    leg = {
        "key": request.key,
        "job": job_name(request.key),
        "track": request.track,
        "attempt": request.attempt,
        "poll": request.poll,
        "run": request.spec.run or "",
        "timeout_minutes": leg_timeout_minutes(request.spec.timeout_minutes),
        "limit": request.spec.timeout_minutes,
        "inputs": dict(sorted(request.spec.inputs.items())),
    }
    if request.runs_on:  # only when the schedule routes: track.yml's default otherwise
        leg["runs_on"] = request.runs_on
    approval = request.spec.approval
    if approval is not None and approval.environment:  # the job's `environment`
        leg["environment"] = approval.environment
    if request.env:
        leg["env"] = dict(sorted(request.env.items()))
    if request.results is not None:  # a track with needs: what they ended in
        leg["results"] = request.results
    if request.items:  # a drain worker: ids and attempts; it reads the payloads itself
        leg["items"] = [[w.id, w.attempt] for w in request.items]
        leg["queue"] = request.queue
        leg["wall"] = request.wall_minutes
    return leg


def _compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def batch_digest(keys: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:12]


def run_id_of(run_name: str) -> str:
    """The run id a batch's ``run-name`` starts with."""
    return run_name.split(" ", 1)[0]


@dataclass(frozen=True)
class Batch:
    """The requests of one run that go into one ``workflow_dispatch`` run."""

    run_id: str
    workflow: str
    requests: tuple[DispatchRequest, ...]

    @property
    def keys(self) -> list[str]:
        return [r.key for r in self.requests]

    @property
    def digest(self) -> str:
        return batch_digest(self.keys)

    @property
    def run_name(self) -> str:
        """The workflow run's ``run-name`` (``display_title``): ``<run_id> <digest>``."""
        return f"{self.run_id} {self.digest}"

    def inputs(self) -> dict[str, str]:
        return {
            "run_id": self.run_id,
            "batch": self.digest,
            "tracks": _compact([_leg(r) for r in self.requests]),
            **_fan_in_input(self.requests),
        }


def _fan_in_input(requests: Iterable[DispatchRequest]) -> dict[str, str]:
    """``fan_in: next_tick`` for a schedule without fan-in jobs. Sent only then, so a
    ``track.yml`` older than the input still takes every other dispatch (GitHub
    refuses an input the workflow does not declare)."""
    return {} if all(r.fan_in_job for r in requests) else {"fan_in": "next_tick"}


def _escaped_len(text: str) -> int:
    """Characters ``text`` takes inside a JSON string (quotes excluded)."""
    return len(json.dumps(text)) - 2


def plan_batches(requests: Iterable[DispatchRequest], *, max_legs: int = MAX_LEGS,
                 max_chars: int = MAX_INPUTS_CHARS) -> tuple[list[Batch], list[DispatchResult]]:
    """Split requests into batches per run and workflow, at most ``max_legs`` legs and
    ``max_chars`` characters of JSON-encoded inputs each.

    Deterministic: the same requests always give the same batches (sorted by track
    and attempt), so a batch's ``run-name`` can be recomputed by a later tick. A
    request too large to fit even alone comes back as an error result.
    """
    groups: dict[tuple[str, str], list[DispatchRequest]] = {}
    for request in requests:
        groups.setdefault((request.run_id, request.workflow), []).append(request)
    batches: list[Batch] = []
    rejected: list[DispatchResult] = []
    for (run_id, workflow), group in sorted(groups.items()):
        group.sort(key=lambda r: (r.track, r.attempt))
        # Size of {"run_id": ..., "batch": ..., "tracks": "[...]"} with an empty list;
        # each leg adds its escaped JSON plus one comma. Escaping is per character, so
        # the lengths add up exactly.
        base = len(json.dumps({"run_id": run_id, "batch": "0" * 12, "tracks": "[]",
                               **_fan_in_input(group)}))
        current: list[DispatchRequest] = []
        size = base
        for request in group:
            cost = _escaped_len(_compact(_leg(request)))
            extra = cost + (1 if current else 0)
            if base + cost > max_chars:
                rejected.append(DispatchResult(
                    key=request.key,
                    error=f"track {request.track}: its matrix leg takes {base + cost} "
                          f"characters of workflow inputs; GitHub allows {max_chars}",
                ))
                continue
            if current and (len(current) >= max_legs or size + extra > max_chars):
                batches.append(Batch(run_id, workflow, tuple(current)))
                current, size, extra = [], base, cost
            current.append(request)
            size += extra
        if current:
            batches.append(Batch(run_id, workflow, tuple(current)))
    return batches, rejected
