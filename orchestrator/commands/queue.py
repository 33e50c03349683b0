"""``orchestrator queue add | list | show | stats | purge | work``: work queues on the
state branch (see :mod:`orchestrator.runs.queues`; ``work`` is what a drain worker's
leg runs, :mod:`orchestrator.executors.drain_leg`)."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from .. import executors
from ..errors import UserError
from ..runs import queues
from ..state import layout
from ..state.items import (
    MAX_FILE_BYTES,
    BadEnqueue,
    ItemStatus,
    NewItem,
    new_item,
    parse_array,
    parse_lines,
)
from ..state.queueops import Enqueued
from ..store import Snapshot, StateStore
from ..support import safejson
from ..support.times import parse_now
from .context import Config, pass_config, said, who


@click.group("queue")
def command() -> None:
    """Work queues: items on the state branch, drained by drain tracks."""


def _store(cfg: Config) -> StateStore:
    return cfg.store()


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def _read_file(name: str) -> bytes:
    if name == "-":
        data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise UserError(f"-: larger than {MAX_FILE_BYTES} bytes")
        return data
    try:
        return safejson.read_file(Path(name), max_bytes=MAX_FILE_BYTES, root=Path("/"))
    except FileNotFoundError:
        raise UserError(f"{name}: no such file") from None
    except safejson.UnsafeJSON as exc:
        raise UserError(f"{name}: {exc}") from None


def _event_items(path: str) -> list[NewItem]:
    """The items of a repository_dispatch event file: its ``client_payload.items``."""
    try:
        event = safejson.loads(_read_file(path), max_bytes=MAX_FILE_BYTES)
    except safejson.UnsafeJSON as exc:
        raise UserError(f"{path}: {exc}") from None
    payload = event.get("client_payload") if isinstance(event, dict) else None
    items = payload.get("items") if isinstance(payload, dict) else None
    try:
        return parse_array(items)
    except BadEnqueue as exc:
        raise UserError(f"{path}: client_payload.items: {exc}; nothing was added") from None


def _items(payload: str | None, file: str | None, key: str | None, priority: int | None,
           not_before: str | None, event: str | None = None) -> list[NewItem]:
    if sum(x is not None for x in (payload, file, event)) != 1:
        raise click.UsageError("give exactly one of --payload, --file and --event")
    if event is not None:
        return _event_items(event)
    if file is not None:
        if key is not None or priority is not None or not_before is not None:
            raise click.UsageError("--key, --priority and --not-before go with --payload; "
                                   "a file gives them per line")
        try:
            return parse_lines(_read_file(file))
        except BadEnqueue as exc:
            raise UserError(f"{file}: {exc}; nothing was added") from None
    assert payload is not None
    try:
        value = safejson.loads(payload, max_bytes=MAX_FILE_BYTES)
    except safejson.UnsafeJSON as exc:
        raise UserError(f"--payload: {exc}") from None
    entry: dict[str, Any] = {"payload": value}
    for name, given in (("key", key), ("priority", priority), ("not_before", not_before)):
        if given is not None:
            entry[name] = given
    try:
        return [new_item(entry)]
    except BadEnqueue as exc:
        raise UserError(f"--{str(exc).replace('_', '-')}") from None


@command.command("add")
@click.argument("queue")
@click.option("--payload", metavar="JSON", help="The item's payload (any JSON, at most 64 KiB).")
@click.option("--file", "file", metavar="FILE",
              help="A JSON-lines file (or - for stdin): one object a line with payload "
                   "and optional key, priority, not_before (or one JSON array of them).")
@click.option("--event", metavar="FILE",
              help="A repository_dispatch event file ($GITHUB_EVENT_PATH): its "
                   "client_payload.items, a JSON array of items (enqueue.yml).")
@click.option("--key", help="Idempotency key: an item with this key already in the queue "
                            "is kept, nothing is added.")
@click.option("--priority", type=int, help="Higher is claimed first (default 0).")
@click.option("--not-before", metavar="ISO", help="Not claimed before this time.")
@click.option("--by", help="Who (default: the GitHub actor, or the user name).")
@click.option("--now", "now_text", metavar="ISO", help="Time of the enqueue (default: now).")
@click.option("--executor", type=click.Choice(executors.NAMES),
              help="Enqueue in a tick that dispatches with this executor. A drain whose "
                   "on_queue the items call for fires in the same commit. Default: no tick.")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def add(cfg: Config, queue: str, payload: str | None, file: str | None, event: str | None,
        key: str | None, priority: int | None, not_before: str | None, by: str | None,
        now_text: str | None, executor: str | None, as_json: bool) -> None:
    """Enqueue items, in one compare-and-swap commit."""
    layout.check_queue(queue)
    items = _items(payload, file, key, priority, not_before, event)
    now = parse_now(now_text)
    actor = said("--by", who(by))
    if executor is not None:
        result = _add_in_tick(cfg, executor, queue, items, now, actor, not as_json)
    else:
        result = _add(cfg, queue, items, now, actor)
    if as_json:
        _echo_json({"queue": queue, "added": [i.id for i in result.added],
                    "existing": list(result.existing)})
    else:
        click.echo(f"{queue}: {len(result.added)} added, {len(result.existing)} already "
                   "there")


def _add(cfg: Config, queue: str, items: list[NewItem], now: datetime, by: str) -> Enqueued:
    """The items added in a commit of their own."""
    done: list[Enqueued] = []

    def change(snap: Snapshot) -> dict[str, bytes | None] | None:
        files, result = queues.add(snap.files, queue, items, now, by)
        done[:] = [result]
        return files

    _store(cfg).transact(change, f"queue {queue}: add {len(items)} item(s)")
    return done[-1]


def _add_in_tick(cfg: Config, executor: str, queue: str, items: list[NewItem],
                 now: datetime, by: str, echo: bool) -> Enqueued:
    """The items added by a tick, in its commit (:class:`~orchestrator.planner.EnqueueRequest`):
    a drain they call for fires and is sent by that tick."""
    from ..planner import EnqueueRequest
    from ..tick.settings import TickSettings
    from .tick import build, summary_lines, write_step_summary

    request = EnqueueRequest(queue, tuple(items), by)
    result = build(cfg, now, TickSettings(executor_name=executor, requests=(request,))).run()
    if echo:
        click.echo("\n".join(summary_lines(result)))
    write_step_summary(result)
    assert result.decision is not None
    return result.decision.enqueued[queue]


@command.command("list")
@click.argument("queue")
@click.option("--status", type=click.Choice([s.value for s in ItemStatus]),
              help="Only items with this status.")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def list_items(cfg: Config, queue: str, status: str | None, as_json: bool) -> None:
    """List a queue's items in queue order."""
    items = queues.listed(_store(cfg).read().files, queue,
                          ItemStatus(status) if status else None)
    if as_json:
        _echo_json([queues.row(i) for i in items])
    else:
        click.echo("\n".join(queues.rows_text(items)))


