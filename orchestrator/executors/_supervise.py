"""The detached supervisor of one local track attempt.

:class:`~orchestrator.executors.local.LocalExecutor` starts it as
``python -I .../_supervise.py <attempt folder>``, detached with setsid. It forks once and
the parent exits at once, so the dispatcher can reap it and the tick can exit while
the attempt goes on; the child does the work:

1. **Claim.** Take an exclusive ``flock`` on ``supervisor.lock`` (held until it exits)
   and, only if ``status.json`` does not exist yet, write it (``queued``). Whoever
   writes the first ``status.json`` under that lock owns the attempt, so extra
   supervisors started for the same folder (a repair after a crashed dispatcher, a
   race) exit without launching anything. The kernel drops the lock when the process
   dies, which is how observers tell a live supervisor from a vanished one.
2. **Wait for a slot** when the executor has a task cap: a slot is an ``flock`` on one
   of ``<work dir>/slots/<i>.lock``.
3. **Launch** ``sh -c <run>`` in its own process group (never the supervisor's, so a
   group kill cannot hit the supervisor), append one line to ``<work dir>/launches.log``
   and record ``running``.
4. **Watch** for exit, the timeout, a ``cancel`` marker or SIGTERM; on the last three
   it kills the group: SIGTERM, then SIGKILL after a grace period.
5. **Record** the outcome in ``status.json`` (``exited``, ``timed_out``, ``cancelled``
   or ``error``) and kill whatever the track left behind in its group, as CI runners
   do with orphan processes at the end of a job.

Standard library only, and of the package only :mod:`._attempt_folder` (itself standard
library only), loaded by path: it starts once per attempt.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

# Run by path under ``python -I``, which puts no folder of ours on ``sys.path``: the
# attempt folder's module is found beside this file, after the standard library.
if TYPE_CHECKING or __package__:
    from . import _attempt_folder as files
else:
    sys.path.append(str(Path(__file__).resolve().parent))
    import _attempt_folder as files


class Launch(NamedTuple):
    """What ``launch.json`` asks the supervisor to run, and how."""

    run: str
    timeout: float
    """Seconds."""
    grace: float
    """Seconds between SIGTERM and SIGKILL."""
    cap: Any
    """``max_concurrent`` as written: no cap when empty."""
    env: dict[str, str]
    cwd: str
    drain: dict[str, Any] | None = None
    """A drain worker's ``items`` (id and attempt each) and ``wall_seconds``."""


