"""``orchestrator init [PATH]``: scaffold a repository that runs scheduled work.

Writes ``schedules/`` (one example and the JSON Schema), ``templates/`` (the brief
and the index, to edit), the workflows (``tick``, ``track``, ``validate``,
``watchdog``, ``enqueue``; ``pages`` with ``--pages``), the orchestrator the workflows
install (``.github/orchestrator/``: the running version's wheel, a hash-pinned
requirements file and the install script, :mod:`orchestrator.distribution`; with
``--action OWNER/REPO@REF`` none of it, the workflows use that action pinned by its
commit instead), a README section and a
``.gitignore`` line for the local executor's work folder. The files are the ones this
project runs on itself, shipped in the package (``orchestrator/data``); a test keeps
the copies equal.

It never overwrites a file, nor adds the example beside existing schedules, unless
``--force``; the check covers every file before anything is written, so a refusal
leaves the folder as it was. A folder that is not in a git repository gets
``git init``. Nothing is committed: review the files, then commit and push.

``--local`` is for a repository that lives on this machine only: it also creates a
bare repository beside the folder (``<folder>.git``) and registers it as ``origin``,
where ``tick``, ``status``, ``serve`` and every other command keep the state branch.
It writes no workflows (``--github`` or ``--pages`` does): whether ``tick.yml`` exists
is how ``validate`` and ``cron-sync`` know the repository runs on GitHub.
Beside, not inside: inside, it would sit in the work tree where ``git clean -x`` or
deleting an ignored folder would take the state with it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import click

from ..config.files import SCHEMA_FILE, schema_text, write_schedule
from ..distribution import action as actions
from ..distribution import install
from ..errors import UserError
from ..support.atomic import write_bytes
from .context import Config, pass_config

DATA = Path(__file__).resolve().parent.parent / "data"
SCAFFOLD = DATA / "scaffold"
WORKFLOWS = ("tick.yml", "track.yml", "validate.yml", "watchdog.yml", "enqueue.yml")
OPTIONAL_WORKFLOWS = ("pages.yml",)
EXAMPLE = "nightly.json"
README_SECTION = SCAFFOLD / "README.section.md"
GITIGNORE_LINE = ".orchestrator/"
"""The local executor's work folder and ``demo`` workspaces: never commit them."""


def scaffold_files(*, pages: bool = False, workflows: bool = True,
                   pin: actions.Pin | None = None) -> dict[str, str]:
    """Every file ``init`` writes, by path relative to the repository root (the
    workflows only for a repository that runs on GitHub; installing through the action
    ``pin`` when given)."""
    files = {
        f"schedules/{EXAMPLE}": (SCAFFOLD / "schedules" / EXAMPLE).read_text(encoding="utf-8"),
        f"schedules/{SCHEMA_FILE}": schema_text(),
        "templates/brief.html.j2": (DATA / "brief.html.j2").read_text(encoding="utf-8"),
        "templates/index.html.j2": (DATA / "index.html.j2").read_text(encoding="utf-8"),
        "templates/brief.md.j2": (DATA / "brief.md.j2").read_text(encoding="utf-8"),
    }
    for name in (WORKFLOWS + (OPTIONAL_WORKFLOWS if pages else ())) if workflows else ():
        files[f".github/workflows/{name}"] = shipped_workflow(name, pin)
    return files


def shipped_workflow(name: str, pin: actions.Pin | None) -> str:
    """The workflow ``name`` as this version ships it, in the install form ``pin`` says."""
    text = (SCAFFOLD / "workflows" / name).read_text(encoding="utf-8")
    return text if pin is None else actions.action_form(text, pin)


def write_install(root: Path, installed: install.InstallFiles) -> list[str]:
    """Write the wheel and the requirements file; remove older wheels beside them."""
    done = []
    for old in install.stale_wheels(root, installed.wheel.filename):
        old.unlink()
        done.append(f"removed {old.relative_to(root).as_posix()}")
    for rel, data in installed.files().items():
        verb = "overwrote" if (root / rel).exists() else "created"
        write_bytes(root / rel, data)
        done.append(f"{verb} {rel}")
    return done + install.keep_tracked(root, list(installed.files()))


def conflicts(root: Path, files: Mapping[str, object]) -> list[str]:
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


def scaffold(root: Path, *, force: bool = False, pages: bool = False,
             workflows: bool = True, pin: actions.Pin | None = None) -> list[str]:
    """Write the scaffold into ``root``; return what was done, one line per item."""
    if root.exists() and not root.is_dir():
        raise UserError(f"{root} exists and is not a folder")
    files = scaffold_files(pages=pages, workflows=workflows, pin=pin)
    # what the workflows install, unless they use the action
    installed = install.current() if workflows and pin is None else None
    wheel = installed.files() if installed is not None else {}
    clash = conflicts(root, {**files, **wheel}) if root.exists() else []
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
    if installed is not None:
        done += write_install(root, installed)
    if workflows:
        done += _sync_cadence(root)
    section = README_SECTION.read_text(encoding="utf-8")
    heading = section.splitlines()[0]
    if _append_unless_present(root / "README.md", section, heading):
        done.append("added the section 'Scheduled work' to README.md")
    if _append_unless_present(root / ".gitignore", f"{GITIGNORE_LINE}\n", GITIGNORE_LINE):
        done.append(f"added {GITIGNORE_LINE} to .gitignore")
    return done


