"""What the operator's verbs share (``trigger``, ``backfill``, ``runs cancel``,
``runs retry``): the common options, who acts, and the tick each one runs at once.

Every verb is a decision, so it goes through a tick: the request is an input of the
planner (:mod:`orchestrator.planner.requests`) and lands in the tick's own
compare-and-swap commit, or (``runs retry``) its change is committed first and the
tick dispatches it at once.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from .. import executors
from ..config.files import load_all
from ..config.models import Schedule
from ..errors import NotFound, UserError
from ..planner import Request
from ..planner.requests import key_of
from ..state import model as state_model
from ..state.records import Act
from ..support.credentials import environment_redactor
from ..support.text import outgoing
from ..support.times import parse_now
from .context import Config, acting

if TYPE_CHECKING:
    from ..tick.result import TickResult

F = TypeVar("F", bound=Callable[..., Any])


def options(func: F) -> F:
    """``--reason``, ``--by``, ``--now`` and ``--executor``, as every verb takes them."""
    return _options(func, click.option("--reason", default="",
                                       help="Why, recorded with who and when."))


def options_with_reason(func: F) -> F:
    """:func:`options`, with ``--reason`` required (click marks it in ``--help``)."""
    return _options(func, click.option("--reason", required=True,
                                       help="Why, recorded with who and when."))


def _options(func: F, reason: Callable[[Any], Any]) -> F:
    options: list[Callable[[Any], Any]] = [
        reason,
        click.option("--by", help="Who (default: the GitHub actor, or the user name)."),
        click.option("--now", "now_text", metavar="ISO", help="Act as of this instant "
                     "(default: now)."),
        click.option("--executor", type=click.Choice(executors.NAMES),
                     envvar="ORCHESTRATOR_EXECUTOR", default=executors.LOCAL,
                     show_default=True, help="The executor the tick dispatches with."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def act(by: str | None, now_text: str | None, reason: str, **more: Any) -> Act:
    """Who acts, when and why, each checked: one line naming a bad one."""
    actor, reason = acting(by, reason)
    return Act(by=actor, at=parse_now(now_text), reason=reason, **more)


def schedule(cfg: Config, schedule_id: str) -> Schedule:
    """The valid schedule ``schedule_id`` of the checkout, or one line naming it."""
    parsed = load_all(cfg.schedules_dir)
    for found in parsed.schedules:
        if found.id == schedule_id:
            return found
    broken = [e.message for e in parsed.errors if schedule_id in e.message]
    if broken:
        raise UserError(f"schedule {schedule_id!r} is invalid: {broken[0]}")
    raise NotFound(f"unknown schedule {schedule_id!r} (no schedules/{schedule_id}.json)")


def read_state(cfg: Config) -> state_model.State:
    snap = cfg.store().read()
    return state_model.load(snap.files, all_tracks=True)


def tick(cfg: Config, executor: str, now: datetime,
         requests: tuple[Request, ...] = ()) -> TickResult:
    """Run one tick with ``requests`` now, and print what it did (the tick shell is
    imported here: ``runs list`` and ``runs show`` never load it)."""
    from ..tick.settings import TickSettings
    from .tick import build, summary_lines, write_step_summary

    result = build(cfg, now, TickSettings(executor_name=executor, requests=requests)).run()
    click.echo("\n".join(summary_lines(result)))
    write_step_summary(result)
    return result


def report(verb: str, line: str) -> None:
    """Print what the verb did and, in GitHub Actions, add it to the job summary."""
    click.echo(line)
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(outgoing(f"### Orchestrator {verb}\n\n```\n{line}\n```\n\n",
                              environment_redactor()))


def answer(result: TickResult, request: Request) -> str:
    """What the tick did with ``request`` (one line); a request the tick did not
    answer is an error, never a quiet success."""
    decision = result.decision
    line = decision.answers.get(key_of(request)) if decision else None
    if not line:
        raise UserError(f"{key_of(request)}: the request was not planned")
    return line
