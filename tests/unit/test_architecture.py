"""The package's shape: no import circle, no module over 500 lines, README's map true.

The import graph is built from the source with :mod:`ast` (nothing is imported), so a
circle held together by an import inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "orchestrator"
MAX_LINES = 500

KNOWN_CIRCLES: frozenset[frozenset[str]] = frozenset({
})
"""Import circles that exist today and are being removed; nothing may join them."""

KNOWN_OVERSIZE: frozenset[str] = frozenset()
"""Modules over :data:`MAX_LINES` today; the list only ever shrinks."""


# --------------------------------------------------------------------------- the graph


def module_name(rel: Path) -> str:
    """``orchestrator/executors/__init__.py`` -> ``orchestrator.executors``."""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_sources(root: Path = REPO, package: str = PACKAGE) -> dict[str, tuple[str, bool]]:
    """Every module of ``package``: name -> (source, whether it is a package's ``__init__``)."""
    return {module_name(path.relative_to(root)): (path.read_text(encoding="utf-8"),
                                                  path.name == "__init__.py")
            for path in sorted((root / package).rglob("*.py"))}


def _base(module: str, is_package: bool, level: int) -> str:
    """The package a relative import of ``level`` dots in ``module`` starts from."""
    parts = module.split(".")
    if not is_package:
        parts.pop()  # a plain module's own package is one dot
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts)


def imports_of(module: str, source: str, is_package: bool, known: Iterable[str]) -> set[str]:
    """The modules in ``known`` that ``module`` imports, wherever the import statement is
    (top level, in a function, under ``TYPE_CHECKING``)."""
    names = set(known)
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                start = _base(module, is_package, node.level)
                base = f"{start}.{base}" if base else start
            for alias in node.names:
                # ``from pkg import mod`` imports the module pkg.mod; ``from mod import
                # name`` imports mod (and the name is an attribute of it).
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in names else base)
    return {name for name in found if name in names and name != module}


def import_graph(sources: Mapping[str, tuple[str, bool]]) -> dict[str, set[str]]:
    return {name: imports_of(name, source, is_package, sources)
            for name, (source, is_package) in sources.items()}


def circles(graph: Mapping[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycle_path(graph: Mapping[str, set[str]], component: frozenset[str]) -> list[str]:
    """One concrete circle through ``component``, for the failure message."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node] & component):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    raise AssertionError(f"{sorted(component)} is not a circle")


# --------------------------------------------------------------------------- the checks


def test_the_package_has_no_import_circle_but_the_known_one() -> None:
    graph = import_graph(package_sources())
    new = [c for c in circles(graph) if c not in KNOWN_CIRCLES]
    assert not new, "import circles: " + "; ".join(
        " -> ".join(cycle_path(graph, c)) for c in new)


def test_every_known_circle_still_exists() -> None:
    """Once a known circle is broken, its entry goes, so it cannot come back unnoticed."""
    found = set(circles(import_graph(package_sources())))
    gone = sorted(sorted(c) for c in KNOWN_CIRCLES if c not in found)
    assert not gone, f"no longer circles, delete them from KNOWN_CIRCLES: {gone}"


def test_no_module_is_over_the_size_limit_but_the_known_ones() -> None:
    sizes = {path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8")
                                                    .splitlines())
             for path in (REPO / PACKAGE).rglob("*.py")}
    over = {rel: n for rel, n in sorted(sizes.items()) if n > MAX_LINES}
    assert set(over) - KNOWN_OVERSIZE == set(), f"modules over {MAX_LINES} lines: {over}"
    fixed = sorted(KNOWN_OVERSIZE - set(over))
    assert not fixed, f"within {MAX_LINES} lines or gone, delete from KNOWN_OVERSIZE: {fixed}"


def readme_map() -> dict[str, str]:
    """The tree in README's Develop section: module path -> what it owns."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    develop = readme.split("\n## Develop\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(rf"```text\n({PACKAGE}/\n.*?)```", develop, re.S)
    assert block, "README's Develop section has no ```text map of the package"
    entries: dict[str, str] = {}
    folders: list[tuple[int, str]] = []  # (indent, name) of the folders we are inside
    for line in block.group(1).splitlines():
        indent = len(line) - len(line.lstrip())
        name, _, owns = line.strip().partition(" ")
        while folders and folders[-1][0] >= indent:
            folders.pop()
        path = "/".join([*(f for _, f in folders), name.rstrip("/")])
        if name.endswith("/"):
            folders.append((indent, name.rstrip("/")))
        else:
            entries[path] = owns.strip()
    return entries


def test_readme_map_lists_exactly_the_modules_each_with_what_it_owns() -> None:
    documented = readme_map()
    actual = {path.relative_to(REPO).as_posix() for path in (REPO / PACKAGE).rglob("*.py")}
    assert sorted(actual - set(documented)) == [], "modules missing from README's map"
    assert sorted(set(documented) - actual) == [], "README's map lists modules that do not exist"
    assert [p for p, owns in documented.items() if not owns] == [], "map lines without a role"


# --------------------------------------------------------------------------- the graph itself

FIXTURE = {
    "pkg": ("from . import a\n", True),
    "pkg.a": ("def f():\n    from pkg.sub import b\n", False),
    "pkg.sub": ("", True),
    "pkg.sub.b": ("from ..c import thing\n", False),
    "pkg.c": ("import json\nfrom .a import f\n", False),
    "pkg.d": ("from pkg import sub\nfrom pkg.sub import b as _\nfrom . import c\n", False),
}


def test_function_level_and_relative_imports_are_edges() -> None:
    graph = import_graph(FIXTURE)
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.sub.b"}, "pkg.sub": set(),
                     "pkg.sub.b": {"pkg.c"}, "pkg.c": {"pkg.a"},
                     "pkg.d": {"pkg.sub", "pkg.sub.b", "pkg.c"}}


def test_a_circle_is_found_and_named() -> None:
    graph = import_graph(FIXTURE)
    assert circles(graph) == [frozenset({"pkg.a", "pkg.sub.b", "pkg.c"})]
    assert cycle_path(graph, circles(graph)[0]) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]


@pytest.mark.parametrize(("module", "is_package", "level", "base"), [
    ("pkg.a", False, 1, "pkg"),
    ("pkg.sub.b", False, 2, "pkg"),
    ("pkg.sub", True, 1, "pkg.sub"),
    ("pkg.sub", True, 2, "pkg"),
])
def test_relative_imports_start_from_the_right_package(module: str, is_package: bool,
                                                       level: int, base: str) -> None:
    assert _base(module, is_package, level) == base
