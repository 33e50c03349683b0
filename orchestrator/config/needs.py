"""The graph of tracks inside a run (``needs``), checked without the models.

Kept apart from :mod:`orchestrator.config.models` so that the schedule model and the planner
share one definition of a well-formed graph, and this module imports nothing of the
package (no import circle).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

CONSOLIDATE = "consolidate"
"""Name of the track a schedule's ``consolidate`` step becomes; reserved then."""


def graph_error(tracks: Sequence[tuple[str, Sequence[str]]]) -> tuple[int, str] | None:
    """The first problem of a track graph as ``(track index, message)``, or ``None``.

    ``tracks`` are ``(name, needs)`` pairs in file order. Problems, in the order they
    are looked for: a track that needs itself, a need that names no track, a cycle
    (reported at the first track of the file that lies on it).
    """
    names = {name for name, _ in tracks}
    for i, (name, needs) in enumerate(tracks):
        problem = _needs_problem(name, needs, names)
        if problem is not None:
            return i, problem
    return _cycle_error(tracks)


def _needs_problem(name: str, needs: Sequence[str], names: set[str]) -> str | None:
    """What is wrong with one track's ``needs`` on their own, if anything."""
    for need in needs:
        if need == name:
            return f"track '{name}' needs itself"
        if need not in names:
            return f"track '{name}' needs '{need}', which is not a track of this schedule"
    if len(set(needs)) != len(needs):
        return f"track '{name}' lists a need twice"
    return None


def _cycle_error(tracks: Sequence[tuple[str, Sequence[str]]]) -> tuple[int, str] | None:
    """A cycle of the graph, reported at the first track of the file that lies on it."""
    graph = {name: list(needs) for name, needs in tracks}
    index = {name: i for i, (name, _) in enumerate(tracks)}
    cycle = find_cycle(graph)
    if cycle is None:
        return None
    first = min(cycle, key=index.__getitem__)
    at = cycle.index(first)
    path = [*cycle[at:], *cycle[:at], first]
    return index[first], "cycle: " + " -> ".join(path)


def find_cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """One cycle of ``graph`` (node -> the nodes it needs) as a list of nodes, or ``None``.

    Iterative depth-first search: a schedule may have 1,024 tracks in a chain, deeper
    than Python's recursion limit allows comfortably.
    """
    done: set[str] = set()
    for root in graph:
        if root in done:
            continue
        cycle = _cycle_from(graph, root, done)
        if cycle is not None:
            return cycle
    return None


def _cycle_from(graph: Mapping[str, Sequence[str]], root: str,
                done: set[str]) -> list[str] | None:
    """A cycle reachable from ``root``, or ``None``; every node found to lie on none
    is added to ``done``."""
    stack: list[tuple[str, int]] = [(root, 0)]
    on_path = {root}
    while stack:
        node, i = stack[-1]
        needs = graph.get(node, ())
        if i == len(needs):
            stack.pop()
            on_path.discard(node)
            done.add(node)
            continue
        stack[-1] = (node, i + 1)
        nxt = needs[i]
        if nxt in on_path:
            path = [n for n, _ in stack]
            return path[path.index(nxt):]
        if nxt not in done and nxt in graph:
            stack.append((nxt, 0))
            on_path.add(nxt)
    return None


def order(graph: Mapping[str, Sequence[str]]) -> list[str]:
    """The nodes of an acyclic ``graph`` so that every node follows what it needs
    (ties by name, so the order is stable). Needs outside the graph are ignored."""
    placed: list[str] = []
    seen: set[str] = set()
    remaining = dict(graph)
    while remaining:
        ready = sorted(n for n, needs in remaining.items()
                       if all(m in seen or m not in graph for m in needs))
        if not ready:  # a cycle (the model forbids it): keep the rest by name
            ready = sorted(remaining)
        for n in ready:
            placed.append(n)
            seen.add(n)
            del remaining[n]
    return placed
