"""The tick renders with the repository's own templates, in the sandbox: a real tick
(local executor, real git with a bare origin) over ``templates/`` of the checkout."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from orchestrator.state import layout
from orchestrator.state import model as state_model
from orchestrator.state.phases import RunStatus
from orchestrator.store import GitStateStore
from tests.drive import tick
from tests.gitrepo import clone, make_origin

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
BRANCH = "orchestrator-state"
RUN_ID = "nightly--20261201T0700Z"
SPEC = {"cron": "0 7 * * *", "tracks": [{"name": "a", "run": "true"},
                                         {"name": "b", "run": "true"}]}


def wait_for_launches(work: Path, n: int, timeout: float = 20.0) -> None:
    log = work / "launches.log"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if log.exists() and len([json.loads(x) for x in log.read_text().splitlines()
                                 if x.strip()]) >= n:
            time.sleep(0.5)  # the tracks (`true`) finish at once
            return
        time.sleep(0.1)
    raise AssertionError("the tracks were not launched in time")


def finished_run(tmp_path: Path, templates: dict[str, str]) -> tuple[Path, Any]:
    """A repository with ``templates``, a run fired and its tracks done, and the result
    of the tick that consolidates it."""
    repo = clone(make_origin(tmp_path, {"nightly": SPEC}), tmp_path / "repo")
    (repo / "templates").mkdir()
    for name, text in templates.items():
        (repo / "templates" / name).write_text(text)
    work = tmp_path / "work"
    assert len(tick(repo, T0 + timedelta(minutes=1), work).dispatched) == 2
    wait_for_launches(work, 2)
    return repo, tick(repo, T0 + timedelta(minutes=2), work)


def test_the_job_summary_uses_the_repository_markdown_template(tmp_path: Path) -> None:
    _, result = finished_run(tmp_path, {"brief.md.j2": (
        "{% macro head() %}ours: {{ run.run_id | md }} {{ view.counts.complete }}/"
        "{{ view.counts.total }}\n{% endmacro %}"
        "{% macro opening(name) %}{% endmacro %}{% macro row(name, x) %}{% endmacro %}"
        "{{ head() }}")})
    assert result.rendered == (RUN_ID,)
    assert result.summaries[RUN_ID](1024 * 1024) == f"ours: {RUN_ID} 2/2\n"


def test_a_hostile_brief_template_is_refused_and_the_run_waits(tmp_path: Path) -> None:
    repo, result = finished_run(tmp_path, {
        "brief.html.j2": "{{ lipsum.__globals__['os'].environ }}",
        "index.html.j2": "{{ lipsum.__globals__['os'].popen('id').read() }}"})
    assert result.rendered == ()
    refused = [line for line in result.log if "not rendered" in line]
    assert len(refused) == 2, result.log
    assert all("unsafe" in line for line in refused)
    assert "templates/brief.html.j2" in refused[0]
    snap = GitStateStore(repo, "origin", BRANCH).read()
    state = state_model.load(snap.files, all_tracks=True)
    assert state.runs[RUN_ID].status is RunStatus.CONSOLIDATING
    assert layout.INDEX not in snap.files and layout.brief_path(RUN_ID) not in snap.files
    assert not any(b"uid=" in data for data in snap.files.values())
