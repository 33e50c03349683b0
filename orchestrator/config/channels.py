"""What users write about notifications: the event names and the channels.

- ``orchestrator.json`` says where events go for the whole repository
  (:class:`NotifySpec`); a schedule file may turn GitHub issues on or off for its own
  runs and add webhooks (:class:`ScheduleNotify`).
- A webhook names the environment variable that holds its URL, never the URL: a
  committed file must not carry a secret. The name must be one the orchestrator treats
  as a credential, so the URL is kept from track commands and redacted from output.
- Strict like every model here: an unknown field or event name is an error naming it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..support.credentials import is_credential


class EventKind(StrEnum):
    """Everything worth a person's attention, one name each."""

    RUN_FAILED = "run_failed"
    """A run ended ``failed``."""
    RUN_RECOVERED = "run_recovered"
    """A run ``completed`` after one or more failed runs of its schedule."""
    DEAD_LETTER = "dead_letter"
    """A track was parked in the dead letter queue: it waits for a requeue or a discard."""
    QUEUE_DEAD_LETTER = "queue_dead_letter"
    """Work-queue items became dead (their last attempt failed): one event per item, or
    one per queue when many died in one decision."""
    SCHEDULE_PAUSED = "schedule_paused"
    """A schedule was paused after repeated failures (``pause_after_failures``)."""
    RUNNER_DEGRADED = "runner_degraded"
    """A runner label became degraded or offline (``runs_on``)."""
    RUNNER_RECOVERED = "runner_recovered"
    """A degraded or offline runner label is healthy again."""
    TICK_STALE = "tick_stale"
    """No tick for longer than the staleness limit (``status --notify``, ``serve``)."""
    RECORD_QUARANTINED = "record_quarantined"
    """A state record could not be read and is left alone until someone fixes it."""
    REWIND_REFUSED = "rewind_refused"
    """The state branch is behind its high-water mark: ticks fire nothing from it."""
    SLA_MISSED = "sla_missed"
    """A run was not finished ``sla_minutes`` after its slot."""
    KEEPALIVE_DUE = "keepalive_due"
    """No commit on the default branch for 45 days: GitHub disables the scheduled
    workflows of a public repository at 60."""
    APPROVAL_WAITING = "approval_waiting"
    """A track began to wait for a person (its ``approval`` gate): once per attempt, with
    who may decide and the commands."""
    CRON_LATE = "cron_late"
    """GitHub's cron, as the ticks measured it, is later than schedules tolerate
    (``max_lateness_minutes``): once per episode, with the fix."""


_Strict = ConfigDict(strict=True, frozen=True, extra="forbid", defer_build=True)


class WebhookSpec(BaseModel):
    """One webhook: where its URL is, which events it gets, and in what shape."""

    model_config = _Strict

    url_secret: str = Field(
        pattern=r"^[A-Z_][A-Z0-9_]{0,99}$",
        description="The environment variable (a secret on GitHub Actions) holding the "
        "webhook's URL, never the URL itself. Its name must contain WEBHOOK (e.g. "
        "SLACK_WEBHOOK) or be ORCHESTRATOR_..._SECRET, so that track commands never see "
        "it and output never shows it.")
    events: list[EventKind] | None = Field(
        None, min_length=1,
        description="The events posted to it; unset: every event.")
    format: Literal["json", "slack"] = Field(
        "json",
        description="'json': the event as a JSON object; 'slack': a Slack incoming-webhook "
        "message (text and blocks).")

    @field_validator("url_secret")
    @classmethod
    def _a_credential(cls, name: str) -> str:
        if not is_credential(name):
            raise ValueError(f"{name!r} is not a name kept from track commands: use one with "
                             "WEBHOOK in it (e.g. SLACK_WEBHOOK) or ORCHESTRATOR_..._SECRET")
        return name

    @property
    def channel(self) -> str:
        """The channel's name: its format and its variable (never the URL)."""
        return f"webhook:{self.format}:{self.url_secret}"

    def wants(self, kind: EventKind) -> bool:
        return self.events is None or kind in self.events


def _distinct(hooks: list[WebhookSpec]) -> list[WebhookSpec]:
    names = [h.channel for h in hooks]
    if len(set(names)) != len(names):
        raise ValueError("two webhooks with the same url_secret and format")
    return hooks


class ScheduleNotify(BaseModel):
    """A schedule's own notification settings, over the repository's."""

    model_config = _Strict

    github_issues: bool | None = Field(
        None,
        description="Open an issue when this schedule fails, closed when it recovers "
        "(true), or never (false); unset: as orchestrator.json says.")
    webhooks: list[WebhookSpec] = Field(
        default_factory=list, max_length=10,
        description="Webhooks this schedule's events go to, besides the repository's.")

    @field_validator("webhooks")
    @classmethod
    def _one_each(cls, hooks: list[WebhookSpec]) -> list[WebhookSpec]:
        return _distinct(hooks)


class NotifySpec(BaseModel):
    """``notify`` in ``orchestrator.json``: where events go, for every schedule."""

    model_config = _Strict

    github_issues: bool = Field(
        False,
        description="A failing schedule opens one GitHub issue (labels 'orchestrator' and "
        "the schedule id); a repeated failure comments on it; the first success closes it. "
        "Needs GITHUB_REPOSITORY and a token with issues: write.")
    webhooks: list[WebhookSpec] = Field(
        default_factory=list, max_length=10,
        description="Webhooks every event (or those listed) is posted to.")
    budget_seconds: float = Field(
        20, ge=1, le=300,
        description="Seconds one tick may spend delivering (retries included); what is "
        "still undelivered then is dropped with one line.")
    brief_url: str | None = Field(
        None, pattern=r"^https?://[^\s]+$", max_length=500,
        description="Where a run's brief is read, with {run_id} and {schedule} replaced, "
        "e.g. https://OWNER.github.io/REPO/runs/{run_id}/brief.html (GitHub Pages). Unset: "
        "on GitHub Actions the job summary of the run that finished it.")

    @field_validator("webhooks")
    @classmethod
    def _one_each(cls, hooks: list[WebhookSpec]) -> list[WebhookSpec]:
        return _distinct(hooks)

    @property
    def enabled(self) -> bool:
        return self.github_issues or bool(self.webhooks)


def any_enabled(repo: NotifySpec, own: Iterable[ScheduleNotify | None]) -> bool:
    """Whether an event has anywhere to go: the repository's channels or a schedule's."""
    return repo.enabled or any(o is not None and (o.github_issues or o.webhooks) for o in own)
