"""``orchestrator upgrade [PATH]``: put the running version into a repository's workflows.

Replaces ``.github/orchestrator/`` (the wheel and the hash-pinned requirements file
``init`` wrote) with this version's, and removes older wheels there. Run it from the
version the workflows should run; commit what it changed. The workflow files are
left alone: it says which differ from the ones this version ships.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..distribution import INSTALL_DIR, install
from ..errors import UserError
from .context import Config, pass_config
from .init import SCAFFOLD, WORKFLOWS, write_install


def _differing_workflows(root: Path) -> list[str]:
    found = []
    for name in WORKFLOWS:
        mine = root / ".github" / "workflows" / name
        shipped = (SCAFFOLD / "workflows" / name).read_bytes()
        if mine.is_file() and mine.read_bytes() != shipped:
            found.append(name)
    return found


@click.command("upgrade")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@pass_config
def command(cfg: Config, path: Path | None) -> int:
    """Replace the orchestrator the workflows install (.github/orchestrator: its wheel
    and hash-pinned requirements) with this version's, in PATH (default: --repo)."""
    root = (path or cfg.repo).resolve()
    if not (root / ".github" / "workflows").is_dir():
        raise UserError(f"{root} has no .github/workflows: run `orchestrator init` there first")
    installed = install.current()
    before = {rel: (root / rel).read_bytes() if (root / rel).is_file() else None
              for rel in installed.files()}
    stale = install.stale_wheels(root, installed.wheel.filename)
    if not stale and all(before[rel] == data for rel, data in installed.files().items()):
        click.echo(f"{INSTALL_DIR} already holds this version ({installed.wheel.filename}, "
                   f"sha256 {installed.wheel.sha256[:12]}): nothing to do")
        for line in install.keep_tracked(root, list(installed.files())):
            click.echo(line)
    else:
        for line in write_install(root, installed):
            click.echo(line)
        click.echo(f"next: commit {INSTALL_DIR}; the workflows install it from their "
                   "next run on")
    for name in _differing_workflows(root):
        click.echo(f"note: .github/workflows/{name} differs from the one this version ships "
                   f"({SCAFFOLD / 'workflows' / name}); compare them and take its changes")
    return 0
