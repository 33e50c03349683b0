"""Chains across schedules: the ``after`` field of a schedule, and the checks that
look at every schedule at once.

- An ``after`` names upstream schedules by id; a schedule fires once each named
  upstream has a qualifying run it has not yet consumed (all are required).
- A run qualifies when it ended in one of ``status`` within ``within_minutes``.
- :func:`chain_problems` is the only check across files: an upstream that no schedule
  defines, and a loop of ``after`` edges, each in one line naming the schedules.
- :func:`chain_paths` lists the chains, upstream first, for the pull request's
  comment; it is bounded, and a loop ends a path rather than repeating it.
- This module imports nothing of the package's models, so ``models`` builds on it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .fieldtypes import ID_RE, _id

UpstreamStatus = Literal["completed", "failed", "cancelled"]
"""How an upstream run may have ended to count."""


def _completed() -> list[UpstreamStatus]:
    return ["completed"]


def _distinct(statuses: list[UpstreamStatus]) -> list[UpstreamStatus]:
    if len(set(statuses)) != len(statuses):
        raise ValueError("list each status once")
    return statuses


class AfterSpec(BaseModel):
    """One upstream of a schedule: its id, the ends that count, and how old a run may be."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    schedule: Annotated[str, AfterValidator(_id),
                        Field(json_schema_extra={"pattern": f"^{ID_RE.pattern}$"})] = Field(
        description="Id of the upstream schedule.")
    status: Annotated[list[UpstreamStatus], AfterValidator(_distinct)] = Field(
        default_factory=_completed, min_length=1,
        description="How an upstream run must have ended to fire this schedule.")
    within_minutes: float = Field(
        1440, gt=0, le=31 * 24 * 60,
        description="An upstream run that ended longer ago than this no longer counts.")

    def describe(self) -> str:
        """``ingest (completed)``, as previews and ``schedules show`` print it."""
        return f"{self.schedule} ({', '.join(self.status)})"


def upstreams(after: AfterSpec | Sequence[AfterSpec] | None) -> list[AfterSpec]:
    """The ``after`` field as a list (a single object is a list of one)."""
    if after is None:
        return []
    return [after] if isinstance(after, AfterSpec) else list(after)


def describe(after: Sequence[AfterSpec]) -> str:
    """``after ingest (completed) and load (completed)``."""
    return "after " + " and ".join(a.describe() for a in after)


def chain_problems(edges: Mapping[str, Sequence[str]]) -> list[tuple[str, str]]:
    """``(schedule id, line)`` for each upstream no schedule defines, and one for each
    loop of ``after`` edges (``edges``: schedule id -> its upstreams' ids)."""
    found = [(sid, f"no schedule {up!r} (the upstream must be a schedule file)")
             for sid, ups in sorted(edges.items()) for up in ups if up not in edges]
    done: set[str] = set()
    for start in sorted(edges):
        for loop in _loops(edges, start, [], done):
            flow = loop[::-1]  # upstream first, as the runs follow each other
            first = flow.index(min(flow))
            flow = flow[first:] + flow[:first]
            found.append((flow[0], "a loop of schedules: " + " -> ".join(
                [*flow, flow[0]]) + " (a chain must end: remove one 'after')"))
    return found


def _loops(edges: Mapping[str, Sequence[str]], node: str, path: list[str],
           done: set[str]) -> list[list[str]]:
    """The loops met walking up from ``node`` (depth first), each as the schedules
    along the ``after`` edges; a schedule in ``done`` was walked already."""
    if node in path:
        return [path[path.index(node):]]
    if node in done or node not in edges:
        return []
    path.append(node)
    loops = [loop for up in sorted(edges[node]) for loop in _loops(edges, up, path, done)]
    path.pop()
    done.add(node)
    return loops


def chain_paths(edges: Mapping[str, Sequence[str]], limit: int = 50
                ) -> tuple[list[list[str]], bool]:
    """The chains among the schedules (``edges``: schedule id -> its upstreams' ids),
    upstream first: each from a schedule that fires after none of them to one that none
    fires after. At most ``limit``, and whether there are more."""
    downs = downstreams(edges)
    roots = [s for s in sorted(downs) if s in edges and not any(u in edges for u in edges[s])]
    found = list(itertools.islice(_walk(downs, roots), limit + 1))
    return found[:limit], len(found) > limit


def downstreams(edges: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Schedule id -> the schedules that fire after it, by id (``edges`` as above)."""
    downs: dict[str, list[str]] = {}
    for sid, ups in sorted(edges.items()):
        for up in ups:
            downs.setdefault(up, []).append(sid)
    return downs


def _walk(downs: Mapping[str, Sequence[str]], roots: Sequence[str]) -> Iterator[list[str]]:
    """Every path from ``roots`` down to a schedule none fires after, depth first (with
    a stack, not recursion: a chain may be longer than Python's recursion limit)."""
    stack = [[r] for r in reversed(roots)]
    while stack:
        path = stack.pop()
        nxt = [d for d in downs.get(path[-1], ()) if d not in path]
        if not nxt:
            yield path
        stack.extend([*path, d] for d in reversed(nxt))
