"""One error root, one exit code per family.

Every error a user can provoke is an :class:`OrchestratorError`. The CLI maps it
to an exit code and prints a single line (``orchestrator: <message>``); anything
else is a bug and exits 4 with a traceback hint. Subclasses carry their default
message in the docstring, so ``raise RemoteUnreachable()`` still says something.
"""

from __future__ import annotations

# Exit codes, as documented in the README.
EXIT_OK = 0
EXIT_USER = 1
EXIT_USAGE = 2
EXIT_REMOTE = 3
EXIT_UNEXPECTED = 4
EXIT_STALE = 5
EXIT_DEAD_LETTERS = 6
EXIT_INVALID_SCHEDULES = 7


class OrchestratorError(Exception):
    """Orchestrator failed."""

    exit_code = EXIT_UNEXPECTED

    def __init__(self, message: str | None = None) -> None:
        doc = (type(self).__doc__ or "").strip().splitlines()
        super().__init__(message or (doc[0] if doc else type(self).__name__))

    @property
    def message(self) -> str:
        return str(self.args[0])


class UserError(OrchestratorError):
    """Invalid input."""

    exit_code = EXIT_USER


class ScheduleError(UserError):
    """A schedule file is invalid."""

    def __init__(self, file: str, field: str, problem: str) -> None:
        # one line, whatever a hostile file name or key holds
        file, field, problem = (_one_line(x) for x in (file, field, problem))
        self.file = file
        self.field = field
        self.problem = problem
        where = f"{file}: {field}: " if field else f"{file}: "
        super().__init__(f"{where}{problem}")


def _one_line(text: str) -> str:
    """``text`` on one line of UTF-8: line breaks escaped, and so is what a file name
    that is not UTF-8 decodes to (``\\udcff``), as ``repr`` shows it."""
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class NotFound(UserError):
    """No such object."""


class InvalidId(UserError):
    """Invalid identifier."""


class IllegalTransition(UserError):
    """That state transition is not allowed."""

    def __init__(self, message: str | None = None, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        """The run whose record the move was refused for (``None``: not a run's)."""


class RemoteError(OrchestratorError):
    """The remote could not be reached or refused the change."""

    exit_code = EXIT_REMOTE


class PushRejected(RemoteError):
    """The remote permanently rejected the push (hook, protected branch or permission)."""


class CASExhausted(RemoteError):
    """Gave up after too many lost compare-and-swap races or transient failures."""


class GitMissing(RemoteError):
    """git could not be run."""


class CheckoutReadOnly(RemoteError):
    """The local checkout could not be written."""


class Rewound(RemoteError):
    """The state branch is behind its high-water mark; nothing fires until it is accepted."""


class ExecutorError(OrchestratorError):
    """An executor backend failed."""

    exit_code = EXIT_REMOTE


class CircuitOpen(ExecutorError):
    """The executor backend's circuit breaker is open; no call was made."""


class Stale(OrchestratorError):
    """The last tick is older than the allowed staleness."""

    # Its own code, so a monitor can tell "the clock stopped" (5) from "the remote
    # could not be read" (3) and from a bad argument (1).
    exit_code = EXIT_STALE


class DeadLettersWaiting(OrchestratorError):
    """Dead letters wait for a decision (``status --fail-on-dead-letters``)."""

    # Its own code: a watchdog alerts on parked work as on a stopped clock (5), and
    # can tell the two apart. Nothing is ever requeued by itself.
    exit_code = EXIT_DEAD_LETTERS


class InvalidSchedules(OrchestratorError):
    """Schedule files are invalid: every tick ignores them, so they never fire."""

    # Its own code: a schedule broken by an edit stops firing without a sound, and a
    # watchdog must tell that from a stopped clock (5) and from waiting work (6).
    exit_code = EXIT_INVALID_SCHEDULES
