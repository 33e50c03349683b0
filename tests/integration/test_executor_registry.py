"""The executor registry: the one list the commands take their executor choices from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import click
import pytest

from orchestrator import executors
from orchestrator.commands import serve, tick
from orchestrator.errors import UserError
from orchestrator.executors.github import GitHubExecutor
from orchestrator.executors.local import LocalExecutor
from orchestrator.state.breaker import Breaker

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


def _executor_option(command: click.Command) -> click.Option:
    [option] = [p for p in command.params if p.name == "executor"]
    assert isinstance(option, click.Option)
    return option


@pytest.mark.parametrize("command", [tick.command, serve.command])
def test_tick_and_serve_offer_exactly_the_registered_executors(command: click.Command) -> None:
    option = _executor_option(command)
    assert isinstance(option.type, click.Choice)
    assert tuple(option.type.choices) == executors.NAMES == ("local", "github")
    assert option.default == executors.LOCAL
    for info in executors.REGISTRY.values():
        assert f"{info.name}, {info.summary}" in (option.help or "")


def test_each_entry_is_named_after_its_key_and_waits_for_its_backend() -> None:
    assert all(name == info.name for name, info in executors.REGISTRY.items())
    assert executors.get("local").grace == timedelta(minutes=1)
    assert executors.get("github").grace == timedelta(minutes=10)
    assert "GITHUB_TOKEN" in executors.get("github").settings
    with pytest.raises(UserError, match="unknown executor 'k8s': expected one of local, github"):
        executors.get("k8s")


def test_the_local_factory_works_in_the_checkout_unless_the_environment_says_otherwise(
        tmp_path: Path) -> None:
    setup = executors.Setup(repo=tmp_path, now=T0, environ={})
    built = executors.get("local").factory(setup, None)
    assert isinstance(built, LocalExecutor)
    assert built.work_dir == (tmp_path / ".orchestrator" / "work").resolve()
    assert built.repo == tmp_path.resolve()
    elsewhere = executors.Setup(repo=tmp_path, now=T0,
                                environ={"ORCHESTRATOR_WORK_DIR": str(tmp_path / "w")})
    assert executors.get("local").factory(elsewhere, None).work_dir == (tmp_path / "w").resolve()


def test_the_github_factory_reads_its_settings_and_keeps_the_persisted_breaker(
        tmp_path: Path) -> None:
    environ = {"GITHUB_REPOSITORY": "acme/jobs", "GITHUB_TOKEN": "t0ken",
               "GITHUB_API_URL": "https://ghe.example/api/v3", "GITHUB_REF_NAME": "prod"}
    opened = Breaker(state="open", failures=5, opened_at=T0)
    built = executors.get("github").factory(executors.Setup(tmp_path, T0, environ), opened)
    assert isinstance(built, GitHubExecutor)
    assert (built.repository, built.api_url, built.ref) == ("acme/jobs",
                                                             "https://ghe.example/api/v3", "prod")
    assert built.health() == opened
    assert built.client.enterprise  # /api/v3: GitHub Enterprise Server
    assert "t0ken" not in repr(built)
    with pytest.raises(UserError, match="GITHUB_REPOSITORY is not set"):
        executors.get("github").factory(executors.Setup(tmp_path, T0, {}), None)
