"""What the prose says about layers is what the code does.

- Every package's ``__init__`` docstring has a ``May import:`` line naming packages.
  What the package imports is within that line, and the line is within what its layer
  allows (``tests/unit/test_architecture.py``'s :data:`LAYERS`).
- CONTRIBUTING.md's and docs/develop.md's layer lists name every package, in the
  layers of :data:`LAYERS`.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.unit.test_architecture import (
    LAYERS,
    PACKAGE,
    REPO,
    TOP_LEVEL,
    package_graph,
    project_graph,
)

PACKAGES = sorted(name for name in LAYERS if name and name not in TOP_LEVEL)
"""The packages (folders) under ``orchestrator/``: each has a docstring to check."""

_MAY = re.compile(r"^May import:(?P<names>.*?)(?:\.\s|\.$|$(?![\s\S]))", re.M | re.S)
_NAME = re.compile(r"(?:orchestrator\.)?\b([a-z_]+)\b")


def declared(package: str) -> set[str] | None:
    """The packages a package's ``May import:`` line names (``None``: it has none).
    ``:mod:`orchestrator.x``` and a bare ``x`` both name ``x``, in an aside too; other
    words (``and``, ``the standard library``) name nothing that is a package."""
    source = (REPO / PACKAGE / package / "__init__.py").read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source)) or ""
    found = _MAY.search(doc)
    if found is None:
        return None
    text = found["names"]
    return {name for name in _NAME.findall(text) if name in LAYERS and name}


def allowed(package: str) -> set[str]:
    """What the layer rule lets ``package`` import: every package at its layer or below."""
    return {name for name, layer in LAYERS.items()
            if name and name != package and layer <= LAYERS[package]}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_says_what_it_may_import(package: str) -> None:
    names = declared(package)
    assert names is not None, (
        f"orchestrator/{package}/__init__.py: add a 'May import: a, b, c.' line")
    imported = package_graph(project_graph()).get(package, set()) - {""}
    assert sorted(imported - names) == [], (
        f"orchestrator/{package} imports packages its 'May import' line does not name")
    assert sorted(names - allowed(package)) == [], (
        f"orchestrator/{package}'s 'May import' line names packages above its layer")


def test_the_may_import_check_catches_an_undeclared_import() -> None:
    # cadence imports the planner; a line without it must fail the first assertion
    imported = package_graph(project_graph())["cadence"]
    assert "planner" in imported
    narrower = (declared("cadence") or set()) - {"planner"}
    assert imported - narrower


def _listed_layers(document: str) -> list[set[str]]:
    """A document's ``Layers, bottom up:`` sentence, one set of names per layer."""
    text = (REPO / document).read_text(encoding="utf-8")
    found = re.search(r"Layers, bottom up:(.*?)\. An import", text, re.S)
    assert found, f"{document} lost its 'Layers, bottom up:' sentence"
    text = re.sub(r"\([^)]*\)", "", found[1])  # an aside names nothing
    return [{name.removesuffix(".py") for name in re.findall(r"`([a-z_.]+)/?`", part)}
            for part in text.split(";")]


@pytest.mark.parametrize("document", ["CONTRIBUTING.md", "docs/develop.md"])
def test_the_documents_list_the_layers_of_the_layer_test(document: str) -> None:
    expected: dict[int, set[str]] = {}
    for name, layer in LAYERS.items():
        if name and name not in {"__main__", "clidoc"}:
            expected.setdefault(layer, set()).add(name)
    assert _listed_layers(document) == [expected[k] for k in sorted(expected)]


def test_the_feature_map_names_modules_that_exist() -> None:
    text = (REPO / "docs" / "develop.md").read_text(encoding="utf-8")
    section = text.split("## Where each feature lives", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| feature")]
    assert len(rows) >= 12
    root = REPO / PACKAGE
    missing = []
    for _feature, model, step, _contributor, _command, _page in rows:
        for name in re.findall(r"`([a-z_/]+\.py|[a-z_]+/)`", model):
            if not (root / name).exists():
                missing.append(name)
        for name in re.findall(r"`([a-z_]+\.py)`", step):
            if not (root / "planner" / name).exists():
                missing.append(f"planner/{name}")
    assert missing == [], "the feature map names modules that are gone"


def test_the_feature_map_names_contributors_the_tick_has() -> None:
    from orchestrator.tick.contributors import CONTRIBUTORS

    text = (REPO / "docs" / "develop.md").read_text(encoding="utf-8")
    section = text.split("## Where each feature lives", 1)[1].split("\n## ", 1)[0]
    named = {name for line in section.splitlines() if line.startswith("| ")
             for name in re.findall(r"`([a-z_]+)`", line.split("|")[4])}
    assert named and named <= {c.__name__ for c in CONTRIBUTORS}
