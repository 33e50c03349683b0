"""``orchestrator dlq list | show KEY | requeue KEY... | discard KEY...``: the dead letter
queue (see :mod:`orchestrator.runs.deadletters`). ``requeue`` and ``discard`` take
several keys, or ``--schedule ID`` / ``--all`` after a confirmation with the count,
and change them all in one compare-and-swap commit."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from ..errors import UserError
from ..runs import deadletters
from ..spec.fields import check_id
from ..store import ChangeFn, GitStateStore
from ..support.times import parse_now
from .context import Config, pass_config, who
from .runs import read_state


@click.group("dlq")
def command() -> None:
    """Tracks parked after their last failed attempt or a tap-out."""


@command.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include discarded entries.")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def list_letters(cfg: Config, show_all: bool, as_json: bool) -> None:
    """List dead letters, oldest first."""
    letters = deadletters.listed(read_state(cfg), show_all=show_all)
    if as_json:
        click.echo(json.dumps([d.model_dump(mode="json", by_alias=True) for d in letters],
                              indent=2, sort_keys=True))
    else:
        click.echo("\n".join(deadletters.list_text(letters)))


@command.command("show")
@click.argument("key")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def show_letter(cfg: Config, key: str, as_json: bool) -> None:
    """Show one dead letter: payload, error log, history."""
    letter = deadletters.find(read_state(cfg), deadletters.check_key(key))
    if as_json:
        click.echo(json.dumps(letter.model_dump(mode="json", by_alias=True), indent=2,
                              sort_keys=True))
    else:
        click.echo("\n".join(deadletters.letter_text(letter)))


def _chosen(cfg: Config, keys: tuple[str, ...], schedule: str | None, every: bool,
            yes: bool, verb: str) -> list[str]:
    """The dead letters ``verb`` acts on: the keys named, or (after a confirmation that
    says how many) those of ``--schedule`` or ``--all``."""
    if sum([bool(keys), schedule is not None, every]) != 1:
        raise click.UsageError("name dead letters by KEY..., or give --schedule ID or --all")
    if schedule is not None:
        check_id(schedule, "schedule id")
    chosen = deadletters.select(read_state(cfg), keys, schedule, every)
    if keys:
        return chosen
    which = f"of schedule {schedule}" if schedule is not None else "waiting"
    if not chosen:
        click.echo(f"no dead letters {which}: nothing to {verb}")
        return []
    if not yes and not click.confirm(f"{verb} {len(chosen)} dead letter(s) {which}?",
                                     err=True):
        raise UserError(f"not confirmed: no dead letter was {verb}d")
    return chosen


def _transact(cfg: Config, change: ChangeFn, message: str) -> None:
    store = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch)
    store.transact(change, message)


def _subject(verb: str, keys: list[str]) -> str:
    return f"dlq: {verb} {keys[0]}" if len(keys) == 1 else f"dlq: {verb} {len(keys)} dead letters"


def _bulk(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``requeue`` and ``discard`` share: which dead letters, and who acts."""
    for option in reversed((
        click.argument("keys", metavar="[KEY]...", nargs=-1),
        click.option("--schedule", metavar="ID", help="Every dead letter of this schedule "
                     "(asks first, with the count)."),
        click.option("--all", "every", is_flag=True,
                     help="Every dead letter waiting (asks first, with the count)."),
        click.option("--yes", "-y", is_flag=True, help="Do not ask for a confirmation."),
        click.option("--by", help="Who (default: $GITHUB_ACTOR or the user name)."),
    )):
        function = option(function)
    return function


@command.command("requeue")
@_bulk
@click.option("--reason", default="", help="Why, recorded in each track's history.")
@click.option("--now", "now_text", metavar="ISO", help="Time of the requeue (default: now).")
@pass_config
def requeue(cfg: Config, keys: tuple[str, ...], schedule: str | None, every: bool,
            yes: bool, by: str | None, reason: str, now_text: str | None) -> None:
    """Put parked tracks back to pending with a fresh attempt budget, in one commit; for
    a failed compensation, reopen the saga where it stopped. A failed run reopens as a
    repair: new slots of its schedule fire beside it, whatever its overlap policy."""
    now = parse_now(now_text)
    actor = who(by)
    chosen = _chosen(cfg, keys, schedule, every, yes, "requeue")
    if not chosen:
        return
    _transact(cfg, lambda snap: deadletters.each(
        snap.files, chosen, lambda files, key: deadletters.requeue(files, key, actor, reason,
                                                                   now)),
        _subject("requeue", chosen))
    for key in chosen:
        click.echo(f"requeued {key}")
    click.echo("the next tick dispatches " + ("it" if len(chosen) == 1 else "them"))


@command.command("discard")
@_bulk
@click.option("--reason", required=True, help="Why they are being given up.")
@pass_config
def discard(cfg: Config, keys: tuple[str, ...], schedule: str | None, every: bool,
            yes: bool, by: str | None, reason: str) -> None:
    """Give up on parked tracks, in one commit; each entry is kept, marked with who and
    why."""
    actor = who(by)
    chosen = _chosen(cfg, keys, schedule, every, yes, "discard")
    if not chosen:
        return
    _transact(cfg, lambda snap: deadletters.each(
        snap.files, chosen, lambda files, key: deadletters.discard(files, key, actor, reason)),
        _subject("discard", chosen))
    for key in chosen:
        click.echo(f"discarded {key}")
