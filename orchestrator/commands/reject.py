"""``orchestrator reject RUN TRACK``: refuse a track held by its approval gate; it ends
``rejected`` and the tracks that need it are skipped (see :mod:`.approve`)."""

from __future__ import annotations

import click

from . import _operate
from .approve import decide
from .context import Config, pass_config


@click.command("reject")
@click.argument("run_id", metavar="RUN")
@click.argument("track", metavar="TRACK")
@_operate.options_with_reason
@pass_config
def command(cfg: Config, run_id: str, track: str, reason: str, by: str | None,
            now_text: str | None, executor: str) -> int:
    """Reject TRACK of RUN, held by its approval gate: it ends rejected, never retried,
    and the tracks that need it are skipped."""
    return decide(cfg, "reject", run_id, track, reason, by, now_text, executor)
