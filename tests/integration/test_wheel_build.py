"""The wheel ``init`` writes, against what nobody here wrote: setuptools' wheel of the
same checkout holds the same files, and pip refuses the wheel once a byte changed.
pip installs offline (``--no-index``); setuptools' build fetches the build backend
``pyproject.toml`` names from the package index, and skips where that is unreachable
(CI must reach it)."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from orchestrator.distribution import INSTALL_DIR, REQUIREMENTS, wheel
from tests.drive import cli

REPO = Path(__file__).resolve().parents[2]


def _names(data: bytes) -> set[str]:
    return set(zipfile.ZipFile(io.BytesIO(data)).namelist())


@pytest.mark.slow
def test_the_wheel_holds_the_files_setuptools_puts_in_one(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", "tests", "bench", "docs", "*.egg-info", "build", "dist", "__pycache__",
        ".*_cache", ".orchestrator", ".venv"))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
         str(tmp_path / "out"), str(source)],
        capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0 and not os.environ.get("CI") and "setuptools" in done.stderr:
        pytest.skip(f"no build backend from the package index: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr
    [built] = (tmp_path / "out").glob("*.whl")
    assert built.name == wheel.build().filename
    theirs = {n for n in _names(built.read_bytes()) if ".dist-info/" not in n}
    ours = {n for n in _names(wheel.build().data) if ".dist-info/" not in n}
    assert ours == theirs


def test_two_inits_write_the_same_wheel_which_is_the_checkout_s_and_pinned(
        tmp_path: Path) -> None:
    for name in ("one", "two"):
        cli(tmp_path, "init", str(tmp_path / name), check=True)
    built = wheel.build()
    one = (tmp_path / "one" / INSTALL_DIR / built.filename).read_bytes()
    assert one == (tmp_path / "two" / INSTALL_DIR / built.filename).read_bytes()
    assert one == built.data  # the wheel built from this checkout
    requirements = (tmp_path / "one" / REQUIREMENTS).read_text()
    assert f"--hash=sha256:{hashlib.sha256(one).hexdigest()}" in requirements
    assert requirements == (tmp_path / "two" / REQUIREMENTS).read_text()


def _left_out(repo: Path) -> list[str]:
    """What `git add -A` would leave out of the commit, under .github/orchestrator."""
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=repo, check=True,
                            capture_output=True, text=True).stdout.split()
    on_disk = [p.relative_to(repo).as_posix() for p in (repo / INSTALL_DIR).iterdir()]
    return sorted(set(on_disk) - set(staged))


def test_init_takes_the_wheel_back_from_a_gitignore_that_ignores_wheels(
        tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    (repo / ".gitignore").write_text("*.whl\n")  # a common line in Python projects
    done = cli(tmp_path, "init", str(repo), check=True)
    assert "added !/.github/orchestrator/* to .gitignore" in done.stdout
    assert "was ignored (.gitignore: *.whl)" in done.stdout
    assert _left_out(repo) == []  # the wheel the workflows install is committed


def test_init_warns_when_the_install_folder_stays_ignored(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "--quiet", str(repo)], check=True)
    # a folder ignored whole: git looks at nothing inside, so no negation can help
    (repo / ".gitignore").write_text(".github/orchestrator/\n")
    done = cli(tmp_path, "init", str(repo), check=True)
    built = wheel.build().filename
    assert (f"warning: {INSTALL_DIR}/{built} is still ignored (.gitignore: "
            f".github/orchestrator/)") in done.stdout
    assert f"git add -f {INSTALL_DIR}/{built}" in done.stdout


@pytest.mark.slow
def test_pip_installs_the_pinned_wheel_and_refuses_it_once_a_byte_changed(
        tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    cli(tmp_path, "init", str(repo), check=True)
    lines = (repo / REQUIREMENTS).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("./"))
    only_wheel = repo / "wheel-only.txt"  # the dependencies would need the index
    only_wheel.write_text("\n".join(lines[start:start + 2]) + "\n")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
           "--no-index", "--no-deps", "--require-hashes", "--only-binary", ":all:",
           "-r", only_wheel.name]
    done = subprocess.run(pip, cwd=repo, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert (venv / "bin" / "orchestrator").exists()
    subprocess.run([*pip[:5], "uninstall", "--yes", "git-orchestrator"], check=True,
                   capture_output=True)
    built = repo / INSTALL_DIR / wheel.build().filename
    built.write_bytes(built.read_bytes() + b"\0")
    done = subprocess.run(pip, cwd=repo, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode != 0
    assert "DO NOT MATCH THE HASHES" in done.stderr
    assert not (venv / "bin" / "orchestrator").exists()