@command.command("show")
@click.argument("queue")
@click.argument("item")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def show(cfg: Config, queue: str, item: str, as_json: bool) -> None:
    """Show one item (by id or idempotency key): payload, errors, history."""
    found = queues.find(_store(cfg).read().files, queue, item)
    if as_json:
        _echo_json(found.model_dump(mode="json", by_alias=True))
    else:
        click.echo("\n".join(queues.item_text(found)))
        click.echo(f"  payload: {json.dumps(found.payload, sort_keys=True)[:2000]}")


@command.command("stats")
@click.argument("queue", required=False)
@click.option("--now", "now_text", metavar="ISO", help="Ages as of this time (default: now).")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def stats(cfg: Config, queue: str | None, now_text: str | None, as_json: bool) -> None:
    """Counts by status, the backlog, the oldest ready item's age, who holds claims."""
    rows = queues.stats(_store(cfg).read().files, queue, parse_now(now_text))
    if as_json:
        _echo_json(rows if queue is None else rows[0])
    else:
        click.echo("\n".join(queues.stats_text(rows)))


@command.command("purge")
@click.argument("queue")
@click.option("--status", type=click.Choice(["done"]), required=True,
              help="Which items: only done ones are purged (dead ones wait in the dlq).")
@click.option("--older-than-days", type=click.FloatRange(min=0), required=True,
              help="Done more than this many days ago.")
@click.option("--now", "now_text", metavar="ISO", help="Time to count from (default: now).")
@click.option("--dry-run", is_flag=True, help="List the items it would purge; change nothing.")
@pass_config
def purge(cfg: Config, queue: str, status: str, older_than_days: float,
          now_text: str | None, dry_run: bool) -> None:
    """Remove done items from the live tree (the branch's history keeps them)."""
    now = parse_now(now_text)
    if dry_run:
        _, ids = queues.purge(_store(cfg).read().files, queue, older_than_days, now)
        click.echo("".join(f"{queue}/{ident}\n" for ident in ids)
                   + f"{queue}: {len(ids)} {status} item(s) would be purged (dry run)")
        return
    purged: list[str] = []

    def change(snap: Snapshot) -> dict[str, bytes | None] | None:
        files, purged[:] = queues.purge(snap.files, queue, older_than_days, now)
        return files

    _store(cfg).transact(change, f"queue {queue}: purge done items")
    click.echo(f"{queue}: {len(purged)} {status} item(s) purged")


@command.command("work")
@click.option("--run", "run_id", envvar="ORCHESTRATOR_RUN_ID", required=True, metavar="RUN",
              help="Run id [env: ORCHESTRATOR_RUN_ID].")
@click.option("--track", envvar="ORCHESTRATOR_TRACK", required=True, metavar="WORKER",
              help="The worker's track name [env: ORCHESTRATOR_TRACK].")
@click.option("--attempt", type=click.IntRange(min=1), envvar="ORCHESTRATOR_ATTEMPT",
              required=True, help="Attempt number [env: ORCHESTRATOR_ATTEMPT].")
@click.option("--queue", "queue", required=True, help="The queue of its items.")
@click.option("--items", "items_json", required=True, metavar="JSON",
              help="Its items as the tick sent them: [[id, attempt], ...].")
@click.option("--wall-minutes", type=click.FloatRange(min=0, min_open=True), required=True,
              help="Its wall clock: no item starts after it; the one in flight is released.")
@click.option("--command", "command_text", envvar="TRACK_COMMAND", required=True,
              help="What to run for each item [env: TRACK_COMMAND].")
@click.option("--output", "folder", required=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Folder to write <run>--<worker>--<attempt>.json into.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the payloads and logs go (default: a folder beside --output).")
@pass_config
def work(cfg: Config, run_id: str, track: str, attempt: int, queue: str, items_json: str,
         wall_minutes: float, command_text: str, folder: Path, work_dir: Path | None) -> None:
    """Work a drain worker's items on a CI runner and write its outcome file (what
    track.yml's drain legs run)."""
    from ..executors.drain_leg import work as work_items

    path = work_items(_store(cfg), run_id=run_id, track=track, attempt=attempt,
                      queue=queue, items_json=items_json, wall_minutes=wall_minutes,
                      command=command_text, output=folder, work_dir=work_dir,
                      cwd=cfg.repo)
    click.echo(f"outcome -> {path}")
