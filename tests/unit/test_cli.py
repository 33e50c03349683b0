"""The CLI shell: lazy command loading and the one place errors become exit codes."""

from __future__ import annotations

import importlib

import click
import pytest

from orchestrator import cli
from orchestrator.commands import MODULES


@pytest.mark.parametrize("name", MODULES)
def test_each_command_module_exposes_a_command_named_after_it(name: str) -> None:
    command = importlib.import_module(f"orchestrator.commands.{name}").command
    assert isinstance(command, click.Command)
    assert command.name == name.replace("_", "-")


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err


def test_user_errors_exit_1_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["tick", "--now", "yesterday", "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert err == "orchestrator: --now: not an ISO datetime: 'yesterday'\n"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert "orchestrator" in capsys.readouterr().out


def test_schedules_unpause_is_resume_under_a_second_name() -> None:
    """One command object under two names: their options and behaviour cannot drift."""
    from orchestrator.commands import schedules

    ctx = click.Context(schedules.command)
    resume = schedules.command.get_command(ctx, "resume")
    assert resume is not None and schedules.command.get_command(ctx, "unpause") is resume
    assert "`schedules unpause` is an alias of `schedules resume`" in (resume.help or "")
