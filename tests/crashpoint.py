"""The orchestrator command with a crash point: ``python tests/crashpoint.py POINT ARGS...``.

Runs ``orchestrator ARGS...`` in this process after installing a checkpoint hook
(:mod:`orchestrator.support.checkpoints`) that kills the process with SIGKILL, with
every process of its group, when it reaches ``POINT``: no cleanup, no ``finally``, like
a runner that vanished. At a tick's points (``before-mark``, ``mark-planned``,
``after-mark``, ``after-dispatch``, ``after-notify``, ``after-record``) the kill is at
once; at the store's ``fetch`` and ``push`` it comes a moment later (``CRASH_DELAY``
seconds, default 0.01), while the git process runs. The process first becomes the
leader of its own process group, so the kill reaches its git children and never the
test that started it. The product itself has no way to crash on purpose.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

GIT_POINTS = frozenset({"fetch", "push"})


def _kill() -> None:
    os.killpg(os.getpid(), signal.SIGKILL)


def main() -> int:
    point, *args = sys.argv[1:]
    from orchestrator.cli import main as cli_main
    from orchestrator.support import checkpoints

    if os.getpgrp() != os.getpid():
        os.setpgid(0, 0)
    delay = float(os.environ.get("CRASH_DELAY", "0.01"))

    def crash(reached: str) -> None:
        if reached != point:
            return
        if reached in GIT_POINTS:  # while git runs: it starts right after this returns
            threading.Timer(delay, _kill).start()
        else:
            _kill()

    checkpoints.HOOKS.append(crash)
    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
