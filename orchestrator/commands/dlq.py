"""``orchestrator dlq list | show KEY | requeue KEY | discard KEY``: the dead letter queue
(see :mod:`orchestrator.runs.deadletters`)."""

from __future__ import annotations

import json
from collections.abc import Mapping

import click

from ..runs import deadletters, queues
from ..state import layout
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
    layout.dlq_path(key)  # validates the key
    letter = deadletters.find(read_state(cfg), key)
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


def _transact(cfg: Config, key: str, change: ChangeFn, message: str) -> None:
    if _is_item(key):
        layout.parse_item_letter_key(key)
    else:
        layout.dlq_path(key)
    store = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch)
    store.transact(change, message)


@command.command("requeue")
@click.argument("key")
@click.option("--reason", default="", help="Why, recorded in the track's history.")
@click.option("--by", help="Who (default: $GITHUB_ACTOR or the user name).")
@click.option("--now", "now_text", metavar="ISO", help="Time of the requeue (default: now).")
@pass_config
def requeue(cfg: Config, key: str, reason: str, by: str | None, now_text: str | None) -> None:
    """Put a parked track back to pending with a fresh attempt budget; for a failed
    compensation, reopen the saga where it stopped."""
    now = parse_now(now_text)
    actor = who(by)
    requeue_fn = queues.requeue if _is_item(key) else deadletters.requeue
    _transact(cfg, key, lambda snap: requeue_fn(snap.files, key, actor, reason, now),
              f"dlq: requeue {key}")
    click.echo(f"requeued {key}; the next tick dispatches it")


@command.command("discard")
@click.argument("key")
@click.option("--reason", required=True, help="Why it is being given up.")
@click.option("--by", help="Who (default: $GITHUB_ACTOR or the user name).")
@pass_config
def discard(cfg: Config, key: str, reason: str, by: str | None) -> None:
    """Give up on a parked track; the entry is kept, marked with who and why."""
    actor = who(by)
    if _is_item(key):
        now = parse_now(None)
        _transact(cfg, key, lambda snap: queues.discard(snap.files, key, actor, reason, now),
                  f"dlq: discard {key}")
    else:
        _transact(cfg, key, lambda snap: deadletters.discard(snap.files, key, actor, reason),
                  f"dlq: discard {key}")
    click.echo(f"discarded {key}")
