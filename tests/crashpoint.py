"""The orchestrator command with a crash point: ``python tests/crashpoint.py POINT ARGS...``.

Runs ``orchestrator ARGS...`` in this process after installing a tick checkpoint hook
that kills the process with SIGKILL when a tick reaches ``POINT`` (``mark-planned``,
``after-mark``, ``after-dispatch`` or ``after-notify``): no cleanup, no ``finally``, like a
runner that vanished. The product itself has no way to crash on purpose.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> int:
    point, *args = sys.argv[1:]
    from orchestrator.cli import main as cli_main
    from orchestrator.tick import shell as tick

    def crash(reached: str) -> None:
        if reached == point:
            os.kill(os.getpid(), signal.SIGKILL)

    tick.CHECKPOINTS.append(crash)
    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
