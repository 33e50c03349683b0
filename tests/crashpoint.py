"""The orchestrator command with a crash point: ``python tests/crashpoint.py POINT ARGS...``.

Runs ``orchestrator ARGS...`` in this process after installing a checkpoint hook
(:mod:`orchestrator.support.checkpoints`) that kills the process with SIGKILL, with
every process of its group, when it reaches ``POINT``: no cleanup, no ``finally``, like
a runner that vanished. At a tick's points (``before-mark``, ``mark-planned``,
``after-mark``, ``after-dispatch``, ``after-notify``, ``after-record``) the kill is at
once; at the store's ``fetch`` and ``push`` it comes a moment later (``CRASH_DELAY``
seconds, default 0.01), while the git process runs. ``process-K`` is a moment of the
command's life counted in the processes it starts rather than in seconds: the kill comes
``CRASH_DELAY`` seconds after the K-th one (a git command, mostly) starts, while it runs
or just after, wherever the command then is. A command that ends before a delayed kill
came is killed at its end: once the point is reached, the process never exits alive.
The process first becomes the leader of its own process group, so the kill reaches its
git children and never the test that started it. The product itself has no way to crash
on purpose.

The delayed kill waits with :func:`time.sleep` in a daemon thread, never with a timed
lock (``threading.Timer``): under libfaketime's defaults a timed lock never times out,
and the thread that waits for it would keep the process from exiting.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

GIT_POINTS = frozenset({"fetch", "push"})
PROCESS = "process-"


def _kill() -> None:
    os.killpg(os.getpid(), signal.SIGKILL)


def main() -> int:
    point, *args = sys.argv[1:]
    from orchestrator.cli import main as cli_main
    from orchestrator.support import checkpoints

    if os.getpgrp() != os.getpid():
        os.setpgid(0, 0)
    delay = float(os.environ.get("CRASH_DELAY", "0.01"))
    pending = threading.Event()

    def later() -> None:
        pending.set()
        threading.Thread(target=lambda: (time.sleep(delay), _kill()), daemon=True).start()

    def crash(reached: str) -> None:
        if reached != point:
            return
        if reached in GIT_POINTS:  # while git runs: it starts right after this returns
            later()
        else:
            _kill()

    if point.startswith(PROCESS):
        nth = int(point.removeprefix(PROCESS))
        started = 0

        def count(event: str, _args: tuple[Any, ...]) -> None:
            # raised by Popen before it forks: the process starts right after
            nonlocal started
            if event == "subprocess.Popen":
                started += 1
                if started == nth:
                    later()

        sys.addaudithook(count)
    else:
        checkpoints.HOOKS.append(crash)
    try:
        return cli_main(args)
    finally:
        if pending.is_set():
            _kill()


if __name__ == "__main__":
    sys.exit(main())
