"""A track's approval gate: who lets it start, and how long it may wait.

- Exactly one of ``by`` (people and teams, answered by ``orchestrator approve``) and
  ``environment`` (a GitHub deployment environment whose required reviewers hold the leg).
- An entry of ``by`` that starts with ``team-`` names a team. A team's members cannot
  be read without GitHub's API, so when ``by`` holds a team any approver is accepted,
  and recorded.
- Where the executor has no environments, an ``environment`` gate is held as ``by``
  is, and any approver is accepted: the environment's reviewers are GitHub's to know.
- ``timeout_minutes`` bounds the wait. The wait is not the track's own: its
  ``timeout_minutes`` counts from its start.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from .fieldtypes import Frozen

TEAM_PREFIX = "team-"
"""How an entry of ``by`` names a team rather than a person."""

MAX_WAIT_MINUTES = 29 * 24 * 60
"""GitHub fails a job its environment's reviewers left for 30 days: a day less, so the
tick taps it out first and never takes that failure for a rejection."""

Approver = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")]

# GitHub's environment names: at most 255 characters, not case sensitive. Spaces and
# quotes are left out: the name travels in a workflow input and a job's expression.
EnvironmentName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")]


class Approval(Frozen):
    """``approval`` of a track: it waits for a person before it is dispatched."""

    by: list[Approver] | None = Field(
        None, min_length=1, max_length=20,
        description="Who may approve or reject it with `orchestrator approve RUN TRACK` "
        "(or `reject`): user names, or teams as `team-<slug>` (with a team, anyone may).")
    environment: EnvironmentName | None = Field(
        None,
        description="On GitHub, the deployment environment its leg's job runs in, so the "
        "environment's required reviewers hold it. Elsewhere it waits for `approve`.")
    timeout_minutes: float = Field(
        1440, gt=0, le=MAX_WAIT_MINUTES,
        description="Minutes it may wait for a decision before it is tapped out; not "
        "counted against the track's own `timeout_minutes`.")

    @model_validator(mode="after")
    def _one_gate(self) -> Approval:
        if (self.by is None) == (self.environment is None):
            raise ValueError("give exactly one of 'by' and 'environment'")
        return self

    @property
    def anyone(self) -> bool:
        """Whether any approver is accepted: the gate names a team or an environment."""
        return self.by is None or any(e.startswith(TEAM_PREFIX) for e in self.by)

    def allows(self, approver: str) -> bool:
        """Whether ``approver`` may decide (user names compared as GitHub does, without
        case)."""
        return self.anyone or approver.casefold() in {e.casefold() for e in self.by or ()}

    def describe(self) -> str:
        """Who may decide, in a few words (the brief, ``status``, the event)."""
        if self.by is None:
            return f"{self.environment}'s reviewers"
        return ", ".join(self.by)
