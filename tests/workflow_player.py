"""The jobs of ``.github/workflows/track.yml`` (and ``tick.yml``'s tick) played as a
runner would play them.

A tick dispatches to the fake GitHub server; :class:`Player` then runs each matrix leg
the dispatch carried, and the ``fan-in`` job once the fake has created it (after every
leg ended). The job's and steps' ``env`` are evaluated from the workflow file (a small
evaluator for the expressions the file uses), ``run`` scripts are executed with
``bash -eo pipefail`` in a clone of the origin with the ``orchestrator`` of this
checkout on ``PATH``, and the steps that use actions are what those actions do
against the fake: ``upload-artifact`` uploads the file as an artifact of the workflow
run, ``download-artifact`` writes the run's matching artifacts into the folder, and
``checkout``, ``setup-python`` and the install step are the clone and this
interpreter. The fake's job status follows: ``in_progress`` while a job plays, then
``completed`` with the conclusion its steps give.

A job GitHub cancels while it plays (a cancel the fake carried out) is stopped as a
runner stops it: the running step's processes get SIGTERM, then SIGKILL, only
``always()`` steps run after it, and the job keeps the conclusion GitHub gave it. Legs
may be played from several threads at once.

:meth:`Player.play_tick` plays the ``tick`` job of a ``tick.yml`` run the fake started
(a workflow or repository dispatch, say an external clock's), in a clone of its own,
with ``github.event_name`` as the run's event: its ``Tick`` step decides whether to
linger, as on GitHub.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.fakes.github import WORKFLOWS, FakeGitHub, UploadFailed
from tests.gitrepo import clone

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _lookup(path: str, ctx: dict[str, Any]) -> Any:
    value: Any = ctx
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _value(text: str, ctx: dict[str, Any]) -> Any:
    text = text.strip()
    if "||" in text:
        first, rest = text.split("||", 1)
        return _value(first, ctx) or _value(rest, ctx)
    if "&&" in text:  # binds tighter than ||: `a && 'x' || ''`
        first, rest = text.split("&&", 1)
        return _value(first, ctx) and _value(rest, ctx)
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1]
    if text.startswith("toJSON(") and text.endswith(")"):
        return json.dumps(_lookup(text[7:-1], ctx))
    return _lookup(text, ctx)


def _truthy(condition: str, ctx: dict[str, Any]) -> bool:
    """A step's ``if: ${{ [!]context.path }}`` as Actions coerces it to a boolean: null,
    false, 0 and the empty string are false, anything else (an array too) is true
    (docs.github.com, "Evaluate expressions in workflows and actions", Operators)."""
    match = _EXPR.fullmatch(condition.strip())
    assert match is not None, f"the player evaluates one expression per if: {condition}"
    text = match.group(1).strip()
    negate = text.startswith("!")
    path = text.lstrip("! ")
    assert re.fullmatch(r"[a-z_.]+", path), f"the player cannot evaluate {text!r}"
    value = _lookup(path, ctx)
    truth = value not in (None, False, 0, "")
    return not truth if negate else truth


def evaluate(template: Any, ctx: dict[str, Any]) -> str:
    def sub(match: re.Match[str]) -> str:
        value = _value(match.group(1), ctx)
        return "" if value is None else value if isinstance(value, str) else json.dumps(value)

    return _EXPR.sub(sub, str(template))


@dataclass
class Played:
    """One job as it was played: each step's outcome by id or name, and the output of
    its ``run`` steps. A step with ``continue-on-error: true`` that fails keeps its
    outcome ``failure`` but does not fail the job (GitHub's docs, ``continue-on-error``:
    "Prevents a job from failing when a step fails")."""

    outcomes: dict[str, str] = field(default_factory=dict)
    output: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    failed: bool = False
    """A step failed that did not allow it: the job concludes ``failure``."""
    errors: list[str] = field(default_factory=list)
    """What failed actions said (e.g. upload-artifact's 409)."""
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    """Each ``run`` step's ``$GITHUB_OUTPUT``, by id or name."""

    @property
    def conclusion(self) -> str:
        return "failure" if self.failed else "success"


@dataclass
class Player:
    """Plays the jobs of one track workflow file against ``fake`` and ``origin``."""

    fake: FakeGitHub
    origin: Path
    work: Path
    workflow: Path = WORKFLOWS / "track.yml"
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment for every step (e.g. ``GITHUB_STEP_SUMMARY``)."""
    shared_checkout: bool = True
    """Legs share one clone (they only read it); ``False`` gives each its own, as legs
    that push while others do need (two fetches in one clone contend for its locks)."""
    _checkouts: dict[str, Path] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _running: set[subprocess.Popen[str]] = field(default_factory=set, repr=False)

    @property
    def doc(self) -> dict[str, Any]:
        data: dict[str, Any] = yaml.safe_load(self.workflow.read_text())
        return data

    def _checkout(self, name: str) -> Path:
        """One clone per kind of job: legs only read theirs (old-style legs push from
        theirs, through the state store, which fetches first)."""
        with self._lock:
            if name not in self._checkouts:
                self._checkouts[name] = clone(self.origin, self.work / f"checkout-{name}")
            return self._checkouts[name]

    def _context(self, inputs: dict[str, str], leg: dict[str, Any] | None,
                 temp: Path, event: str = "workflow_dispatch") -> dict[str, Any]:
        temp.mkdir(parents=True, exist_ok=True)
        return {"inputs": inputs, "matrix": {"leg": leg} if leg is not None else {},
                "vars": {}, "secrets": {},
                "github": {"token": self.fake.token, "event_name": event},
                "steps": {}, "runner": {"temp": str(temp)}}

    # ------------------------------------------------------------------ jobs

    def legs(self, inputs: dict[str, str]) -> list[dict[str, Any]]:
        legs: list[dict[str, Any]] = json.loads(inputs["tracks"])
        return legs

    def play_leg(self, ci_run: int, inputs: dict[str, str], leg: dict[str, Any]) -> Played:
        """Run one matrix leg (the workflow's job with a matrix)."""
        [job] = [j for j in self.doc["jobs"].values() if "strategy" in j]
        ctx = self._context(inputs, leg, self.work / f"temp-{leg['key']}")
        # the name the tick matches on (an older track.yml names it after the key)
        assert evaluate(job["name"], ctx) in (leg["job"], leg["key"])
        self.fake.set_job(ci_run, leg["key"], "in_progress")
        checkout = self._checkout("leg" if self.shared_checkout else leg["key"])
        played = self._play(job, ctx, ci_run, checkout, leg["key"])
        self._complete(ci_run, leg["key"], played)
        return played

    def play_fan_in(self, ci_run: int, inputs: dict[str, str]) -> Played:
        """Run the ``fan-in`` job, which the fake created once every leg ended."""
        job = self.doc["jobs"]["fan-in"]
        assert job.get("if") in ("${{ !cancelled() && inputs.fan_in != 'next_tick' }}",
                                 "always() && inputs.fan_in != 'next_tick'")  # an older one
        assert job.get("needs") == "track"
        assert inputs.get("fan_in", "job") != "next_tick", "GitHub skips this job"
        ctx = self._context(inputs, None, self.work / f"temp-fan-in-{ci_run}")
        self.fake.set_job(ci_run, "fan-in", "in_progress")
        played = self._play(job, ctx, ci_run, self._checkout("fan-in"), "fan-in")
        self._complete(ci_run, "fan-in", played)
        return played

    def play_tick(self, ci_run: int) -> Played:
        """Run the ``tick`` job of a tick.yml run, in a clone of its own (ticks that run
        at once each fetch and push)."""
        run = self.fake.runs[ci_run]
        assert run.workflow == "tick.yml", run.workflow
        job = self.doc["jobs"]["tick"]
        ctx = self._context(dict(run.inputs), None, self.work / f"temp-tick-{ci_run}",
                            run.event)
        ctx["github"]["event"] = run.payload  # a repository_dispatch's, else empty
        self.fake.set_job(ci_run, "tick", "in_progress")
        played = self._play(job, ctx, ci_run, self._checkout(f"tick-{ci_run}"), "tick")
        self._complete(ci_run, "tick", played)
        return played

    def play_event(self, job_id: str, event_name: str, event: dict[str, Any],
                   inputs: dict[str, str] | None = None) -> Played:
        """Run a job of :attr:`workflow` as GitHub runs it for an event (no matrix, no
        workflow run of the fake): ``event`` is the webhook payload, written to
        ``GITHUB_EVENT_PATH`` and seen as ``github.event``; ``inputs`` those of a
        ``workflow_dispatch``."""
        job = self.doc["jobs"][job_id]
        temp = self.work / f"temp-{job_id}-{event_name}"
        ctx = self._context(inputs or {}, None, temp)
        ctx["github"].update(event=event, event_name=event_name, actor="octocat")
        event_path = temp / "event.json"
        event_path.write_text(json.dumps(event))
        env = {"GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(event_path),
               "GITHUB_ACTOR": "octocat", "RUNNER_TEMP": str(temp),
               "GITHUB_STEP_SUMMARY": str(temp / "summary.md")}
        before, self.env = self.env, {**env, **self.env}
        try:
            return self._play(job, ctx, 0, self._checkout(job_id), job_id)
        finally:
            self.env = before

    def play_job(self, name: str, inputs: dict[str, str]) -> Played:
        """Run the job ``name`` of a workflow started by ``workflow_dispatch`` with
        ``inputs`` (``tick.yml``'s "Run workflow" button); it has no run in the fake."""
        job = self.doc["jobs"][name]
        ctx = self._context(inputs, None, self.work / f"temp-{name}")
        return self._play(job, ctx, None, self._checkout(name), name)

    def _complete(self, ci_run: int, name: str, played: Played) -> None:
        """The job ends with its steps' conclusion, unless GitHub ended it first."""
        if self.fake.job_status(ci_run, name)[0] != "completed":
            self.fake.set_job(ci_run, name, "completed", played.conclusion)

    def stop(self) -> None:
        """Kill every step still running (a test's clean-up)."""
        with self._lock:
            running = list(self._running)
        for proc in running:
            _kill(proc)

    # ------------------------------------------------------------------ steps

    def _play(self, job: dict[str, Any], ctx: dict[str, Any], ci_run: int | None,
              checkout: Path, name: str) -> Played:
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
        job_env = {k: evaluate(v, ctx) for k, v in (job.get("env") or {}).items()}
        played = Played()
        failed = False
        for step in job["steps"]:
            failed = failed or self._cancelled(ci_run, name)
            condition = str(step.get("if", ""))
            if condition.startswith("vars."):
                continue  # repository variables are unset here
            if condition.startswith("${{") and not _truthy(condition, ctx):
                continue  # a step whose condition is false is skipped
            if not _holds(condition, ctx, checkout):
                continue
            # `always()` steps run after a failure or a cancel, the others do not
            if failed and not condition.startswith("always()"):
                continue
            step_name = step.get("id") or step.get("name") or step.get("uses", "")
            uses = str(step.get("uses", ""))
            if uses:
                outcome = self._action(uses, {k: evaluate(v, ctx) for k, v in
                                              (step.get("with") or {}).items()}, ci_run,
                                       played)
            elif step.get("name") == "Install the orchestrator":
                continue  # installed already (editable)
            else:
                outputs = self.work / f"output-{name}-{len(played.output)}"
                outputs.write_text("")
                env = {**os.environ, **self.fake.env(), **job_env,
                       "PATH": f"{self._gh()}{os.pathsep}{path}", "GITHUB_OUTPUT": str(outputs),
                       **self.env,
                       **{k: evaluate(v, ctx) for k, v in (step.get("env") or {}).items()}}
                proc = self._run(["bash", "--noprofile", "--norc", "-eo", "pipefail",
                                  "-c", step["run"]], checkout, env, ci_run, name)
                played.output.append(proc)
                played.outputs[step_name] = dict(
                    line.split("=", 1) for line in outputs.read_text().splitlines()
                    if "=" in line)
                outcome = "success" if proc.returncode == 0 else "failure"
                if self._cancelled(ci_run, name):
                    outcome = "cancelled"
            played.outcomes[step_name] = outcome
            tolerated = str(step.get("continue-on-error")).lower() == "true"
            ctx["steps"][step_name] = {"outcome": outcome, "conclusion": (
                "success" if tolerated and outcome == "failure" else outcome),
                "outputs": played.outputs.get(step_name, {})}
            if outcome == "failure" and not tolerated:
                failed = played.failed = True
        return played

    def _gh(self) -> Path:
        """A folder with ``gh``: ``gh workflow run FILE --ref REF`` sends the dispatch to
        the fake, as GitHub's CLI (on every hosted runner) sends it to GitHub."""
        folder = self.work / "bin"
        gh = folder / "gh"
        if not gh.exists():
            folder.mkdir(parents=True, exist_ok=True)
            gh.write_text(f"#!{sys.executable}\n" + _GH)
            gh.chmod(0o755)
        return folder

    def _cancelled(self, ci_run: int | None, name: str) -> bool:
        if not ci_run:  # a job the fake does not track (played for an event, a dispatch)
            return False
        return self.fake.job_status(ci_run, name) == ("completed", "cancelled")

    def _run(self, args: list[str], cwd: Path, env: dict[str, str], ci_run: int | None,
             name: str) -> subprocess.CompletedProcess[str]:
        """One ``run`` step in its own session, stopped if GitHub cancels the job."""
        proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        with self._lock:
            self._running.add(proc)
        deadline = time.monotonic() + 300
        try:
            while True:
                try:
                    out, err = proc.communicate(timeout=0.1)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() > deadline or self._cancelled(ci_run, name):
                        _kill(proc)
        finally:
            with self._lock:
                self._running.discard(proc)
        return subprocess.CompletedProcess(args, proc.returncode, out, err)

    def _action(self, uses: str, given: dict[str, str], ci_run: int | None,
                played: Played) -> str:
        action = uses.split("@", 1)[0]
        if ci_run is None:
            return "success"  # a played dispatch's job uses no artifact
        if action == "actions/upload-artifact":
            # `path` holds one path a line; those that exist are uploaded, at the
            # archive's top (the workflow's paths share their folder)
            sources = [Path(line.strip()) for line in given["path"].splitlines()
                       if line.strip()]
            found = {source.name: source.read_bytes() for source in sources
                     if source.is_file()}
            if not found:
                # if-no-files-found: ignore uploads nothing and succeeds
                return "success" if given.get("if-no-files-found") == "ignore" else "failure"
            try:
                self.fake.upload(ci_run, given["name"], found,
                                 overwrite=given.get("overwrite", "").lower() == "true")
            except UploadFailed as exc:
                played.errors.append(str(exc))
                return "failure"
            return "success"
        if action == "actions/download-artifact":
            into = Path(given["path"])
            into.mkdir(parents=True, exist_ok=True)
            found = {name: files for name, files in self.fake.download_all(ci_run).items()
                     if fnmatch.fnmatchcase(name, given.get("pattern", "*"))}
            for name, files in found.items():
                merge = given.get("merge-multiple", "").lower() == "true"
                folder = into if merge else into / name
                folder.mkdir(parents=True, exist_ok=True)
                for file, data in files.items():
                    (folder / file).write_bytes(data)
            # download-artifact fails when a pattern matches nothing
            return "success" if found else "failure"
        return "success"  # checkout, setup-python: the clone and this interpreter


_GH = """import json, os, sys, urllib.request
args = sys.argv[1:]
assert args[:2] == ["workflow", "run"] and args[3] == "--ref", args
url = (f"{os.environ['GITHUB_API_URL']}/repos/{os.environ['GITHUB_REPOSITORY']}"
       f"/actions/workflows/{args[2]}/dispatches")
request = urllib.request.Request(url, data=json.dumps({"ref": args[4]}).encode(), headers={
    "Authorization": f"Bearer {os.environ['GH_TOKEN']}", "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json"})
urllib.request.urlopen(request).read()
"""


def _holds(condition: str, ctx: dict[str, Any], checkout: Path) -> bool:
    """A step's ``if`` of the forms the workflows use: terms joined by ``&&``, each
    ``steps.ID.outputs.NAME != ''`` or ``hashFiles('PATH') != ''``; status functions
    (``always()``) are the caller's, and anything else counts as true."""
    for term in (t.strip() for t in condition.removeprefix("${{").removesuffix("}}").split("&&")):
        output = re.fullmatch(r"steps\.(\w+)\.outputs\.(\w+) != ''", term)
        if output and not ctx["steps"].get(output[1], {}).get("outputs", {}).get(output[2]):
            return False
        hashed = re.fullmatch(r"hashFiles\('([^']+)'\) != ''", term)
        if hashed and not (checkout / hashed[1]).is_file():
            return False
    return True


def _session(sid: int) -> list[int]:
    """The live processes of session ``sid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[3]) == sid:
                pids.append(int(entry.name))
    return pids


def _kill(proc: subprocess.Popen[str], grace: float = 1.0) -> None:
    """What a runner does to a cancelled step: SIGTERM to every process the step
    started (its session: ``timeout`` puts the track in a process group of its own),
    SIGKILL to what is left after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _session(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if sig == signal.SIGTERM:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
