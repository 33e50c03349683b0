"""``orchestrator init [PATH]``: scaffold a repository that runs scheduled work.

Writes ``schedules/`` (one example and the JSON Schema), ``templates/`` (the brief
and the index, to edit), the workflows (``tick``, ``track``, ``validate``,
``watchdog``; ``pages`` with ``--pages``), a README section and a ``.gitignore`` line
for the local executor's work folder. The files are the ones this project runs on
itself, shipped in the package (``orchestrator/data``); a test keeps the copies equal.

It never overwrites a file, nor adds the example beside existing schedules, unless
``--force``; the check covers every file before anything is written, so a refusal
leaves the folder as it was. A folder that is not in a git repository gets
``git init``. Nothing is committed: review the files, then commit and push.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import click

from ..cli import Config, pass_config
from ..errors import UserError
from ..schedules import SCHEMA_FILE, schema_text, write_schedule

DATA = Path(__file__).resolve().parent.parent / "data"
SCAFFOLD = DATA / "scaffold"
WORKFLOWS = ("tick.yml", "track.yml", "validate.yml", "watchdog.yml")
OPTIONAL_WORKFLOWS = ("pages.yml",)
EXAMPLE = "nightly.json"
README_SECTION = SCAFFOLD / "README.section.md"
GITIGNORE_LINE = ".orchestrator/"
"""The local executor's work folder and ``demo`` workspaces: never commit them."""


def scaffold_files(*, pages: bool = False) -> dict[str, str]:
    """Every file ``init`` writes, by path relative to the repository root."""
    files = {
        f"schedules/{EXAMPLE}": (SCAFFOLD / "schedules" / EXAMPLE).read_text(encoding="utf-8"),
        f"schedules/{SCHEMA_FILE}": schema_text(),
        "templates/brief.html.j2": (DATA / "brief.html.j2").read_text(encoding="utf-8"),
        "templates/index.html.j2": (DATA / "index.html.j2").read_text(encoding="utf-8"),
    }
    for name in WORKFLOWS + (OPTIONAL_WORKFLOWS if pages else ()):
        files[f".github/workflows/{name}"] = (SCAFFOLD / "workflows" / name).read_text(
            encoding="utf-8")
    return files


def conflicts(root: Path, files: dict[str, str]) -> list[str]:
    """Files ``init`` would overwrite, and existing schedules it would add the example to."""
    found = {rel for rel in files if (root / rel).exists() or (root / rel).is_symlink()}
    schedules = root / "schedules"
    if schedules.is_dir():
        found |= {f"schedules/{p.name}" for p in schedules.iterdir() if not p.is_dir()}
    return sorted(found)


def _git_init(root: Path) -> bool:
    """``git init`` unless ``root`` is the top of a work tree already; True if it ran.

    A folder inside another repository gets a repository of its own: GitHub reads
    workflows only from ``.github/workflows`` at a repository's root."""
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root,
                         capture_output=True, text=True, check=False)
    if top.returncode == 0 and Path(top.stdout.strip()).resolve() == root.resolve():
        return False
    proc = subprocess.run(["git", "init", "--quiet", "--initial-branch=main", str(root)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise UserError(f"git init {root} failed: {proc.stderr.strip()}")
    return True


def _append_unless_present(path: Path, text: str, marker: str) -> bool:
    """Append ``text`` to ``path`` (creating it) unless a line equals ``marker``."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if marker in old.splitlines():
        return False
    sep = "" if not old or old.endswith("\n\n") else ("\n" if old.endswith("\n") else "\n\n")
    write_schedule(path, old + sep + text)
    return True


def scaffold(root: Path, *, force: bool = False, pages: bool = False) -> list[str]:
    """Write the scaffold into ``root``; return what was done, one line per item."""
    if root.exists() and not root.is_dir():
        raise UserError(f"{root} exists and is not a folder")
    files = scaffold_files(pages=pages)
    clash = conflicts(root, files) if root.exists() else []
    if clash and not force:
        more = f" and {len(clash) - 1} more" if len(clash) > 1 else ""
        raise UserError(f"{root / clash[0]} already exists{more}: init writes nothing "
                        "over existing files or beside existing schedules; pass --force "
                        "to overwrite the scaffold's files")
    root.mkdir(parents=True, exist_ok=True)
    done = ["initialised an empty git repository"] if _git_init(root) else []
    for rel, content in files.items():
        verb = "overwrote" if (root / rel).exists() else "created"
        write_schedule(root / rel, content)
        done.append(f"{verb} {rel}")
    done += _sync_cadence(root)
    section = README_SECTION.read_text(encoding="utf-8")
    heading = section.splitlines()[0]
    if _append_unless_present(root / "README.md", section, heading):
        done.append("added the section 'Scheduled work' to README.md")
    if _append_unless_present(root / ".gitignore", f"{GITIGNORE_LINE}\n", GITIGNORE_LINE):
        done.append(f"added {GITIGNORE_LINE} to .gitignore")
    return done


def _sync_cadence(root: Path) -> list[str]:
    """The shipped tick.yml ticks for this project's own schedules: derive it from the
    schedules actually written (what ``cron-sync`` does)."""
    from ..cadence import sync
    from ..repo_config import load_repo_config
    from ..schedules import load_all

    changed = sync(root, load_all(root / "schedules").schedules, load_repo_config(root),
                   datetime.now(UTC))
    for path, text in changed.items():
        write_schedule(path, text)
    return [f"derived the cron of {p.relative_to(root).as_posix()} from schedules/"
            for p in changed]


@click.command("init")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite files the scaffold brings along.")
@click.option("--pages", is_flag=True,
              help="Also add pages.yml (publishes the briefs; needs GitHub Pages enabled).")
@pass_config
def command(cfg: Config, path: Path | None, force: bool, pages: bool) -> int:
    """Scaffold schedules/, templates/, the workflows and a README section in PATH
    (default: --repo). Refuses to overwrite existing files unless --force."""
    root = (path or cfg.repo).resolve()
    for line in scaffold(root, force=force, pages=pages):
        click.echo(line)
    click.echo(f"next: review and commit the files in {root}, set the repository variable "
               "ORCHESTRATOR_PACKAGE to a pip requirement for the orchestrator, and push; "
               "`orchestrator validate --preview 5` shows the example's next runs")
    return 0
