"""What the workflows themselves decide, run as the runner would run their steps.

``pages.yml`` deploys only when the collected HTML differs from what Pages serves;
``tick.yml``'s concurrency never drops a pending manual tick or operator verb, where
GitHub would cancel a pending run for a newer one, and scheduled ticks do not pile up.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.api.incremental import MANIFEST
from tests.fakes.concurrency import Concurrency

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"


def _workflow(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    return data


def _step(job: dict[str, Any], name: str) -> dict[str, Any]:
    [step] = [s for s in job["steps"] if s.get("name") == name]
    return step


def _pages_run(tmp_path: Path, *, served: str | None, event: str = "workflow_run",
               api: str = "") -> str:
    """Collect the briefs of a state checkout (beside the API's ``api`` text, as the
    render step left it), then compare; returns ``changed``."""
    build = _workflow("pages.yml")["jobs"]["build"]
    work = tmp_path / "work"
    state = work / "_state" / "state"  # the state branch's checkout, beside the default's
    (state / "runs" / "nightly--20261201T0700Z").mkdir(parents=True)
    (state / "index.html").write_text("<p>index</p>\n")
    (state / "runs" / "nightly--20261201T0700Z" / "brief.html").write_text("<p>b</p>\n")
    (work / "_site" / "api" / "v1").mkdir(parents=True)
    (work / "_site" / "api" / "v1" / "index.json").write_text(api)
    (work / "_site" / MANIFEST).write_text(api)  # rewritten by every render, not published
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
    # the API's clock and the render's manifest moved, the HTML did not: an idle tick
    # deploys nothing
    assert _pages_run(tmp_path / "api", served=digest, api='{"later":1}') == "changed=false"
    # by hand: always deploy
    assert _pages_run(tmp_path / "manual", served=digest,
                      event="workflow_dispatch") == "changed=true"


def test_pages_upload_and_deploy_wait_for_the_comparison() -> None:
    jobs = _workflow("pages.yml")["jobs"]
    upload = [s for s in jobs["build"]["steps"]
              if str(s.get("uses", "")).startswith("actions/upload-pages-artifact")]
    assert [s["if"] for s in upload] == ["steps.compare.outputs.changed == 'true'"]
    assert jobs["deploy"]["if"] == "needs.build.outputs.changed == 'true'"


def test_pages_renders_the_api_from_the_state_branch_checked_out_beside(
        tmp_path: Path) -> None:
    """The render step as the runner runs it: the default branch's checkout, the state
    branch's shallow one in ``_state``, the orchestrator on PATH; what it renders
    is published beside the HTML."""
    from orchestrator.state.phases import RunStatus
    from orchestrator.store import GitStateStore
    from tests.builders import run_files, spec_data
    from tests.gitrepo import clone, git, make_origin

    origin = make_origin(tmp_path, {"nightly": spec_data("0 7 * * *")})
    work = clone(origin, tmp_path / "work")
    store = GitStateStore(work, "origin", "orchestrator-state", sleep=lambda _: None)
    files = dict(run_files("nightly--20261201T0700Z", RunStatus.RUNNING))
    assert store.transact(lambda _snap: files, "a run").landed
    git("clone", "--quiet", "--depth", "1", "--branch", "orchestrator-state",
        f"file://{origin}", "_state", cwd=work)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "orchestrator").write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -m orchestrator "$@"\n')
    (stubs / "orchestrator").chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "GITHUB_WORKSPACE": str(work),
           "ORCHESTRATOR_STATE_BRANCH": "orchestrator-state"}
    step = _step(_workflow("pages.yml")["jobs"]["build"], "Render the API and the badges")
    subprocess.run(["bash", "-e", "-c", step["run"]], cwd=work, env=env, check=True,
                   capture_output=True, text=True, timeout=120)
    assert (work / "_site" / "api" / "v1" / "runs" / "nightly--20261201T0700Z.json").is_file()
    assert (work / "_site" / "badges" / "repository.svg").is_file()


def test_pages_keeps_the_rendering_and_its_manifest_for_the_next_run() -> None:
    """The render finds the last deployed rendering where it writes, manifest included,
    and only a deployment saves one (an idle tick adds no cache entry)."""
    build = _workflow("pages.yml")["jobs"]["build"]
    restore = _step(build, "Restore the last rendering of the API")
    save = _step(build, "Keep this rendering for the next run")
    assert "render --api _site" in _step(build, "Render the API and the badges")["run"]
    paths = restore["with"]["path"].split()
    assert paths == save["with"]["path"].split() == [
        "_site/api", "_site/badges", f"_site/{MANIFEST}"]
    assert save["with"]["key"] == restore["with"]["key"]
    assert restore["with"]["key"].startswith(restore["with"]["restore-keys"])
    assert "steps.compare.outputs.changed == 'true'" in save["if"]
    steps = [s.get("name") for s in build["steps"]]
    assert steps.index(restore["name"]) < steps.index("Render the API and the badges")
    assert set(build["permissions"]) == {"contents", "pages"}  # a cache needs no more


def _ticks() -> Concurrency:
    return Concurrency(_workflow("tick.yml"), "tick")


def test_a_pending_operator_verb_is_never_dropped() -> None:
    """GitHub keeps one pending run per group unless it says ``queue: max``: a manual
    tick runs, "cancel run X" waits, then "retry" and an external clock's call arrive.
    The cancel must still run; scheduled ticks arriving meanwhile change nothing."""
    ticks = _ticks()
    ticks.arrive("manual", "workflow_dispatch", 1, {"action": "tick"})
    ticks.arrive("cancel", "workflow_dispatch", 2, {"action": "cancel", "run": "r"})
    ticks.arrive("retry", "workflow_dispatch", 3, {"action": "retry", "run": "r"})
    ticks.arrive("clock", "repository_dispatch", 4)
    ticks.arrive("dry", "workflow_dispatch", 5, {"action": "tick", "dry_run": True})
    for n in range(3):
        ticks.arrive(f"cron{n}", "schedule", 10 + n)
    assert ticks.state["cancel"] == "pending"
    for run in ("manual", "cancel", "retry", "clock"):
        assert ticks.state[run] == "running", run
        ticks.finish(run)
    assert ticks.state["dry"] == "running"


def test_scheduled_ticks_do_not_pile_up_behind_a_lingering_one() -> None:
    """A newer scheduled tick replaces the pending one: at most one waits, and a verb
    does not wait for a lingering scheduled tick (the compare-and-swap makes it safe)."""
    ticks = _ticks()
    for n in range(4):
        ticks.arrive(f"cron{n}", "schedule", 10 + n)
    assert [ticks.state[f"cron{n}"] for n in range(4)] == [
        "running", "cancelled", "cancelled", "pending"]
    ticks.arrive("cancel", "workflow_dispatch", 20, {"action": "cancel", "run": "r"})
    assert ticks.state["cancel"] == "running"
    ticks.finish("cron0")
    assert ticks.state["cron3"] == "running"


@pytest.mark.parametrize(("name", "job", "step"), [("tick.yml", "tick", "Tick"),
                                                   ("track.yml", "fan-in", "Fan in"),
                                                   ("watchdog.yml", "watchdog",
                                                    "Check the heartbeat"),
                                                   ("enqueue.yml", "enqueue", "Enqueue")])
def test_the_jobs_that_notify_may_write_issues_and_get_the_webhooks(
        name: str, job: str, step: str) -> None:
    """Notifications need ``issues: write`` where a tick or the watchdog runs, and the
    webhooks' secrets in the step's environment (never interpolated into the script);
    the legs, which run a track's code, get neither."""
    jobs = _workflow(name)["jobs"]
    assert jobs[job]["permissions"]["issues"] == "write"
    env = _step(jobs[job], step)["env"]
    for secret in ("SLACK_WEBHOOK", "ORCHESTRATOR_WEBHOOK"):
        assert env[secret] == f"${{{{ secrets.{secret} }}}}"
        assert "secrets." not in _step(jobs[job], step)["run"]
    if name == "track.yml":
        leg = jobs["track"]
        assert "issues" not in leg["permissions"]
        assert "SLACK_WEBHOOK" not in str(leg)
    if name == "watchdog.yml":
        assert "--notify" in _step(jobs[job], step)["run"]


