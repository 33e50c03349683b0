"""What the workflows themselves decide, run as the runner would run their steps.

``pages.yml`` deploys only when the collected HTML differs from what Pages serves;
``tick.yml`` keeps manual ticks out of the scheduled ticks' concurrency group, where
GitHub would cancel a pending manual tick when the next scheduled one arrives.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"


def _workflow(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    return data


def _step(job: dict[str, Any], name: str) -> dict[str, Any]:
    [step] = [s for s in job["steps"] if s.get("name") == name]
    return step


def _pages_run(tmp_path: Path, *, served: str | None, event: str = "workflow_run") -> str:
    """Collect the briefs of a state checkout, then compare; returns ``changed``."""
    build = _workflow("pages.yml")["jobs"]["build"]
    work = tmp_path / "work"
    (work / "state" / "runs" / "nightly--20261201T0700Z").mkdir(parents=True)
    (work / "state" / "index.html").write_text("<p>index</p>\n")
    (work / "state" / "runs" / "nightly--20261201T0700Z" / "brief.html").write_text("<p>b</p>\n")
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    (stubs / "gh").write_text("#!/bin/sh\necho https://octo-org.github.io/widgets/\n")
    served_file = tmp_path / "served"
    served_file.write_text(served or "")
    # curl of the published site.sha256: what Pages serves, or a 404 (exit 22)
    (stubs / "curl").write_text(f"#!/bin/sh\n[ -s {served_file} ] || exit 22\n"
                                f"cat {served_file}\n")
    for stub in ("gh", "curl"):
        (stubs / stub).chmod(0o755)
    output = tmp_path / "output"
    output.write_text("")
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "GITHUB_OUTPUT": str(output),
           "GITHUB_REPOSITORY": "octo-org/widgets", "EVENT": event, "GH_TOKEN": "x"}
    for name in ("Copy the index and the briefs", "Compare with the published site"):
        subprocess.run(["bash", "-e", "-c", _step(build, name)["run"]], cwd=work, env=env,
                       check=True, capture_output=True, text=True)
    [line] = output.read_text().splitlines()
    return line


def test_pages_deploys_only_when_the_html_changed(tmp_path: Path) -> None:
    assert _pages_run(tmp_path / "first", served=None) == "changed=true"
    digest = (tmp_path / "first" / "work" / "_site" / "site.sha256").read_text()
    assert _pages_run(tmp_path / "same", served=digest) == "changed=false"
    assert _pages_run(tmp_path / "other", served="0" * 64 + "\n") == "changed=true"
    # by hand: always deploy
    assert _pages_run(tmp_path / "manual", served=digest,
                      event="workflow_dispatch") == "changed=true"


def test_pages_upload_and_deploy_wait_for_the_comparison() -> None:
    jobs = _workflow("pages.yml")["jobs"]
    upload = [s for s in jobs["build"]["steps"]
              if str(s.get("uses", "")).startswith("actions/upload-pages-artifact")]
    assert [s["if"] for s in upload] == ["steps.compare.outputs.changed == 'true'"]
    assert jobs["deploy"]["if"] == "needs.build.outputs.changed == 'true'"


@pytest.mark.parametrize(("event", "group"), [("schedule", "orchestrator-tick-schedule"),
                                              ("workflow_dispatch",
                                               "orchestrator-tick-workflow_dispatch")])
def test_a_manual_tick_is_never_replaced_by_a_scheduled_one(event: str, group: str) -> None:
    concurrency = _workflow("tick.yml")["concurrency"]
    assert concurrency["cancel-in-progress"] is False
    assert concurrency["group"].replace("${{ github.event_name }}", event) == group


NODE24_MAJORS = {"actions/checkout": 5, "actions/setup-python": 6,
                 "actions/upload-artifact": 6, "actions/download-artifact": 7,
                 "actions/upload-pages-artifact": 5, "actions/deploy-pages": 5}
"""The first major of each action that runs on Node 24 (each action's README or release
notes); GitHub's runner removed Node 20 on 2026-09-16."""


def test_every_action_is_pinned_by_sha_to_a_node24_major_with_its_tag_beside() -> None:
    import re

    seen = set()
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            found = re.search(r"uses: ([\w./-]+)@(\S+)(?: # (v[\d.]+))?$", line)
            if found is None:
                continue
            action, ref, tag = found.groups()
            assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{path.name}: {action} not by SHA"
            assert tag, f"{path.name}: {action}@{ref} without its tag in a comment"
            assert int(tag[1:].split(".")[0]) >= NODE24_MAJORS[action], (path.name, action)
            seen.add(action)
    assert seen == set(NODE24_MAJORS)