class Drainer:
    """A drain worker's loop: ``run`` once per item, in order, until the items are done,
    the wall clock passes or ``stopping()`` says why to stop.

    Each item gets ``ORCHESTRATOR_ITEM_ID``, ``ORCHESTRATOR_ITEM`` (its payload file),
    ``ORCHESTRATOR_ITEM_ATTEMPT`` and its own ``ORCHESTRATOR_RESULT``; exit 0 is
    ``done``, 75 ``back`` (not now), anything else ``failed``. An item stopped by the
    wall clock or a stop is ``released``, and no item starts after either. Every start
    and end is a line of ``items.jsonl`` written before the next step, so a worker that
    dies leaves an account up to the item it was in (``started`` without an end).
    Used by the local supervisor and by ``orchestrator queue work`` on a CI runner.
    """

    def __init__(self, folder: Path, run: str, env: dict[str, str], cwd: str,
                 items: list[dict[str, Any]], wall_seconds: float, grace: float,
                 stopping: Any, launched: Any = None) -> None:
        self.folder = folder
        self.run = run
        self.env = env
        self.cwd = cwd
        self.items = items
        self.wall = wall_seconds
        self.grace = grace
        self.stopping = stopping
        """() -> a reason to stop, or None."""
        self.launched = launched
        """(process, item id) -> None: told of every launch (the supervisor's status)."""

    def work(self) -> None:
        deadline = time.monotonic() + self.wall
        for entry in self.items:
            if self.stopping() or time.monotonic() >= deadline:
                return  # the rest was never started: released
            self.one(str(entry["id"]), int(entry["attempt"]), deadline)

    def one(self, item_id: str, attempt: int, deadline: float) -> None:
        result = self.folder / files.ITEM_RESULTS / f"{item_id}.json"
        result.parent.mkdir(exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            result.unlink()
        env = dict(self.env, ORCHESTRATOR_ITEM_ID=item_id,
                   ORCHESTRATOR_ITEM=str(self.folder / files.ITEMS / f"{item_id}.json"),
                   ORCHESTRATOR_ITEM_ATTEMPT=str(attempt), ORCHESTRATOR_RESULT=str(result))
        stderr = self.folder / files.STDERR
        line: dict[str, Any] = {"id": item_id, "attempt": attempt, "outcome": "started",
                                "started_at": files.utc_now(), "stderr_from": _size(stderr)}
        files.append_line(self.folder / files.ITEMS_LOG, line)
        with open(self.folder / files.STDOUT, "ab") as out, open(stderr, "ab") as err:
            try:
                proc = subprocess.Popen(["sh", "-c", self.run], cwd=self.cwd, env=env,
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                        process_group=0)
            except OSError as exc:
                line.update(outcome="failed", finished_at=files.utc_now(),
                            error=f"could not start the command: {exc}")
                files.append_line(self.folder / files.ITEMS_LOG, line)
                return
        if self.launched is not None:
            self.launched(proc, item_id)
        stopped = self.watch(proc, deadline)
        files.kill_group(proc.pid, signal.SIGKILL)  # whatever it left behind goes with it
        rc = proc.returncode
        line.update(outcome=_item_outcome(stopped, rc), finished_at=files.utc_now(),
                    stderr_to=_size(stderr), exit_code=rc if rc >= 0 else None,
                    signal=-rc if rc < 0 else None)
        if stopped:
            line["error"] = stopped
        files.append_line(self.folder / files.ITEMS_LOG, line)

    def watch(self, proc: subprocess.Popen[bytes], deadline: float) -> str | None:
        """Wait for the item's command; why it was stopped, or ``None`` if it ended."""
        while True:
            try:
                proc.wait(timeout=files.POLL_SECONDS)
                return None
            except subprocess.TimeoutExpired:
                pass
            why = self.stopping() or (
                "the worker's wall clock passed" if time.monotonic() >= deadline else None)
            if why is None:
                continue
            files.kill_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.grace)
            files.kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
            return why


def _item_outcome(stopped: str | None, rc: int) -> str:
    """An item's outcome from why it was stopped (if it was) and its exit code."""
    if stopped:
        return "released"
    if rc == 0:
        return "done"
    return "back" if rc == files.EX_TEMPFAIL else "failed"


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


