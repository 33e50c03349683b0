"""Every command of the CLI is exercised by this folder's tests.

The command tree comes from click; the invocations are read from the tests' source
(calls such as ``user.run("dlq", "requeue", key)`` or ``[orchestrator(), "validate"]``).
A new command without an acceptance test fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import click

from orchestrator.commands import MODULES, load

HERE = Path(__file__).resolve().parent


def command_paths() -> set[tuple[str, ...]]:
    paths: set[tuple[str, ...]] = set()

    def walk(command: click.Command, prefix: tuple[str, ...]) -> None:
        path = (*prefix, command.name or "")
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):  # lazily loaded ones too
                sub = command.get_command(ctx, name)
                assert sub is not None, name
                walk(sub, path)
        else:
            paths.add(path)

    for name in MODULES:
        command = load(name)
        assert command is not None, name
        walk(command, ())
    return paths


def _words(args: list[ast.expr]) -> tuple[str, ...]:
    """The leading literal words of an argument list, up to the first option."""
    words: list[str] = []
    for arg in args:
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            break
        if arg.value.startswith("-"):
            break
        words.append(arg.value)
    return tuple(words)


def invocations() -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for path in HERE.glob("*.py"):  # the tests and their helper module
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            # user.run("schedules", "add", ...), user.json(...), user.start(...)
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("run", "json", "start")):
                found.add(_words(node.args))
            # subprocess.run([orchestrator(), "validate", ...])
            if (isinstance(node, ast.List) and node.elts and isinstance(node.elts[0], ast.Call)
                    and isinstance(node.elts[0].func, ast.Name)
                    and node.elts[0].func.id == "orchestrator"):
                found.add(_words(node.elts[1:]))
    return found


def test_the_command_tree_is_read_correctly() -> None:
    paths = command_paths()
    assert {("tick",), ("dlq", "requeue"), ("schedules", "add"), ("status",)} <= paths
    assert not any(p[0] in ("dlq", "runs", "schedules") and len(p) == 1 for p in paths)


def test_every_command_has_an_acceptance_test() -> None:
    seen = invocations()
    missing = sorted(" ".join(p) for p in command_paths()
                     if not any(call[:len(p)] == p for call in seen))
    assert missing == [], f"commands no acceptance test runs: {missing}"
