"""What users write about work queues: a drain track's settings and the limits of an
enqueued item.

- A queue is a name under the same rule as schedule ids (:data:`~.fieldtypes.ID_RE`).
- :class:`Drain` turns a track into a drain track: sized when it is dispatched, its
  workers each own at most ``task_cap`` items of ``queue``.
- The limits here bound every item, whoever enqueues it (``queue add``, a track's
  ``ORCHESTRATOR_ENQUEUE`` file, ``enqueue.yml``), and the records built from them.
- :class:`OnQueue` fires a schedule on a queue's backlog: at ``min_ready`` ready items,
  or once the oldest has waited ``max_wait_minutes``; it names at least one of the two.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .fieldtypes import Id

MAX_PAYLOAD_BYTES = 64 * 1024
"""Largest payload of one item, as compact JSON in UTF-8."""
MAX_KEY_CHARS = 256
"""Longest idempotency key."""
MAX_PRIORITY = 999_999
"""Priorities run from ``-MAX_PRIORITY`` to ``MAX_PRIORITY``; higher is claimed first."""
MAX_TASK_CAP = 1000
MAX_WORKERS = 256
"""At most this many workers per drain: one GitHub matrix holds 256 legs."""
WORKER_SUFFIX = "-w"
"""A drain track ``pages`` has workers ``pages-w1``, ``pages-w2``, ...: names the schedule
may not give its own tracks."""


class Drain(BaseModel):
    """``"drain"`` of a track: the track works the items of a queue instead of running
    once. Its ``run`` runs once per item; ``timeout_minutes`` is each worker's wall
    clock, ``max_attempts`` and ``retry_backoff_seconds`` are each item's retries."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", defer_build=True)

    queue: Id = Field(description="The queue to drain (same rule as schedule ids).")
    task_cap: int = Field(
        25, ge=1, le=MAX_TASK_CAP,
        description="At most this many items per worker.")
    max_workers: int = Field(
        4, ge=1, le=MAX_WORKERS,
        description="At most this many workers per run of the track: it dispatches "
        "min(max_workers, ceil(backlog / task_cap)).")
    lease_minutes: float | None = Field(
        None, gt=0, le=7 * 24 * 60,
        description="How long a claim holds once its worker is no longer known to be "
        "alive; default: the track's timeout_minutes plus 10.")


class OnQueue(BaseModel):
    """``"on_queue"`` of a schedule: fire it when the queue's backlog calls for a drain."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", defer_build=True)

    queue: Id = Field(description="The queue to watch; a track of the schedule drains it.")
    min_ready: int | None = Field(
        None, ge=1, le=10_000_000,
        description="Fire once the queue holds this many ready items.")
    max_wait_minutes: float | None = Field(
        None, gt=0, le=31 * 24 * 60,
        description="Fire once the oldest ready item has waited this long.")

    @model_validator(mode="after")
    def _one_threshold(self) -> OnQueue:
        if self.min_ready is None and self.max_wait_minutes is None:
            raise ValueError("give 'min_ready', 'max_wait_minutes' or both")
        return self

    def describe(self) -> str:
        """``on queue jobs (100 ready or 30 min)``, as previews print it."""
        when = [f"{self.min_ready} ready" if self.min_ready is not None else "",
                f"{self.max_wait_minutes:g} min" if self.max_wait_minutes is not None else ""]
        return f"on queue {self.queue} ({' or '.join(w for w in when if w)})"


def worker_name(track: str, index: int) -> str:
    """The name of worker ``index`` (from 1) of the drain track ``track``."""
    return f"{track}{WORKER_SUFFIX}{index}"


def worker_names(track: str, drain: Drain) -> list[str]:
    """Every name a worker of ``track`` may take."""
    return [worker_name(track, i) for i in range(1, drain.max_workers + 1)]
