"""``orchestrator dlq list | show KEY | requeue KEY | discard KEY``: the dead letter queue.

A dead letter is a track that failed with no attempts left or was tapped out. It
stays parked until an operator requeues it (back to ``pending`` with a fresh
attempt budget; its run reopens) or discards it (kept, marked with who and why).
Both go through the same compare-and-swap as the tick, so they never lose a race.
"""

from __future__ import annotations

import getpass
import json
import os

import click

from .. import machine
from .. import state as st
from ..cli import Config, pass_config
from ..errors import NotFound, UserError
from ..models import DeadLetter, RunStatus, TrackPhase
from ..store import GitStateStore, Snapshot
from ..times import parse_now
from .runs import read_state


def _who(by: str | None) -> str:
    if by:
        return by
    try:
        return os.environ.get("GITHUB_ACTOR") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _letter(files: st.State, key: str) -> DeadLetter:
    letter = files.dlq.get(key)
    if letter is None:
        raise NotFound(f"no dead letter {key!r}")
    return letter


@click.group("dlq")
def command() -> None:
    """Tracks parked after their last failed attempt or a tap-out."""


@command.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include discarded entries.")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def list_letters(cfg: Config, show_all: bool, as_json: bool) -> None:
    """List dead letters, oldest first."""
    state = read_state(cfg)
    letters = sorted((d for d in state.dlq.values() if show_all or not d.discarded),
                     key=lambda d: (d.parked_at, d.key))
    if as_json:
        click.echo(json.dumps([d.model_dump(mode="json", by_alias=True) for d in letters],
                              indent=2, sort_keys=True))
        return
    if not letters:
        click.echo("dead letter queue is empty")
    for d in letters:
        flag = "  (discarded)" if d.discarded else ""
        click.echo(f"{d.key}  {d.parked_at:%Y-%m-%dT%H:%MZ}  {d.reason}{flag}")


@command.command("show")
@click.argument("key")
@click.option("--json", "as_json", is_flag=True)
@pass_config
def show_letter(cfg: Config, key: str, as_json: bool) -> None:
    """Show one dead letter: payload, error log, history."""
    st.dlq_path(key)  # validates the key
    letter = _letter(read_state(cfg), key)
    if as_json:
        click.echo(json.dumps(letter.model_dump(mode="json", by_alias=True), indent=2,
                              sort_keys=True))
        return
    # The planner's reason for a failed track already counts its attempts
    # ("failed after 2 attempt(s)"); a tap-out's reason does not.
    attempts = "" if "attempt" in letter.reason else f" (attempt {letter.attempts})"
    click.echo(f"{letter.key}: {letter.reason}{attempts}")
    click.echo(f"  payload: {letter.payload.model_dump_json(exclude_defaults=True)}")
    for entry in letter.error_log:
        # an entry may hold a stderr tail on several lines: keep them under their "!"
        first, *rest = entry.splitlines() or [""]
        click.echo(f"  ! {first}")
        for line in rest:
            click.echo(f"      {line}")
    for h in letter.state_history:
        click.echo(f"  {h.at:%Y-%m-%dT%H:%M:%SZ}  {h.from_} -> {h.to}  {h.reason}")
    if letter.discarded:
        click.echo(f"  discarded by {letter.discarded_by}: {letter.discarded_reason}")


def _transact(cfg: Config, key: str, change, message: str) -> None:  # type: ignore[no-untyped-def]
    st.dlq_path(key)
    store = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch)
    store.transact(change, message)


@command.command("requeue")
@click.argument("key")
@click.option("--reason", default="", help="Why, recorded in the track's history.")
@click.option("--by", help="Who (default: $GITHUB_ACTOR or the user name).")
@click.option("--now", "now_text", metavar="ISO", help="Time of the requeue (default: now).")
@pass_config
def requeue(cfg: Config, key: str, reason: str, by: str | None, now_text: str | None) -> None:
    """Put a parked track back to pending with a fresh attempt budget."""
    now = parse_now(now_text)
    who = _who(by)

    def change(snap: Snapshot) -> dict[str, bytes | None]:
        state = st.load(snap.files, all_tracks=True)
        letter = _letter(state, key)
        if letter.discarded:
            raise UserError(f"dead letter {key!r} was discarded; it cannot be requeued")
        run = state.runs.get(letter.run_id)
        track = state.tracks.get(letter.run_id, {}).get(letter.track)
        if run is None or track is None:
            raise NotFound(f"dead letter {key!r}: its run or track record is gone "
                           "(compacted?)")
        if run.status is RunStatus.CONSOLIDATING:
            raise UserError(f"run {run.run_id} is being consolidated; requeue after the "
                            "next tick")
        if track.phase not in (TrackPhase.FAILED, TrackPhase.TAPPED_OUT):
            raise UserError(f"track {letter.run_id}/{letter.track} is {track.phase.value}, "
                            "not failed or tapped out")
        why = f"requeued by {who}" + (f": {reason}" if reason else "")
        track = machine.move_track(
            track, TrackPhase.PENDING, now, why, attempt=track.attempt + 1,
            max_attempts=track.attempt + track.spec.max_attempts, not_before=None, handle=None,
            dispatch_key=None, url=None, dispatched_at=None, started_at=None, finished_at=None)
        out: dict[str, bytes | None] = {
            st.track_path(letter.run_id, letter.track): st.to_json(track),
            st.dlq_path(key): None,
        }
        if run.status is RunStatus.FAILED:
            # a reopened run gets its whole allowance again, from now
            allowance = run.deadline - max(run.fire_at, run.created_at)
            run = machine.move_run(run, RunStatus.RUNNING, now, why, finished_at=None,
                                   deadline=max(run.deadline, now + allowance))
            out[st.run_path(run.run_id)] = st.to_json(run)
        return out

    _transact(cfg, key, change, f"dlq: requeue {key}")
    click.echo(f"requeued {key}; the next tick dispatches it")


@command.command("discard")
@click.argument("key")
@click.option("--reason", required=True, help="Why it is being given up.")
@click.option("--by", help="Who (default: $GITHUB_ACTOR or the user name).")
@pass_config
def discard(cfg: Config, key: str, reason: str, by: str | None) -> None:
    """Give up on a parked track; the entry is kept, marked with who and why."""
    who = _who(by)

    def change(snap: Snapshot) -> dict[str, bytes | None] | None:
        letter = _letter(st.load(snap.files), key)
        if letter.discarded:
            return None
        done = letter.model_copy(update={"discarded": True, "discarded_by": who,
                                         "discarded_reason": reason})
        return {st.dlq_path(key): st.to_json(done)}

    _transact(cfg, key, change, f"dlq: discard {key}")
    click.echo(f"discarded {key}")
