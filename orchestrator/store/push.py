"""How a push ended, read from git's own output: the compare-and-swap's verdict.

Pure text classification, no git run here: :class:`~.plumbing.GitTransport` feeds it
what ``git push --porcelain`` printed, and :class:`~.git.GitStateStore` acts on the
verdict (re-read, ask whether it landed, or give up at once). The messages are parsed
in English because every git command runs with ``LC_ALL=C``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class PushStatus(enum.Enum):
    """How one push ended, from the point of view of the compare-and-swap."""

    OK = "ok"
    """The remote accepted the update."""
    LOST_RACE = "lost_race"
    """The branch moved since we read it (lease failed): re-read and re-apply."""
    PERMANENT = "permanent"
    """Hook declined, protected branch, no permission: retrying cannot help."""
    TRANSIENT = "transient"
    """Network, 5xx, remote died: the update may or may not have landed."""


@dataclass(frozen=True)
class PushOutcome:
    status: PushStatus
    reason: str


_LOST_RACE = ("stale info", "fetch first", "non-fast-forward", "cannot lock ref",
              "reference already exists", "but expected", "incorrect old value")
_TRANSIENT = ("internal server error", "bad gateway", "service unavailable", "timeout",
              "timed out", "try again", "temporarily", "remote failure",
              "failed to update ref")
_PERMANENT_STDERR = ("permission denied", "permission to", "authentication failed",
                     "could not read username", "could not read password",
                     "terminal prompts disabled", "error: 401", "error: 403", "error: 404",
                     "returned error: 401", "returned error: 403", "returned error: 404",
                     "repository not found", "does not appear to be a git repository",
                     "gh006", "protected branch", "gh013", "repository rule violations",
                     "write access", "not allowed")


def refusal_advice(reason: str) -> str:
    """What to do about a refusal GitHub explains: a ruleset (``GH013``, and signed
    commits in particular, which the orchestrator's commits are not) or branch
    protection (``GH006``). Empty for any other reason."""
    low = reason.lower()
    fix = ("exclude the state branch from it, or let the token's actor bypass it ("
           "docs/get-started/github.md#branch-rules)")
    if "verified signatures" in low:
        return (" A ruleset (perhaps the organization's) requires signed commits on this "
                f"branch, and the orchestrator's commits are not signed: {fix}.")
    if "gh013" in low or "repository rule violations" in low:
        return f" A repository or organization ruleset guards this branch: {fix}."
    if "gh006" in low or "protected branch" in low:
        return f" Branch protection guards this branch: {fix}."
    return ""


def refused(stderr: str) -> bool:
    """Whether ``stderr`` says the remote refused us (authentication, permission, no
    such repository): asking again cannot help."""
    low = stderr.lower()
    return any(p in low for p in _PERMANENT_STDERR)


def remote_lines(stderr: str) -> str:
    """What the remote itself said (its ``remote:`` lines), on one line."""
    lines = [line[len("remote:"):].strip() for line in stderr.splitlines()
             if line.startswith("remote:")]
    return "; ".join(line for line in lines if line)[:500]


def last_error(stderr: str) -> str:
    """The line of ``stderr`` that names the failure: the first ``fatal:`` or
    ``error:``, else the first line that is not the remote's or a hint."""
    lines = [line.strip() for line in stderr.splitlines()
             if line.strip() and not line.startswith(("remote:", "hint:"))]
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (fatal or lines or ["no output"])[0][:300]


def classify_push(returncode: int, stdout: str, stderr: str, refs: list[str]) -> PushOutcome:
    """Classify a ``git push --porcelain`` of ``refs`` (destination ref names).

    Per ref: a line ``<flag>\\t<src>:<dst>\\t<summary>`` with flag ``!`` is a rejection
    whose reason in parentheses tells a lost race (``stale info``, ``fetch first``,
    ``cannot lock ref ... expected``) from a permanent refusal (hook declined, protected
    branch). No line at all means the conversation broke off: transient, unless stderr
    says the remote refused us (authentication, permission, no such repository).
    In an atomic push the refs rejected only because another was are ignored.
    """
    lines = _porcelain(stdout)
    remote = remote_lines(stderr)
    suffix = f"; remote says: {remote}" if remote else ""
    outcomes: list[PushOutcome] = []
    atomic_failed = False
    for ref in refs:
        if ref not in lines:
            outcomes.append(_unreported(stderr, suffix))
            continue
        flag, summary = lines[ref]
        if flag in _ACCEPTED:
            continue
        if _atomic_only(summary):
            atomic_failed = True
            continue
        outcomes.append(_rejection(summary, remote, suffix))
    if outcomes:  # the first of the worst
        return max(outcomes, key=lambda outcome: _RANK[outcome.status])
    if atomic_failed:
        return _atomic_failure(stderr, remote, suffix)
    return PushOutcome(PushStatus.OK, "accepted")  # every ref has a line, and took


_ACCEPTED = " +*=-"
"""The porcelain flags of a ref the push updated (or found up to date)."""


def _atomic_only(summary: str) -> bool:
    """Whether a ref was rejected only because another ref of the atomic push was."""
    low = summary.lower()
    return "atomic push failed" in low or "atomic transaction failed" in low


def _unreported(stderr: str, suffix: str) -> PushOutcome:
    """The outcome for a ref git printed no line for: the conversation broke off."""
    status = PushStatus.PERMANENT if refused(stderr) else PushStatus.TRANSIENT
    return PushOutcome(status, last_error(stderr) + suffix)


def _atomic_failure(stderr: str, remote: str, suffix: str) -> PushOutcome:
    """The outcome when every rejected ref says only that the atomic push failed."""
    if any(p in remote.lower() for p in _LOST_RACE):
        # The remote's own message (e.g. "cannot lock ref ... reference already
        # exists") says why.
        return PushOutcome(PushStatus.LOST_RACE, remote)
    # Some ref failed without saying why.
    return PushOutcome(PushStatus.TRANSIENT, last_error(stderr) + suffix)


_RANK = {PushStatus.LOST_RACE: 1, PushStatus.TRANSIENT: 2, PushStatus.PERMANENT: 3}
"""Of the refs of one push, the worst outcome is the push's."""


def _porcelain(stdout: str) -> dict[str, tuple[str, str]]:
    """Destination ref -> ``(flag, summary)``, from ``--porcelain``'s ref lines."""
    lines: dict[str, tuple[str, str]] = {}
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and len(parts[0]) == 1 and ":" in parts[1]:
            lines[parts[1].rsplit(":", 1)[1]] = (parts[0], parts[2])
    return lines


def _rejection(summary: str, remote: str, suffix: str) -> PushOutcome:
    """What the summary of one rejected ref says (``remote``: the remote's own lines)."""
    low = summary.lower()
    # receive-pack says why it failed to update a ref only on stderr.
    if any(p in low or p in remote.lower() for p in _LOST_RACE):
        return PushOutcome(PushStatus.LOST_RACE, summary)
    if low.strip() in ("[remote rejected] (failed)", "[remote failure] (failed)") \
            or any(p in low for p in _TRANSIENT):
        return PushOutcome(PushStatus.TRANSIENT, summary + suffix)
    return PushOutcome(PushStatus.PERMANENT, summary + suffix)
