"""A repository made by ``orchestrator init`` installs the orchestrator with its own
workflows' install step, as a runner would: the step is read from ``tick.yml`` and run
as written beside a fresh virtual environment (setup-python's, the package index
reachable, as on GitHub). A track then installs an old pydantic into that Python, and
the orchestrator, in a Python of its own, still works; the tick runs from that copy,
whose ``upgrade`` packs the same wheel again. And
``orchestrator upgrade`` replaces what ``init`` wrote with the running version's.

The install needs the package index (PyPI) for the dependencies; a developer's machine
without it skips, CI must not (``CI`` set).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from orchestrator import __version__
from orchestrator.distribution import INSTALL_DIR, lock, wheel
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


def run_steps(script: str, cwd: Path, env: dict[str, str]) -> None:
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"


def runner_env(tmp_path: Path, venv: Path) -> dict[str, str]:
    """:func:`clean_env` with the job's own files: ``$RUNNER_TEMP`` and ``$GITHUB_PATH``."""
    (tmp_path / "runner-temp").mkdir()
    (tmp_path / "github-path").write_text("")
    return {**clean_env(venv), "RUNNER_TEMP": str(tmp_path / "runner-temp"),
            "GITHUB_PATH": str(tmp_path / "github-path")}


def later_steps(env: dict[str, str]) -> dict[str, str]:
    """The environment of the job's later steps: the runner puts each folder a step
    added to ``$GITHUB_PATH`` before the PATH, the last added first."""
    added = Path(env["GITHUB_PATH"]).read_text().splitlines()
    return {**env, "PATH": os.pathsep.join([*reversed(added), env["PATH"]])}


def track_breaks_its_python(repo: Path, env: dict[str, str], out: Path) -> None:
    """A track pins an old pydantic into the workflow's Python; the leg's outcome is
    then written by the orchestrator as the workflow's next step runs it."""
    run_steps("python -m pip install --quiet --disable-pip-version-check 'pydantic<2'\n"
              "python -c 'import pydantic, sys; assert pydantic.VERSION < \"2\"'",
              repo, env)
    run_steps(f"orchestrator --version && orchestrator outcome --run nightly--20261201T0700Z "
              "--track build --attempt 1 --exit-code 0 --started-at 2026-12-01T07:00:05Z "
              f"--finished-at 2026-12-01T07:01:05Z --output {out}", repo, env)
    assert (out / "nightly--20261201T0700Z--build--1.json").is_file()


@pytest.mark.slow
def test_init_s_repository_installs_with_its_workflow_s_step_and_ticks_from_it(
        tmp_path: Path, index: None) -> None:
    repo = tmp_path / "mine"
    User(repo).run("init", str(repo), "--local", "--github", cwd=tmp_path)
    step = install_step(repo / ".github" / "workflows" / "tick.yml")
    venv = tmp_path / "runner-python"  # what setup-python puts first on PATH
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = runner_env(tmp_path, venv)
    run_steps(step, repo, env)
    env = later_steps(env)
    installed = shutil.which("orchestrator", path=env["PATH"])
    assert installed is not None
    where = subprocess.run([installed, "--version"], cwd=repo, env=env,
                           capture_output=True, text=True, check=True)
    assert where.stdout.strip().endswith(__version__)
    # nothing a track installs reaches the orchestrator: it has a Python of its own
    track_breaks_its_python(repo, env, tmp_path / "outcomes")
    assert not Path(installed).resolve().is_relative_to(venv)

    ticked = subprocess.run([installed, "tick", "--executor", "local"], cwd=repo,
                            env={**env, "ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")},
                            capture_output=True, text=True, timeout=300, check=False)
    assert ticked.returncode == 0, f"{ticked.stdout}\n{ticked.stderr}"
    assert "nightly: new schedule: first slot at " in ticked.stdout

    # the installed copy (compiled .pyc files beside it) packs the very same wheel, so
    # `upgrade` run from it, as a user who installed this version would, changes nothing
    again = subprocess.run([installed, "upgrade"], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert "already holds this version" in again.stdout, again.stdout


REPO = Path(__file__).resolve().parents[2]
PIN = "octo-org/orchestrator@0123456789abcdef0123456789abcdef01234567"


def composite_steps(action: Path) -> list[tuple[str, dict[str, str]]]:
    """Each ``run:`` of a composite action, with the environment it declares (its
    inputs' defaults put in, as the runner evaluates ``${{ inputs.NAME }}``)."""
    doc = yaml.safe_load(action.read_text())
    assert doc["runs"]["using"] == "composite"
    inputs = {name: str(spec.get("default", "")) for name, spec in doc["inputs"].items()}
    steps = []
    for step in doc["runs"]["steps"]:
        assert step["shell"] == "bash" and "${{" not in step["run"], step
        env = {key: re.sub(r"^\$\{\{ inputs\.([\w-]+) \}\}$",
                           lambda m: inputs[m.group(1)], str(value))
               for key, value in step.get("env", {}).items()}
        assert not [v for v in env.values() if "${{" in v], env
        steps.append((str(step["run"]), env))
    return steps


@pytest.mark.slow
def test_a_repository_init_action_made_installs_through_the_action_s_steps(
        tmp_path: Path, index: None) -> None:
    repo = tmp_path / "mine"
    User(repo).run("init", str(repo), "--local", "--github", "--action", PIN, cwd=tmp_path)
    assert not (repo / INSTALL_DIR).exists()
    tick = yaml.safe_load((repo / ".github" / "workflows" / "tick.yml").read_text())
    assert [s for s in tick["jobs"]["tick"]["steps"]
            if s.get("name") == "Install the orchestrator"] == [
        {"name": "Install the orchestrator", "uses": PIN}]
    # the runner downloads the action's commit (no .git) and runs its steps from the
    # user's checkout, GITHUB_ACTION_PATH naming where the action is
    downloaded = tmp_path / "action"
    shutil.copytree(REPO, downloaded, ignore=shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", ".*_cache", ".orchestrator", "site"))
    venv = tmp_path / "runner-python"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {**runner_env(tmp_path, venv), "GITHUB_ACTION_PATH": str(downloaded)}
    for script, declared in composite_steps(downloaded / "action.yml"):
        run_steps(script, repo, {**env, **declared})
    env = later_steps(env)
    track_breaks_its_python(repo, env, tmp_path / "outcomes")
    ticked = subprocess.run(["orchestrator", "tick", "--executor", "local"], cwd=repo,
                            env={**env, "ORCHESTRATOR_WORK_DIR": str(tmp_path / "work")},
                            capture_output=True, text=True, timeout=300, check=False)
    assert ticked.returncode == 0, f"{ticked.stdout}\n{ticked.stderr}"
    assert not (repo / INSTALL_DIR).exists()  # nothing written into the user's checkout


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
    assert sorted(p.name for p in folder.iterdir()) == [current.filename, "install.sh",
                                                        "requirements.txt"]
    assert (folder / current.filename).read_bytes() == current.data
    assert f"--hash=sha256:{current.sha256}" in requirements.read_text()
    again = user.run("upgrade")
    assert "already holds this version" in again.stdout
    (user.cwd / ".github" / "workflows" / "tick.yml").write_text("name: tick\n")
    assert "note: .github/workflows/tick.yml differs" in user.run("upgrade").stdout
