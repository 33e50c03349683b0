"""GitHub's cron lateness as this repository measures it: the ledger ``state/lateness.jsonl``.

- A tick that GitHub's cron started makes one :class:`Sample`: the cron line fired (the
  event payload's ``schedule``), the slot it meant (that line's latest instant at or
  before the run's creation), the run's ``created_at`` and the tick's start.
- A sample rides a commit the tick makes anyway (:mod:`orchestrator.tick.contributors`):
  an idle tick commits nothing and leaves none, and the heartbeat commit carries one.
- One line per workflow run: a lingering tick's later commits add nothing.
- The ledger keeps the samples of the last :data:`KEEP_DAYS` days, at most :data:`KEEP`.
- Lateness is ``created_at`` minus the slot: the delay before GitHub created the run.
  A line whose lateness is below 0 or over :data:`LOOKBACK` is read as unreadable.
- A slot of a ``tick.yml`` line between the first and the last slot sampled counts as
  dropped when no sample names it. A tick that committed nothing, or was cancelled
  while pending, leaves no sample either, so ``dropped`` is an upper bound.
- Nothing here reads the clock, the network or the checkout.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..state import codec
from ..support.times import iso, parse_utc
from .derive import ZONED, utc_spec
from .wake import cron_slots

KEEP_DAYS = 30
KEEP = 1000
"""Samples kept at most (about 130 KB, rewritten by each commit that adds one): 30 days
of a scheduled tick every 45 minutes."""
LOOKBACK = timedelta(days=2)
"""How far before a run's creation its slot is looked for; a run later than that is
no sample (its slot cannot be told from the line's earlier ones)."""
MAX_EVENT_BYTES = 1024 * 1024
SCHEDULE_EVENT = "schedule"
RISK_DAYS = 7
MIN_SAMPLES = 5
"""Samples of the last :data:`RISK_DAYS` days needed before lateness is called a risk."""


@dataclass(frozen=True)
class Sample:
    """One scheduled tick: the line GitHub fired, its slot, the run's creation, the start."""

    cron: str
    """As ``tick.yml`` has it (``TZ=<zone> <cron>`` for a zoned entry)."""
    slot: datetime
    created: datetime
    started: datetime
    run: int | None = None
    """The workflow run (``GITHUB_RUN_ID``), so a run is sampled once."""

    @property
    def late(self) -> float:
        """Seconds from the slot to the run's creation."""
        return (self.created - self.slot).total_seconds()

    def line(self) -> bytes:
        return codec.json_line({"cron": self.cron, "slot": iso(self.slot),
                                "created": iso(self.created), "started": iso(self.started),
                                "run": self.run})


@dataclass(frozen=True)
class Figures:
    """Lateness over some samples, in seconds, and the slots dropped beside them."""

    samples: int
    p50: float | None
    p95: float | None
    max: float | None
    dropped: int

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "p50_seconds": self.p50, "p95_seconds": self.p95,
                "max_seconds": self.max, "dropped": self.dropped}


# --------------------------------------------------------------------------- a sample


def event_cron(environ: Mapping[str, str]) -> str | None:
    """The cron line GitHub fired, from the event payload of a ``schedule`` run."""
    path = environ.get("GITHUB_EVENT_PATH")
    if environ.get("GITHUB_EVENT_NAME") != SCHEDULE_EVENT or not path:
        return None
    try:
        with open(path, "rb") as fh:
            payload = json.loads(fh.read(MAX_EVENT_BYTES))
    except (OSError, ValueError, RecursionError):  # a payload too deep is no payload
        return None
    cron = payload.get("schedule") if isinstance(payload, dict) else None
    return cron.strip() if isinstance(cron, str) and cron.strip() else None


def scheduled_run(environ: Mapping[str, str]) -> tuple[str, int] | None:
    """The cron line fired and the workflow run (``GITHUB_RUN_ID``) of a ``schedule`` run."""
    cron, run = event_cron(environ), environ.get("GITHUB_RUN_ID", "")
    return (cron, int(run)) if cron is not None and run.isdigit() else None


def tick_line(cron: str, lines: Iterable[str]) -> str:
    """The line of ``tick.yml`` that ``cron`` (the payload's, without its zone) is, so a
    zoned entry keeps its zone; ``cron`` itself when none matches (read in UTC)."""
    for line in lines:
        if line == cron or (line.startswith(ZONED) and line.partition(" ")[2] == cron):
            return line
    return cron


def slot_of(line: str, created: datetime) -> datetime | None:
    """The latest instant of ``line`` at or before ``created``, within :data:`LOOKBACK`."""
    try:
        found = cron_slots(utc_spec(line), created - LOOKBACK, created)
    except ValueError:  # a line the evaluator refuses
        return None
    return found[-1] if found else None


def sample(cron: str, lines: Iterable[str], created: datetime, started: datetime,
           run: int | None) -> Sample | None:
    """The sample of a run of ``cron`` created at ``created``; ``None`` without a slot."""
    line = tick_line(cron, lines)
    slot = slot_of(line, created)
    return Sample(line, slot, created, started, run) if slot is not None else None


# --------------------------------------------------------------------------- the ledger


def read(data: bytes | None) -> list[Sample]:
    """The samples of the ledger's bytes, oldest first; an unreadable line is skipped."""
    found = []
    for raw in (data or b"").splitlines():
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):  # a hostile line costs only itself
            continue
        parsed = _parsed(entry) if isinstance(entry, dict) else None
        if parsed is not None:
            found.append(parsed)
    return found


