"""``orchestrator schedules resume ID --reason R``: end a pause after repeated failures
(see :mod:`orchestrator.planner.pause`)."""

from __future__ import annotations

import click

from .. import state as st
from ..cli import Config, pass_config
from ..errors import OrchestratorError
from ..models import Cursor, check_id
from ..planner.pause import resume
from ..policies import Pause
from ..store import GitStateStore
from ..times import parse_now
from .dlq import _who


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
    who = _who(by)
    store = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch)
    store.transact(lambda snap: resume(snap.files, schedule_id, who, reason, now),
                   f"schedules: resume {schedule_id}")
    click.echo(f"resumed {schedule_id}; the next tick fires its next slot")


def pauses(cfg: Config) -> dict[str, Pause]:
    """Schedule id -> its pause, read from the state branch; empty when the branch cannot
    be read (``schedules list`` and ``show`` still describe the files then)."""
    try:
        snap = GitStateStore(cfg.repo, cfg.remote, cfg.state_branch).read()
        found = {}
        for path in snap.files:
            parts = path.split("/")
            if len(parts) == 3 and parts[:2] == [st.ROOT, "schedules"] and path.endswith(
                    ".json"):
                cursor = st.parse_record(Cursor, path, snap.files[path])
                if cursor.paused is not None:
                    found[cursor.schedule_id] = cursor.paused
        return found
    except OrchestratorError:
        return {}


def pause_text(pause: Pause) -> str:
    return f"paused since {pause.at:%Y-%m-%dT%H:%M:%SZ} by {pause.by}: {pause.reason}"
