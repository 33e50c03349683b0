"""``orchestrator dlq list | show KEY | requeue KEY... | discard KEY...``: the dead letter
queue (see :mod:`orchestrator.runs.deadletters`). ``requeue`` and ``discard`` take
several keys, or ``--schedule ID`` / ``--queue NAME`` / ``--all`` after a confirmation
with the count, and change them all in one compare-and-swap commit."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import click

from ..config.fieldtypes import check_id
from ..errors import UserError
from ..runs import deadletters, queues
from ..state import model as state_model
from ..store import ChangeFn
from ..support.times import parse_now
from .context import Config, acting, pass_config
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
    return cfg.store().read().files


@dataclass(frozen=True)
class Choice:
    """The dead letters a bulk verb acts on; ``queue`` when they are all of that one
    queue (``--queue``), so the change reads that queue once."""

    keys: list[str]
    queue: str | None = None

    def ids(self) -> list[str]:
        return [k.partition("/")[2] for k in self.keys]


def _chosen(cfg: Config, keys: tuple[str, ...], schedule: str | None, queue: str | None,
            every: bool, yes: bool, verb: str) -> Choice:
    """The dead letters ``verb`` acts on: the keys named (a track's or a queue item's),
    or (after a confirmation that says how many) those of ``--schedule``, ``--queue`` or
    ``--all`` (``--all``: the dead queue items too)."""
    if sum([bool(keys), schedule is not None, queue is not None, every]) != 1:
        raise click.UsageError("choose one selector: KEY..., --schedule ID, --queue NAME "
                               "or --all")
    if schedule is not None:
        check_id(schedule, "schedule id")
    if queue is not None:
        check_id(queue, "queue")
    files = _files(cfg)
    if queue is not None:
        return _of_queue(files, queue, yes, verb)
    items = list(dict.fromkeys(k for k in keys if _is_item(k)))
    for key in items:
        queues.find_letter(files, key)  # validates the key; it must be a dead item
    chosen = deadletters.select(state_model.load(files), [k for k in keys if not _is_item(k)],
                                schedule, every)
    if every:
        chosen += [f"{i.queue}/{i.id}" for i in queues.dead_letters(files)]
    if keys:
        return Choice(chosen + items)
    which = f"of schedule {schedule}" if schedule is not None else "waiting"
    return _confirmed(Choice(chosen), which, yes, verb)


def _of_queue(files: Mapping[str, bytes], queue: str, yes: bool, verb: str) -> Choice:
    """Every dead item of ``queue`` waiting, once confirmed; none, said why, when there
    is no such queue."""
    ids = queues.queue_letters(files, queue)
    if ids is None:
        click.echo(f"no queue {queue!r}: nothing to {verb}")
        return Choice([], queue)
    return _confirmed(Choice([f"{queue}/{i}" for i in ids], queue), f"of queue {queue}",
                      yes, verb)


def _confirmed(choice: Choice, which: str, yes: bool, verb: str) -> Choice:
    """``choice`` once confirmed (or ``--yes``); nothing, said so, when it is empty."""
    count = len(choice.keys)
    if not count:
        click.echo(f"no dead letters {which}: nothing to {verb}")
        return choice
    if not yes and not click.confirm(f"{verb} {count} dead letter(s) {which}?", err=True):
        raise UserError(f"not confirmed: no dead letter was {verb}d")
    return choice


def _transact(cfg: Config, change: ChangeFn, message: str) -> None:
    store = cfg.store()
    store.transact(change, message)


def _subject(verb: str, choice: Choice) -> str:
    keys = choice.keys
    if len(keys) == 1:
        return f"dlq: {verb} {keys[0]}"
    of = f" of queue {choice.queue}" if choice.queue is not None else ""
    return f"dlq: {verb} {len(keys)} dead letters{of}"


def _apply(cfg: Config, verb: str, choice: Choice,
           one: Callable[[Mapping[str, bytes], str], Any],
           bulk: Callable[[Mapping[str, bytes], str, list[str]], Any]) -> None:
    """Change every chosen dead letter in one compare-and-swap commit: ``one`` key at a
    time, or (``--queue``) ``bulk`` on one read of the queue, so a queue of 10,000 dead
    items is still one commit and one pass."""
    queue = choice.queue
    if queue is not None:
        ids = choice.ids()
        _transact(cfg, lambda snap: bulk(snap.files, queue, ids), _subject(verb, choice))
    else:
        _transact(cfg, lambda snap: deadletters.each(snap.files, choice.keys, one),
                  _subject(verb, choice))


def _bulk(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``requeue`` and ``discard`` share: which dead letters, and who acts."""
    for option in reversed((
        click.argument("keys", metavar="[KEY]...", nargs=-1),
        click.option("--schedule", metavar="ID", help="Every dead letter of this schedule "
                     "(asks first, with the count)."),
        click.option("--queue", metavar="NAME", help="Every dead item of this work queue "
                     "(asks first, with the count)."),
        click.option("--all", "every", is_flag=True,
                     help="Every dead letter waiting (asks first, with the count)."),
        click.option("--yes", "-y", is_flag=True, help="Do not ask for a confirmation."),
        click.option("--by", help="Who (default: the GitHub actor, or the user name)."),
    )):
        function = option(function)
    return function


@command.command("requeue")
@_bulk
@click.option("--reason", default="", help="Why, recorded in each track's history.")
@click.option("--now", "now_text", metavar="ISO", help="Time of the requeue (default: now).")
@pass_config
def requeue(cfg: Config, keys: tuple[str, ...], schedule: str | None, queue: str | None,
            every: bool, yes: bool, by: str | None, reason: str,
            now_text: str | None) -> None:
    """Put parked tracks back to pending with a fresh attempt budget, in one commit; for
    a failed compensation, reopen the saga where it stopped. A failed run reopens as a
    repair: new slots of its schedule fire beside it, whatever its overlap policy."""
    now = parse_now(now_text)
    actor, reason = acting(by, reason)
    chosen = _chosen(cfg, keys, schedule, queue, every, yes, "requeue")
    if not chosen.keys:
        return

    def one(files: Mapping[str, bytes], key: str) -> Any:
        if _is_item(key):
            return queues.requeue(files, key, actor, reason, now)
        return deadletters.requeue(files, key, actor, reason, now)

    _apply(cfg, "requeue", chosen, one, lambda files, name, ids: queues.requeue_queue(
        files, name, ids, actor, reason, now))
    for key in chosen.keys:
        click.echo(f"requeued {key}")
    click.echo("the next tick dispatches " + ("it" if len(chosen.keys) == 1 else "them"))


@command.command("discard")
@_bulk
@click.option("--reason", required=True, help="Why they are being given up.")
@pass_config
def discard(cfg: Config, keys: tuple[str, ...], schedule: str | None, queue: str | None,
            every: bool, yes: bool, by: str | None, reason: str) -> None:
    """Give up on parked tracks, in one commit; each entry is kept, marked with who and
    why."""
    actor, reason = acting(by, reason)
    chosen = _chosen(cfg, keys, schedule, queue, every, yes, "discard")
    if not chosen.keys:
        return
    now = parse_now(None)

    def one(files: Mapping[str, bytes], key: str) -> Any:
        if _is_item(key):
            return queues.discard(files, key, actor, reason, now)
        return deadletters.discard(files, key, actor, reason)

    _apply(cfg, "discard", chosen, one, lambda files, name, ids: queues.discard_queue(
        files, name, ids, actor, reason, now))
    for key in chosen.keys:
        click.echo(f"discarded {key}")
