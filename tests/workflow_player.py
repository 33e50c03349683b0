"""The jobs of ``.github/workflows/track.yml`` played as a runner would play them.

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

from tests.fakes.github import WORKFLOWS, FakeGitHub
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
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1]
    if text.startswith("toJSON(") and text.endswith(")"):
        return json.dumps(_lookup(text[7:-1], ctx))
    return _lookup(text, ctx)


def evaluate(template: Any, ctx: dict[str, Any]) -> str:
    def sub(match: re.Match[str]) -> str:
        value = _value(match.group(1), ctx)
        return "" if value is None else value if isinstance(value, str) else json.dumps(value)

    return _EXPR.sub(sub, str(template))


@dataclass
class Played:
    """One job as it was played: each step's outcome by id or name, and the output of
    its ``run`` steps."""

    outcomes: dict[str, str] = field(default_factory=dict)
    output: list[subprocess.CompletedProcess[str]] = field(default_factory=list)

    @property
    def conclusion(self) -> str:
        return "failure" if "failure" in self.outcomes.values() else "success"


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
                 temp: Path) -> dict[str, Any]:
        temp.mkdir(parents=True, exist_ok=True)
        return {"inputs": inputs, "matrix": {"leg": leg} if leg is not None else {},
                "vars": {}, "secrets": {}, "github": {"token": self.fake.token},
                "steps": {}, "runner": {"temp": str(temp)}}

    # ------------------------------------------------------------------ jobs

    def legs(self, inputs: dict[str, str]) -> list[dict[str, Any]]:
        legs: list[dict[str, Any]] = json.loads(inputs["tracks"])
        return legs

    def play_leg(self, ci_run: int, inputs: dict[str, str], leg: dict[str, Any]) -> Played:
        """Run one matrix leg (the workflow's job with a matrix)."""
        [job] = [j for j in self.doc["jobs"].values() if "strategy" in j]
        ctx = self._context(inputs, leg, self.work / f"temp-{leg['key']}")
        assert evaluate(job["name"], ctx) == leg["key"]  # the name the tick matches on
        self.fake.set_job(ci_run, leg["key"], "in_progress")
        checkout = self._checkout("leg" if self.shared_checkout else leg["key"])
        played = self._play(job, ctx, ci_run, checkout, leg["key"])
        self._complete(ci_run, leg["key"], played)
        return played

    def play_fan_in(self, ci_run: int, inputs: dict[str, str]) -> Played:
        """Run the ``fan-in`` job, which the fake created once every leg ended."""
        job = self.doc["jobs"]["fan-in"]
        assert job.get("if") == "always() && inputs.fan_in != 'next_tick'"
        assert job.get("needs") == "track"
        assert inputs.get("fan_in", "job") != "next_tick", "GitHub skips this job"
        ctx = self._context(inputs, None, self.work / f"temp-fan-in-{ci_run}")
        self.fake.set_job(ci_run, "fan-in", "in_progress")
        played = self._play(job, ctx, ci_run, self._checkout("fan-in"), "fan-in")
        self._complete(ci_run, "fan-in", played)
        return played

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
            # `always()` steps run after a failure or a cancel, the others do not
            if failed and not condition.startswith("always()"):
                continue
            step_name = step.get("id") or step.get("name") or step.get("uses", "")
            uses = str(step.get("uses", ""))
            if uses:
                outcome = self._action(uses, {k: evaluate(v, ctx) for k, v in
                                              (step.get("with") or {}).items()}, ci_run)
            elif step.get("name") == "Install the orchestrator":
                continue  # installed already (editable)
            else:
                env = {**os.environ, **self.fake.env(), **job_env, "PATH": path, **self.env,
                       **{k: evaluate(v, ctx) for k, v in (step.get("env") or {}).items()}}
                proc = self._run(["bash", "--noprofile", "--norc", "-eo", "pipefail",
                                  "-c", step["run"]], checkout, env, ci_run, name)
                played.output.append(proc)
                outcome = "success" if proc.returncode == 0 else "failure"
                if self._cancelled(ci_run, name):
                    outcome = "cancelled"
            played.outcomes[step_name] = outcome
            ctx["steps"][step_name] = {"outcome": outcome}
            if outcome == "failure" and str(step.get("continue-on-error")).lower() != "true":
                failed = True
        return played

    def _cancelled(self, ci_run: int | None, name: str) -> bool:
        if ci_run is None:
            return False  # a job the fake does not track (a played dispatch)
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

    def _action(self, uses: str, given: dict[str, str], ci_run: int | None) -> str:
        action = uses.split("@", 1)[0]
        if ci_run is None:
            return "success"  # a played dispatch's job uses no artifact
        if action == "actions/upload-artifact":
            source = Path(given["path"])
            if not source.is_file():
                # if-no-files-found: ignore uploads nothing and succeeds
                return "success" if given.get("if-no-files-found") == "ignore" else "failure"
            self.fake.upload(ci_run, given["name"], {source.name: source.read_bytes()})
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
