"""The package's shape: layers by package, no import circle, the map in docs/develop.md true.

- The import graph is built from the source with :mod:`ast` (nothing is imported), so
  an import inside a function counts as much as one at the top.
- Every package sits in a layer of :data:`LAYERS`; an edge between packages may only
  point down or sideways, and packages may not import each other in a circle.
- Modules over :data:`MAX_LINES` are a smell alarm, not a rule to split by.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from tests.docs import documentation

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "orchestrator"
MAX_LINES = 800
"""A module this long is worth a look for a second role (the alarm, not a target)."""

LAYERS: dict[str, int] = {
    # leaf utilities and the error root
    "": 0, "errors": 0, "support": 0,
    # what users write, the cron evaluator, the git store, the installable wheel
    "cron": 1, "store": 1, "config": 1, "distribution": 1,
    # what the tick writes; GitHub's REST API (its client keeps the breaker of state/)
    "state": 2, "github": 2,
    # the pure decision, and the backends that carry it out
    "planner": 3, "executors": 3,
    # what runs on top of state: the brief, operations on runs, the clock, notifications,
    # the static JSON API
    "brief": 4, "runs": 4, "cadence": 4, "notify": 4, "api": 4,
    # the imperative shell of one tick
    "tick": 5,
    # click wiring
    "commands": 6, "cli": 6, "clidoc": 6, "__main__": 6,
}
"""Package (or module directly under ``orchestrator/``) -> its layer, bottom up.
docs/develop.md says the same in words."""

TOP_LEVEL = {"__init__", "__main__", "cli", "errors", "clidoc"}
"""The modules allowed directly under ``orchestrator/``: the version, ``python -m``,
the click group, the error root, and the CLI reference generator (run as
``python -m orchestrator.clidoc``, beside the group it reads)."""

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


@functools.cache
def project_graph() -> dict[str, set[str]]:
    """The graph of this package (read once per test session; tests must not mutate it)."""
    return import_graph(package_sources())


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
    graph = project_graph()
    new = [c for c in circles(graph) if c not in KNOWN_CIRCLES]
    assert not new, "import circles: " + "; ".join(
        " -> ".join(cycle_path(graph, c)) for c in new)


def test_every_known_circle_still_exists() -> None:
    """Once a known circle is broken, its entry goes, so it cannot come back unnoticed."""
    found = set(circles(project_graph()))
    gone = sorted(sorted(c) for c in KNOWN_CIRCLES if c not in found)
    assert not gone, f"no longer circles, delete them from KNOWN_CIRCLES: {gone}"


def test_no_module_is_over_the_size_alarm_but_the_known_ones() -> None:
    sizes = {path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8")
                                                    .splitlines())
             for path in (REPO / PACKAGE).rglob("*.py")}
    over = {rel: n for rel, n in sorted(sizes.items()) if n > MAX_LINES}
    assert set(over) - KNOWN_OVERSIZE == set(), f"modules over {MAX_LINES} lines: {over}"
    fixed = sorted(KNOWN_OVERSIZE - set(over))
    assert not fixed, f"within {MAX_LINES} lines or gone, delete from KNOWN_OVERSIZE: {fixed}"


def package_of(module: str) -> str:
    """``orchestrator.tick.shell`` -> ``tick``; ``orchestrator.cli`` -> ``cli``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def package_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The import graph folded to packages, without self-edges."""
    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        edges = folded.setdefault(package_of(module), set())
        edges.update(package_of(t) for t in targets if package_of(t) != package_of(module))
    return folded


def upward_edges(graph: Mapping[str, set[str]],
                 layers: Mapping[str, int]) -> list[tuple[str, str]]:
    """Module edges ``(importer, imported)`` whose package sits in a higher layer."""
    return sorted((module, target) for module, targets in graph.items() for target in targets
                  if layers[package_of(target)] > layers[package_of(module)])


def test_every_package_has_a_layer() -> None:
    packages = set(package_graph(project_graph()))
    assert sorted(packages - set(LAYERS)) == [], "put the new package in LAYERS"


def test_no_import_points_up_a_layer() -> None:
    up = upward_edges(project_graph(), LAYERS)
    assert not up, "imports pointing up a layer: " + "; ".join(f"{a} -> {b}" for a, b in up)


def test_packages_do_not_import_each_other_in_a_circle() -> None:
    folded = package_graph(project_graph())
    found = circles(folded)
    assert not found, "package circles: " + "; ".join(
        " -> ".join(cycle_path(folded, c)) for c in found)


def test_only_the_few_modules_sit_directly_under_the_package() -> None:
    flat = {path.stem for path in (REPO / PACKAGE).glob("*.py")}
    assert sorted(flat - TOP_LEVEL) == [], "put the module in the package of its role"
    assert len(TOP_LEVEL) <= 6


def test_a_read_only_command_does_not_load_the_tick_shell() -> None:
    graph = project_graph()
    for command in ("status", "runs", "render", "schedules", "validate", "dlq", "estimate"):
        reached = reachable(graph, f"{PACKAGE}.commands.{command}")
        shell = sorted(m for m in reached if package_of(m) == "tick")
        assert not shell, f"commands.{command} loads {shell}"


def test_the_git_store_is_built_in_one_place_outside_the_store_package() -> None:
    """Commands get their store from ``Config.store`` (or ``Config.git`` for what only
    git does), so a config holding the in-memory store runs them on it."""
    built = [(module, node.lineno)
             for module, (source, _) in package_sources().items()
             if package_of(module) != "store" and "GitStateStore" in source
             for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Call) and _called_name(node.func) == "GitStateStore"]
    assert len(built) <= 1, f"GitStateStore(...) built in {built}"


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def reachable(graph: Mapping[str, set[str]], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def readme_map() -> dict[str, str]:
    """The tree in the documentation's map of the package (docs/develop.md):
    module path -> what it owns."""
    block = re.search(rf"```text\n({PACKAGE}/\n.*?)```", documentation(), re.S)
    assert block, "the documentation has no ```text map of the package (docs/develop.md)"
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
    assert sorted(actual - set(documented)) == [], "modules missing from the map"
    assert sorted(set(documented) - actual) == [], "the map lists modules that do not exist"
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


LAYERED = {
    "pkg": ("", True),
    "pkg.low": ("", True),
    "pkg.low.a": ("X = 1\n", False),
    "pkg.high": ("", True),
    "pkg.high.b": ("from ..low.a import X\n", False),
}


def test_the_layer_check_finds_an_import_pointing_up() -> None:
    layers = {"": 0, "low": 1, "high": 2}
    assert upward_edges(import_graph(LAYERED), layers) == []
    upward = {**LAYERED, "pkg.low.a": ("def f():\n    from pkg.high import b\n", False)}
    assert upward_edges(import_graph(upward), layers) == [("pkg.low.a", "pkg.high.b")]


def test_the_package_circle_check_finds_a_circle_of_packages() -> None:
    # no module circle (a -> b only), yet the packages import each other
    circular = {**LAYERED, "pkg.low.c": ("from pkg.high import b\n", False)}
    modules = import_graph(circular)
    assert circles(modules) == []
    folded = package_graph(modules)
    assert circles(folded) == [frozenset({"low", "high"})]


def test_no_two_test_files_share_a_name() -> None:
    """pytest imports test files by their base name (no ``__init__.py`` in tests/): two
    of one name make the whole suite fail to collect, though each runs alone."""
    names: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        names.setdefault(path.name, []).append(path.relative_to(REPO).as_posix())
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}


# --------------------------------------------------------------------------- doors and capabilities

GITHUB_DOORS = ("orchestrator.github", "orchestrator.executors.github")
"""The packages that may import GitHub's REST client module."""


