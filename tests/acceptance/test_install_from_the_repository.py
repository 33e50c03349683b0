"""A repository made by ``orchestrator init`` installs the orchestrator with its own
workflows' install step, as a runner would: the step is read from ``tick.yml`` and run
as written in a fresh virtual environment (the package index reachable, as on GitHub),
then the tick runs from that copy, whose ``upgrade`` packs the same wheel again. And
``orchestrator upgrade`` replaces what ``init`` wrote with the running version's.

The install needs the package index (PyPI) for the dependencies; a developer's machine
without it skips, CI must not (``CI`` set).
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from orchestrator.distribution import INSTALL_DIR, REQUIREMENTS, lock, wheel
from tests.acceptance.cliuser import User

PLATFORMS = ("manylinux_2_17_x86_64", "manylinux_2_17_aarch64", "macosx_11_0_arm64",
             "macosx_13_0_x86_64", "win_amd64")
"""Where a runner may install: GitHub's Linux (x64 and arm64), macOS and Windows."""


def _index_reachable() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=10):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def index() -> None:
    if not _index_reachable():
        if os.environ.get("CI"):
            pytest.fail("the package index is unreachable: the install cannot be tested")
        pytest.skip("the package index is unreachable from this machine")


def install_step(workflow: Path) -> str:
    """The ``run`` of the workflow's step named ``Install the orchestrator``."""
    doc = yaml.safe_load(workflow.read_text())
    [run] = [step["run"] for job in doc["jobs"].values() for step in job.get("steps", ())
             if step.get("name") == "Install the orchestrator"]
    return str(run)


def clean_env(venv: Path) -> dict[str, str]:
    """A shell like a runner's after setup-python: this venv's ``python`` first on PATH,
    nothing of the test run's own environment (its PYTHONPATH points at this checkout)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    path = [p for p in env["PATH"].split(os.pathsep) if not p.startswith(sys.prefix)]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["VIRTUAL_ENV"] = str(venv)
    return env


@pytest.mark.slow
def test_init_s_repository_installs_with_its_workflow_s_step_and_ticks_from_it(
        tmp_path: Path, index: None) -> None:
    repo = tmp_path / "mine"
    User(repo).run("init", str(repo), "--local", "--github", cwd=tmp_path)
    step = install_step(repo / ".github" / "workflows" / "tick.yml")
    assert "--require-hashes" in step and REQUIREMENTS in step
    venv = tmp_path / "runner-python"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = clean_env(venv)
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, f"{step}\n{done.stdout}\n{done.stderr}"
    installed = venv / "bin" / "orchestrator"
    assert installed.exists()
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import orchestrator; print(orchestrator.__file__)"],
                           cwd=repo, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(venv)), where.stdout  # that copy, not this checkout

    ticked = subprocess.run([str(installed), "tick", "--executor", "local"], cwd=repo,
                            env={**env, "ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")},
                            capture_output=True, text=True, timeout=300, check=False)
    assert ticked.returncode == 0, f"{ticked.stdout}\n{ticked.stderr}"
    assert "nightly: new schedule: first slot at " in ticked.stdout

    # the installed copy (compiled .pyc files beside it) packs the very same wheel, so
    # `upgrade` run from it, as a user who installed this version would, changes nothing
    again = subprocess.run([str(installed), "upgrade"], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert "already holds this version" in again.stdout, again.stdout


@pytest.mark.slow
@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_lock_has_a_hashed_wheel_for_every_runner_platform(
        tmp_path: Path, index: None, platform: str) -> None:
    """pip itself picks the files a runner of ``platform`` would, and checks each
    against the lock's hashes (``--only-binary``: no build, whose tools are unpinned)."""
    deps = tmp_path / "deps.txt"
    deps.write_text(lock.load().body)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes",
         "--only-binary", ":all:", "--platform", platform, "--implementation", "cp",
         "--python-version", lock.PYTHON, "-r", str(deps), "-d", str(tmp_path / "got")],
        capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(list((tmp_path / "got").iterdir())) == len(lock.load().pins)


def test_upgrade_replaces_an_older_wheel_and_its_pins(tmp_path: Path) -> None:
    user = User(tmp_path / "mine")
    user.run("init", str(user.cwd), "--local", "--github", cwd=tmp_path)
    folder = user.cwd / INSTALL_DIR
    current = wheel.build()
    (folder / current.filename).rename(folder / "git_orchestrator-0.0.1-py3-none-any.whl")
    requirements = folder / "requirements.txt"
    requirements.write_text(requirements.read_text().replace(current.filename,
                                                             "git_orchestrator-0.0.1-py3-none-any.whl"))
    done = user.run("upgrade")
    assert "removed .github/orchestrator/git_orchestrator-0.0.1-py3-none-any.whl" in done.stdout
    assert sorted(p.name for p in folder.iterdir()) == [current.filename, "requirements.txt"]
    assert (folder / current.filename).read_bytes() == current.data
    assert f"--hash=sha256:{current.sha256}" in requirements.read_text()
    again = user.run("upgrade")
    assert "already holds this version" in again.stdout
    (user.cwd / ".github" / "workflows" / "tick.yml").write_text("name: tick\n")
    assert "note: .github/workflows/tick.yml differs" in user.run("upgrade").stdout
