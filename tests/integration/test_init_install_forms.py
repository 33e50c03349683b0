"""The two ways a repository ``init`` made installs the orchestrator: the committed
wheel (``--vendor``, the default) and this repository's GitHub Action pinned by commit
(``--action OWNER/REPO@REF``). Both pass actionlint and zizmor as written; ``upgrade``
on a fresh repository of either form finds nothing to change, and moves an action's
pin to the commit a tag names (resolved with ``git ls-remote``, here against a bare
repository standing in for GitHub)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.distribution import INSTALL_DIR
from tests.drive import cli
from tests.gitrepo import git

SHA = "0123456789abcdef0123456789abcdef01234567"
ACTION = f"octo-org/orchestrator@{SHA}"


def tool(name: str) -> str:
    """A linter installed beside this interpreter (the test extras), else on PATH."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is not installed (pip install -e '.[test]')"
    return found


def lint(repo: Path) -> None:
    """actionlint (with shellcheck) and zizmor, offline, as .ci/run runs them."""
    workflows = sorted(str(p) for p in (repo / ".github" / "workflows").glob("*.yml"))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    found = subprocess.run([tool("actionlint"), *workflows], capture_output=True, text=True,
                           timeout=120, check=False, env=env)
    assert found.returncode == 0, found.stdout + found.stderr
    found = subprocess.run([tool("zizmor"), "--offline", "--no-progress",
                            str(repo / ".github" / "workflows")], capture_output=True,
                           text=True, timeout=120, check=False)
    assert found.returncode == 0, found.stdout + found.stderr


def install_steps(repo: Path) -> list[dict[str, object]]:
    found = []
    for path in sorted((repo / ".github" / "workflows").glob("*.yml")):
        for job in yaml.safe_load(path.read_text())["jobs"].values():
            found += [s for s in job.get("steps", ())
                      if s.get("name") == "Install the orchestrator"]
    return found


@pytest.mark.parametrize("form", [("--vendor",), ("--action", ACTION), ()])
def test_both_forms_pass_actionlint_and_zizmor_and_upgrade_finds_nothing_to_do(
        tmp_path: Path, form: tuple[str, ...]) -> None:
    repo = tmp_path / "mine"
    cli(tmp_path, "init", str(repo), "--pages", *form, check=True)
    lint(repo)
    steps = install_steps(repo)
    assert len(steps) == 7  # pages.yml renders the API with the orchestrator too
    if "--action" in form:
        assert not (repo / INSTALL_DIR).exists()  # no wheel in the user's repository
        assert all(s == {"name": "Install the orchestrator", "uses": ACTION}
                   or s == {"name": "Install the orchestrator", "uses": ACTION,
                            "if": "steps.changes.outputs.relevant == 'true'"} for s in steps)
    else:
        assert (repo / INSTALL_DIR / "install.sh").is_file()
        assert all("uses" not in s for s in steps)
    done = cli(repo, "upgrade", str(repo), check=True)
    assert "note:" not in done.stdout, done.stdout  # cron-sync's lines are init's own
    assert "nothing to do" in done.stdout or "moves their pin" in done.stdout


def test_upgrade_still_names_a_workflow_changed_beyond_its_cron(tmp_path: Path) -> None:
    repo = tmp_path / "mine"
    cli(tmp_path, "init", str(repo), "--action", ACTION, check=True)
    track = repo / ".github" / "workflows" / "track.yml"
    track.write_text(track.read_text().replace("timeout-minutes:", "timeout-minutes: 1 #", 1))
    done = cli(repo, "upgrade", str(repo), check=True)
    assert "note: .github/workflows/track.yml differs" in done.stdout
    assert "tick.yml differs" not in done.stdout