def test_only_the_github_packages_import_the_github_client() -> None:
    """GitHub behind one door: the client module is imported by ``orchestrator/github/``
    and the GitHub executor only; others take names from ``orchestrator.github``, and
    nothing outside ``executors/`` imports the GitHub executor's modules."""
    graph = project_graph()
    inside = tuple(f"{door}." for door in GITHUB_DOORS)
    client = [m for m, targets in graph.items() if f"{PACKAGE}.github.client" in targets
              and not m.startswith(inside) and m not in GITHUB_DOORS]
    assert client == [], "import the GitHub client's names from orchestrator.github"
    executor = [m for m, targets in graph.items()
                if any(t.startswith(f"{PACKAGE}.executors.github") for t in targets)
                and package_of(m) != "executors"]
    assert executor == [], "ask the executor registry, not the GitHub executor"


def test_only_the_github_packages_hold_the_github_client() -> None:
    """Nor does anyone else take the client itself from the door: the issues, the
    clock's dispatch and the workflow admin are the door's, and a notification channel
    or the clock asks them (``orchestrator.github.issues``, ``WorkflowAdmin``)."""
    holders = []
    for path in sorted((REPO / PACKAGE).rglob("*.py")):
        rel = path.relative_to(REPO / PACKAGE).as_posix()
        if rel.startswith(("github/", "executors/github/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and any(
                    alias.name == "GitHubClient" for alias in node.names):
                holders.append(rel)
    assert holders == [], "ask orchestrator.github's APIs, not its client"


EXECUTOR_CONTRACT = {f"{PACKAGE}.executors", f"{PACKAGE}.executors.base",
                     f"{PACKAGE}.executors.outcomes", f"{PACKAGE}.executors.local_outcome",
                     f"{PACKAGE}.executors.drain_leg", f"{PACKAGE}.executors.leg_command"}
"""What a module outside ``executors/`` may import of it: the registry and the contract,
and the leg's side that any executor's legs run (``orchestrator outcome`` runs a
track's command, reads its files and writes its outcome; ``orchestrator queue work``
is a drain leg)."""


def test_outside_the_executors_only_the_registry_and_the_contract_are_imported() -> None:
    graph = project_graph()
    reached = sorted(f"{m} -> {t}" for m, targets in graph.items()
                     if package_of(m) != "executors"
                     for t in targets if package_of(t) == "executors"
                     and t not in EXECUTOR_CONTRACT)
    assert reached == [], "ask the registry (executors.declared), not a backend's module"


def _defined_classes(*packages: str) -> set[str]:
    return {node.name for package in packages
            for path in (REPO / PACKAGE / package).rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ClassDef)}


