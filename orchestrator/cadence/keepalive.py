"""Keeping the scheduled workflows enabled: GitHub's 60-day rule for public repositories.

GitHub disables the scheduled workflows of a public repository after 60 days without
"repository activity", which it does not define; whether the tick's own pushes to the
state branch count is not known. If they do not, ``tick.yml`` and ``watchdog.yml`` stop
together and nothing warns. So a GitHub tick, which holds ``actions: write``, once a
week (:data:`EVERY`):

- reads each scheduled workflow's ``state`` (``GET .../actions/workflows/{file}``);
- enables the ``active`` ones and those GitHub disabled for inactivity
  (``PUT .../enable``, documented). That this also restarts the 60 days is
  undocumented; projects such as gautamkrishnar/keepalive-workflow rely on it;
- never enables one a person disabled (``disabled_manually``): it warns instead;
- records what it found in ``state/workflows.json`` (:class:`Record`), so ``status``
  and every tick's job summary warn while a workflow the cadence needs is disabled.

The record is read as hostile input: one that cannot be read counts as never checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from ..state import layout
from ..support.times import iso, parse_utc

WORKFLOWS = ("tick.yml", "watchdog.yml")
"""The scheduled workflows the cadence depends on."""
EVERY = timedelta(days=7)
"""How often a tick refreshes them: well inside GitHub's 60 days."""
REFRESHED = frozenset({"active", "disabled_inactivity"})
"""States a tick enables; any other was a person's decision or is not ours to undo."""
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


def check(api: WorkflowsAPI, now: datetime, workflows: tuple[str, ...] = WORKFLOWS) -> Record:
    """Read every workflow's state and enable those :data:`REFRESHED` covers."""
    states: dict[str, str] = {}
    enabled = []
    for workflow in workflows:
        state = api.workflow_state(workflow)
        if state is None:
            continue  # not in this repository (no watchdog.yml, say)
        states[workflow] = state
        if state in REFRESHED:
            api.enable_workflow(workflow)
            enabled.append(workflow)
    return Record(now, states, tuple(enabled))


def warnings(record: Record) -> list[str]:
    """One line per workflow the cadence needs that is disabled, as last found."""
    lines = []
    for workflow, state in sorted(record.states.items()):
        if state == "disabled_inactivity":
            again = " and the tick enabled it again" if workflow in record.enabled else ""
            lines.append(f"{workflow} had been disabled by GitHub for inactivity (60 days "
                         f"in a public repository){again}")
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
