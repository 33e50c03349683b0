"""``release.yml``, which cannot run here (it publishes): its structure. A tag ``v*``
starts it; no job holds a permission it does not use, and only the PyPI job may ask
for an OIDC token, behind an environment; every action is pinned by SHA; no ``run:``
pastes an expression into its script. The build it runs is run in
``tests/integration/test_release_build.py``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
RELEASE = REPO / ".github" / "workflows" / "release.yml"


def _release() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(RELEASE.read_text(encoding="utf-8"))
    return data


def _steps(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if "runs" in doc:
        return list(doc["runs"]["steps"])
    return [step for job in doc["jobs"].values() for step in job.get("steps", ())]


def test_a_version_tag_and_nothing_else_starts_a_release() -> None:
    doc = _release()
    assert doc[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads `on` as true
    assert doc["permissions"] == {}


def test_each_job_holds_only_the_permissions_it_uses() -> None:
    jobs = _release()["jobs"]
    assert {name: job["permissions"] for name, job in jobs.items()} == {
        "build": {"contents": "read"},
        "github-release": {"contents": "write"},
        "pypi": {"id-token": "write"},
        "major-tag": {"contents": "write"},
    }
    assert jobs["pypi"]["environment"]["name"] == "pypi"
    assert [name for name, job in jobs.items() if "environment" in job] == ["pypi"]
    assert jobs["major-tag"]["needs"] == ["github-release", "pypi"]


def test_pypi_is_reached_by_trusted_publishing_only() -> None:
    text = RELEASE.read_text(encoding="utf-8")
    [publish] = [s for s in _release()["jobs"]["pypi"]["steps"]
                 if str(s.get("uses", "")).startswith("pypa/gh-action-pypi-publish@")]
    assert "with" not in publish  # no password: the OIDC token is the credential
    assert "secrets." not in text


def test_every_action_is_pinned_by_sha_and_no_run_pastes_an_expression() -> None:
    for path in [RELEASE, REPO / "action.yml"]:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for step in _steps(doc):
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), step
            assert "${{" not in str(step.get("run", "")), (path.name, step.get("name"))


def test_the_release_builds_and_checks_both_distributions_and_attaches_the_lock() -> None:
    jobs = _release()["jobs"]
    build = "\n".join(str(s.get("run", "")) for s in jobs["build"]["steps"])
    assert "python -m build" in build and "twine check --strict" in build
    assert "cp orchestrator/data/requirements.lock dist/" in build
    release = "\n".join(str(s.get("run", "")) for s in jobs["github-release"]["steps"])
    assert 'gh release create "$TAG" dist/*' in release
