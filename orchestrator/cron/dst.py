"""The daylight-saving policy of fixed-time cron schedules.

It lives with the evaluator, which applies it, rather than with the schedule models:
the evaluator depends on nothing in :mod:`orchestrator.config`, and the models take
these types from here.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class DstGap(StrEnum):
    """A fixed local time that does not exist on a spring-forward day."""

    SHIFT = "shift"
    """Run once, at the first valid instant after the gap (Vixie/Debian cron)."""
    SKIP = "skip"
    """Do not run that day."""


class DstFold(StrEnum):
    """A fixed local time that occurs twice on a fall-back day."""

    FIRST = "first"
    """Run once, at the first occurrence (Vixie/Debian cron)."""
    BOTH = "both"
    """Run at both occurrences."""


class DstPolicy(BaseModel):
    """How fixed-time schedules behave on daylight-saving changes.

    Schedules whose minute or hour field starts with ``*`` run in real elapsed time
    and are not affected.
    """

    # The same strictness as every schedule model (see orchestrator.config.fieldtypes.Frozen).
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", use_enum_values=False,
                              defer_build=True)

    gap: DstGap = Field(
        DstGap.SHIFT,
        description="A local time skipped by spring-forward: 'shift' runs once at the first "
        "valid instant after the gap (Vixie/Debian cron); 'skip' does not run that day.",
    )
    fold: DstFold = Field(
        DstFold.FIRST,
        description="A local time repeated by fall-back: 'first' runs once, at the first "
        "occurrence (Vixie/Debian cron); 'both' runs at both occurrences.",
    )
