"""Failure and capacity policies of a schedule, and the pause record of its cursor.

Every policy is opt-in: a field left out (``null``) keeps the behaviour a schedule
had without it. :class:`SchedulePolicies` is a base of
:class:`~orchestrator.models.ScheduleSpec`, so its fields are fields of a schedule
file (and of its JSON Schema); it lives here so that the policies are read in one
place. This module imports nothing of the package's models, so ``models`` can build
on it without an import circle.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def _aware_utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must include a UTC offset (e.g. 2026-12-01T07:00:00Z)")
    return value.astimezone(UTC)


_Strict = ConfigDict(strict=True, frozen=True, extra="forbid")


class SchedulePolicies(BaseModel):
    """The opt-in policies of a schedule file (a base of ``ScheduleSpec``)."""

    model_config = _Strict

    max_parallel: int | None = Field(
        None, ge=1, le=1024,
        description="At most this many tracks of one run in flight (dispatched or "
        "running); the others wait and are dispatched as slots free up. Unset: no cap.",
    )
    pause_after_failures: int | None = Field(
        None, ge=1, le=1000,
        description="Pause the schedule after this many consecutive runs ended failed: "
        "a paused schedule fires nothing until `orchestrator schedules resume ID --reason "
        "R`. Editing the file does not resume it. Unset: never paused.",
    )


class Pause(BaseModel):
    """Who paused or resumed a schedule, when and why (kept in its cursor)."""

    model_config = _Strict

    by: str = Field(min_length=1)
    at: Annotated[datetime, AfterValidator(_aware_utc)]
    reason: str
