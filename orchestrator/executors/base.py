"""The executor contract shared by the local and the GitHub Actions backends.

The tick calls executors only outside the compare-and-swap "lock":

1. ``observe`` before planning, for every track that is ``dispatched`` or ``running``
   and has a handle;
2. ``lookup`` before planning, for every ``dispatched`` track *without* a handle (its
   dispatch may have happened in a tick that died before recording it): a found
   dispatch is adopted, never repeated;
3. ``dispatch`` after the mark commit landed, for the tracks it moved to
   ``dispatched``; results are recorded in a second commit;
4. ``cancel`` after the mark commit, for tracks it tapped out or cancelled.

A dispatch is marked with the executor's :attr:`Executor.machine` (when it has one), and
only an executor of that machine is asked to observe or look it up.

Every request carries a dispatch key ``<run_id>--<track>--<attempt>`` (a compensation
``<run_id>--<track>--undo--<attempt>``). ``dispatch``
must be idempotent per key where the backend allows it (the local executor is; on
GitHub the ``run-name`` correlation in ``lookup`` provides it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from ..config.models import TrackSpec
from ..state.breaker import Breaker
from ..state.items import ItemReport, NewItem
from ..state.phases import TrackPhase
from ..state.records import Track


@dataclass(frozen=True)
class WorkItem:
    """One item a drain worker is to work: its id, the attempt it makes, its payload."""

    id: str
    attempt: int
    payload: Any = None


@dataclass(frozen=True)
class DispatchRequest:
    """One track attempt to start."""

    run_id: str
    track: str
    attempt: int
    spec: TrackSpec
    workflow: str = "track.yml"
    marked_at: datetime | None = None
    """When the tick marked the track ``dispatched``; the dispatch, if it was sent, was
    sent by that tick. Set for :meth:`Executor.lookup`, to bound the search."""
    poll: int = 0
    """How many times this attempt answered "not yet" before: each poll is dispatched
    under its own key (``<run_id>--<track>--<attempt>.<poll>``), so an idempotent
    backend starts it again."""
    results: dict[str, Any] | None = None
    """For a track with ``needs`` (the ``consolidate`` step among them): every other
    track of the run by name, with its phase, attempt, result and error tail. The
    backend hands it to the command as the file named by ``ORCHESTRATOR_RESULTS``."""

    compensating: bool = False
    """The compensation of ``track`` (key ``<run_id>--<track>--undo--<attempt>``)."""
    runs_on: str | None = None
    """The runner label of the leg (GitHub's ``runs-on``), when the schedule routes."""
    fan_in_job: bool = True
    """Whether the batch's ``fan-in`` job records it (the schedule's ``fan_in``); when
    not, the next tick reads the outcomes from the legs' artifacts."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment of the command (a compensation's ``ORCHESTRATOR_COMPENSATING``
    and ``ORCHESTRATOR_ORIGINAL_RESULT``)."""
    items: tuple[WorkItem, ...] = ()
    """A drain worker's items, in the order it works them (none: an ordinary track).
    The command runs once per item; a backend that cannot carry the payloads (GitHub's
    inputs) sends the ids and attempts, and the worker reads the payloads itself."""
    queue: str | None = None
    """A drain worker's queue."""
    wall_minutes: float | None = None
    """A drain worker's wall clock: it starts no item after it and releases the one in
    flight (``spec.timeout_minutes`` stays the hard limit of the whole attempt)."""

    @property
    def key(self) -> str:
        undo = "--undo" if self.compensating else ""
        poll = f".{self.poll}" if self.poll else ""
        return f"{self.run_id}--{self.track}{undo}--{self.attempt}{poll}"


@dataclass(frozen=True)
class DispatchResult:
    """What became of one :class:`DispatchRequest`: a handle, or an error."""

    key: str
    handle: dict[str, Any] | None = None
    url: str | None = None
    error: str | None = None
    not_sent: bool = False
    """The request never reached the backend (e.g. its circuit breaker is open): the
    attempt is not spent, the track is dispatched again later."""


@dataclass(frozen=True)
class Observation:
    """What the backend knows about one dispatched attempt.

    ``phase`` is ``None`` when the backend has nothing new to say (e.g. a job still
    queued for a runner: the track stays ``dispatched`` until it starts). Only the phases
    ``RUNNING``, ``COMPLETE``, ``FAILED``, ``TAPPED_OUT``, ``CANCELLED`` and ``WAITING``
    (a poll track answered "not yet", e.g. exit code 75) are used.
    """

    key: str
    phase: TrackPhase | None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    url: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    handle: dict[str, Any] | None = None
    """A more precise handle learned while observing (e.g. the CI run id of a dispatch
    that was only correlated by name); the tick stores it on the track."""
    items: tuple[ItemReport, ...] | None = None
    """A drain worker's account of its items (``None``: the backend has none, e.g. a
    GitHub job whose outcome artifact is missing)."""
    enqueue: tuple[NewItem, ...] = ()
    """Items the track asked to enqueue (its ``ORCHESTRATOR_ENQUEUE`` file)."""
    enqueue_error: str | None = None
    """Why its enqueue file was refused as a whole, if it was."""
    held: bool = False
    """With ``phase`` ``None``: the attempt waits for the reviewers of its deployment
    environment (a GitHub job's status ``waiting``), not for a runner."""
    failed_to_start: bool = False
    """With ``phase`` ``FAILED``: the attempt never ran its command because its runner
    failed it (none took the job, or it died while setting up). Not the track's fault:
    a routed track goes to its next runner label without spending an attempt."""


@dataclass(frozen=True)
class Handle:
    """A dispatched attempt as the executor needs it for ``observe`` and ``cancel``."""

    key: str
    handle: dict[str, Any]
    timeout_minutes: float


class Executor(Protocol):
    """A place that runs tracks."""

    name: str

    @property
    def machine(self) -> str | None:
        """The machine this executor launches on, when only it can see what it launched
        (the local executor's work folder): what a tick marks dispatched is claimed by
        it, and other machines leave it alone. ``None``: any tick may look a dispatch up
        (GitHub)."""
        ...

    def dispatch(self, requests: list[DispatchRequest]) -> list[DispatchResult]:
        """Start every request; one result per request, in order. Never raises for a
        single failed request: its result carries ``error`` instead."""
        ...

    def lookup(self, requests: list[DispatchRequest]) -> dict[str, DispatchResult | None]:
        """Find attempts that were dispatched but never recorded, by dispatch key.

        A found attempt maps to its result; a key the backend was asked about and has
        no trace of maps to ``None``; a key the backend could not be asked about (an
        error, a rate limit) is absent. Only ``None`` lets the tick dispatch again, so
        an unreachable backend never causes a second start."""
        ...

    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        """Current knowledge about dispatched attempts, keyed by dispatch key."""
        ...

    def cancel(self, handle: Handle) -> None:
        """Stop an attempt (best effort; a finished attempt is left alone)."""
        ...

    def health(self) -> Breaker | None:
        """The backend's circuit breaker after this tick's calls (``None``: no breaker)."""
        ...


@dataclass(frozen=True)
class TrackLog:
    """The end of what a track's current attempt printed, as its backend keeps it."""

    text: bytes
    size: int
    """The whole log's size in bytes."""
    source: str
    """What the log is, for its header (``job 42``)."""
    whole: str | None = None
    """Where the whole log is (a page), when only its end is here."""

    @property
    def cut(self) -> int:
        """Bytes of the beginning not kept."""
        return self.size - len(self.text)


LogReader = Callable[[Track, bool, Callable[[str], None]], TrackLog]
"""Reads a track's log: the track's record, whether to wait until the attempt has
ended (``--follow``), and where to say that it waits."""