def _github(tmp_path: Path) -> tuple[str, str]:
    """A bare ``octo-org/orchestrator`` under a folder that stands in for GitHub, with
    an annotated tag ``v1``; the folder's URL and the commit the tag names."""
    server = tmp_path / "github"
    work = tmp_path / "action-src"
    git("init", "--quiet", str(work))
    (work / "action.yml").write_text("name: x\n")
    git("add", ".", cwd=work)
    git("commit", "--quiet", "-m", "release", cwd=work)
    git("tag", "-a", "-m", "v1", "v1", cwd=work)
    git("clone", "--quiet", "--bare", str(work), str(server / "octo-org" / "orchestrator"))
    return server.as_uri(), git("rev-parse", "HEAD", cwd=work)


def test_upgrade_moves_the_pin_to_the_commit_a_tag_names(tmp_path: Path) -> None:
    url, commit = _github(tmp_path)
    repo = tmp_path / "mine"
    cli(tmp_path, "init", str(repo), "--action", ACTION, check=True)
    done = cli(repo, "upgrade", str(repo), "--action", "octo-org/orchestrator@v1",
               env={"GITHUB_SERVER_URL": url}, check=True)
    assert f"moved .github/workflows/tick.yml to octo-org/orchestrator@{commit}" in done.stdout
    assert {s["uses"] for s in install_steps(repo)} == {f"octo-org/orchestrator@{commit}"}
    assert f"uses: octo-org/orchestrator@{commit} # v1\n" in (
        repo / ".github" / "workflows" / "tick.yml").read_text()
    lint(repo)
    again = cli(repo, "upgrade", str(repo), env={"GITHUB_SERVER_URL": url}, check=True)
    assert "note:" not in again.stdout, again.stdout
    missing = cli(repo, "upgrade", str(repo), "--action", "octo-org/orchestrator@v9",
                  env={"GITHUB_SERVER_URL": url})
    assert missing.returncode != 0 and "cannot resolve 'v9'" in missing.stderr


def test_init_refuses_both_forms_and_a_malformed_action(tmp_path: Path) -> None:
    both = cli(tmp_path, "init", str(tmp_path / "a"), "--vendor", "--action", ACTION)
    assert both.returncode != 0 and "choose one" in both.stderr
    bad = cli(tmp_path, "init", str(tmp_path / "b"), "--action", "orchestrator@v1")
    assert bad.returncode != 0 and "expected OWNER/REPO@REF" in bad.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_vendored_repository_has_no_pin_to_move(tmp_path: Path) -> None:
    repo = tmp_path / "mine"
    cli(tmp_path, "init", str(repo), check=True)
    done = cli(repo, "upgrade", str(repo), "--action", ACTION)
    assert done.returncode != 0 and "switch-to-the-action" in done.stderr


def test_init_without_a_remote_says_how_to_add_one(tmp_path: Path) -> None:
    done = cli(tmp_path, "init", str(tmp_path / "mine"), check=True)
    assert "git remote add origin https://github.com/OWNER/REPO.git" in done.stdout
    git("remote", "add", "origin", str(tmp_path / "x.git"), cwd=tmp_path / "mine")
    shutil.rmtree(tmp_path / "mine" / "schedules")
    again = cli(tmp_path, "init", str(tmp_path / "mine"), "--force", check=True)
    assert "git remote add" not in again.stdout


def test_the_action_passes_zizmor_and_its_steps_shellcheck(tmp_path: Path) -> None:
    action = Path(__file__).resolve().parents[2] / "action.yml"
    found = subprocess.run([tool("zizmor"), "--offline", "--no-progress", str(action)],
                           capture_output=True, text=True, timeout=120, check=False)
    assert found.returncode == 0, found.stdout + found.stderr
    for number, step in enumerate(yaml.safe_load(action.read_text())["runs"]["steps"]):
        script = tmp_path / f"step{number}.sh"
        script.write_text(f"#!/usr/bin/env bash\n{step['run']}")
        checked = subprocess.run([tool("shellcheck"), str(script)], capture_output=True,
                                 text=True, timeout=60, check=False)
        assert checked.returncode == 0, checked.stdout
