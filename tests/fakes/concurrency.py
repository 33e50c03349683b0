"""GitHub's concurrency groups, as a workflow file's ``concurrency`` blocks set them.

What it models (GitHub's docs, "Control the concurrency of workflows and jobs", and the
changelog of 2026-05-07, "concurrency groups now allow larger queues"):

- a group holds at most one running run or job; one that arrives while the group is
  held waits ``pending``;
- ``queue: single`` (the default) keeps one pending: a newer arrival cancels it;
  ``queue: max`` keeps up to 100, in arrival order, and cancels any arrival beyond;
- a run first takes its workflow-level group, then its job takes the job-level group;
  it holds both until it ends, and each group then starts its oldest pending.

Group names are expressions over ``github`` and ``inputs``; :func:`evaluate` reads the
forms the workflows use (literals, context paths, ``==``, ``!=``, ``&&``, ``||``).
GitHub compares group names without regard to case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MAX_QUEUE = 100
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _operand(text: str, ctx: dict[str, Any]) -> Any:
    text = text.strip()
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1]
    value: Any = ctx
    for part in text.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _value(text: str, ctx: dict[str, Any]) -> Any:
    """``||`` binds loosest, then ``&&``, then the comparisons."""
    if "||" in text:
        first, rest = text.split("||", 1)
        return _value(first, ctx) or _value(rest, ctx)
    if "&&" in text:
        first, rest = text.split("&&", 1)
        return _value(first, ctx) and _value(rest, ctx)
    for op in ("==", "!="):
        if op in text:
            left, right = (_operand(side, ctx) for side in text.split(op, 1))
            return (left == right) == (op == "==")
    return _operand(text, ctx)


def evaluate(template: str, ctx: dict[str, Any]) -> str:
    def sub(match: re.Match[str]) -> str:
        value = _value(match.group(1), ctx)
        return "" if value in (None, False) else str(value)

    return _EXPR.sub(sub, template).lower()


@dataclass
class Level:
    """One ``concurrency`` block: the workflow's, or a job's."""

    group: str
    queue: str = "single"

    @classmethod
    def read(cls, block: Any) -> Level | None:
        if block is None:
            return None
        if isinstance(block, str):
            return cls(block)
        assert block.get("cancel-in-progress") in (None, False), "not modelled"
        return cls(block["group"], block.get("queue", "single"))


@dataclass
class _Group:
    holder: str | None = None
    pending: list[str] = field(default_factory=list)


@dataclass
class Concurrency:
    """The runs of one workflow file (its ``tick`` job) in GitHub's groups."""

    workflow: dict[str, Any]
    job: str
    state: dict[str, str] = field(default_factory=dict)
    """Each run's state: ``running``, ``pending`` or ``cancelled``."""
    _levels: list[Level] = field(default_factory=list)
    _groups: dict[str, _Group] = field(default_factory=dict)
    _names: dict[str, list[str]] = field(default_factory=dict)
    _stage: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        blocks = (self.workflow.get("concurrency"),
                  self.workflow["jobs"][self.job].get("concurrency"))
        self._levels = [level for level in map(Level.read, blocks) if level is not None]

    def arrive(self, run: str, event: str, run_id: int,
               inputs: dict[str, Any] | None = None) -> None:
        ctx = {"github": {"event_name": event, "run_id": str(run_id)}, "inputs": inputs or {}}
        self._names[run] = [evaluate(level.group, ctx) for level in self._levels]
        self._stage[run] = 0
        self._enter(run)

    def finish(self, run: str) -> None:
        """``run`` ends: each group it held starts its oldest pending run."""
        assert self.state[run] == "running", run
        self.state[run] = "completed"
        for name in self._names[run]:
            group = self._groups[name]
            group.holder = None
            if group.pending:
                nxt = group.pending.pop(0)
                group.holder = nxt
                self._stage[nxt] += 1
                self._enter(nxt)

    def _enter(self, run: str) -> None:
        while self._stage[run] < len(self._levels):
            name = self._names[run][self._stage[run]]
            group = self._groups.setdefault(name, _Group())
            if group.holder is not None:
                self._wait(run, group, self._levels[self._stage[run]].queue)
                return
            group.holder = run
            self._stage[run] += 1
        self.state[run] = "running"

    def _wait(self, run: str, group: _Group, queue: str) -> None:
        room = MAX_QUEUE if queue == "max" else 1
        if queue != "max" and group.pending:
            self.state[group.pending.pop(0)] = "cancelled"
        if len(group.pending) >= room:
            self.state[run] = "cancelled"
            return
        group.pending.append(run)
        self.state[run] = "pending"
