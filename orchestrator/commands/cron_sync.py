"""``orchestrator cron-sync``: write tick.yml's cron (and the watchdog's) from schedules/.

GitHub's token cannot edit workflow files, so the tick never rewrites its own
cron: the change travels in the pull request that changes a schedule, and
``validate`` (the pull request check) fails until it does.
"""

from __future__ import annotations

from datetime import UTC, datetime

import click

from ..cadence.derive import TICK, derive, dropped_zones, sync, utc_spec
from ..errors import EXIT_OK, EXIT_USER, UserError
from ..spec.config import load_repo_config
from ..spec.files import load_all
from ..spec.files import write_schedule as write_atomically
from .context import Config, pass_config
from .schedules import INSTANT


@click.command("cron-sync")
@click.option("--check", is_flag=True, help="Change nothing; exit 1 if a workflow is stale.")
@click.option("--from", "start", type=INSTANT, default=None, metavar="ISO",
              help="Derive from this instant's next year of slots (default: now).")
@pass_config
def command(cfg: Config, check: bool, start: datetime | None) -> int:
    """Derive tick.yml's schedule from the schedules (UTC, both sides of daylight-saving
    changes) and the watchdog's from the tick's; write the workflows that changed."""
    loaded = load_all(cfg.schedules_dir)
    for error in loaded.errors:
        click.echo(f"orchestrator: {error.message} (ignored)", err=True)
    config = load_repo_config(cfg.repo)
    moment = start or datetime.now(UTC)
    try:
        changed = sync(cfg.repo, loaded.schedules, config, moment)
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from None
    derived = derive(loaded.schedules, config, moment)
    click.echo(f"tick cron ({config.cadence.mode}, UTC):")
    click.echo("".join(f"  {line}\n" for line in derived.tick_cron), nl=False)
    click.echo(f"watchdog: {derived.watchdog_cron}, stale after "
               f"{derived.max_staleness_minutes} minutes")
    tick = cfg.repo / TICK
    for line in dropped_zones(tick.read_text(encoding="utf-8"), derived.tick_cron):
        cron = utc_spec(line)
        click.echo(f"note: {TICK}'s entry {cron.cron!r} in {cron.timezone} is replaced by UTC "
                   "entries: cron-sync writes UTC, since GitHub documents nothing of a "
                   "zoned entry in the repeated hour of a fall-back night", err=True)
    for path in changed:
        rel = path.relative_to(cfg.repo).as_posix()
        click.echo(f"{'stale' if check else 'wrote'} {rel}")
    if not changed:
        click.echo("workflows up to date")
    if check:
        return EXIT_USER if changed else EXIT_OK
    for path, text in changed.items():
        write_atomically(path, text)
    return EXIT_OK