def local_origin(root: Path) -> Path:
    """Where ``--local`` puts the bare repository: ``<folder>.git`` beside ``root``."""
    return root.parent / f"{root.name}.git"


def check_local_origin(root: Path) -> Path:
    """The bare repository ``--local`` would create; refuse before anything is written
    when it exists or ``root`` already has a remote named ``origin``."""
    bare = local_origin(root)
    if bare.exists() or bare.is_symlink():
        raise UserError(f"{bare} already exists: --local creates the bare repository "
                        "there; remove it, or register it yourself with "
                        f"`git remote add origin {bare}`")
    if (root / ".git").exists():
        proc = subprocess.run(["git", "remote", "get-url", "origin"], cwd=root,
                              capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            raise UserError(f"{root} already has a remote named origin "
                            f"({proc.stdout.strip()}); --local would replace it")
    return bare


def add_local_origin(root: Path, bare: Path) -> list[str]:
    """Create the bare repository ``bare`` and register it as ``root``'s ``origin``."""
    for args in (["git", "init", "--quiet", "--bare", "--initial-branch=main", str(bare)],
                 ["git", "-C", str(root), "remote", "add", "origin", str(bare)]):
        proc = subprocess.run(args, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise UserError(f"{' '.join(args[:4])} failed: {proc.stderr.strip()}")
    return [f"created the bare repository {bare} and registered it as origin"]


def _sync_cadence(root: Path) -> list[str]:
    """The shipped tick.yml ticks for this project's own schedules: derive it from the
    schedules actually written (what ``cron-sync`` does)."""
    from ..cadence.tickfile import sync
    from ..config.files import load_all
    from ..config.repository import load_repo_config

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
@click.option("--local", is_flag=True,
              help="Also create a bare repository beside PATH (PATH.git) and register it "
                   "as origin, to run on this machine without GitHub: no workflows are "
                   "written, unless --github.")
@click.option("--github", is_flag=True,
              help="With --local: write the GitHub Actions workflows too (the repository "
                   "also runs on GitHub). Without --local they are always written.")
@click.option("--action", "action", metavar="OWNER/REPO@REF",
              help="The workflows install the orchestrator with this GitHub Action, "
                   "pinned by commit SHA (a tag or branch is resolved to one); no wheel "
                   "is committed.")
@click.option("--vendor", is_flag=True,
              help="The workflows install the wheel committed in .github/orchestrator "
                   "(the default): for GitHub Enterprise Server and repositories that "
                   "may not use other repositories' actions.")
@pass_config
def command(cfg: Config, path: Path | None, force: bool, pages: bool, local: bool,
            github: bool, action: str | None, vendor: bool) -> int:
    """Scaffold schedules/, templates/, the workflows (not with --local alone) and a
    README section in PATH (default: --repo). Refuses to overwrite existing files
    unless --force."""
    root = (path or cfg.repo).resolve()
    if action is not None and vendor:
        raise UserError("--action and --vendor are two ways to install: choose one")
    pin = actions.resolve(action) if action is not None else None
    bare = check_local_origin(root) if local else None
    lines = scaffold(root, force=force, pages=pages,
                     workflows=not local or github or pages, pin=pin)
    if bare is not None:
        lines += add_local_origin(root, bare)
    for line in lines + next_steps(root, cfg.state_branch, bare, vendored=pin is None):
        click.echo(line)
    return 0


def _has_remote(root: Path) -> bool:
    proc = subprocess.run(["git", "remote"], cwd=root, capture_output=True, text=True,
                          check=False)
    return bool(proc.stdout.strip())


def next_steps(root: Path, branch: str, bare: Path | None, *, vendored: bool) -> list[str]:
    """What the user does after ``init``: the lines it ends with."""
    if bare is not None:
        return [f"next: in {root}, `orchestrator validate --preview 5` shows the "
                "example's next runs, `orchestrator tick` fires what is due and "
                "`orchestrator serve` keeps ticking; the state goes to the branch "
                f"{branch} of {bare}"]
    wheel = (" (.github/orchestrator too: the workflows install the orchestrator from it)"
             if vendored else "")
    lines = [f"next: review and commit the files in {root}{wheel}, and push; "
             "`orchestrator validate --preview 5` shows the example's next runs"]
    if not _has_remote(root):
        lines.append("no remote yet: create an empty repository on GitHub, then `git remote "
                     "add origin https://github.com/OWNER/REPO.git` and `git push -u origin "
                     "HEAD`; the one-time settings follow in docs/get-started/github.md")
    return lines
