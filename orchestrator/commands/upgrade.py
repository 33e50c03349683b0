"""``orchestrator upgrade [PATH]``: put the running version into a repository's workflows.

Replaces ``.github/orchestrator/`` (the wheel, the hash-pinned requirements file and
the install script ``init`` wrote) with this version's, and removes older wheels
there. A repository whose workflows use the GitHub Action instead (``init --action``)
has no wheel: ``--action OWNER/REPO@REF`` moves their pin. Run it from the version the
workflows should run; commit what it changed. The workflow files are otherwise left
alone: it says which differ from the ones this version ships, apart from the cron
lines ``cron-sync`` writes.
"""

from __future__ import annotations

from pathlib import Path

import click

from ..cadence.tickfile import without_cadence
from ..distribution import INSTALL_DIR, install
from ..distribution import action as actions
from ..errors import UserError
from ..support.atomic import write_text
from .context import Config, pass_config
from .init import SCAFFOLD, WORKFLOWS, shipped_workflow, write_install


def _workflow_texts(root: Path) -> dict[str, str]:
    folder = root / ".github" / "workflows"
    return {name: (folder / name).read_text(encoding="utf-8") for name in WORKFLOWS
            if (folder / name).is_file()}


def _differing_workflows(root: Path, pin: actions.Pin | None) -> list[str]:
    found = []
    for name, mine in _workflow_texts(root).items():
        try:
            shipped = shipped_workflow(name, pin)
        except ValueError:
            shipped = ""
        if without_cadence(mine) != without_cadence(shipped):
            found.append(name)
    return found


def _upgrade_wheel(root: Path) -> list[str]:
    installed = install.current()
    before = {rel: (root / rel).read_bytes() if (root / rel).is_file() else None
              for rel in installed.files()}
    stale = install.stale_wheels(root, installed.wheel.filename)
    if stale or any(before[rel] != data for rel, data in installed.files().items()):
        return [*write_install(root, installed),
                f"next: commit {INSTALL_DIR}; the workflows install it from their next run on"]
    return [f"{INSTALL_DIR} already holds this version ({installed.wheel.filename}, "
            f"sha256 {installed.wheel.sha256[:12]}): nothing to do",
            *install.keep_tracked(root, list(installed.files()))]


def _move_pin(root: Path, old: actions.Pin, spec: str | None) -> list[str]:
    if spec is None:
        return [f"the workflows use the action {old.repo}@{old.sha}: `orchestrator upgrade "
                "--action OWNER/REPO@REF` moves their pin"]
    new = actions.resolve(spec)
    if new.sha == old.sha and new.repo == old.repo:
        return [f"the workflows already use {new.repo}@{new.sha}: nothing to do"]
    folder = root / ".github" / "workflows"
    done = []
    for name, text in _workflow_texts(root).items():
        moved = actions.repin(text, old, new)
        if moved != text:
            write_text(folder / name, moved)
            done.append(f"moved .github/workflows/{name} to {new.repo}@{new.sha}")
    return [*done, "next: commit .github/workflows; the workflows use it from their next "
                   "run on"]


@click.command("upgrade")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--action", "action", metavar="OWNER/REPO@REF",
              help="For workflows that use the GitHub Action (init --action): pin them to "
                   "this commit (a tag or branch is resolved to one).")
@pass_config
def command(cfg: Config, path: Path | None, action: str | None) -> int:
    """Replace the orchestrator the workflows install with this version's, in PATH
    (default: --repo): .github/orchestrator's wheel, hash-pinned requirements and
    install script. Or move the pin of workflows that use the action."""
    root = (path or cfg.repo).resolve()
    if not (root / ".github" / "workflows").is_dir():
        raise UserError(f"{root} has no .github/workflows: run `orchestrator init` there first")
    pin = actions.pinned(_workflow_texts(root).get("tick.yml", ""))
    if pin is None and action is not None:
        raise UserError("--action: these workflows install the wheel in .github/orchestrator, "
                        "they have no pin to move; docs/how-to/upgrade.md#switch-to-the-action "
                        "says how to switch")
    lines = _upgrade_wheel(root) if pin is None else _move_pin(root, pin, action)
    for line in lines:
        click.echo(line)
    after = actions.pinned(_workflow_texts(root).get("tick.yml", ""))
    for name in _differing_workflows(root, after):
        click.echo(f"note: .github/workflows/{name} differs from the one this version ships "
                   f"({SCAFFOLD / 'workflows' / name}); compare them and take its changes")
    return 0
