"""``orchestrator cron-sync``: write tick.yml's cron (and the watchdog's) from schedules/.

GitHub's token cannot edit workflow files, so the tick never rewrites its own
cron: the change travels in the pull request that changes a schedule, and
``validate`` (the pull request check) fails until it does.
"""

from __future__ import annotations

from datetime import UTC, datetime

import click

from ..cadence.derive import TICK, derive, sync
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
    if not (cfg.repo / TICK).is_file():
        # a repository that does not run on GitHub (`init --local`): nothing to keep in step
        click.echo(f"no {TICK}: this repository does not run on GitHub Actions, so "
                   "there is no cron to write (`orchestrator init --local --github` "
                   "scaffolds the workflows)")
        return EXIT_OK
    try:
        changed = sync(cfg.repo, loaded.schedules, config, moment)
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from None
    derived = derive(loaded.schedules, config, moment)
    click.echo(f"tick cron ({config.cadence.mode}, UTC):")
    click.echo("".join(f"  {line}\n" for line in derived.tick_cron), nl=False)
    click.echo(f"watchdog: {derived.watchdog_cron}, stale after "
               f"{derived.max_staleness_minutes} minutes")
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
