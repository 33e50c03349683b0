"""A newcomer's first hour, as README and the scaffold tell it: the commands are read
from the documents themselves and run as written, so the documents cannot drift from
what works."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acceptance.cliuser import User, orchestrator
from tests.acceptance.readme import commands, section


def shell(command: str, cwd: Path, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["sh", "-ec", command], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, (f"{command}: exit {proc.returncode}\nstdout:\n{proc.stdout}"
                                  f"\nstderr:\n{proc.stderr}")
    return proc


def test_the_scaffold_s_examples_validate_without_warnings(tmp_path: Path) -> None:
    user = User(tmp_path / "mine")
    user.run("init", str(user.cwd), "--local", cwd=tmp_path)
    user.run("schedules", "remove", "nightly")
    readme = (user.cwd / "README.md").read_text()
    # Every command before the section's `validate`, as written: the adds, then
    # cron-sync (tick.yml must cover the new slots, or validate fails).
    listed = commands(section(readme, "Scheduled work (orchestrator)"))
    before = listed[:next(i for i, c in enumerate(listed)
                         if c.startswith("orchestrator validate"))]
    adds = [c for c in before if c.startswith("orchestrator schedules add ")]
    assert len(adds) >= 2
    assert any(c.startswith("orchestrator cron-sync") for c in before)
    path = f"{Path(orchestrator()).parent}{os.pathsep}{os.environ['PATH']}"
    for command in before:
        shell(command, user.cwd, {"PATH": path})
    checked = user.run("validate", "--preview", "5")
    assert checked.stdout.rstrip().endswith(f"{len(adds)} schedules valid, 0 invalid")
    assert "warning" not in checked.stdout + checked.stderr


REPO_ROOT = Path(__file__).resolve().parent.parent.parent
COPY_IGNORES = shutil.ignore_patterns(".git", ".venv", "*.egg-info", "__pycache__",
                                      ".*_cache", ".orchestrator", "build", "dist")


def as_run_here(command: str) -> str:
    """README's command, with the two changes a test run needs, and no others:

    - the virtual environment sees the packages already installed here
      (``--system-site-packages``) and ``pip install`` adds ``--no-deps``, so nothing
      is downloaded but the build backend (from the configured index, as any editable
      install does);
    - ``python3 -m pytest -q`` runs one small test file instead of the whole suite
      (the suite is what is running this test).
    """
    command = command.replace("python3 -m venv ", "python3 -m venv --system-site-packages ")
    command = re.sub(r"\bpip install (?!--no-deps)", "pip install --quiet --no-deps ", command)
    return command.replace("python3 -m pytest -q", "python3 -m pytest -q -p no:cacheprovider "
                           "tests/unit/test_text.py")


@pytest.mark.slow
def test_readme_quick_start_and_start_a_repository_work_as_written(tmp_path: Path) -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    quick = commands(section(readme, "Quick start"))
    start = commands(section(readme, "Start a repository"))
    assert len(quick) == 2, "the Quick start is exactly two commands"
    assert quick[0].startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    assert start[0].startswith("orchestrator init ") and "--local" in start[0]

    clone = tmp_path / "orchestrator"
    shutil.copytree(REPO_ROOT, clone, ignore=COPY_IGNORES)
    # a fresh shell: nothing of this test run's environment leaks into the venv
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ORCHESTRATOR_WORK_DIR")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not p.startswith(sys.prefix))
    script = " && ".join(as_run_here(c) for c in quick)
    done = subprocess.run(["sh", "-ec", script], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    brief = re.search(r"^brief: (.*)$", done.stdout, flags=re.M)
    assert brief and Path(brief.group(1)).is_file(), done.stdout
    assert "passed" in done.stdout.splitlines()[-1]
    venv_bin = clone / ".venv" / "bin"
    assert (venv_bin / "orchestrator").exists()

    # Start a repository, in the same virtual environment, one shell as a user types it
    home = tmp_path / "work"
    home.mkdir()
    env["PATH"] = f"{venv_bin}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(clone / ".venv")
    env["ORCHESTRATOR_WORK_DIR"] = str(tmp_path / "tracks")
    script = " && ".join(start)
    done = subprocess.run(["sh", "-ec", script], cwd=home, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    assert "nightly: new schedule: first slot at " in done.stdout
    assert re.search(r"^last tick +\S+ +\(\d+(?:\.\d+)?m ago; fresh", done.stdout, flags=re.M)
    assert (home / "my-schedules.git").is_dir()
