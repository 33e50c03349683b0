"""The circuit breaker of an executor backend: its states, transitions and policy.

::

    closed ──(threshold consecutive failures)──> open ──(cooldown passed)──> half_open
       ^                                          ^                            │
       │                                          └──────(the probe fails)─────┤
       └─────────────────────────(the probe succeeds)──────────────────────────┘

A failure is a call that got no usable answer: a server error, no answer at all, an
exhausted rate limit. A client error (``4xx``) is an answer and counts as a success
for the breaker. While the breaker is open and its cooldown has not passed, the
backend makes no call at all; once it has, one probing call decides.

The tick persists one :class:`Breaker` per executor in ``state/health.json``. Two
ticks may race; the one that lost re-plans on the winner's state and commits
:func:`merge_breaker`'s choice, the more cautious breaker, so a lost race never
closes a breaker the other tick opened.

Pure: every function takes the time it decides at.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from ..config.fieldtypes import Frozen, UTCDateTime

BreakerState = Literal["closed", "open", "half_open"]


class Breaker(Frozen):
    """Circuit breaker of one executor backend, in ``state/health.json``."""

    state: BreakerState = "closed"
    failures: int = 0
    """Consecutive failed calls."""
    opened_at: UTCDateTime | None = None
    last_error: str | None = None


@dataclass(frozen=True)
class BreakerPolicy:
    """When the circuit opens and how long it stays open."""

    threshold: int = 5
    """Consecutive failed calls (server errors, network errors, exhausted rate limits)."""
    cooldown: timedelta = timedelta(minutes=15)
    """Time after opening before one probing call is let through (``half_open``)."""


def breaker_now(breaker: Breaker, now: datetime, policy: BreakerPolicy) -> Breaker:
    """``breaker`` as it stands at ``now``: an open breaker past its cooldown is half-open."""
    if (breaker.state == "open" and breaker.opened_at is not None
            and now >= breaker.opened_at + policy.cooldown):
        return Breaker(state="half_open", failures=breaker.failures,
                       opened_at=breaker.opened_at, last_error=breaker.last_error)
    return breaker


def breaker_success(breaker: Breaker) -> Breaker:
    """A call got an answer: the breaker closes and forgets its failures (the last
    error stays, for ``status``)."""
    if breaker.state == "closed" and breaker.failures == 0:
        return breaker
    return Breaker(last_error=breaker.last_error)


def breaker_failure(breaker: Breaker, now: datetime, error: str,
                    policy: BreakerPolicy) -> Breaker:
    """Count one failure; a half-open breaker reopens at once, a closed one at the threshold."""
    failures = breaker.failures + 1
    if breaker.state == "half_open" or failures >= policy.threshold:
        return Breaker(state="open", failures=failures, opened_at=now, last_error=error)
    return Breaker(state="closed", failures=failures, opened_at=None, last_error=error)


def breaker_allows(breaker: Breaker, now: datetime, policy: BreakerPolicy) -> bool:
    """Whether a call may be made at ``now``."""
    return breaker_now(breaker, now, policy).state != "open"


_CAUTION: dict[BreakerState, int] = {"closed": 0, "half_open": 1, "open": 2}
_FLOOR = datetime.min.replace(tzinfo=UTC)


def caution(breaker: Breaker) -> tuple[int, datetime, int]:
    """Orders breakers from the least to the most cautious: open beats half-open beats
    closed; between equals, the later opening and then the more failures win."""
    return _CAUTION[breaker.state], breaker.opened_at or _FLOOR, breaker.failures


def merge_breaker(base: Breaker | None, theirs: Breaker | None, ours: Breaker) -> Breaker:
    """The breaker to commit: this tick's (``ours``), unless another tick changed the
    committed one (``theirs``) since this tick read it (``base``); then the more
    cautious of the two, so a lost race never closes a breaker another tick opened."""
    if theirs is None or theirs == base:
        return ours
    return max((ours, theirs), key=caution)
