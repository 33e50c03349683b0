"""``orchestrator schedules pause ID --reason R``, ``resume`` and its alias ``unpause``:
a pause by hand, and the end of any pause (see :mod:`orchestrator.runs.pauses` and
:mod:`orchestrator.planner.pause`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import click

from ..brief import INDEX_TEMPLATE, render_index, repo_template
from ..brief.dashboard import from_files
from ..config.fieldtypes import check_id
from ..config.files import load_all
from ..config.policies import Pause
from ..errors import OrchestratorError
from ..runs.pauses import pause, resume
from ..runs.status import staleness_for
from ..state import codec, layout
from ..state import index as state_index
from ..state.history import page_runs
from ..state.records import Cursor
from ..store import Change, Snapshot
from ..support.times import iso, parse_now
from .context import Config, acting, pass_config
from .render import lateness_needs

_ID = click.argument("schedule_id", metavar="ID")
_BY = click.option("--by", help="Who (default: the GitHub actor, or the user name).")
_NOW = click.option("--now", "now_text", metavar="ISO", help="Time of it (default: now).")


@click.command("resume")
@_ID
@click.option("--reason", required=True, help="Why it may fire again, recorded in its state.")
@_BY
@_NOW
@pass_config
def schedule_resume(cfg: Config, schedule_id: str, reason: str, by: str | None,
                    now_text: str | None) -> None:
    """Resume a paused schedule, paused by hand or after repeated failures (a
    compare-and-swap commit on the state branch). Slots that came due while it was
    paused are not fired.

    `schedules unpause` is an alias of `schedules resume`: one command, two names.
    """
    _write(cfg, schedule_id, reason, by, now_text, resume)
    click.echo(f"resumed {schedule_id}; the next tick fires its next slot")


@click.command("pause")
@_ID
@click.option("--reason", required=True, help="Why, recorded in its state and shown "
              "wherever the pause is (status, the index, the tick's log).")
@_BY
@_NOW
@pass_config
def schedule_pause(cfg: Config, schedule_id: str, reason: str, by: str | None,
                   now_text: str | None) -> None:
    """Pause a schedule by hand, with no pull request (a compare-and-swap commit on the
    state branch): it fires nothing until `schedules resume` or `unpause`. Open runs
    go on. A schedule that has not ticked yet can be held before its first run; an id
    with no schedule file here and no state is refused."""
    _write(cfg, schedule_id, reason, by, now_text, pause)
    click.echo(f"paused {schedule_id}; `orchestrator schedules unpause {schedule_id} "
               "--reason R` lets it fire again")


def _write(cfg: Config, schedule_id: str, reason: str, by: str | None,
           now_text: str | None, edit: Callable[..., Change]) -> None:
    """Commit ``edit`` of the schedule's cursor, and the index that names its pause.

    A schedule file in this checkout defines the id, so a schedule can be paused
    before its first tick, even from the branch of the pull request that adds it."""
    check_id(schedule_id, "schedule id")
    defined = (cfg.schedules_dir / f"{schedule_id}.json").is_file()
    now = parse_now(now_text)
    actor, reason = acting(by, reason)
    store = cfg.store()
    verb = "pause" if edit is pause else "resume"

    def change(snap: Snapshot) -> Change:
        out = edit(snap.files, schedule_id, actor, reason, now, defined=defined)
        # the index names paused schedules: now with, or without, this one
        # (the open runs and the newest others, as the tick renders it)
        loaded = state_index.load(snap.files)
        edited = out[layout.cursor_path(schedule_id)]
        assert edited is not None
        cursors = {**loaded.state.cursors, schedule_id: codec.parse_record(
            Cursor, layout.cursor_path(schedule_id), edited)}
        runs, older = page_runs(snap.files, loaded.state.runs)
        state = loaded.state.copy()
        state.cursors = cursors
        parsed = load_all(cfg.schedules_dir)
        tick_lines, tolerance = lateness_needs(cfg)
        board = from_files(snap.files, parsed.schedules, [e.message for e in parsed.errors],
                           now, state=state, last_tick=codec.heartbeat_at(snap.files),
                           max_staleness=staleness_for(cfg.repo, now),
                           tick_lines=tick_lines, max_lateness_minutes=tolerance)
        # (a broken index template keeps the old index; the tick reports it)
        with contextlib.suppress(OrchestratorError):
            out[layout.INDEX] = render_index(
                list(runs.values()), generated_at=now,
                template=repo_template(cfg.repo, INDEX_TEMPLATE),
                paused={sid: c.paused for sid, c in sorted(cursors.items()) if c.paused},
                older=older, board=board).encode()
        return out

    store.transact(change, f"schedules: {verb} {schedule_id}")


def cursors(cfg: Config) -> dict[str, Cursor]:
    """Schedule id -> its cursor, read from the state branch; empty when the branch
    cannot be read (``schedules list`` and ``show`` still describe the files then)."""
    try:
        snap = cfg.store().read()
        found = {}
        for path in snap.files:
            if layout.kind_of(path) is layout.Kind.CURSOR:
                cursor = codec.parse_record(Cursor, path, snap.files[path])
                found[cursor.schedule_id] = cursor
        return found
    except OrchestratorError:
        return {}


def pauses(cfg: Config) -> dict[str, Pause]:
    """Schedule id -> its pause, read from the state branch (see :func:`cursors`)."""
    return {sid: c.paused for sid, c in cursors(cfg).items() if c.paused is not None}


def pause_text(pause: Pause) -> str:
    return f"paused since {iso(pause.at)} by {pause.by}: {pause.reason}"
