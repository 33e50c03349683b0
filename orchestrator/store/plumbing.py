"""Talking to git and to the remote: the command wrapper, the transport, secrets.

:class:`Git` runs one git command in a pinned, prompt-free environment;
:class:`Transport` is the three conversations with the remote (``ls-remote``,
``fetch``, ``push``), :class:`GitTransport` its implementation over the command line
(tests inject flaky ones). :class:`Redactor` and :func:`auth_env` keep the token out of
argv, ``.git/config``, messages and logs.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import logging
import os
import subprocess
import time
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from ..errors import CheckoutReadOnly, GitMissing, OrchestratorError, RemoteError
from ..support import checkpoints
from ..support.credentials import Redactor
from . import locks
from .base import committable
from .push import PushOutcome, classify_push, last_error, refused

log = logging.getLogger(__name__)


class TransportError(RemoteError):
    """Talking to the remote failed."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


def display_url(url: str) -> str:
    """``url`` without its user info, for messages."""
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return url


def token_allowed(url: str) -> bool:
    """Whether a GitHub token may be sent to ``url``."""
    # A GitHub token goes only to GitHub over TLS (github.com, or the server of
    # $GITHUB_SERVER_URL for Enterprise Server), or to the loopback interface (tests,
    # local mirrors): never to another forge the remote happens to point at.
    parts = urlsplit(url)
    if parts.scheme == "https":
        server = urlsplit(os.environ.get("GITHUB_SERVER_URL") or "https://github.com")
        return parts.hostname in {"github.com", server.hostname}
    if parts.scheme == "http" and parts.hostname:
        if parts.hostname == "localhost":
            return True
        with contextlib.suppress(ValueError):
            return ipaddress.ip_address(parts.hostname).is_loopback
    return False


def auth_env(url: str, token: str | None, redact: Redactor) -> dict[str, str]:
    """The environment that sends ``token`` to ``url`` as an ``Authorization`` header.

    Registers the URL's password, the token and its Basic-auth form with ``redact``.
    Empty when there is no token or ``url`` may not receive it (:func:`token_allowed`).
    """
    env: dict[str, str] = {}
    parts = urlsplit(url)
    if parts.password:
        redact.add(parts.password)
    if token and token_allowed(url):
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        redact.add(token)
        redact.add(basic)
        # Through GIT_CONFIG_* (git >= 2.31): not in argv (visible in ps), not in
        # .git/config. The empty value first resets headers configured elsewhere
        # (actions/checkout persists its own under http.https://github.com/), so
        # only one Authorization is sent. Keyed by the full URL: git ignores a
        # less specific http.<url>.* entry once it has seen a more specific one.
        n = int(os.environ.get("GIT_CONFIG_COUNT", "0") or 0)
        key = f"http.{display_url(url)}.extraHeader"
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = ""
        env[f"GIT_CONFIG_KEY_{n + 1}"] = key
        env[f"GIT_CONFIG_VALUE_{n + 1}"] = f"Authorization: Basic {basic}"
        env["GIT_CONFIG_COUNT"] = str(n + 2)
    return env


LOCK_WAITS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
"""Seconds waited before each new try of a command whose lock a live git process may
hold: about 6 s in all, far more than a fetch of the state branch takes."""


def _waited(waits: Iterator[float]) -> bool:
    """Sleep the next of ``waits``; False when none is left."""
    wait = next(waits, None)
    if wait is None:
        return False
    time.sleep(wait)
    return True


GIT_TIMEOUT = 300.0
"""Seconds one git command may take (a fetch of a large state branch over a slow link
included); past that it counts as a transient failure."""


_CANNOT_WRITE = ("read-only file system", "insufficient permission",
                 "unable to create temporary file", "permission denied")
"""What git says when the local repository cannot be written (not the remote: a push
or a fetch is classified on its own)."""


def _index_safe(path: bytes) -> bool:
    """Whether git's index accepts ``path`` (see :meth:`Git.read_tree`), as
    :func:`~.base.committable` says of each of its parts."""
    return all(committable(part.decode("utf-8", "surrogateescape"))
               for part in path.split(b"/"))


