"""Every pointer to the documentation that a user follows resolves: in the files
``init`` writes (workflows of both install forms, the install files, the README
section), in ``action.yml`` and in every message of the package (each string literal
of its source). A pointer is a path under ``docs/`` or ``README.md``, with an optional
``#anchor``; the page must exist and offer that anchor. The older prose form
(README, "Some heading") named sections that moved away, so it is refused."""

from __future__ import annotations

import ast
import re

from orchestrator.commands import init
from orchestrator.distribution import action, install
from tests.docs import REPO, anchors

POINTER = re.compile(r"(?<![\w./-])(docs/[\w./-]+?\.md|README\.md)(?:#([\w-]+))?")
PROSE = re.compile(r"\bREADME(?:,|\s+\")|\bin the docs\b")
PIN = action.Pin("octo-org/orchestrator", "0" * 40, "v1")


def generated() -> dict[str, str]:
    """What ``init`` writes and ``action.yml``, by a name for the message."""
    found = {f"vendor:{rel}": text for rel, text in init.scaffold_files(pages=True).items()}
    found |= {f"action:{rel}": text
              for rel, text in init.scaffold_files(pages=True, pin=PIN).items()}
    found["requirements.txt"] = install.current().requirements
    found["install.sh"] = install.SCRIPT.read_text(encoding="utf-8")
    found["README section"] = init.README_SECTION.read_text(encoding="utf-8")
    found["action.yml"] = (REPO / "action.yml").read_text(encoding="utf-8")
    return found


def messages() -> dict[str, str]:
    """Every string literal of the package's source, by file and line."""
    found = {}
    for path in sorted((REPO / "orchestrator").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found[f"{path.relative_to(REPO)}:{node.lineno}"] = node.value
    return found


def unresolved(texts: dict[str, str]) -> list[str]:
    broken = []
    for where, text in texts.items():
        for found in POINTER.finditer(text):
            page, anchor = found.group(1), found.group(2)
            target = REPO / page
            if not target.is_file():
                broken.append(f"{where}: {page} does not exist")
            elif anchor and anchor not in anchors(page, target.read_text(encoding="utf-8")):
                broken.append(f"{where}: {page} has no #{anchor}")
    return broken


def test_every_pointer_in_what_init_writes_resolves() -> None:
    texts = generated()
    assert sum(len(POINTER.findall(t)) for t in texts.values()) >= 9
    assert unresolved(texts) == []
    assert [w for w, t in texts.items() if PROSE.search(t)] == [], "cite docs/PATH.md#anchor"


def test_every_pointer_in_a_message_resolves() -> None:
    texts = messages()
    assert unresolved(texts) == []
    assert [w for w, t in texts.items() if PROSE.search(t)] == [], "cite docs/PATH.md#anchor"


def test_a_pointer_to_a_missing_page_or_anchor_is_caught() -> None:
    assert unresolved({"x": "see docs/how-to/nowhere.md"}) == [
        "x: docs/how-to/nowhere.md does not exist"]
    assert unresolved({"x": "(docs/how-to/operate.md#nowhere)"}) == [
        "x: docs/how-to/operate.md has no #nowhere"]
    assert unresolved({"x": "docs/how-to/operate.md#watch-the-clock."}) == []