def _names_an_executor(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else \
        node.attr if isinstance(node, ast.Attribute) else ""
    return "executor" in name.lower()


def _is_literal_name(node: ast.expr) -> bool:
    """A string, a tuple or set of strings, or a constant like ``executors.LOCAL``."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Tuple | ast.Set | ast.List):
        return any(_is_literal_name(e) for e in node.elts)
    return isinstance(node, ast.Attribute) and node.attr.isupper()


def capability_probes(source: str, classes: set[str]) -> list[str]:
    """Where ``source`` compares an executor's name with a literal, or calls isinstance
    on one of ``classes`` (executor and store classes, runtime-checked protocols)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(map(_names_an_executor, operands)) and any(map(_is_literal_name, operands)):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "isinstance" and len(node.args) == 2:
            kinds = node.args[1]
            named = [kinds] if not isinstance(kinds, ast.Tuple) else list(kinds.elts)
            if any((n.id if isinstance(n, ast.Name) else
                    n.attr if isinstance(n, ast.Attribute) else "") in classes
                   for n in named):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def _runtime_protocols() -> set[str]:
    return {node.name for path in (REPO / PACKAGE).rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ClassDef) and any(
                "runtime_checkable" in ast.unparse(d) for d in node.decorator_list)}


def test_no_executor_name_or_class_is_checked_outside_the_executors() -> None:
    """Capabilities declared, not probed: outside ``executors/`` a caller asks the
    registry (``executors.declared(name)``), and a store its ``archive``."""
    classes = _defined_classes("executors") | _runtime_protocols() | {
        "GitStateStore", "InMemoryStateStore", "StateStore"}
    found = {rel: probes for rel, probes in (
        (path.relative_to(REPO).as_posix(),
         capability_probes(path.read_text(encoding="utf-8"), classes))
        for path in sorted((REPO / PACKAGE).rglob("*.py"))
        if "executors" not in path.relative_to(REPO / PACKAGE).parts) if probes}
    assert found == {}


def test_the_probe_check_finds_names_and_classes() -> None:
    source = ("a = t.executor == 'local'\nb = executor != executors.LOCAL\n"
              "c = isinstance(ex, LocalExecutor)\nd = name == 'local'\n"
              "e = executors.declared(t.executor).work_dir is not None\n")
    assert capability_probes(source, {"LocalExecutor"}) == [
        "line 1: t.executor == 'local'", "line 2: executor != executors.LOCAL",
        "line 3: isinstance(ex, LocalExecutor)"]
