"""Health per runner label, beside the circuit breaker in ``state/health.json``.

A schedule or track may list runner labels in order of preference (``runs_on``); the
tick routes each leg to the first label it trusts. A label whose leg sat queued past
``queue_timeout_minutes`` (no runner took it, nor any other leg there) or failed to
start (its runner was lost setting up) is marked ``degraded``; after
:data:`OFFLINE_AFTER` such failures in a row, ``offline``. New legs skip it. Once
``runner_cooldown_minutes`` have passed since it was last checked, one leg probes it
(half-open, as the breaker does): the probe starting marks it ``healthy`` again, the
probe queuing too long marks it down once more.

Pure: every function takes the time it decides at. Only changes of status are
written, so an idle tick still commits nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import Field

from ..config.fieldtypes import Frozen, UTCDateTime
from ..support.times import iso_minute

RunnerStatus = Literal["healthy", "degraded", "offline"]

OFFLINE_AFTER = 3
"""Consecutive failures after which a degraded label is reported offline."""

RUNNERS_KEY = "runners"
"""The key of runner labels in ``state/health.json`` (the others are executor names)."""


class RunnerHealth(Frozen):
    """The health of one runner label."""

    status: RunnerStatus = "healthy"
    last_checked_at: UTCDateTime | None = None
    """When the status last changed (a failure, a recovery)."""
    consecutive_failures: int = Field(0, ge=0)
    notes: str = ""
    """What was last seen, in words."""
    probe: str | None = None
    """The dispatch key of the leg probing a degraded label (half-open), while it runs."""


Choice = Literal["use", "probe", "skip"]


def choice(health: RunnerHealth | None, now: datetime, cooldown: timedelta) -> Choice:
    """Whether a new leg may go to the label: ``use`` it (healthy), ``probe`` it (its
    cooldown passed and no probe is out) or ``skip`` it."""
    if health is None or health.status == "healthy":
        return "use"
    if health.probe is not None:
        return "skip"
    if health.last_checked_at is None or now >= health.last_checked_at + cooldown:
        return "probe"
    return "skip"


def degrade(health: RunnerHealth | None, now: datetime, note: str) -> RunnerHealth:
    failures = (health.consecutive_failures if health else 0) + 1
    return RunnerHealth(status="offline" if failures >= OFFLINE_AFTER else "degraded",
                        last_checked_at=now, consecutive_failures=failures, notes=note)


def recover(now: datetime, note: str) -> RunnerHealth:
    return RunnerHealth(status="healthy", last_checked_at=now, notes=note)


def describe(label: str, health: RunnerHealth) -> str:
    """One label's health in words, for ``status`` and the tick's log."""
    if health.status == "healthy":
        return f"{label} healthy"
    since = f" since {iso_minute(health.last_checked_at)}" if health.last_checked_at else ""
    probe = ", probing" if health.probe else ""
    return (f"{label} {health.status}{since} ({health.consecutive_failures} failure(s)"
            f"{probe}): {health.notes}")
