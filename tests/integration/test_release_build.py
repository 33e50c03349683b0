"""What ``release.yml`` runs before it publishes: ``python -m build`` makes the sdist
and the wheel of a copy of this checkout, and ``twine check --strict`` accepts both
(the long description renders on the package index). The wheel holds what the
orchestrator's own reproducible wheel holds. The build fetches its backend from the
package index; a developer's machine without it skips, CI must not (``CI`` set)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from orchestrator import __version__
from orchestrator.distribution import WHEEL_NAME, wheel

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_build_makes_an_sdist_and_a_wheel_that_twine_accepts(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", "*.egg-info", "build", "dist", "__pycache__", ".*_cache", ".orchestrator",
        ".venv", "site"))
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
                           capture_output=True, text=True, timeout=600, check=False)
    if built.returncode != 0 and not os.environ.get("CI") and "setuptools" in built.stderr:
        pytest.skip(f"no build backend from the package index: {built.stderr[-300:]}")
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    names = sorted(p.name for p in dist.iterdir())
    assert names == [f"{WHEEL_NAME}-{__version__}-py3-none-any.whl",
                     f"{WHEEL_NAME}-{__version__}.tar.gz"]
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict",
                              *map(str, sorted(dist.iterdir()))],
                             capture_output=True, text=True, timeout=120, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    ours = {n for n in zipfile.ZipFile(io.BytesIO(wheel.build().data)).namelist()
            if ".dist-info/" not in n}
    theirs = {n for n in zipfile.ZipFile(dist / names[0]).namelist() if ".dist-info/" not in n}
    assert ours == theirs
    with tarfile.open(dist / names[1]) as sdist:
        inside = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "LICENSE", "orchestrator/data/requirements.lock",
            "orchestrator/data/install.sh"} <= inside
