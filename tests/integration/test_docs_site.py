"""The documentation site as a reader meets it: every shell block marked to run works
as written in a throwaway workspace, and MkDocs builds the site in strict mode, where
a broken link fails the build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acceptance.cliuser import orchestrator
from tests.docs import REPO, pages, runnable_blocks

BLOCKS = runnable_blocks(pages())


def test_the_documents_mark_blocks_to_run() -> None:
    assert {page for page, _ in BLOCKS} >= {"README.md", "docs/get-started/local.md"}


@pytest.mark.slow
@pytest.mark.parametrize(("page", "block"), BLOCKS,
                         ids=[f"{page}-{i}" for i, (page, _) in enumerate(BLOCKS)])
def test_a_marked_block_runs_as_written_in_a_throwaway_workspace(
        tmp_path: Path, page: str, block: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home),
           "PATH": f"{Path(orchestrator()).parent}{os.pathsep}{os.environ['PATH']}",
           "ORCHESTRATOR_WORK_DIR": str(tmp_path / "tracks"),
           "GIT_CONFIG_GLOBAL": str(home / ".gitconfig")}
    (home / ".gitconfig").write_text("[user]\n\tname = Reader\n\temail = reader@example.com\n")
    done = subprocess.run(["sh", "-ec", block], cwd=home, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, f"{page}:\n{block}\n{done.stdout}\n{done.stderr}"


def _mkdocs() -> list[str]:
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("mkdocs and mkdocs-material are missing: .ci/run installs .[test]")
        pytest.skip("needs mkdocs and mkdocs-material (pip install -e '.[docs]')")
    # not --quiet: it hides the warnings that strict mode counts, and the build passes
    return [sys.executable, "-m", "mkdocs", "build", "--strict"]


def _build(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_mkdocs(), "--site-dir", str(root / "site")], cwd=root,
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.mark.slow
def test_the_site_builds_strict_and_a_broken_link_fails_it(tmp_path: Path) -> None:
    site = tmp_path / "project"
    shutil.copytree(REPO / "docs", site / "docs")
    shutil.copy(REPO / "mkdocs.yml", site / "mkdocs.yml")
    built = _build(site)
    assert built.returncode == 0, built.stdout + built.stderr
    assert (site / "site" / "reference" / "schedules" / "index.html").is_file()

    page = site / "docs" / "concepts" / "tick.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [gone](no-such-page.md).\n",
                    encoding="utf-8")
    broken = _build(site)
    assert broken.returncode != 0
    assert "no-such-page.md" in broken.stdout + broken.stderr
