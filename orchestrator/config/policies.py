"""Failure, capacity and notification policies of a schedule, and the pause record of
its cursor.

Every policy is opt-in: a field left out (``null``) keeps the behaviour a schedule
had without it. :class:`SchedulePolicies` is a base of
:class:`~orchestrator.config.models.ScheduleSpec`, so its fields are fields of a schedule
file (and of its JSON Schema); it lives here so that the policies are read in one
place. This module imports nothing of the package's models, so ``models`` can build
on it without an import circle.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .approval import Approval
from .channels import ScheduleNotify


def _aware_utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must include a UTC offset (e.g. 2026-12-01T07:00:00Z)")
    return value.astimezone(UTC)


_Strict = ConfigDict(strict=True, frozen=True, extra="forbid", defer_build=True)

RunnerLabel = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")]

RUNS_ON = ("Runner labels in order of preference, e.g. [\"gpu-self-hosted\", "
           "\"ubuntu-latest\"] (the leg's `runs-on`): each leg goes to the first label "
           "that is healthy; a label whose legs sat queued past `queue_timeout_minutes` is "
           "skipped until a probe after `runner_cooldown_minutes` finds it working again.")


def _distinct(labels: list[str] | None) -> list[str] | None:
    if labels is not None and len(set(labels)) != len(labels):
        raise ValueError("runner labels must differ")
    return labels


RunsOn = Annotated[list[RunnerLabel] | None, AfterValidator(_distinct)]


class OnFailure(StrEnum):
    """What a run does at the first final failure of one of its tracks (a track failed
    with no attempt left, or tapped out)."""

    CONTINUE = "continue"
    """The other tracks go on; the run ends ``failed`` once all are done."""
    CANCEL_RUN = "cancel_run"
    """Cancel the run's open tracks at once."""
    COMPENSATE = "compensate"
    """Cancel the open tracks, then run the ``compensate`` step of every completed track,
    one at a time, in reverse order of completion (a saga)."""


class FanIn(StrEnum):
    """Who records a GitHub batch's outcomes once its legs have ended."""

    JOB = "job"
    """``track.yml``'s ``fan-in`` job, at once: one billed job per batch."""
    NEXT_TICK = "next_tick"
    """No fan-in job: the next tick reads the legs' outcomes from their artifacts. A
    billed minute saved per batch; the run advances (next tracks, retries, its brief)
    only at that tick."""


class Compensation(BaseModel):
    """The undo of what a track did to an outside system; it must be idempotent."""

    model_config = _Strict

    run: str = Field(
        min_length=1,
        description="Shell command that undoes the track's work. It sees "
        "ORCHESTRATOR_COMPENSATING=1 and the track's result in ORCHESTRATOR_ORIGINAL_RESULT "
        "(JSON), and may run more than once: make it idempotent.")
    timeout_minutes: float = Field(
        30, gt=0, le=7 * 24 * 60, description="Minutes one attempt may run.")
    max_attempts: int = Field(
        3, ge=1, le=20, description="Attempts before the compensation is dead-lettered "
        "(reason 'compensation_failed').")


class TrackPolicies(BaseModel):
    """The opt-in policies of one track (a base of ``TrackSpec``)."""

    model_config = _Strict

    compensate: Compensation | None = Field(
        None, description="How to undo this track once it completed, when its run fails "
        "under `on_failure: compensate`.")
    runs_on: RunsOn = Field(None, min_length=1, max_length=10,
                            description=RUNS_ON + " Overrides the schedule's `runs_on`.")
    approval: Approval | None = Field(
        None, description="Wait for a person before it is dispatched: {\"by\": [\"alice\", "
        "\"team-ops\"]} (`orchestrator approve`), or {\"environment\": \"production\"} "
        "(GitHub's reviewers); `timeout_minutes` bounds the wait (1440).")


class SchedulePolicies(BaseModel):
    """The opt-in policies of a schedule file (a base of ``ScheduleSpec``)."""

    model_config = _Strict

    max_parallel: int | None = Field(
        None, ge=1, le=1024,
        description="At most this many tracks of one run in flight (dispatched or "
        "running); the others wait and are dispatched as slots free up. Unset: no cap.",
    )
    on_failure: OnFailure = Field(
        OnFailure.CONTINUE,
        description="At the first final failure of a track: 'continue' (the other tracks "
        "go on), 'cancel_run' (cancel the run's open tracks) or 'compensate' (cancel them, "
        "then run the `compensate` step of every completed track, one at a time, newest "
        "first).",
    )
    runs_on: RunsOn = Field(None, min_length=1, max_length=10, description=RUNS_ON)
    queue_timeout_minutes: float = Field(
        15, gt=0, le=24 * 60,
        description="With `runs_on`: minutes a leg may wait for a runner. Past them, unless a "
        "leg started on its label meanwhile (a busy label is not a sick one), the label is "
        "marked degraded and the leg's run cancelled; once the leg is seen cancelled it "
        "goes to the next label (a leg that fails to start there goes at once).")
    runner_cooldown_minutes: float = Field(
        30, gt=0, le=7 * 24 * 60,
        description="With `runs_on`: minutes before one leg probes a degraded label again.")
    fan_in: FanIn = Field(
        FanIn.JOB,
        description="On GitHub, who records a batch once its legs have ended: 'job' "
        "(track.yml's fan-in job, at once; one billed job per batch) or 'next_tick' (no "
        "fan-in job: the next tick reads the legs' outcomes from their artifacts, so the "
        "run's next tracks, retries and brief wait for it; a billed minute saved per "
        "batch). The local executor ignores it.",
    )
    pause_after_failures: int | None = Field(
        None, ge=1, le=1000,
        description="Pause the schedule after this many consecutive runs ended failed: "
        "a paused schedule fires nothing until `orchestrator schedules resume ID --reason "
        "R`. Editing the file does not resume it. Unset: never paused.",
    )
    sla_minutes: float | None = Field(
        None, gt=0, le=7 * 24 * 60,
        description="A run not finished this many minutes after its slot is an SLA miss: "
        "the event sla_missed, once per run (noticed by the first tick after it). Unset: "
        "no SLA.",
    )
    max_lateness_minutes: float | None = Field(
        None, gt=0, le=7 * 24 * 60,
        description="The most lateness of GitHub's cron this schedule tolerates: while "
        "the p95 the ticks measured over 7 days is later, the event cron_late names it, "
        "once per episode, with the fix (an external clock). Unset: orchestrator.json's "
        "cadence.max_lateness_minutes, else none.",
    )
    notify: ScheduleNotify | None = Field(
        None,
        description="This schedule's own notifications over orchestrator.json's: "
        "github_issues on or off, and webhooks of its own.",
    )


class Pause(BaseModel):
    """Who paused or resumed a schedule, when and why (kept in its cursor)."""

    model_config = _Strict

    by: str = Field(min_length=1)
    at: Annotated[datetime, AfterValidator(_aware_utc)]
    reason: str


def compensation_problem(on_failure: OnFailure, undoable: list[str]) -> str | None:
    """Why a schedule's ``on_failure`` and its tracks' ``compensate`` steps disagree:
    either would be a setting that silently does nothing."""
    if on_failure is OnFailure.COMPENSATE and not undoable:
        return "on_failure 'compensate' needs a track with a 'compensate' step"
    if on_failure is not OnFailure.COMPENSATE and undoable:
        return (f"track {undoable[0]!r} has a 'compensate' step, which runs only with "
                "on_failure 'compensate'")
    return None