class Git:
    """Runs ``git`` in one repository with a pinned, prompt-free environment."""

    def __init__(self, repo: Path, redact: Redactor, extra_env: Mapping[str, str] | None = None
                 ) -> None:
        self.repo = repo
        self.redact = redact
        env = dict(os.environ)
        for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
            env.pop(var, None)  # inherited from a hook or a wrapper; we name the repo
        env.update({
            # Never wait for a password on a CI runner; parse messages in English.
            "GIT_TERMINAL_PROMPT": "0",
            "GCM_INTERACTIVE": "never",
            "LC_ALL": "C",
            "LANGUAGE": "C",
        })
        env.update(extra_env or {})
        self.env = env
        self.lock_folders: list[Path] = []
        """Folders whose stale git locks a failed command may clear before it runs
        again (:mod:`.locks`): the checkout, and a remote that is a folder here."""

    def run(self, *args: str, input: bytes | None = None, check: bool = True,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        proc = self._run(args, input, env)
        # A lock a killed git process left would fail this command, and every later
        # one, until someone deletes it: clear a stale one and run once more. One a
        # live git process may hold is waited for (a fetch of this checkout that is
        # still running), then the error stands.
        waits = iter(LOCK_WAITS)
        for _ in range(2 * len(LOCK_WAITS)):
            if proc.returncode == 0 or not self.lock_folders:
                break
            unlocked = self._unlocked(proc)
            if unlocked is None or (not unlocked and not _waited(waits)):
                break
            proc = self._run(args, input, env)
        if check and proc.returncode != 0:
            raise self._failure(args, proc)
        return proc

    def _unlocked(self, proc: subprocess.CompletedProcess[bytes]) -> bool | None:
        """Clear the stale locks that ``proc``'s error names in the lock folders, logging
        each. ``None`` when it names none there; else whether every one is gone now
        (cleared, or released by its holder meanwhile)."""
        named = [(path, lock) for path in locks.named(proc.stderr.decode(errors="replace"))
                 if (lock := locks.owned(path, self.lock_folders, self.repo)) is not None]
        if not named:
            return None  # none here: a server's own lock is the server's to wait for
        for path, _ in named:
            if line := locks.clear(path, self.lock_folders, self.repo):
                log.warning("%s", line)
        return not any(os.path.lexists(lock) for _, lock in named)

    def _failure(self, args: tuple[str, ...], proc: subprocess.CompletedProcess[bytes]
                 ) -> OrchestratorError:
        """The error of the failed command ``args``: the checkout cannot be written, or
        git's last line of error."""
        said = proc.stderr.decode(errors="replace")
        if any(p in said.lower() for p in _CANNOT_WRITE):
            return CheckoutReadOnly(f"cannot write the checkout {self.repo}: "
                                    f"{self.redact(last_error(said))}")
        return OrchestratorError(
            f"git {args[0]} failed in {self.repo}: {self.redact(last_error(said))}")

    def _run(self, args: tuple[str, ...], input: bytes | None,
             env: Mapping[str, str] | None) -> subprocess.CompletedProcess[bytes]:
        # Automatic gc would race other processes sharing this clone.
        cmd = ["git", "-C", str(self.repo), "-c", "gc.auto=0", "-c", "maintenance.auto=0",
               *args]
        full_env = {**self.env, **env} if env else self.env
        try:
            proc = subprocess.run(cmd, input=input, capture_output=True, env=full_env,
                                  check=False, timeout=GIT_TIMEOUT)
        except OSError as exc:  # no git on PATH, or not executable
            raise GitMissing(f"cannot run git ({exc.strerror or exc}): install git or put "
                             "it on PATH") from None
        except subprocess.TimeoutExpired:
            # A stalled remote must not hang the tick: treated like a dropped
            # connection (the compare-and-swap then asks whether the push landed).
            raise TransportError(f"git {args[0]} timed out after {GIT_TIMEOUT:g}s",
                                 transient=True) from None
        return proc

    def out(self, *args: str, input: bytes | None = None,
            env: Mapping[str, str] | None = None) -> str:
        return self.run(*args, input=input, env=env).stdout.decode().strip()

    def read_tree(self, tip: str, env: Mapping[str, str]) -> None:
        """Load the tree of ``tip`` into the index named by ``env``.

        git's index refuses a path with a ``..``, ``.`` or ``.git`` component, which a
        hand-made tree can hold (the state reader quarantines them). Such entries
        cannot be carried over, so they are left out of the next commit rather than
        stopping every later write.
        """
        if self.run("read-tree", tip, env=env, check=False).returncode == 0:
            return
        listing = self.run("ls-tree", "-r", "-z", "--full-tree", tip).stdout
        keep = [entry for entry in listing.split(b"\0")
                if entry and _index_safe(entry.split(b"\t", 1)[1])]
        # --index-info reads ls-tree's own format
        self.run("update-index", "-z", "--index-info",
                 input=b"".join(entry + b"\0" for entry in keep), env=env)

    def has_commit(self, sha: str) -> bool:
        return self.run("cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0

    def present(self, shas: list[str]) -> set[str]:
        """Those of the commits ``shas`` that are in the local object store."""
        # rev-list with --missing never fetches a missing object by itself, where
        # cat-file would, in a partial clone, fetch it with every tree under it.
        out = self.run("rev-list", "--no-walk", "--ignore-missing", "--missing=print",
                       "--stdin", input="".join(f"{s}\n" for s in shas).encode()).stdout
        return {line.decode() for line in out.split()} & set(shas)


class Transport(Protocol):
    """The conversations with the remote. Injectable for tests."""

    def ls_remote(self, refs: list[str]) -> dict[str, str]:
        """Current sha of each of ``refs`` that exists. Raises :class:`TransportError`."""
        ...

    def fetch(self, sha: str, ref: str, depth: int | None) -> None:
        """Bring ``sha`` (the tip of ``ref``) and its tree into the local object store,
        writing no ref and no ``FETCH_HEAD``. Raises :class:`TransportError`."""
        ...

    def fetch_blobs(self, shas: list[str]) -> None:
        """Bring the blobs ``shas`` into a partial clone, in one request. Raises
        :class:`TransportError`."""
        ...

    def push(self, updates: list[tuple[str, str]], leases: list[tuple[str, str | None]],
             atomic: bool = False, forced: Collection[str] = ()) -> PushOutcome:
        """Push ``(sha, ref)`` pairs, each lease ``(ref, expected sha or None = absent)``;
        the refs ``forced`` move whatever they point at."""
        ...


class GitTransport:
    """:class:`Transport` over the ``git`` command line, talking to one URL."""

    def __init__(self, git: Git, url: str, *, partial: bool = False) -> None:
        self.git = git
        self.url = url
        self.partial = partial
        """Fetch commits and trees only (``--filter=blob:none``); blobs on demand."""

    def _fail(self, what: str, proc: subprocess.CompletedProcess[bytes]) -> TransportError:
        stderr = proc.stderr.decode(errors="replace")
        return TransportError(self.git.redact(f"{what} failed: {last_error(stderr)}"),
                              transient=not refused(stderr))

    def ls_remote(self, refs: list[str]) -> dict[str, str]:
        proc = self.git.run("ls-remote", self.url, *refs, check=False)
        if proc.returncode != 0:
            raise self._fail("ls-remote", proc)
        found: dict[str, str] = {}
        for line in proc.stdout.decode().splitlines():
            sha, _, name = line.partition("\t")
            if name in refs:  # ls-remote matches patterns by tail; keep exact names
                found[name] = sha
        return found

    def fetch(self, sha: str, ref: str, depth: int | None) -> None:
        # --refmap= stops the opportunistic update of refs/remotes/*, which processes
        # sharing this clone would otherwise race on; --no-write-fetch-head likewise.
        base = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--refmap=",
                "--no-recurse-submodules"]
        if depth is not None:
            base.append(f"--depth={depth}")
        if self.partial:
            # GitHub serves partial fetches; a server that does not just sends all.
            base.append("--filter=blob:none")
        checkpoints.reached("fetch")
        proc = self.git.run(*base, self.url, sha, check=False)
        if proc.returncode != 0:
            # Servers that do not allow fetching by sha: fetch the ref itself.
            proc = self.git.run(*base, self.url, ref, check=False)
            if proc.returncode != 0:
                raise self._fail("fetch", proc)

    def fetch_blobs(self, shas: list[str]) -> None:
        """Bring the blobs ``shas`` into a partial clone, in one request."""
        # The filter marks the pack as the promisor's, like git's own lazy fetches;
        # objects asked for by id are sent whatever the filter says.
        proc = self.git.run("fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                            "--refmap=", "--no-recurse-submodules", "--filter=blob:none",
                            "--stdin", self.url,
                            input="".join(f"{s}\n" for s in shas).encode(), check=False)
        if proc.returncode != 0:
            raise self._fail("fetch", proc)

    def push(self, updates: list[tuple[str, str]], leases: list[tuple[str, str | None]],
             atomic: bool = False, forced: Collection[str] = ()) -> PushOutcome:
        # --no-verify: a pre-push hook of the user's checkout has no business with
        # machine-written state (and may not even be installed on the runner).
        args = ["push", "--porcelain", "--no-verify"]
        if atomic:
            args.append("--atomic")
        args += [f"--force-with-lease={ref}:{sha or ''}" for ref, sha in leases]
        args.append(self.url)
        args += [f"{'+' if ref in forced else ''}{sha}:{ref}" for sha, ref in updates]
        checkpoints.reached("push")
        proc = self.git.run(*args, check=False)
        outcome = classify_push(proc.returncode, proc.stdout.decode(errors="replace"),
                                proc.stderr.decode(errors="replace"),
                                [ref for _, ref in updates])
        return PushOutcome(outcome.status, self.git.redact(outcome.reason))
