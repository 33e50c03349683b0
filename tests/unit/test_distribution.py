"""The installable orchestrator: the wheel's bytes, the dependency lock, the workflows'
install step. All offline: the lock is checked against ``pyproject.toml`` and the
workflows, the wheel against itself (the integration tier builds it with setuptools
and installs it with pip)."""

from __future__ import annotations

import io
import re
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from orchestrator import __version__, distribution
from orchestrator.distribution import install, lock, wheel

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_distribution_is_named_where_the_index_has_room_and_lists_pyproject_s_deps(
        ) -> None:
    project = PYPROJECT["project"]
    assert project["name"] == distribution.NAME == "git-orchestrator"
    assert project["version"] == __version__
    assert tuple(project["dependencies"]) == distribution.DEPENDENCIES
    assert project["requires-python"] == distribution.REQUIRES_PYTHON
    assert project["scripts"] == distribution.ENTRY_POINTS


def test_the_lock_is_current_with_pyproject_and_pins_every_file_by_hash() -> None:
    locked = lock.load()
    assert locked.dependencies == tuple(PYPROJECT["project"]["dependencies"]), (
        "pyproject's dependencies changed: python3 -m orchestrator.distribution.lock")
    pins = {canonicalize_name(p.name): p for p in locked.pins}
    assert len(pins) == len(locked.pins), "a package pinned twice"
    for spec in map(Requirement, locked.dependencies):
        pin = pins.get(canonicalize_name(spec.name))
        assert pin is not None, f"{spec.name} is not in the lock"
        assert spec.specifier.contains(pin.version, prereleases=True), (spec, pin.version)
    for pin in locked.pins:
        assert pin.hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in pin.hashes)


PROJECT_ONLY = {"ci.yml", "docs.yml", "release.yml"}
"""This repository's own workflows that init never writes (the CI, the docs site, the
release)."""


def test_the_lock_is_for_the_python_every_workflow_sets_up() -> None:
    versions = set()
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for job in (yaml.safe_load(path.read_text()).get("jobs") or {}).values():
            for step in job.get("steps") or ():
                if str(step.get("uses", "")).startswith("actions/setup-python@") \
                        and path.name not in PROJECT_ONLY:
                    versions.add(str(step["with"]["python-version"]))
    assert lock.load().python == lock.PYTHON
    assert versions == {lock.PYTHON}


def test_a_lock_line_without_a_hash_is_refused() -> None:
    with pytest.raises(ValueError, match="click: pinned without a hash"):
        lock.parse("click==8.1.7\n")
    with pytest.raises(ValueError, match="line 1: not a pin"):
        lock.parse("click>=8.1 \\\n    --hash=sha256:" + "0" * 64 + "\n")


def test_the_wheel_is_the_same_bytes_every_time_and_changes_with_the_code() -> None:
    first, second = wheel.build(), wheel.build()
    assert first.data == second.data
    assert first.filename == f"git_orchestrator-{__version__}-py3-none-any.whl"
    other = wheel.build(version="9.9.9")
    assert other.sha256 != first.sha256 and other.filename.startswith("git_orchestrator-9.9.9")


def test_the_wheel_holds_the_package_its_metadata_and_a_true_record() -> None:
    archive = zipfile.ZipFile(io.BytesIO(wheel.build().data))
    names = archive.namelist()
    info = f"git_orchestrator-{__version__}.dist-info"
    assert names[-1] == f"{info}/RECORD"
    assert "orchestrator/__init__.py" in names and "orchestrator/py.typed" in names
    assert "orchestrator/data/requirements.lock" in names
    assert "orchestrator/data/scaffold/workflows/tick.yml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert all(i.date_time == wheel.EPOCH for i in archive.infolist())
    metadata = archive.read(f"{info}/METADATA").decode()
    assert "Name: git-orchestrator\n" in metadata
    assert [line.removeprefix("Requires-Dist: ") for line in metadata.splitlines()
            if line.startswith("Requires-Dist: ")] == list(distribution.DEPENDENCIES)
    assert "orchestrator = orchestrator.cli:run" in archive.read(
        f"{info}/entry_points.txt").decode()
    record = archive.read(f"{info}/RECORD").decode().splitlines()
    assert {line.rsplit(",", 2)[0] for line in record} == set(names)


def test_the_requirements_file_pins_the_wheel_by_its_hash_then_the_lock() -> None:
    files = install.current()
    text = files.requirements
    assert f"./.github/orchestrator/{files.wheel.filename} \\\n" \
           f"    --hash=sha256:{files.wheel.sha256}\n" in text
    assert text.endswith(lock.load().body)
    requirement_lines = [line for line in text.splitlines()
                         if line and not line.startswith((" ", "#"))]
    assert all(line.endswith(" \\") for line in requirement_lines), "a line without a hash"
    assert set(files.files()) == {files.wheel_path, distribution.REQUIREMENTS,
                                  distribution.INSTALL_SCRIPT}


def test_every_workflow_installs_the_committed_wheel_with_hashes_and_nothing_else() -> None:
    installs = 0
    for path in sorted(WORKFLOWS.glob("*.yml")):
        if path.name in PROJECT_ONLY:
            continue  # the project's own CI and site install the checkout or MkDocs
        text = path.read_text()
        for job in (yaml.safe_load(text).get("jobs") or {}).values():
            for step in job.get("steps") or ():
                run = str(step.get("run", ""))
                assert not re.search(r"\bpip\b", run), f"{path.name}: pip outside install.sh"
                if step.get("name") == "Install the orchestrator":
                    assert run.strip() == distribution.INSTALL_COMMAND, path.name
                    installs += 1
        assert "ORCHESTRATOR_PACKAGE" not in text, path.name
    assert installs == 7  # tick, a track leg, fan-in, validate, watchdog, enqueue, pages


def test_this_repository_s_own_workflows_install_a_wheel_pinned_by_its_hash() -> None:
    """This repository runs on its own workflows: they install the wheel committed in
    .github/orchestrator (refreshed with `orchestrator upgrade` when the code its ticks
    run should change), never this checkout's code directly."""
    import hashlib

    folder = REPO / distribution.INSTALL_DIR
    text = (REPO / distribution.REQUIREMENTS).read_text(encoding="utf-8")
    [wheel_file] = sorted(folder.glob("git_orchestrator-*.whl"))
    digest = hashlib.sha256(wheel_file.read_bytes()).hexdigest()
    assert f"./{distribution.INSTALL_DIR}/{wheel_file.name} \\\n    --hash=sha256:{digest}\n" \
        in text
    assert text.endswith(lock.load().body), "the lock changed: run `orchestrator upgrade`"
    assert (REPO / distribution.INSTALL_SCRIPT).read_bytes() == install.SCRIPT.read_bytes()
