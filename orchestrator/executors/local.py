"""The local executor: each track attempt is a detached process group on this machine.

The work folder's layout, its machine id and the dispatch keys are
:mod:`.workfolder`'s.

Concurrency and crash safety, per dispatch key:

* ``launch.json`` is created exclusively (a fully written temp file hard-linked into
  place: ``O_EXCL`` semantics, and never seen half-written). Of any number of
  dispatchers racing on one key, in one process or many, exactly one creates it and
  starts a supervisor; the others get the same handle and start nothing.
* The supervisor (:mod:`._supervise`) launches the command only after claiming the
  attempt (first ``status.json``, written under ``supervisor.lock``), so a second
  supervisor for the same folder exits without launching. That makes repair safe: if
  ``launch.json`` exists but nothing claimed it for ``adopt_after_seconds`` (the
  dispatcher died between the two steps), ``dispatch``, ``lookup`` and ``observe``
  start a supervisor again.
* A supervisor that dies leaves a non-final ``status.json`` and a free lock; the next
  ``observe`` takes the lock, kills the orphaned group, waits until it is gone (a
  killed process may take a while to die) and records ``lost``, which is reported as
  ``failed``. A supervisor started for an attempt already claimed exits without
  taking the lock, so it never passes for the owner.

Machines: a work folder is one machine (:func:`.workfolder.machine_id`). A tick marks
each dispatch with that id, and only ticks of the same folder look it up or observe it
(:meth:`LocalExecutor.owns`); the others cannot see this folder.

``launches.log`` is an operational log: one line per command actually started, with
the key, the pid and the time. It answers "did this run, and how often?" and is what
the exactly-once tests count.

What the track sees: the executor's environment (``env``, else this process's) plus
``ORCHESTRATOR_RUN_ID``, ``ORCHESTRATOR_TRACK``, ``ORCHESTRATOR_ATTEMPT``,
``ORCHESTRATOR_INPUTS`` (the track's ``inputs`` as a JSON object),
``ORCHESTRATOR_POLL`` (earlier "not yet" answers of this attempt) and
``ORCHESTRATOR_RESULT``, a path where it may write a JSON object with a ``summary``;
a track with ``needs`` (the ``consolidate`` step) also gets ``ORCHESTRATOR_RESULTS``,
the path of ``results.json`` in its attempt folder: every other track's phase, attempt,
result and error tail. The request's own variables come last (``launch.json`` keeps
them): the run's ``ORCHESTRATOR_SCHEDULE``, ``ORCHESTRATOR_SLOT``,
``ORCHESTRATOR_SLOT_LOCAL`` and ``ORCHESTRATOR_PREVIOUS_SLOT``, and a compensation's
``ORCHESTRATOR_COMPENSATING`` and ``ORCHESTRATOR_ORIGINAL_RESULT``.
It runs as ``sh -c <run>`` in the repository checkout (else in its attempt folder).
The executor's environment is never written to disk.

Outcomes: exit 75 (``EX_TEMPFAIL``) is ``waiting``, a poll's "not yet"; exit 0 is
``complete`` (a ``result.json`` that is not a JSON object in a regular file of at most
:data:`MAX_RESULT_BYTES` becomes ``{"error": why}``: the track's work is done, only
its report is broken); a non-zero exit or a signal is ``failed``
with the tail of stderr; the timeout (``timeout_minutes``, counted from the launch, not
from the dispatch) is ``tapped_out``; a cancel is ``cancelled``. While an attempt waits
for a task-cap slot it is reported with no phase (still ``dispatched``).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..config.fieldtypes import check_id, check_run_id
from ..errors import ExecutorError, InvalidId, OrchestratorError, UserError
from ..state.breaker import Breaker
from ..state.layout import check_item_id
from ..state.phases import TrackPhase
from ..support.credentials import track_environment
from . import _attempt_folder as files
from . import _supervise as supervisor
from .base import DispatchRequest, DispatchResult, Handle, Observation
from .local_outcome import EX_TEMPFAIL as EX_TEMPFAIL
from .local_outcome import MAX_RESULT_BYTES as MAX_RESULT_BYTES
from .local_outcome import stderr_tail, to_observation
from .workfolder import age as launch_age
from .workfolder import check_key, create_exclusive, machine_id

log = logging.getLogger(__name__)

SUPERVISOR = Path(supervisor.__file__)

class LocalExecutor:
    """Runs tracks as detached local processes; see the module docstring.

    ``max_concurrent`` caps how many attempts run at once across every executor
    sharing ``work_dir``; dispatch never blocks on it, extra attempts wait in their
    supervisor. ``kill_grace_seconds`` is the time between SIGTERM and SIGKILL when a
    track is timed out or cancelled.

    ``clock_offset`` is the tick's clock minus the machine's: zero for a tick on the
    real clock, ``T - start`` for ``tick --now T``. Every time an attempt records
    (dispatched, queued, started, finished) is the machine's clock plus it, so a track
    of a simulated tick starts at ``T`` plus the real time since the tick began, and the
    next simulated tick measures its timeout on the same clock as it started on.
    """

    name = "local"
    adopt_after_seconds = 2.0
    """Age of an unclaimed ``launch.json`` after which a supervisor is started again."""

    def __init__(
        self,
        work_dir: Path,
        *,
        repo: Path | None = None,
        env: Mapping[str, str] | None = None,
        max_concurrent: int | None = None,
        kill_grace_seconds: float = 5.0,
        clock_offset: timedelta = timedelta(0),
    ) -> None:
        if max_concurrent is not None and max_concurrent < 1:
            raise UserError(f"max_concurrent must be at least 1, not {max_concurrent}")
        if kill_grace_seconds < 0:
            raise UserError("kill_grace_seconds must not be negative")
        # Absolute: supervisors run with another working directory.
        self.work_dir = Path(work_dir).resolve()
        self.repo = Path(repo).resolve() if repo is not None else None
        self.env = dict(env) if env is not None else None
        self.max_concurrent = max_concurrent
        self.kill_grace_seconds = kill_grace_seconds
        self.clock_offset = clock_offset

    def _now(self) -> str:
        """Now on the tick's clock (see ``clock_offset`` in the class docstring)."""
        return (datetime.now(UTC) + self.clock_offset).isoformat()

    # ------------------------------------------------------------------ paths

    def attempt_dir(self, key: str) -> Path:
        return self.work_dir / check_key(key)

    @functools.cached_property
    def machine(self) -> str:
        """This work folder's machine id (:func:`machine_id`): what the tick marks
        dispatched is claimed by it, and only it launches or looks that up."""
        return machine_id(self.work_dir)

    def _handle(self, key: str) -> dict[str, Any]:
        return {"executor": self.name, "key": key, "host": socket.gethostname(),
                "work_dir": str(self.work_dir), "machine": self.machine}

    def owns(self, handle: Handle) -> bool:
        """Whether ``handle`` is an attempt of this machine's work folder.

        Several local ticks may share a state branch (``serve`` on two machines, or in
        two work folders); each observes and cancels only its own attempts, and leaves
        the others to their owner (or to the run's deadline). A handle names its
        machine; one from before machine ids names its host and work folder."""
        claimed = handle.handle.get("machine")
        if claimed is not None:
            return claimed == self.machine
        host = handle.handle.get("host")
        work = handle.handle.get("work_dir")
        return (host is None or host == socket.gethostname()) and (
            work is None or Path(str(work)) == self.work_dir)

    def _url(self, folder: Path) -> str:
        return folder.as_uri()

    # ------------------------------------------------------------------ dispatch

    def dispatch(self, requests: list[DispatchRequest]) -> list[DispatchResult]:
        results: list[DispatchResult] = []
        launchers: list[tuple[int, Path, subprocess.Popen[bytes]]] = []
        for request in requests:
            try:
                result, launcher = self._dispatch_one(request)
            except (OrchestratorError, OSError) as exc:
                result, launcher = DispatchResult(key=request.key,
                                                  error=f"local dispatch: {exc}"), None
            if launcher is not None:
                launchers.append((len(results), self.attempt_dir(result.key), launcher))
            results.append(result)
        # Each launcher forks the real supervisor and exits at once; reap them so no
        # zombie is left in a long-lived caller (`orchestrator serve`).
        for index, folder, proc in launchers:
            if proc.wait() != 0:
                results[index] = self._launch_failed(results[index].key, folder,
                                                     f"exit code {proc.returncode}")
        return results

    def _launch_failed(self, key: str, folder: Path, reason: str) -> DispatchResult:
        """The supervisor could not start, so nothing was started. Close the attempt
        (so no later look-up or racing dispatch adopts it) and report the error."""
        error = f"local dispatch: the supervisor failed to start ({reason})"
        tail = stderr_tail(folder / files.SUPERVISOR_LOG, lines=5)
        if tail:
            error = f"{error}: {tail}"
        try:
            fd = files.try_lock(folder / files.LOCK)
            if fd is None:  # a supervisor started after all (an adoption): it owns it
                return DispatchResult(key=key, handle=self._handle(key), url=self._url(folder))
            try:
                if files.read_json(folder / files.STATUS) is None:
                    files.write_json_atomic(folder / files.STATUS, {
                        "state": files.ERROR, "finished_at": self._now(),
                        "error": error})
            finally:
                os.close(fd)
        except (OSError, ValueError) as exc:
            error = f"{error}; closing the attempt failed too: {exc}"
        return DispatchResult(key=key, error=error)

    def _dispatch_one(
        self, request: DispatchRequest
    ) -> tuple[DispatchResult, subprocess.Popen[bytes] | None]:
        """Create the attempt; the supervisor's launcher if this call started one."""
        check_run_id(request.run_id)
        check_id(request.track, "track name")
        key = check_key(request.key)
        if request.spec.run is None:
            raise UserError(f"track {request.track!r} has no 'run' command to run locally")
        folder = self.attempt_dir(key)
        folder.mkdir(parents=True, exist_ok=True)
        fresh = not (folder / files.LAUNCH).exists()
        if request.results is not None and fresh:
            # Before launch.json: the supervisor may start the command at once.
            files.write_json_atomic(folder / files.RESULTS, request.results)
        if request.items and fresh:
            _write_payloads(folder, request)
        launch = {
            "key": key,
            "run_id": request.run_id,
            "track": request.track,
            "attempt": request.attempt,
            "poll": request.poll,
            "run": request.spec.run,
            "inputs": dict(request.spec.inputs),
            "credentials": list(request.spec.credentials),  # names only, never values
            "env": dict(request.env),
            "timeout_minutes": request.spec.timeout_minutes,
            "kill_grace_seconds": self.kill_grace_seconds,
            "max_concurrent": self.max_concurrent,
            "cwd": str(self.repo) if self.repo is not None else None,
            "results": request.results is not None,
            "drain": _drain(request),
            "dispatched_at": self._now(),
            "clock_offset_seconds": self.clock_offset.total_seconds(),
            "dispatcher_pid": os.getpid(),
            # The machine's clock, not the tick's: adoption ages the file on it.
            "created_unix": time.time(),
        }
        launcher = None
        if create_exclusive(folder / files.LAUNCH, launch):
            try:
                launcher = self._start_supervisor(folder)
            except OSError as exc:
                return self._launch_failed(key, folder, str(exc)), None
        else:
            self._adopt(folder)  # dispatched before, by us or a racing tick
        return DispatchResult(key=key, handle=self._handle(key), url=self._url(folder)), launcher

    def _start_supervisor(self, folder: Path) -> subprocess.Popen[bytes]:
        env = dict(self.env) if self.env is not None else dict(os.environ)
        try:  # the track inherits this: only the credentials its schedule names
            launch = files.read_json(folder / files.LAUNCH) or {}
            asked = launch.get("credentials") or []
        except (OSError, ValueError):
            asked = []
        env = track_environment(env, [str(name) for name in asked])
        with open(folder / files.SUPERVISOR_LOG, "ab") as log:
            # -I: the supervisor needs only the standard library; ignore PYTHON* and
            # the user site. setsid: it outlives the tick and ignores its terminal.
            return subprocess.Popen(
                [sys.executable, "-I", str(SUPERVISOR), str(folder)],
                cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=log, start_new_session=True,
            )

    def _adopt(self, folder: Path) -> None:
        """Start a supervisor for a dispatch nobody claimed in time (its dispatcher died
        between creating ``launch.json`` and starting the supervisor). Harmless when a
        supervisor does exist: only the one that claims the attempt launches."""
        if (folder / files.STATUS).exists():
            return
        age = launch_age(folder / files.LAUNCH)
        if age is None:
            return
        if age < self.adopt_after_seconds:
            return
        try:
            self._start_supervisor(folder).wait()
        except OSError as exc:  # best effort: the next look or the timeout tries again
            log.warning("could not start a supervisor for %s: %s", folder.name, exc)

    # ------------------------------------------------------------------ lookup

    def lookup(self, requests: list[DispatchRequest]) -> dict[str, DispatchResult | None]:
        found: dict[str, DispatchResult | None] = {}
        for request in requests:
            try:
                folder = self.attempt_dir(request.key)
            except InvalidId:
                found[request.key] = None  # no such folder can exist
                continue
            try:
                exists = (folder / files.LAUNCH).exists()
            except OSError as exc:
                # "Not found" would make the tick dispatch again: the key is left out
                # (not asked), and the others are still answered.
                log.warning("local lookup of %s: %s", request.key, exc.strerror or exc)
                continue
            if not exists:
                found[request.key] = None
                continue
            self._adopt(folder)
            found[request.key] = DispatchResult(
                key=request.key, handle=self._handle(request.key), url=self._url(folder)
            )
        return found

    # ------------------------------------------------------------------ observe

    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        out: dict[str, Observation] = {}
        for handle in handles:
            if not self.owns(handle):
                continue
            try:
                out[handle.key] = self._observe_one(handle.key)
            except InvalidId as exc:
                out[handle.key] = Observation(key=handle.key, phase=TrackPhase.FAILED,
                                              error=exc.message)
            except OSError as exc:  # nothing new to say; the tick's timeout still applies
                out[handle.key] = Observation(key=handle.key, phase=None,
                                              error=f"local observe: {exc}")
        return out

    def _observe_one(self, key: str) -> Observation:
        folder = self.attempt_dir(key)
        url = self._url(folder)
        if not (folder / files.LAUNCH).exists():
            return Observation(key=key, phase=TrackPhase.FAILED, url=url,
                               error=f"no local attempt {key} in {self.work_dir}")
        try:
            status = files.read_json(folder / files.STATUS)
        except ValueError as exc:  # written atomically, so only if tampered with
            return Observation(key=key, phase=None, url=url,
                               error=f"status.json unreadable: {exc}")
        if status is None:
            self._adopt(folder)
            return Observation(key=key, phase=None, url=url, details={"state": "launching"})
        if status.get("state") not in files.FINAL_STATES:
            status = self._check_supervisor(folder, status)
        return to_observation(key, folder, self._url(folder), status)

    def _check_supervisor(self, folder: Path, status: dict[str, Any]) -> dict[str, Any]:
        """If the supervisor of an unfinished attempt is dead (its lock is free), kill
        the orphaned group and record the attempt as ``lost``."""
        fd = files.try_lock(folder / files.LOCK)
        if fd is None:
            return status  # alive
        try:
            fresh = files.read_json(folder / files.STATUS) or status
            if fresh.get("state") in files.FINAL_STATES:
                return dict(fresh)  # it finished just before dying
            # Reported failed only once its orphans are gone: a retry never overlaps them.
            files.kill_group_and_wait(fresh.get("pgid"))
            fresh.update(state=files.LOST, finished_at=self._now(),
                         error="supervisor vanished")
            files.write_json_atomic(folder / files.STATUS, fresh)
            return dict(fresh)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ cancel

    def cancel(self, handle: Handle) -> None:
        if not self.owns(handle):
            log.warning("not cancelling %s: it runs in another work folder (%s on %s)",
                        handle.key, handle.handle.get("work_dir"), handle.handle.get("host"))
            return
        try:
            self._cancel(self.attempt_dir(handle.key))
        except (OSError, ValueError) as exc:
            raise ExecutorError(f"local cancel of {handle.key}: {exc}") from exc

    def _cancel(self, folder: Path) -> None:
        try:
            status = files.read_json(folder / files.STATUS)
        except ValueError:
            status = None
        if status is not None and status.get("state") in files.FINAL_STATES:
            return
        folder.mkdir(parents=True, exist_ok=True)
        # The marker first: a live supervisor polls for it and stops the group itself
        # (SIGTERM, grace, SIGKILL); one that claims the attempt later never launches.
        (folder / files.CANCEL).touch()
        fd = files.try_lock(folder / files.LOCK)
        if fd is None:
            return  # a live supervisor will act on the marker
        try:
            fresh = files.read_json(folder / files.STATUS) or {}
            if fresh.get("state") in files.FINAL_STATES:
                return
            # No supervisor: none claimed the attempt yet, or it died. Claim or close it
            # here so that nothing launches or keeps running.
            files.kill_group_and_wait(fresh.get("pgid"))
            fresh.update(state=files.CANCELLED, finished_at=self._now(),
                         error="cancelled")
            files.write_json_atomic(folder / files.STATUS, fresh)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ health

    def health(self) -> Breaker | None:
        return None  # local processes: nothing to trip a breaker on


def _drain(request: DispatchRequest) -> dict[str, Any] | None:
    """What the supervisor needs of a drain worker: its items and its wall clock."""
    if not request.items:
        return None
    wall = request.wall_minutes or request.spec.timeout_minutes
    return {"items": [{"id": w.id, "attempt": w.attempt} for w in request.items],
            "wall_seconds": wall * 60, "queue": request.queue}


def _write_payloads(folder: Path, request: DispatchRequest) -> None:
    """Each item's payload as ``items/<id>.json``, what ``ORCHESTRATOR_ITEM`` names."""
    items = folder / files.ITEMS
    items.mkdir(exist_ok=True)
    for work in request.items:
        check_item_id(work.id)
        files.write_json_atomic(items / f"{work.id}.json", work.payload)
