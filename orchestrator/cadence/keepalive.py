"""Watching the scheduled workflows: GitHub's 60-day rule for public repositories.

GitHub disables the scheduled workflows of a public repository after 60 days without
repository activity ("Disabling and enabling a workflow"). Enabling an active workflow
to restart that clock is what GitHub disabled gautamkrishnar/keepalive-workflow for in
April 2025, so the orchestrator never does it. A GitHub tick, once a week (:data:`EVERY`):

- reads each scheduled workflow's ``state`` (``GET .../actions/workflows/{file}``);
- never enables an ``active`` one, nor one a person disabled (``disabled_manually``);
- enables one GitHub disabled for inactivity only when ``orchestrator.json`` opts in
  (``cadence.reenable_workflows``, default off); otherwise it warns;
- warns from :data:`WARN_AFTER` without activity (the default branch's last commit),
  :data:`INACTIVE_AFTER` less that, in the summary, in ``status`` and as a
  ``keepalive_due`` event;
- records what it found in ``state/workflows.json`` (:class:`Record`), so ``status``
  and every tick's job summary warn while a workflow the cadence needs is disabled.

The record is read as hostile input: one that cannot be read counts as never checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from ..errors import OrchestratorError
from ..state import layout
from ..store.plumbing import Git
from ..support.credentials import Redactor
from ..support.times import iso, parse_utc

WORKFLOWS = ("tick.yml", "watchdog.yml")
"""The scheduled workflows the cadence depends on."""
EVERY = timedelta(days=7)
"""How often a tick checks them: twice at least inside the warning's fortnight."""
INACTIVE_AFTER = timedelta(days=60)
"""GitHub's limit: a public repository's scheduled workflows stop after this long."""
WARN_AFTER = timedelta(days=45)
"""From this long without activity the tick, ``status`` and the channels warn."""
REENABLED = "disabled_inactivity"
"""The one state a tick may undo, and only when the user opted in; any other was a
person's decision, and ``active`` needs nothing."""
RECORD = layout.WORKFLOWS


class WorkflowsAPI(Protocol):
    """What the keep-alive needs of the workflow admin (:mod:`orchestrator.github.admin`)."""

    def workflow_state(self, workflow: str) -> str | None: ...

    def enable_workflow(self, workflow: str) -> None: ...


@dataclass(frozen=True)
class Record:
    """``state/workflows.json``: when the workflows were last checked, and each one's
    state as found then (before any enabling) and whether the tick enabled it."""

    checked_at: datetime | None = None
    states: dict[str, str] = field(default_factory=dict)
    enabled: tuple[str, ...] = ()

    def dump(self) -> bytes:
        return (json.dumps({"checked_at": _stamp(self.checked_at), "states": self.states,
                            "enabled": list(self.enabled)}, indent=2, sort_keys=True)
                + "\n").encode()

    @classmethod
    def parse(cls, data: bytes | None) -> Record:
        try:
            raw = json.loads(data) if data else None
        except (ValueError, UnicodeDecodeError, RecursionError):
            raw = None
        if not isinstance(raw, dict):
            return cls()
        states = raw.get("states")
        enabled = raw.get("enabled")
        return cls(parse_utc(raw.get("checked_at")) if isinstance(raw.get("checked_at"), str)
                   else None,
                   {k: v for k, v in states.items() if isinstance(k, str) and isinstance(v, str)}
                   if isinstance(states, dict) else {},
                   tuple(e for e in enabled if isinstance(e, str))
                   if isinstance(enabled, list) else ())


def _stamp(moment: datetime | None) -> str | None:
    return iso(moment) if moment is not None else None


def read_record(files: Mapping[str, bytes]) -> Record:
    try:
        return Record.parse(files.get(RECORD))
    except OSError:
        return Record()


def due(record: Record, now: datetime) -> bool:
    return record.checked_at is None or now - record.checked_at >= EVERY


def check(api: WorkflowsAPI, now: datetime, *, reenable: bool = False,
          workflows: tuple[str, ...] = WORKFLOWS) -> Record:
    """Read every workflow's state; with ``reenable``, enable those GitHub disabled for
    inactivity. An active workflow is never enabled (GitHub's terms, module docstring)."""
    states: dict[str, str] = {}
    enabled = []
    for workflow in workflows:
        state = api.workflow_state(workflow)
        if state is None:
            continue  # not in this repository (no watchdog.yml, say)
        states[workflow] = state
        if reenable and state == REENABLED:
            api.enable_workflow(workflow)
            enabled.append(workflow)
    return Record(now, states, tuple(enabled))


def last_activity(repo: Path) -> datetime | None:
    """When the checkout's commit was made: on a runner, the default branch's tip, the
    activity GitHub's rule counts surely. ``None`` outside a git checkout."""
    try:
        proc = Git(repo, Redactor([])).run("log", "-1", "--format=%ct", "HEAD", check=False)
    except OrchestratorError:
        return None
    text = proc.stdout.decode().strip()
    return datetime.fromtimestamp(int(text), UTC) if proc.returncode == 0 and \
        text.isdigit() else None


def due_by(activity: datetime | None, now: datetime) -> datetime | None:
    """When GitHub would disable the scheduled workflows, once that is near enough to
    warn of (:data:`WARN_AFTER`); else ``None``."""
    if activity is None or now - activity < WARN_AFTER:
        return None
    return activity + INACTIVE_AFTER


def inactivity_warning(activity: datetime | None, now: datetime) -> list[str]:
    """One line when the 60 days are near: what happens and what to do."""
    by = due_by(activity, now)
    if by is None or activity is None:
        return []
    return [f"no commit on the default branch since {iso(activity)}: in a public "
            f"repository GitHub disables tick.yml and watchdog.yml at {iso(by)}; push "
            "a commit to keep them running (the orchestrator does not re-enable them "
            "unless cadence.reenable_workflows is true)"]


def warnings(record: Record) -> list[str]:
    """One line per workflow the cadence needs that is disabled, as last found."""
    lines = []
    for workflow, state in sorted(record.states.items()):
        if state == REENABLED and workflow in record.enabled:
            lines.append(f"{workflow} had been disabled by GitHub for inactivity (60 days "
                         "in a public repository) and the tick enabled it again "
                         "(cadence.reenable_workflows)")
        elif state == REENABLED:
            lines.append(f"{workflow} is disabled by GitHub for inactivity (60 days in a "
                         "public repository): GitHub runs none of its scheduled runs; "
                         f"enable it under Actions > {workflow} > Enable workflow")
        elif state != "active":
            lines.append(f"{workflow} is {state.replace('_', ' ')}: GitHub runs none of its "
                         "scheduled runs, and the tick leaves it so (a person's decision); "
                         f"enable it under Actions > {workflow} > Enable workflow")
    return lines


def live(api: WorkflowsAPI, workflows: tuple[str, ...] = WORKFLOWS) -> dict[str, str]:
    """Each workflow's state now (read only: what ``status`` asks)."""
    found = {}
    for workflow in workflows:
        state = api.workflow_state(workflow)
        if state is not None:
            found[workflow] = state
    return found


def describe(record: Record) -> dict[str, Any]:
    return {"checked_at": _stamp(record.checked_at), "states": dict(record.states),
            "enabled": list(record.enabled), "warnings": warnings(record)}
