"""``docs/cli.md`` is generated from the click tree and must not drift from it."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from orchestrator import clidoc
from orchestrator.cli import cli
from orchestrator.commands import MODULES, load

REFERENCE = Path(__file__).resolve().parent.parent.parent / "docs" / "cli.md"


def test_the_committed_reference_is_up_to_date() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == clidoc.render(), (
        "docs/cli.md is out of date: python3 -m orchestrator.clidoc > docs/cli.md")


def _commands() -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = [("orchestrator", cli)]

    def walk(command: click.Command, path: str) -> None:
        found.append((path, command))
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, f"{path} {name}")

    for name in MODULES:
        command = load(name)
        assert command is not None
        walk(command, f"orchestrator {name.replace('_', '-')}")
    return found


def test_every_command_and_every_option_has_a_row_with_a_meaning() -> None:
    text = clidoc.render()
    sections = {chunk.split("`", 1)[0]: chunk for chunk in text.split("\n## `")[1:]}
    for path, command in _commands():
        assert path in sections, f"{path} missing from the reference"
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                row = next((line for line in sections[path].splitlines()
                            if line.startswith(f"| `{param.opts[0]}`")), None)
                assert row is not None, f"{path} {param.opts[0]} missing"
                assert not row.rstrip().endswith("|  |"), f"{path} {param.opts[0]}: no meaning"


def test_every_exit_code_the_errors_define_is_listed_once() -> None:
    from orchestrator import errors

    defined = {value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    assert set(clidoc.EXIT_CODES) == defined
    listed = [line for line in clidoc.render().splitlines() if line[:4] in
              {f"- {code}:" for code in defined}]
    assert len(listed) == len(defined)


def _row(path: str, option: str) -> str:
    text = clidoc.render()
    section = next(chunk for chunk in text.split("\n## `")[1:]
                   if chunk.split("`", 1)[0] == path)
    return next(line for line in section.splitlines() if line.startswith(f"| `{option}`"))


def test_a_reason_the_verb_refuses_without_is_marked_required() -> None:
    for path in ("orchestrator runs cancel", "orchestrator schedules pause",
                 "orchestrator dlq discard", "orchestrator schedules resume"):
        assert "**required**" in _row(path, "--reason"), path
    assert "**required**" not in _row("orchestrator trigger", "--reason")


def test_runs_cancel_without_a_reason_is_a_usage_error_its_help_foretells(
        capsys: pytest.CaptureFixture[str]) -> None:
    from orchestrator.cli import main

    assert main(["runs", "cancel", "--help"]) == 0
    assert "[required]" in capsys.readouterr().out
    assert main(["runs", "cancel", "nightly--20261201T0715Z"]) == 2
    assert "Missing option '--reason'" in capsys.readouterr().err
