"""How dense the package is, as radon counts it: a ratchet that only turns one way.

- ruff's C901 counts branches only; radon also counts ``and``/``or``, conditional
  expressions and comprehension filters, so it sees the boolean chains C901 misses.
- Every function, method and closure counts once, whatever it is nested in (keyed by
  file, line and name).
- The limits are what the tree measures today. When a change lowers a count, lower
  its constant with it; none of them ever goes up.
"""

from __future__ import annotations

import functools
from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Class, Function

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "orchestrator"

# Measured on the tree as it stands; the targets are at most 25 over 12 and at most 6 %
# over 8. Both constants only ever go down.
MAX_OVER_12 = 14
"""Functions over radon complexity 12."""
MAX_SHARE_OVER_8 = 0.0405
"""The share of functions over radon complexity 8 (82 of 2,028 today)."""
MAX_LINES = 500
"""A module longer than this holds more than one role."""
KNOWN_LONG: dict[str, int] = {}
"""Modules over :data:`MAX_LINES` today, each with its length as its limit: the list
and the limits only ever shrink."""


def _blocks(blocks: list[Function | Class]) -> list[Function]:
    """The functions among ``blocks``, with the methods and closures inside them."""
    found: list[Function] = []
    for block in blocks:
        if isinstance(block, Class):
            found += _blocks([*block.methods, *block.inner_classes])
        else:
            found += [block, *_blocks(block.closures)]
    return found


@functools.cache
def complexities() -> dict[tuple[str, int, str], int]:
    """(module, line, name) -> radon complexity, for every function of the package."""
    found: dict[tuple[str, int, str], int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for block in _blocks(cc_visit(path.read_text(encoding="utf-8"))):
            found[(rel, block.lineno, block.name)] = block.complexity
    return found


def _named(over: dict[tuple[str, int, str], int]) -> str:
    return "; ".join(f"{rel}:{line} {name} ({n})"
                     for (rel, line, name), n in sorted(over.items()))


def test_no_more_functions_over_12_than_the_ratchet_allows() -> None:
    over = {key: n for key, n in complexities().items() if n > 12}
    assert len(over) <= MAX_OVER_12, (
        f"{len(over)} functions over radon 12 (at most {MAX_OVER_12}): split the new ones "
        f"into named steps or a table: {_named(over)}")


def test_the_share_over_8_stays_within_the_ratchet() -> None:
    found = complexities()
    over = sum(1 for n in found.values() if n > 8)
    share = over / len(found)
    assert share <= MAX_SHARE_OVER_8, (
        f"{share:.2%} of {len(found)} functions are over radon 8 "
        f"(at most {MAX_SHARE_OVER_8:.2%})")


def test_no_module_is_longer_than_500_lines_but_the_known_ones() -> None:
    sizes = {path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8")
                                                    .splitlines())
             for path in PACKAGE.rglob("*.py")}
    over = {rel: n for rel, n in sorted(sizes.items())
            if n > KNOWN_LONG.get(rel, MAX_LINES)}
    assert not over, f"modules over their limit (split them by role): {over}"
    within = sorted(rel for rel in KNOWN_LONG if sizes.get(rel, 0) <= MAX_LINES)
    assert not within, f"within {MAX_LINES} lines or gone, delete from KNOWN_LONG: {within}"


def test_the_walk_counts_methods_and_closures_once_each() -> None:
    source = (
        "def outer(a):\n"
        "    def inner(b):\n"
        "        return b and a\n"
        "    return inner\n"
        "class C:\n"
        "    def method(self, x):\n"
        "        return [y for y in x if y]\n"
        "    class Inner:\n"
        "        def deep(self):\n"
        "            return 1\n")
    named = {(block.name, block.complexity) for block in _blocks(cc_visit(source))}
    assert {name for name, _ in named} == {"outer", "inner", "method", "deep"}
    assert ("inner", 2) in named and ("method", 3) in named