class Supervisor:
    def __init__(self, attempt_dir: Path) -> None:
        self.dir = attempt_dir
        self.work_dir = attempt_dir.parent
        self.status: dict[str, Any] = {}
        self.stop_reason: str | None = None

    # -- status

    def record(self, **changes: Any) -> None:
        self.status.update(changes)
        files.write_json_atomic(self.dir / files.STATUS, self.status)

    def finish(self, state: str, **changes: Any) -> int:
        self.record(state=state, finished_at=files.utc_now(), **changes)
        return 0

    def cancel_requested(self) -> bool:
        if self.stop_reason is None and (self.dir / files.CANCEL).exists():
            self.stop_reason = "cancelled"
        return self.stop_reason is not None

    def _on_sigterm(self, signum: int, frame: object) -> None:
        self.stop_reason = "supervisor terminated"

    # -- the attempt

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_sigterm)
        if not self.claim():
            return 0
        try:
            launch = self.read_launch()
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            return self.finish(files.ERROR, error=f"launch.json unreadable: {exc}")
        self.record()  # the claim

        slot = None
        if launch.cap:
            slot = self.take_slot(int(launch.cap))
            if slot is None:
                return self.finish(files.CANCELLED, error=self.stop_reason)
        if self.cancel_requested():
            return self.finish(files.CANCELLED, error=self.stop_reason)
        if launch.drain is not None:
            code = self.drain(launch)
            if slot is not None:
                os.close(slot)
            return code
        return self.track(launch, slot)

    def track(self, launch: Launch, slot: int | None) -> int:
        """The track's command, watched to its end; the concurrency ``slot`` (if any)
        is given back before the attempt is recorded finished."""
        with open(self.dir / files.STDOUT, "ab") as out, open(self.dir / files.STDERR, "ab") as err:
            try:
                proc = subprocess.Popen(
                    ["sh", "-c", launch.run], cwd=launch.cwd, env=launch.env,
                    stdin=subprocess.DEVNULL, stdout=out, stderr=err, process_group=0,
                )
            except OSError as exc:
                return self.finish(files.ERROR, error=f"could not start the track: {exc}")
        self.record(state=files.RUNNING, pid=proc.pid, pgid=proc.pid, started_at=files.utc_now())
        files.append_line(self.work_dir / files.LAUNCHES, {
            "at": self.status["started_at"], "key": self.dir.name, "pid": proc.pid,
            "supervisor_pid": os.getpid(),
        })

        outcome = self.watch(proc, launch.timeout, launch.grace)
        # Whatever the track left running in its group goes with it.
        files.kill_group(proc.pid, signal.SIGKILL)
        changes = self.ending(proc.returncode, outcome, launch.timeout)
        if slot is not None:
            os.close(slot)
        return self.finish(outcome, **changes)

    def drain(self, launch: Launch) -> int:
        """A drain worker: its items one by one (:class:`Drainer`); the attempt ends
        ``exited`` 0 whatever the items did (they each have their own outcome), or
        ``cancelled`` when a cancel or SIGTERM stopped it."""
        assert launch.drain is not None
        self.record(state=files.RUNNING, started_at=files.utc_now())

        def launched(proc: subprocess.Popen[bytes], item_id: str) -> None:
            self.record(pid=proc.pid, pgid=proc.pid)
            files.append_line(self.work_dir / files.LAUNCHES, {
                "at": files.utc_now(), "key": self.dir.name, "item": item_id, "pid": proc.pid,
                "supervisor_pid": os.getpid()})

        def stopping() -> str | None:
            return self.stop_reason if self.cancel_requested() else None

        Drainer(self.dir, launch.run, launch.env, launch.cwd, launch.drain["items"],
                float(launch.drain["wall_seconds"]), launch.grace, stopping,
                launched).work()
        if self.stop_reason is not None:
            return self.finish(files.CANCELLED, error=self.stop_reason)
        return self.finish(files.EXITED, exit_code=0, signal=None)

    def claim(self) -> bool:
        """Take the supervisor lock and the attempt, unless another supervisor (alive,
        or dead after claiming it) or a cancel got there first."""
        if (self.dir / files.STATUS).exists():
            # Claimed before: exit without even taking the lock, which an observer
            # would take for the owner's (a supervisor that vanished looks alive).
            return False
        # The descriptor is never closed: the lock is held until the process exits.
        lock = files.try_lock(self.dir / files.LOCK)
        if lock is None:
            return False  # another supervisor is alive and owns this attempt
        if (self.dir / files.STATUS).exists():
            return False  # claimed before: by a supervisor (maybe dead) or a cancel
        self.status = {
            "state": files.QUEUED, "supervisor_pid": os.getpid(), "queued_at": files.utc_now(),
            "pid": None, "pgid": None, "started_at": None, "finished_at": None,
            "exit_code": None, "signal": None,
        }
        return True

    def read_launch(self) -> Launch:
        """What ``launch.json`` asks for, with the environment the track gets."""
        launch = files.read_json(self.dir / files.LAUNCH)
        run = launch["run"]
        timeout = float(launch["timeout_minutes"]) * 60
        grace = float(launch.get("kill_grace_seconds", 5.0))
        cap = launch.get("max_concurrent")
        env = self.track_env(launch)
        cwd = launch.get("cwd") or str(self.dir)
        drain = launch.get("drain")
        if drain is not None and not (isinstance(drain, dict)
                                      and isinstance(drain.get("items"), list)):
            raise ValueError("launch.json: drain: items expected")
        return Launch(run=run, timeout=timeout, grace=grace, cap=cap, env=env, cwd=cwd,
                      drain=drain)

    def track_env(self, launch: dict[str, Any]) -> dict[str, str]:
        """The environment the track gets: this process's, with the attempt's
        variables and the track's own ``env`` over it."""
        env = dict(os.environ)
        env.update({
            "ORCHESTRATOR_RUN_ID": str(launch["run_id"]),
            "ORCHESTRATOR_TRACK": str(launch["track"]),
            "ORCHESTRATOR_ATTEMPT": str(launch["attempt"]),
            "ORCHESTRATOR_POLL": str(launch.get("poll") or 0),
            "ORCHESTRATOR_RESULT": str(self.dir / files.RESULT),
            "ORCHESTRATOR_INPUTS": json.dumps(launch.get("inputs") or {}, sort_keys=True),
            "ORCHESTRATOR_ENQUEUE": str(self.dir / files.ENQUEUE),
        })
        if launch.get("results"):
            env["ORCHESTRATOR_RESULTS"] = str(self.dir / files.RESULTS)
        env.update({str(k): str(v) for k, v in (launch.get("env") or {}).items()})
        return env

    def watch(self, proc: subprocess.Popen[bytes], timeout: float, grace: float) -> str:
        """Wait for the track to exit, or stop it on a cancel, SIGTERM or the timeout;
        the outcome (``exited``, ``cancelled`` or ``timed_out``)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                proc.wait(timeout=files.POLL_SECONDS)
                return files.EXITED
            except subprocess.TimeoutExpired:
                pass
            if self.cancel_requested():
                outcome = files.CANCELLED
            elif time.monotonic() >= deadline:
                outcome = files.TIMED_OUT
            else:
                continue
            self.stop(proc, grace)
            return outcome

    def ending(self, rc: int, outcome: str, timeout: float) -> dict[str, Any]:
        """The status fields an ended track adds: its exit code or signal, and why it
        was stopped."""
        changes: dict[str, Any] = {
            "exit_code": rc if rc >= 0 else None,
            "signal": -rc if rc < 0 else None,
        }
        if outcome == files.CANCELLED:
            changes["error"] = self.stop_reason
        elif outcome == files.TIMED_OUT:
            changes["error"] = f"timed out after {timeout / 60:g} minutes"
        return changes

    def stop(self, proc: subprocess.Popen[bytes], grace: float) -> None:
        files.kill_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
        files.kill_group(proc.pid, signal.SIGKILL)
        proc.wait()

    def take_slot(self, cap: int) -> int | None:
        """Block until one of ``cap`` slot locks is free (``None``: cancelled first).
        Not FIFO: whichever waiting supervisor looks first after a slot frees wins."""
        slots = self.work_dir / files.SLOTS
        slots.mkdir(exist_ok=True)
        while not self.cancel_requested():
            for i in range(cap):
                fd = files.try_lock(slots / f"{i}.lock")
                if fd is not None:
                    return fd
            time.sleep(files.POLL_SECONDS)
        return None


def main(argv: list[str]) -> int:
    if len(argv) != 1 and not (len(argv) == 2 and argv[1] == "--foreground"):
        print("usage: _supervise.py ATTEMPT_DIR [--foreground]", file=sys.stderr)
        return 2
    attempt_dir = Path(argv[0]).resolve()
    with contextlib.suppress(OSError, ValueError):  # the claim reports a bad launch.json
        launch = files.read_json(attempt_dir / files.LAUNCH)
        if isinstance(launch, dict):
            files.set_clock_offset(launch.get("clock_offset_seconds", 0))
    if "--foreground" not in argv and os.fork() > 0:
        # The dispatcher waits for this parent only; the child is adopted by init
        # (or a subreaper) and outlives the tick.
        os._exit(0)
    return Supervisor(attempt_dir).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