NODE24_MAJORS = {"actions/checkout": 5, "actions/setup-python": 6,
                 "actions/upload-artifact": 6, "actions/download-artifact": 7,
                 "actions/upload-pages-artifact": 5, "actions/deploy-pages": 5,
                 "actions/cache/restore": 5, "actions/cache/save": 5,
                 "pypa/gh-action-pypi-publish": 1}
"""The first major of each action that runs on Node 24 (each action's README or release
notes); GitHub's runner removed Node 20 on 2026-09-16. PyPI's publisher runs in a
container, on no Node at all."""


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


def _pull_request(tmp_path: Path, changed: dict[str, str], nightly: str = "{}\n") -> Path:
    """A checkout as actions/checkout makes one for a pull request with fetch-depth 2:
    GitHub's merge commit of the head into the base, and its two parents. The base's
    ``schedules/nightly.json`` holds ``nightly``."""
    import shutil

    from tests.gitrepo import bare_origin, git

    origin = bare_origin(tmp_path)
    seed = tmp_path / "seed"
    git("clone", "--quiet", str(origin), str(seed), cwd=tmp_path)
    (seed / "schedules").mkdir()
    (seed / "schedules" / "nightly.json").write_text(nightly)
    (seed / "README.md").write_text("hello\n")
    git("add", ".", cwd=seed)
    git("commit", "--quiet", "-m", "base", cwd=seed)
    git("push", "--quiet", "origin", "HEAD:main", cwd=seed)
    git("checkout", "--quiet", "-b", "feature", cwd=seed)
    for rel, text in changed.items():
        (seed / rel).parent.mkdir(parents=True, exist_ok=True)
        (seed / rel).write_text(text)
    git("add", ".", cwd=seed)
    git("commit", "--quiet", "-m", "change", cwd=seed)
    git("checkout", "--quiet", "main", cwd=seed)
    (seed / "OTHER.md").write_text("meanwhile on main\n")  # the base moved on
    git("add", ".", cwd=seed)
    git("commit", "--quiet", "-m", "main moves", cwd=seed)
    git("merge", "--quiet", "--no-ff", "-m", "Merge feature into main", "feature", cwd=seed)
    git("push", "--quiet", "origin", "HEAD:refs/pull/1/merge", cwd=seed)
    shutil.rmtree(seed)
    work = tmp_path / "work"
    git("init", "--quiet", str(work), cwd=tmp_path)
    git("fetch", "--quiet", "--depth=2", f"file://{origin}", "refs/pull/1/merge", cwd=work)
    git("checkout", "--quiet", "FETCH_HEAD", cwd=work)
    return work


