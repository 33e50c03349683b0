"""The CLI run in this process, as a subprocess would see it.

Starting ``orchestrator`` as a process costs an interpreter and the package's imports
(a third of a second on a shared core), and most tests that drive the CLI test what it
does, not where it runs. :func:`run` calls the console script's own entry point
(:func:`orchestrator.cli.main`) with what a subprocess would get, and gives back what a
subprocess would give: a :class:`subprocess.CompletedProcess` with the exit code and
the text of stdout and stderr. Everything below the entry point is real: git, the
bare origin, the tracks' processes, the fake GitHub server on loopback.

What a subprocess would have, and the call gets for its duration:

- the environment, whole: ``os.environ`` is replaced, then put back;
- the working folder: ``os.chdir``, then back;
- stdin, stdout and stderr of its own (text over bytes, so ``.buffer`` writes work);
- the signal handlers of SIGINT and SIGTERM, put back after (``tick --linger`` sets
  them);
- warnings as a new interpreter shows them (the suite's ``filterwarnings = error`` is
  for the test's own code), and log records of warning and above on its stderr, as
  Python's last-resort handler prints them in a process with no logging set up.

Tests where the process boundary is the subject (a kill, a race of processes, the
console script itself, a real terminal) start a process instead.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import logging
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path


class _LastResort(logging.Handler):
    """Python's last-resort handler: the message alone, on the current stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(self.format(record) + "\n")


def _new_interpreter_filters() -> None:
    """The warning filters of ``python`` started with no ``-W`` option."""
    warnings.resetwarnings()
    warnings.simplefilter("default")
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                     ResourceWarning):
        warnings.simplefilter("ignore", category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")


def _become(env: Mapping[str, str]) -> None:
    """Make ``os.environ`` equal to ``env``, touching only the variables that differ.

    Each change is a ``setenv`` or ``unsetenv`` of the C library, which is not safe
    while another thread reads the environment (a test's server thread, libfaketime's
    own ``getenv`` on every clock read): the fewer, the narrower that window."""
    for name in [n for n in os.environ if n not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


@contextlib.contextmanager
def _as_a_process(env: Mapping[str, str], cwd: Path | None, input: str | None
                  ) -> Iterator[tuple[io.BytesIO, io.BytesIO]]:
    out, err = io.BytesIO(), io.BytesIO()
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    handler = _LastResort()
    root = logging.getLogger()
    text_out = text_err = None
    _become(env)
    try:
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin = io.TextIOWrapper(io.BytesIO((input or "").encode()), encoding="utf-8")
        sys.stdout = text_out = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
        sys.stderr = text_err = io.TextIOWrapper(err, encoding="utf-8", write_through=True,
                                                 errors="backslashreplace")
        root.addHandler(handler)
        with warnings.catch_warnings():
            _new_interpreter_filters()
            yield out, err
    finally:
        root.removeHandler(handler)
        for stream in (text_out, text_err):
            if stream is None:
                continue
            with contextlib.suppress(ValueError):
                stream.flush()
                stream.detach()  # the bytes outlive their wrapper
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        for number, was in saved_signals.items():
            signal.signal(number, was)
        os.chdir(saved_cwd)
        _become(saved_env)


def run(args: Sequence[str], *, env: Mapping[str, str] | None = None,
        cwd: Path | None = None, input: str | None = None, timeout: float = 120
        ) -> subprocess.CompletedProcess[str]:
    """``orchestrator ARGS`` in this process with ``env`` (default: this process's
    environment) in ``cwd``, ``input`` on stdin; what a subprocess run would return.

    ``timeout`` is a hang guard, as a subprocess's would be: a call still running then
    prints every thread's stack and ends this process (the test run reports the
    worker's crash), so a command that blocks (a FIFO read) fails instead of hanging."""
    from orchestrator.cli import main

    argv = [str(a) for a in args]
    with _as_a_process(dict(os.environ if env is None else env), cwd, input) as (out, err):
        faulthandler.dump_traceback_later(timeout, exit=True, file=sys.__stderr__)
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            faulthandler.cancel_dump_traceback_later()
    return subprocess.CompletedProcess(
        ["orchestrator", *argv], code, out.getvalue().decode("utf-8", "replace"),
        err.getvalue().decode("utf-8", "replace"))
