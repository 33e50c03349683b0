"""``orchestrator notify test``: send a sample event to each configured channel.

The channels are those of ``orchestrator.json`` and of the schedules' own ``notify``;
each is built from this environment as a tick builds it (the webhooks' variables, and
``GITHUB_REPOSITORY`` with a token for issues). A webhook gets the sample event; the
issue channel opens an issue for it and closes it at once. One line per channel says
what it answered; the exit code is 1 unless every channel accepted.
"""

from __future__ import annotations

import os
from datetime import datetime

import click

from ..config.channels import EventKind, NotifySpec
from ..config.files import load_all
from ..config.models import Schedule
from ..config.repository import RepoSettings
from ..errors import UserError
from ..notify import deliver as delivery
from ..notify.channel import ISSUES, Deadline, Item
from ..notify.events import Event, stamp
from ..notify.record import Pending
from ..state.layout import run_id_for
from ..support.credentials import redactor
from ..support.times import parse_now
from .context import Config, pass_config

RUN_KINDS = frozenset({EventKind.RUN_FAILED, EventKind.RUN_RECOVERED, EventKind.DEAD_LETTER,
                       EventKind.SLA_MISSED})


@click.group("notify")
def command() -> None:
    """Notifications: try the channels of orchestrator.json."""


def sample(kind: EventKind, schedule: str, now: datetime) -> Event:
    """An event of ``kind`` that says it is a test."""
    about_run = kind in RUN_KINDS
    return Event(id=f"test:{kind.value}:{stamp(now)}", kind=kind, at=now,
                 schedule=schedule if about_run or kind is EventKind.SCHEDULE_PAUSED
                 else None, run_id=run_id_for(schedule, now) if about_run else None,
                 summary=f"A test of the orchestrator's notifications ({kind.value}), sent "
                 "by `orchestrator notify test`: nothing happened.",
                 details={"test": "true"})


def configured(spec: NotifySpec, schedules: list[Schedule]) -> list[str]:
    """Every channel of ``orchestrator.json`` and of the schedules, once each."""
    own = [s.spec.notify for s in schedules if s.spec.notify is not None]
    names = [ISSUES] if spec.github_issues or any(n.github_issues for n in own) else []
    hooks = [*spec.webhooks, *(h for n in own for h in n.webhooks)]
    return names + list(dict.fromkeys(h.channel for h in hooks))


def try_channel(name: str, event: Event, budget: float, now: datetime) -> tuple[str, bool]:
    """What the channel ``name`` answered to ``event``, and whether it accepted it."""
    from ..notify.issues import IssueChannel

    built = delivery.build(name, os.environ, redactor(os.environ), now, budget)
    deadline = Deadline(budget)
    if isinstance(built, str):
        return f"{name}: not sent: {built}", False
    if isinstance(built, IssueChannel):
        done = built.try_out(event, deadline)
    else:
        pending = Pending(event=event, channels=[name], claimed_at=now)
        [done] = delivery.deliver({name: [Item(pending)]}, {name: built}, deadline)
    return done.line.removeprefix("notify: "), done.status == "delivered"


@command.command("test")
@click.option("--event", "kind", type=click.Choice([k.value for k in EventKind]),
              default=EventKind.RUN_FAILED.value, show_default=True,
              help="The kind of the sample event.")
@click.option("--now", "now_text", metavar="ISO", help="The sample's time (default: now).")
@pass_config
def test(cfg: Config, kind: str, now_text: str | None) -> int:
    """Send a sample event to each configured channel and print what each answered."""
    settings = RepoSettings.read(cfg.repo)
    if settings.problem:
        raise UserError(settings.problem)
    schedules = load_all(cfg.schedules_dir).schedules
    names = configured(settings.notify, schedules)
    if not names:
        raise UserError("no channel configured: add \"notify\" to orchestrator.json "
                        "(docs/how-to/notifications.md)")
    now = parse_now(now_text)
    event = sample(EventKind(kind), schedules[0].id if schedules else "example", now)
    failed = 0
    for name in names:
        line, ok = try_channel(name, event, settings.notify.budget_seconds, now)
        failed += not ok
        click.echo(line)
    if failed:
        raise UserError(f"{failed} of {len(names)} channel(s) did not accept the test event")
    return 0
