"""``orchestrator schedules resume ID --reason R``: end a pause after repeated failures
(see :mod:`orchestrator.planner.pause`)."""

from __future__ import annotations

import contextlib

import click

from ..brief import INDEX_TEMPLATE, render_index, repo_template
from ..errors import OrchestratorError
from ..runs.pauses import resume
from ..spec.fields import check_id
from ..spec.policies import Pause
from ..state import codec, layout
from ..state import index as state_index
from ..state.records import Cursor
from ..store import Change, GitStateStore, Snapshot
from ..support.times import iso, parse_now
from .context import Config, pass_config, who


@click.command("resume")
@click.argument("schedule_id", metavar="ID")
@click.option("--reason", required=True, help="Why it may fire again, recorded in its state.")
@click.option("--by", help="Who (default: $GITHUB_ACTOR or the user name).")
@click.option("--now", "now_text", metavar="ISO", help="Time of the resume (default: now).")
@pass_config
def schedule_resume(cfg: Config, schedule_id: str, reason: str, by: str | None,
                    now_text: str | None) -> None:
    """Resume a schedule paused after repeated failures (a compare-and-swap commit on
    the state branch). Slots that came due while it was paused are not fired."""
    check_id(schedule_id, "schedule id")
    now = parse_now(now_text)
    actor = who(by)
    store = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch)

    def change(snap: Snapshot) -> Change:
        out = resume(snap.files, schedule_id, actor, reason, now)
        # the index names paused schedules: it no longer names this one
        # (the open runs and the newest others, as the tick renders it)
        loaded = state_index.load(snap.files)
        resumed = out[layout.cursor_path(schedule_id)]
        assert resumed is not None
        cursors = {**loaded.state.cursors, schedule_id: codec.parse_record(
            Cursor, layout.cursor_path(schedule_id), resumed)}
        runs, older = state_index.page_runs(snap.files, loaded.state.runs)
        # (a broken index template keeps the old index; the tick reports it)
        with contextlib.suppress(OrchestratorError):
            out[layout.INDEX] = render_index(
                list(runs.values()), generated_at=now,
                template=repo_template(cfg.repo, INDEX_TEMPLATE),
                paused={sid: c.paused for sid, c in sorted(cursors.items()) if c.paused},
                older=older).encode()
        return out

    store.transact(change, f"schedules: resume {schedule_id}")
    click.echo(f"resumed {schedule_id}; the next tick fires its next slot")


def cursors(cfg: Config) -> dict[str, Cursor]:
    """Schedule id -> its cursor, read from the state branch; empty when the branch
    cannot be read (``schedules list`` and ``show`` still describe the files then)."""
    try:
        snap = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch).read()
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
