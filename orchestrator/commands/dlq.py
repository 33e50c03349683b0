"""``orchestrator dlq list | show KEY | requeue KEY... | discard KEY...``: the dead letter
queue (see :mod:`orchestrator.runs.deadletters`). ``requeue`` and ``discard`` take
several keys, or ``--schedule ID`` / ``--all`` after a confirmation with the count,
and change them all in one compare-and-swap commit."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import click

from ..errors import UserError
from ..runs import deadletters, queues
from ..spec.fields import check_id
from ..state import model as state_model
from ..store import ChangeFn, GitStateStore
from ..support.times import parse_now
from .context import Config, pass_config, who
from .runs import read_state


@click.group("dlq")
def command() -> None:
    """Tracks parked after their last failed attempt or a tap-out, and queue items
    dead after their last attempt (keys ``<queue>/<item-id>``)."""


@command.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include discarded entries.")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def list_letters(cfg: Config, show_all: bool, as_json: bool) -> None:
    """List dead letters, oldest first: tracks, then queue items (``<queue>/<id>``)."""
    files = _files(cfg)
    letters = deadletters.listed(state_model.load(files, all_tracks=True), show_all=show_all)
    items = queues.dead_letters(files, show_all=show_all)
    if as_json:
        click.echo(json.dumps([d.model_dump(mode="json", by_alias=True) for d in letters]
                              + [{"key": f"{i.queue}/{i.id}", **i.model_dump(
                                  mode="json", by_alias=True)} for i in items],
                              indent=2, sort_keys=True))
    elif items and not letters:
        click.echo("\n".join(queues.letter_lines(items)))
    else:
        click.echo("\n".join(deadletters.list_text(letters) + queues.letter_lines(items)))


@command.command("show")
@click.argument("key")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def show_letter(cfg: Config, key: str, as_json: bool) -> None:
    """Show one dead letter: payload, error log, history."""
    if _is_item(key):
        item = queues.find_letter(_files(cfg), key)
        if as_json:
            click.echo(json.dumps(item.model_dump(mode="json", by_alias=True), indent=2,
                                  sort_keys=True))
        else:
            click.echo("\n".join(queues.item_text(item)))
        return
    letter = deadletters.find(read_state(cfg), deadletters.check_key(key))
    if as_json:
        click.echo(json.dumps(letter.model_dump(mode="json", by_alias=True), indent=2,
                              sort_keys=True))
    else:
        click.echo("\n".join(deadletters.letter_text(letter)))


def _is_item(key: str) -> bool:
    """A queue item's dead letter is named ``<queue>/<item-id>``."""
    return "/" in key


def _files(cfg: Config) -> Mapping[str, bytes]:
    return GitStateStore(cfg.repo, cfg.remote, cfg.state_branch).read().files


def _chosen(cfg: Config, keys: tuple[str, ...], schedule: str | None, every: bool,
            yes: bool, verb: str) -> list[str]:
    """The dead letters ``verb`` acts on: the keys named (a track's or a queue item's),
    or (after a confirmation that says how many) those of ``--schedule`` or ``--all``
    (``--all``: the dead queue items too)."""
    if sum([bool(keys), schedule is not None, every]) != 1:
        raise click.UsageError("name dead letters by KEY..., or give --schedule ID or --all")
    if schedule is not None:
        check_id(schedule, "schedule id")
    files = _files(cfg)
    items = list(dict.fromkeys(k for k in keys if _is_item(k)))
    for key in items:
        queues.find_letter(files, key)  # validates the key; it must be a dead item
    chosen = deadletters.select(state_model.load(files), [k for k in keys if not _is_item(k)],
                                schedule, every)
    if every:
        chosen += [f"{i.queue}/{i.id}" for i in queues.dead_letters(files)]
    if keys:
        return chosen + items
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

    def one(files: Mapping[str, bytes], key: str) -> Any:
        if _is_item(key):
            return queues.requeue(files, key, actor, reason, now)
        return deadletters.requeue(files, key, actor, reason, now)

    _transact(cfg, lambda snap: deadletters.each(snap.files, chosen, one),
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
    now = parse_now(None)

    def one(files: Mapping[str, bytes], key: str) -> Any:
        if _is_item(key):
            return queues.discard(files, key, actor, reason, now)
        return deadletters.discard(files, key, actor, reason)

    _transact(cfg, lambda snap: deadletters.each(snap.files, chosen, one),
              _subject("discard", chosen))
    for key in chosen:
        click.echo(f"discarded {key}")