def _parsed(entry: dict[str, Any]) -> Sample | None:
    cron, run = entry.get("cron"), entry.get("run")
    moments = [parse_utc(entry.get(k)) for k in ("slot", "created", "started")]
    if not isinstance(cron, str) or None in moments:
        return None
    slot, created, started = moments
    assert slot is not None and created is not None and started is not None
    if not timedelta(0) <= created - slot <= LOOKBACK:
        return None  # no tick samples that: a forged line would skew every figure
    return Sample(cron, slot, created, started,
                  run if type(run) is int else None)  # a bool is no run id


def append(data: bytes | None, new: Sample) -> bytes | None:
    """The ledger with ``new`` added and cut to its window (from ``new``'s start);
    ``None`` when its run is already in it. Only the lines it drops are parsed, so a
    tick pays for the few samples that leave the window, not for the ledger."""
    data = data or b""
    if new.run is not None and f'"run":{new.run},'.encode() in data:
        return None  # sort_keys writes "run" before "slot" on every line
    for _ in range(data.count(b"\n") - (KEEP - 1)):
        data = _rest(data)
    since = new.started - timedelta(days=KEEP_DAYS)
    while data and _older(data[:data.find(b"\n") + 1 or None], since):
        data = _rest(data)
    return data + new.line()


def _rest(data: bytes) -> bytes:
    """``data`` without its first line."""
    cut = data.find(b"\n")
    return b"" if cut < 0 else data[cut + 1:]


def _older(line: bytes, since: datetime) -> bool:
    """Whether the sample of ``line`` is older than ``since``; an unreadable one is."""
    found = read(line)
    return not found or found[0].slot < since


# --------------------------------------------------------------------------- figures


def percentile(values: Sequence[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile of ``values`` (sorted), ``None`` when empty."""
    if not values:
        return None
    return values[max(math.ceil(p / 100 * len(values)) - 1, 0)]


def recent(samples: Iterable[Sample], now: datetime, days: int) -> list[Sample]:
    since = now - timedelta(days=days)
    return [s for s in samples if since <= s.slot <= now]


def dropped(line: str, samples: Sequence[Sample]) -> int:
    """Slots of ``line`` between the first and the last slot ``samples`` name that no
    sample of that line names."""
    if not samples:
        return 0
    slots = _slots(line, min(s.slot for s in samples), max(s.slot for s in samples))
    seen = {s.slot for s in samples if s.cron == line}
    return len(set(slots) - seen)


def _slots(line: str, first: datetime, last: datetime) -> list[datetime]:
    """The slots of ``line`` in ``[first, last]`` (none for a line the evaluator refuses)."""
    try:
        return cron_slots(utc_spec(line), first - timedelta(seconds=1), last)
    except ValueError:
        return []


def figures(samples: Sequence[Sample], lines: Iterable[str], window: Sequence[Sample]
            ) -> Figures:
    """The lateness of ``samples``, and the slots of ``lines`` dropped within ``window``
    (every sample of the period, whatever its line)."""
    late = sorted(s.late for s in samples)
    return Figures(len(late), percentile(late, 50), percentile(late, 95),
                   late[-1] if late else None, sum(dropped(line, window) for line in lines))


def by_line(samples: Sequence[Sample], lines: Sequence[str]) -> dict[str, Figures]:
    """Per cron line (``tick.yml``'s and any the samples name), its figures."""
    names = sorted({*lines, *(s.cron for s in samples)})
    return {name: figures([s for s in samples if s.cron == name], [name], samples)
            for name in names}


def overall(samples: Sequence[Sample], lines: Sequence[str]) -> Figures:
    """Every line's samples and drops together."""
    return figures(samples, sorted({*lines, *(s.cron for s in samples)}), samples)


# --------------------------------------------------------------------------- risk


@dataclass(frozen=True)
class Risk:
    """The schedules that tolerate less lateness than the ledger measures (maybe none)."""

    schedules: tuple[str, ...]
    tolerance_minutes: float
    """The least tolerance among them (0 when there are none)."""
    measured: Figures


def at_risk(samples: Sequence[Sample], tolerances: Mapping[str, float | None],
            now: datetime) -> Risk | None:
    """The schedules whose ``max_lateness_minutes`` the last :data:`RISK_DAYS` days'
    p95 exceeds; ``None`` with fewer than :data:`MIN_SAMPLES` samples (no verdict)."""
    measured = overall(recent(samples, now, RISK_DAYS), ())
    if measured.samples < MIN_SAMPLES or measured.p95 is None:
        return None
    p95 = measured.p95
    late = {sid: m for sid, m in tolerances.items() if m is not None and p95 > m * 60}
    return Risk(tuple(sorted(late)), min(late.values(), default=0), measured)


# --------------------------------------------------------------------------- reports


def report(data: bytes | None, lines: Sequence[str], now: datetime, days: int
           ) -> dict[str, Any]:
    """The figures of the last ``days`` days, all lines together and per line."""
    samples = recent(read(data), now, days)
    return {"days": days, **overall(samples, lines).to_json(),
            "by_cron": {name: f.to_json() for name, f in by_line(samples, lines).items()}}


def minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 60:.0f} min"


def describe(found: Mapping[str, Any]) -> list[str]:
    """``found`` (:func:`report`) for a person: one line, then one per cron line."""
    def row(name: str, f: Mapping[str, Any]) -> str:
        return (f"{name}: p50 {minutes(f['p50_seconds'])}, p95 {minutes(f['p95_seconds'])}, "
                f"max {minutes(f['max_seconds'])}, {f['samples']} sample(s), "
                f"{f['dropped']} dropped")

    return [row(f"cron lateness ({found['days']} days)", found),
            *(f"  {row(name, f)}" for name, f in found["by_cron"].items())]
