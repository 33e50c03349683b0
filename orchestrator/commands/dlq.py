"""``orchestrator dlq list | show KEY | requeue KEY | discard KEY``: the dead letter queue
(see :mod:`orchestrator.runs.deadletters`)."""

from __future__ import annotations

import json

import click

from ..runs import deadletters
from ..state import layout
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
    layout.dlq_path(key)  # validates the key
    letter = deadletters.find(read_state(cfg), key)
    if as_json:
        click.echo(json.dumps(letter.model_dump(mode="json", by_alias=True), indent=2,
                              sort_keys=True))
    else:
        click.echo("\n".join(deadletters.letter_text(letter)))


def _transact(cfg: Config, key: str, change: ChangeFn, message: str) -> None:
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
    _transact(cfg, key, lambda snap: deadletters.requeue(snap.files, key, actor, reason, now),
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
    _transact(cfg, key, lambda snap: deadletters.discard(snap.files, key, actor, reason),
              f"dlq: discard {key}")
    click.echo(f"discarded {key}")