@pytest.mark.parametrize(("changed", "relevant"), [
    ({"README.md": "docs only\n"}, "false"),
    ({".github/workflows/tick.yml": "name: tick\n"}, "true"),
    ({"orchestrator.json": "{}\n"}, "true"),
    ({"templates/brief.html.j2": "x\n"}, "true"),
    ({"schedules/other.json": "{}\n"}, "true"),
    # validate reads the calendars and, under an external clock, the clock's file
    ({"calendars/holidays.json": "{}\n"}, "true"),
    ({".github/orchestrator-clock.json": "{}\n"}, "true"),
])
def test_validate_runs_on_every_pull_request_and_passes_at_once_when_nothing_relevant_changed(
        tmp_path: Path, changed: dict[str, str], relevant: str) -> None:
    doc = _workflow("validate.yml")
    on = doc.get("on", doc.get(True))
    assert on == {"pull_request": None}  # no path filter: never left "Pending"
    text = (WORKFLOWS / "validate.yml").read_text()
    assert "vars." not in text and "secrets." not in text  # a fork's pull request has none
    job = doc["jobs"]["validate"]
    later = job["steps"][2:]
    assert later and all(s["if"] == "steps.changes.outputs.relevant == 'true'" for s in later)

    work = _pull_request(tmp_path, changed)
    output, summary = tmp_path / "output", tmp_path / "summary"
    output.write_text("")
    done = subprocess.run(["bash", "-e", "-c", _step(job, "What the pull request changes")["run"]],
                          cwd=work, env={**os.environ, "GITHUB_OUTPUT": str(output),
                                         "GITHUB_STEP_SUMMARY": str(summary)},
                          capture_output=True, text=True, check=True)
    assert output.read_text() == f"relevant={relevant}\n"
    if relevant == "false":
        assert "nothing to validate" in done.stdout and "nothing to validate" in summary.read_text()


