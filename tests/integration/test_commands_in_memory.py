"""The read-only commands on the in-memory store answer as on the git store.

A checkout's state branch is seeded by real ticks with the local executor (a run
that completed, one whose track failed into a dead letter); an in-memory store is
then given the same files (:class:`~orchestrator.store.InMemoryStateStore`). Each
read-only command runs with a :class:`~orchestrator.commands.context.Config` on
either store, and must print the same and exit the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner, Result

from orchestrator.commands import load
from orchestrator.commands.context import Config
from orchestrator.store import InMemoryStateStore
from tests.builders import spec_data
from tests.drive import STATE_BRANCH, finished, state_of, tick, wait_until
from tests.gitrepo import clone, make_origin

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
NOW = "2026-12-01T07:30:00Z"
DONE = "nightly--20261201T0700Z"
FAILED = "flaky--20261201T0700Z"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Config, Config]]:
    """A checkout whose state branch two ticks wrote, as a git config and a memory one."""
    root = tmp_path_factory.mktemp("seeded")
    origin = make_origin(root, {"nightly": spec_data(tracks=("a", "b")),
                                "flaky": spec_data(tracks=("x",), run="exit 3")})
    repo = clone(origin, root / "repo")
    work = root / "work"
    first = tick(repo, T0 + timedelta(minutes=3), work)
    assert len(first.dispatched) == 3
    wait_until(lambda: all(finished(work, key) for key in first.dispatched))
    second = tick(repo, T0 + timedelta(minutes=4), work)
    assert DONE in second.rendered and second.parked
    _, snap = state_of(repo)
    git = Config(repo=repo, remote="origin", state_branch=STATE_BRANCH)
    memory = Config(repo=repo, remote="origin", state_branch=STATE_BRANCH,
                    memory=InMemoryStateStore(dict(snap.files)))
    yield git, memory


READ_ONLY = [
    ("status", "--now", NOW),
    ("status", "--json", "--now", NOW),
    ("runs", "list"),
    ("runs", "show", DONE),
    ("runs", "show", FAILED),
    # on one clock: the brief says when it was made, and the two renders are seconds apart
    ("render", DONE, "--now", NOW),
    ("render", DONE, "--format", "markdown", "--now", NOW),
    ("schedules", "list", "--json", "--from", NOW),
    ("schedules", "runs", "nightly"),
    ("schedules", "show", "flaky", "--from", NOW),
    ("dlq", "list"),
    ("dlq", "show", f"{FAILED}--x"),
]


def run(cfg: Config, args: tuple[str, ...]) -> Result:
    """``orchestrator ARGS`` with ``cfg`` as the group would hand it to the command."""
    command = load(args[0])
    assert command is not None
    return CliRunner().invoke(command, list(args[1:]), obj=cfg, standalone_mode=False)


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_a_read_only_command_answers_the_same_on_either_store(
        checkout: tuple[Config, Config], args: tuple[str, ...]) -> None:
    git, memory = checkout
    on_git, in_memory = run(git, args), run(memory, args)
    assert on_git.exception is None, on_git.output
    assert (in_memory.return_value, in_memory.output) == (on_git.return_value, on_git.output)
    assert on_git.output.strip()


def test_the_memory_store_is_the_one_read(checkout: tuple[Config, Config]) -> None:
    """Without the seeded files the memory config sees no run: it never reads git."""
    git, _ = checkout
    empty = Config(repo=git.repo, remote=git.remote, state_branch=git.state_branch,
                   memory=InMemoryStateStore())
    assert DONE in run(git, ("runs", "list")).output
    assert DONE not in run(empty, ("runs", "list")).output
