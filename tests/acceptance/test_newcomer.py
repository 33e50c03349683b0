"""A newcomer's first hour, as README, the docs and the scaffold tell it: the commands
are read from the documents themselves and run as written, so the documents cannot
drift from what works."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acceptance.cliuser import User, orchestrator
from tests.acceptance.readme import commands, section
from tests.docs import documentation


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

    - the virtual environment sees the packages this test run imports (a ``.pth``
      file listing its site-packages folders, written right after ``python3 -m venv``)
      and ``pip install`` adds ``--no-deps``, so nothing is downloaded but the build
      backend (from the configured index, as any editable install does);
    - ``python3 -m pytest -q`` runs one small test file instead of the whole suite
      (the suite is what is running this test).

    Not ``--system-site-packages``: run from the Quick start's own venv, the system's
    Python (the one ``python3`` names once that venv's ``bin`` is off the PATH) lacks
    the project's dependencies, which live in the venv.
    """
    share = (".venv/bin/python3 -c " + shlex.quote(
        "import sysconfig; open(sysconfig.get_path('purelib') + '/test-run-packages.pth', "
        f"'w').write({chr(10).join(site.getsitepackages())!r})"))
    command = re.sub(r"\bpython3 -m venv \.venv(?= &&)",
                     lambda m: f"{m.group(0)} && {share}", command)
    command = re.sub(r"\bpip install (?!--no-deps)", "pip install --quiet --no-deps ", command)
    return command.replace("python3 -m pytest -q", "python3 -m pytest -q -p no:cacheprovider "
                           "tests/unit/test_text.py")


def this_python(folder: Path) -> Path:
    """A folder whose ``python3`` is the interpreter running this test (its base, when
    it runs in a venv), to put first on the PATH: the venv the Quick start makes is
    then of the same Python as the packages it is given."""
    folder.mkdir()
    (folder / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    return folder


@pytest.mark.slow
def test_readme_quick_start_and_start_a_repository_work_as_written(tmp_path: Path) -> None:
    docs = documentation()  # README first: its Quick start is the one a newcomer reads
    quick = commands(section(docs, "Quick start"))
    start = commands(section(docs, "Start a repository"))
    assert len(quick) == 2, "the Quick start is exactly two commands"
    assert quick[0].startswith("python3 -m venv .venv && . .venv/bin/activate && ")
    assert start[0] == "cd .."  # out of the clone: the tour leaves nothing inside it
    assert start[1].startswith("orchestrator init ") and "--local" in start[1]

    clone = tmp_path / "orchestrator"
    shutil.copytree(REPO_ROOT, clone, ignore=COPY_IGNORES)
    # a fresh shell: nothing of this test run's environment leaks into the venv
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ORCHESTRATOR_WORK_DIR")}
    # `demo --keep` keeps its workspace in the temporary folder, as asked, and pytest
    # keeps its basetemp there: this test's folder, so neither outlives the test run.
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env["TMPDIR"] = str(temporary)
    # this run's own venv (if any) off the PATH; this run's Python first
    own_bin = str(Path(sys.prefix) / "bin") if sys.prefix != sys.base_prefix else None
    env["PATH"] = os.pathsep.join([str(this_python(tmp_path / "python")), *(
        p for p in env["PATH"].split(os.pathsep) if p.rstrip("/") != own_bin)])
    script = " && ".join(as_run_here(c) for c in quick)
    done = subprocess.run(["sh", "-ec", script], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    brief = re.search(r"^brief: (.*)$", done.stdout, flags=re.M)
    assert brief and Path(brief.group(1)).is_file(), done.stdout
    assert Path(brief.group(1)).is_relative_to(temporary)
    assert "passed" in done.stdout.splitlines()[-1]
    venv_bin = clone / ".venv" / "bin"
    assert (venv_bin / "orchestrator").exists()

    # Start a repository, in the same virtual environment, one shell as a user types it
    home = tmp_path / "work" / "orchestrator"
    home.mkdir(parents=True)
    env["PATH"] = f"{venv_bin}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(clone / ".venv")
    env["ORCHESTRATOR_WORK_DIR"] = str(tmp_path / "tracks")
    script = " && ".join(start)
    done = subprocess.run(["sh", "-ec", script], cwd=home, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    assert "nightly: new schedule: first slot at " in done.stdout
    # minutes as status prints them: "0.1m", "3m" (age_text)
    assert re.search(r"^last tick +\S+ +\(\d+(?:\.\d+)?m ago; fresh", done.stdout, flags=re.M)
    assert (home.parent / "my-schedules.git").is_dir() and not any(home.iterdir())


def test_ci_runs_the_quick_start_as_written() -> None:
    """``.ci/run`` is the Quick start, so CI fails where a newcomer would: its two
    commands, verbatim and in order, are the only installs into its venv and the only
    test run."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    quick = commands(section(readme, "Quick start"))
    script = [line.strip() for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
              if line.strip() and not line.lstrip().startswith("#")]
    assert quick[0] in script and quick[1] in script
    first, second = script.index(quick[0]), script.index(quick[1])
    assert first < second == len(script) - 1, "the suite runs last, as the Quick start says"
    before = script[:first]
    assert not any("pip install" in line or "pytest" in line for line in before), before
    between = script[first + 1:second]
    assert not any("pytest" in line for line in between), between
    assert all(line.startswith("pip install --quiet -e '.[test]'") for line in between
               if "pip install" in line), between