def test_validate_compares_the_schedules_with_the_base_the_merge_commit_was_made_on(
        tmp_path: Path) -> None:
    def nightly(cron: str) -> str:
        return json.dumps({"cron": cron, "timezone": "America/New_York",
                           "tracks": [{"name": "a", "run": "true"}]})

    work = _pull_request(tmp_path, {"schedules/nightly.json": nightly("30 6 * * 1-5")},
                         nightly=nightly("0 7 * * *"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "orchestrator"  # what the install step puts on PATH
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m orchestrator "$@"\n')
    shim.chmod(0o755)
    summary = tmp_path / "summary"
    step = _step(_workflow("validate.yml")["jobs"]["validate"], "Validate and preview")
    assert step["env"] == {"GITHUB_TOKEN": "${{ github.token }}"}
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step["run"]], cwd=work, capture_output=True,
        text=True, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                        "PYTHONPATH": str(WORKFLOWS.parents[1]),
                        "GITHUB_STEP_SUMMARY": str(summary)})
    assert done.returncode == 0, done.stderr
    text = summary.read_text()
    assert "## What this pull request changes" in text
    assert ("Now at 06:30 on Monday through Friday (America/New\\_York); was at 07:00 every "
            "day (America/New\\_York).") in text


STUB = """#!{python}
import pathlib, signal, sys, time
seen = pathlib.Path({seen!r})
signal.signal(signal.SIGINT, lambda *_: (seen.write_text("SIGINT"), sys.exit(0)))
seen.with_suffix(".ready").write_text(" ".join(sys.argv[1:]))
time.sleep(60)
"""


@pytest.mark.parametrize(("action", "event"), [
    ("tick", "schedule"), ("tick", "workflow_dispatch"), ("cancel", "workflow_dispatch"),
    ("approve", "workflow_dispatch"), ("reject", "workflow_dispatch")])
def test_a_cancelled_tick_step_signals_the_orchestrator_not_only_its_shell(
        tmp_path: Path, action: str, event: str) -> None:
    """The runner cancels a step by signalling the step's own process (its shell) with
    SIGINT, then SIGTERM, then kills the tree (actions/runner's process invoker). A
    command the shell waits on never hears the first two; exec'd, it is the shell."""
    import signal
    import sys
    import time

    seen = tmp_path / "seen"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "orchestrator"
    stub.write_text(STUB.format(python=sys.executable, seen=str(seen)))
    stub.chmod(0o755)
    script = _step(_workflow("tick.yml")["jobs"]["tick"], "Tick")["run"]
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ACTION": action,
           "EVENT": event, "DRY_RUN": "", "RUN": "nightly--20261203T0700Z", "REASON": "r",
           "TRACK": "ship"}
    # the runner's `shell: bash`
    step = subprocess.Popen(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                            env=env, start_new_session=True)
    try:
        ready = seen.with_suffix(".ready")
        end = time.monotonic() + 30  # a guard against a hang, not a margin
        while not ready.exists() and time.monotonic() < end:
            time.sleep(0.02)
        argv = ready.read_text().split()
        assert argv[0] in {"tick", "runs", "approve", "reject"}
        if action in ("approve", "reject"):  # the inputs reach it as arguments, never code
            assert argv == [action, "--executor", "github", "--reason", "r", "--",
                            "nightly--20261203T0700Z", "ship"]
        step.send_signal(signal.SIGINT)  # to the step's process alone, as the runner does
        assert step.wait(timeout=30) == 0
        assert seen.read_text() == "SIGINT"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(step.pid, signal.SIGKILL)  # the stub too, when the shell kept it
        step.wait()


def test_pages_builds_nothing_after_a_cancelled_or_skipped_tick() -> None:
    condition = " ".join(_workflow("pages.yml")["jobs"]["build"]["if"].split())
    assert condition == (
        "github.event_name == 'workflow_dispatch' || !contains(fromJSON('[\"cancelled\", "
        "\"skipped\"]'), github.event.workflow_run.conclusion)")
    assert _workflow("pages.yml")["jobs"]["deploy"]["needs"] == "build"  # skipped with it
