"""State on git: compare-and-swap commits, with push rejection as the lock.

The repository is the database. Every writer (a tick, a track reporting its phase,
``compact``) reads the state branch, computes its change from what it read, builds a
commit on top of exactly that tip and pushes it with a lease on that tip. The remote
updates the branch only if it still points where the writer saw it; otherwise the
writer re-reads and re-applies its change. No lock server, no textual merge.

:class:`GitStateStore` is the real store, :class:`InMemoryStateStore` the in-package
fake with the same contract (one contract test suite runs against both).
"""

from __future__ import annotations

import base64
import contextlib
import enum
import hashlib
import ipaddress
import logging
import os
import random
import re
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from .errors import CASExhausted, OrchestratorError, PushRejected, RemoteError, UserError
from .state import changes

log = logging.getLogger(__name__)

STATE_PREFIX = "state/"
"""Every path a store writes starts with this; in single-branch mode everything else in
the tip is carried over untouched."""

FALLBACK_NAME = "orchestrator"
FALLBACK_EMAIL = "orchestrator@localhost"

Change = dict[str, bytes | None]
"""Files to write (bytes) or delete (``None``), by path relative to the repository root."""


@dataclass(frozen=True)
class Snapshot:
    """The state branch as one writer saw it.

    ``tip`` is the commit sha (``None`` while the branch does not exist yet); ``files``
    maps every file of the tip's tree (paths relative to the repository root, e.g.
    ``state/runs/x--20261201T0700Z/run.json``) to its content. For the git store the
    mapping lists the tree once and loads contents lazily, in bulk, cached per snapshot.
    """

    tip: str | None
    files: Mapping[str, bytes]


ChangeFn = Callable[[Snapshot], Change | None]


@dataclass(frozen=True)
class TransactResult:
    """What :meth:`StateStore.transact` did.

    ``landed`` is false when the change function asked for nothing (or for what was
    already there): then ``tip`` is the tip it saw and nothing was committed. When it
    landed, ``tip`` is the new commit and ``changed`` the paths it wrote or deleted.
    """

    landed: bool
    tip: str | None
    attempts: int
    changed: tuple[str, ...] = ()


class StateStore(Protocol):
    """Where the state lives. Both implementations share these semantics:

    ``read()`` returns a consistent snapshot of the branch.

    ``transact(change_fn, message)`` reads, calls ``change_fn(snapshot)`` and commits the
    files it returns on top of exactly that snapshot's tip, atomically: the commit lands
    only if the branch still points at that tip. On a lost race it reads again and
    calls ``change_fn`` again with the newer snapshot, so ``change_fn`` must compute its
    change from the snapshot alone (it may be called several times; never accumulate
    outside state in it). A change that is empty, ``None`` or equal to what is already
    there commits nothing. An exception raised by ``change_fn`` propagates and nothing
    is written. Retries are bounded; running out raises
    :class:`~orchestrator.errors.CASExhausted`.

    ``snapshot``, when given, is used for the first attempt instead of reading again (a
    caller that has just read saves a round trip); if it is stale the push loses the
    race and the next attempt reads afresh, so correctness never depends on it.
    """

    def read(self) -> Snapshot: ...

    def transact(self, change_fn: ChangeFn, message: str, *,
                 snapshot: Snapshot | None = None) -> TransactResult: ...


def check_path(path: str) -> str:
    """Return ``path`` if a store may write it: under ``state/``, relative, normalised."""
    if (
        not isinstance(path, str)
        or not path.startswith(STATE_PREFIX)
        or "\\" in path
        or "\0" in path
        or "\n" in path
        or any(part in ("", ".", "..", ".git") for part in path.split("/"))
    ):
        raise ValueError(f"invalid state path {path!r}: must be a normalised path under "
                         f"{STATE_PREFIX!r}")
    return path


def effective(files: Mapping[str, bytes], change: Change | None) -> Change:
    """The part of ``change`` that really changes ``files`` (paths validated)."""
    if not change:
        return {}
    for path, data in change.items():
        check_path(path)
        if data is not None and not isinstance(data, bytes):
            raise TypeError(f"content of {path} must be bytes, not {type(data).__name__}")
    return changes(files, change)


# --------------------------------------------------------------------------- in memory


class InMemoryStateStore:
    """The fake: same contract as :class:`GitStateStore`, in memory, thread-safe.

    ``contention`` injects rival writers for tests: it is called with the attempt
    number after ``change_fn`` and before the compare-and-swap; a change it returns is
    committed first, as if another writer had won the race.
    """

    def __init__(
        self,
        files: Mapping[str, bytes] | None = None,
        *,
        max_attempts: int = 30,
        contention: Callable[[int], Change | None] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._tip: str | None = None
        self._files: Mapping[str, bytes] = MappingProxyType({})
        self.max_attempts = max_attempts
        self.contention = contention
        self.log: list[tuple[str, str, tuple[str, ...]]] = []
        """Every commit: ``(sha, message, changed paths)``, oldest first."""
        if files:
            self._commit(self._tip, effective(self._files, dict(files)), "initial state")

    def read(self) -> Snapshot:
        with self._lock:
            return Snapshot(self._tip, self._files)

    def transact(self, change_fn: ChangeFn, message: str, *,
                 snapshot: Snapshot | None = None) -> TransactResult:
        for attempt in range(1, self.max_attempts + 1):
            snap = snapshot if attempt == 1 and snapshot is not None else self.read()
            change = effective(snap.files, change_fn(snap))
            if not change:
                return TransactResult(False, snap.tip, attempt)
            if self.contention is not None:
                rival = self.contention(attempt)
                if rival:
                    with self._lock:
                        self._commit(self._tip, effective(self._files, rival), "rival")
            with self._lock:
                if self._tip != snap.tip:
                    continue  # lost the race: re-read and re-apply
                tip = self._commit(snap.tip, change, message)
            return TransactResult(True, tip, attempt, tuple(sorted(change)))
        raise CASExhausted(f"gave up after {self.max_attempts} lost races (in-memory store)")

    def _commit(self, parent: str | None, change: Change, message: str) -> str:
        # Caller holds the lock (or is the constructor). Copy on write: snapshots
        # already handed out keep their own mapping.
        files = dict(self._files)
        for path, data in change.items():
            if data is None:
                files.pop(path, None)
            else:
                files[path] = data
        sha = hashlib.sha1(f"{parent}:{len(self.log)}:{message}".encode()).hexdigest()
        self._tip, self._files = sha, MappingProxyType(files)
        self.log.append((sha, message, tuple(sorted(change))))
        return sha


# --------------------------------------------------------------------------- git plumbing


class TransportError(RemoteError):
    """Talking to the remote failed."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


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
                     "gh006", "protected branch", "write access", "not allowed")


def _remote_lines(stderr: str) -> str:
    lines = [line[len("remote:"):].strip() for line in stderr.splitlines()
             if line.startswith("remote:")]
    return "; ".join(line for line in lines if line)[:500]


def _last_error(stderr: str) -> str:
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
    lines: dict[str, tuple[str, str]] = {}
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and len(parts[0]) == 1 and ":" in parts[1]:
            lines[parts[1].rsplit(":", 1)[1]] = (parts[0], parts[2])
    remote = _remote_lines(stderr)
    suffix = f"; remote says: {remote}" if remote else ""
    worst: PushOutcome | None = None
    rank = {PushStatus.LOST_RACE: 1, PushStatus.TRANSIENT: 2, PushStatus.PERMANENT: 3}
    for ref in refs:
        if ref not in lines:
            low = stderr.lower()
            if any(p in low for p in _PERMANENT_STDERR):
                outcome = PushOutcome(PushStatus.PERMANENT, _last_error(stderr) + suffix)
            else:
                outcome = PushOutcome(PushStatus.TRANSIENT, _last_error(stderr) + suffix)
        else:
            flag, summary = lines[ref]
            if flag in " +*=-":
                continue
            low = summary.lower()
            if "atomic push failed" in low or "atomic transaction failed" in low:
                continue
            # receive-pack says why it failed to update a ref only on stderr.
            if any(p in low or p in remote.lower() for p in _LOST_RACE):
                outcome = PushOutcome(PushStatus.LOST_RACE, summary)
            elif low.strip() in ("[remote rejected] (failed)", "[remote failure] (failed)") \
                    or any(p in low for p in _TRANSIENT):
                outcome = PushOutcome(PushStatus.TRANSIENT, summary + suffix)
            else:
                outcome = PushOutcome(PushStatus.PERMANENT, summary + suffix)
        if worst is None or rank[outcome.status] > rank[worst.status]:
            worst = outcome
    if worst is None:
        if all(r in lines for r in refs):
            return PushOutcome(PushStatus.OK, "accepted")
        # Only "atomic push failed" lines: some ref failed without saying why.
        return PushOutcome(PushStatus.TRANSIENT, _last_error(stderr) + suffix)
    return worst


class Redactor:
    """Removes secrets (the token, its Basic-auth form, URL passwords) from text."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets = sorted({s for s in (secrets or []) if s}, key=len, reverse=True)

    def add(self, secret: str) -> None:
        if secret:
            self._secrets = sorted({*self._secrets, secret}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        # user:password@ in any URL that slipped through
        return re.sub(r"(\b[a-z][a-z0-9+.-]*://)[^/@\s]+@", r"\1***@", text)


def display_url(url: str) -> str:
    """``url`` without its user info, for messages."""
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc:
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return url


def _token_allowed(url: str) -> bool:
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


GIT_TIMEOUT = 300.0
"""Seconds one git command may take (a fetch of a large state branch over a slow link
included); past that it counts as a transient failure."""


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

    def run(self, *args: str, input: bytes | None = None, check: bool = True,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        # Automatic gc would race other processes sharing this clone.
        cmd = ["git", "-C", str(self.repo), "-c", "gc.auto=0", "-c", "maintenance.auto=0",
               *args]
        full_env = {**self.env, **env} if env else self.env
        try:
            proc = subprocess.run(cmd, input=input, capture_output=True, env=full_env,
                                  check=False, timeout=GIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            # A stalled remote must not hang the tick: treated like a dropped
            # connection (the compare-and-swap then asks whether the push landed).
            raise TransportError(f"git {args[0]} timed out after {GIT_TIMEOUT:g}s",
                                 transient=True) from None
        if check and proc.returncode != 0:
            raise OrchestratorError(
                f"git {args[0]} failed in {self.repo}: "
                f"{self.redact(_last_error(proc.stderr.decode(errors='replace')))}"
            )
        return proc

    def out(self, *args: str, input: bytes | None = None,
            env: Mapping[str, str] | None = None) -> str:
        return self.run(*args, input=input, env=env).stdout.decode().strip()

    def has_commit(self, sha: str) -> bool:
        return self.run("cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0


class Transport(Protocol):
    """The three conversations with the remote. Injectable for tests."""

    def ls_remote(self, refs: list[str]) -> dict[str, str]:
        """Current sha of each of ``refs`` that exists. Raises :class:`TransportError`."""
        ...

    def fetch(self, sha: str, ref: str, depth: int | None) -> None:
        """Bring ``sha`` (the tip of ``ref``) and its tree into the local object store,
        writing no ref and no ``FETCH_HEAD``. Raises :class:`TransportError`."""
        ...

    def push(self, updates: list[tuple[str, str]], leases: list[tuple[str, str | None]],
             atomic: bool = False) -> PushOutcome:
        """Push ``(sha, ref)`` pairs, each lease ``(ref, expected sha or None = absent)``."""
        ...


class GitTransport:
    """:class:`Transport` over the ``git`` command line, talking to one URL."""

    def __init__(self, git: Git, url: str) -> None:
        self.git = git
        self.url = url

    def _fail(self, what: str, proc: subprocess.CompletedProcess[bytes]) -> TransportError:
        stderr = proc.stderr.decode(errors="replace")
        low = stderr.lower()
        permanent = any(p in low for p in _PERMANENT_STDERR)
        return TransportError(self.git.redact(f"{what} failed: {_last_error(stderr)}"),
                              transient=not permanent)

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
        proc = self.git.run(*base, self.url, sha, check=False)
        if proc.returncode != 0:
            # Servers that do not allow fetching by sha: fetch the ref itself.
            proc = self.git.run(*base, self.url, ref, check=False)
            if proc.returncode != 0:
                raise self._fail("fetch", proc)

    def push(self, updates: list[tuple[str, str]], leases: list[tuple[str, str | None]],
             atomic: bool = False) -> PushOutcome:
        # --no-verify: a pre-push hook of the user's checkout has no business with
        # machine-written state (and may not even be installed on the runner).
        args = ["push", "--porcelain", "--no-verify"]
        if atomic:
            args.append("--atomic")
        args += [f"--force-with-lease={ref}:{sha or ''}" for ref, sha in leases]
        args.append(self.url)
        args += [f"{sha}:{ref}" for sha, ref in updates]
        proc = self.git.run(*args, check=False)
        outcome = classify_push(proc.returncode, proc.stdout.decode(errors="replace"),
                                proc.stderr.decode(errors="replace"),
                                [ref for _, ref in updates])
        return PushOutcome(outcome.status, self.git.redact(outcome.reason))


class _TreeFiles(Mapping[str, bytes]):
    """Files of one commit: the tree is listed once, contents loaded in bulk on demand.

    A miss loads the requested file together with its not yet loaded siblings (same
    folder) in one ``git cat-file --batch``; :meth:`prefetch` loads an exact set in
    one call (the state parser asks for every ``run.json`` at once, but never for the
    briefs or the tracks of finished runs). Contents are cached by blob id in a cache
    shared by the store's snapshots, so reading the same tip twice (the tick reads,
    then its compare-and-swap reads again) loads nothing the second time.
    """

    def __init__(self, git: Git, tip: str, cache: dict[str, bytes] | None = None) -> None:
        self._git = git
        self._tip = tip
        self._lock = threading.Lock()
        self._index: dict[str, str] | None = None
        self._cache: dict[str, bytes] = {} if cache is None else cache

    def _entries(self) -> dict[str, str]:
        with self._lock:
            if self._index is None:
                raw = self._git.run("ls-tree", "-r", "-z", "--full-tree", self._tip).stdout
                index: dict[str, str] = {}
                for record in raw.split(b"\0"):
                    if not record:
                        continue
                    meta, _, path = record.partition(b"\t")
                    _mode, kind, sha = meta.split(b" ")
                    if kind == b"blob":  # submodules (commit entries) carry no content
                        index[path.decode("utf-8", "surrogateescape")] = sha.decode()
                self._index = index
            return self._index

    def __getitem__(self, path: str) -> bytes:
        entries = self._entries()
        if path not in entries:
            raise KeyError(path)
        sha = entries[path]
        with self._lock:
            if sha not in self._cache:
                folder = path.rpartition("/")[0] + "/"
                self._load([sha, *(s for p, s in entries.items() if p.startswith(folder)
                                   and "/" not in p[len(folder):])])
            return self._cache[sha]

    def prefetch(self, paths: Iterable[str]) -> None:
        """Load the contents of ``paths`` (those in the tree) with one git call."""
        entries = self._entries()
        with self._lock:
            self._load([entries[p] for p in paths if p in entries])

    def _load(self, shas: Iterable[str]) -> None:
        wanted = sorted({s for s in shas if s not in self._cache})
        if not wanted:
            return
        out = self._git.run("cat-file", "--batch", input="".join(f"{s}\n" for s in wanted)
                            .encode()).stdout
        pos = 0
        while pos < len(out):
            end = out.index(b"\n", pos)
            sha, _kind, size = out[pos:end].decode().split(" ")
            start = end + 1
            self._cache[sha] = out[start:start + int(size)]
            pos = start + int(size) + 1

    def __contains__(self, path: object) -> bool:
        return path in self._entries()

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def __len__(self) -> int:
        return len(self._entries())

    def __repr__(self) -> str:
        return f"<files of {self._tip[:12]}: {len(self)} paths>"


_EMPTY: Mapping[str, bytes] = MappingProxyType({})


class GitStateStore:
    """The state branch of a git remote, written by compare-and-swap pushes.

    **Reading.** ``read()`` asks the remote for the branch's tip (``ls-remote``) and
    fetches that commit only if it is not already in the local object store (processes
    sharing one clone see each other's pushed commits without a fetch). The fetch is
    shallow (depth 1) unless the branch is also a local branch of a full clone
    (single-branch mode on a developer's machine: marking its tip shallow would cut
    the local history). Fetches write no ref and no ``FETCH_HEAD``, so any number of
    processes may share one clone.

    **Writing.** ``transact(change_fn, message)`` builds the commit without touching
    the work tree: the tip's tree is read into a private temporary index, the changed
    files are written as blobs and applied, the tree is written and committed with the
    tip as its only parent. In single-branch mode (e.g. ``branch="main"``) every path
    outside ``state/`` is therefore kept as it is. The commit is pushed as
    ``<commit>:refs/heads/<branch>`` with
    ``--force-with-lease=refs/heads/<branch>:<tip>`` (an empty lease when the branch
    does not exist yet: of two creators of the orphan branch one wins, the other
    retries onto it). The lease is what is compared: the remote moves the branch only
    if it still points at the tip we built on, so history stays linear and no update
    is lost.

    **Outcomes,** classified per ref from ``--porcelain``:

    - *lost race* (``stale info``, ``fetch first``, ``non-fast-forward``,
      ``cannot lock ref ... expected``): nothing landed; back off, re-read and call
      ``change_fn`` again on the new snapshot;
    - *permanent* (hook declined, protected branch / GH006, permission,
      authentication, no such repository): raise :class:`PushRejected` at once,
      naming the branch, the remote and the remote's reason; no retry;
    - *transient* (network, 5xx, bare ``(failed)``, remote hung up): our commit may
      have landed. ``ls-remote`` tells: if the tip is our commit, or a descendant of
      it, the transaction is done and is not pushed again; otherwise back off and
      retry like a lost race.

    **Bounds.** Back-off is "full jitter" exponential: a random delay up to
    ``slot * 2**(attempt-1)``, capped at ``max_delay``, where the slot is the time the
    failed attempt took (at least ``base_delay``), so waits scale with the remote's
    latency. Retries are bounded by ``max_attempts`` and ``max_seconds``; running out
    raises :class:`CASExhausted` (exit 3). An archive whose tag is already taken on
    the remote fails at once instead.

    **Remote and secrets.** ``remote`` is a remote name of ``repo``, a local path, a
    ``file://`` or an ``https://`` URL. With https, ``token`` (default: the
    ``GITHUB_TOKEN`` environment variable) is sent as an ``Authorization`` header set
    through ``GIT_CONFIG_*`` environment variables: never on a command line, never in
    ``.git/config``, and redacted from every message and log line.
    """

    def __init__(
        self,
        repo: Path,
        remote: str = "origin",
        branch: str = "orchestrator-state",
        *,
        token: str | None = None,
        max_attempts: int = 30,
        max_seconds: float = 180.0,
        base_delay: float = 0.05,
        max_delay: float = 4.0,
        transport: Transport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.repo = Path(repo)
        self.branch = branch
        self.ref = f"refs/heads/{branch}"
        self.max_attempts = max_attempts
        self.max_seconds = max_seconds
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self._clock = clock
        self._rand = rand
        self.redact = Redactor()
        self._blobs: dict[str, bytes] = {}  # blob id -> content, shared by snapshots
        self.git = Git(self.repo, self.redact)
        if self.git.run("rev-parse", "--git-dir", check=False).returncode != 0:
            raise UserError(f"not a git repository: {self.repo}")
        if self.git.run("check-ref-format", self.ref, check=False).returncode != 0:
            raise UserError(f"invalid state branch name {branch!r}")
        self.url, self.remote_name = self._resolve(remote)
        self._setup_env(token if token is not None else os.environ.get("GITHUB_TOKEN"))
        self.transport: Transport = transport or GitTransport(self.git, self.url)
        self._depth: int | None = self._fetch_depth()

    # ---------------------------------------------------------------- setup

    def _resolve(self, remote: str) -> tuple[str, str]:
        """``(url, name for messages)`` of ``remote``."""
        looks_like_url = "://" in remote or remote.startswith(("/", ".", "~")) or (
            ":" in remote and "/" in remote)
        if not looks_like_url:
            # A configured remote name wins over a folder of the same name.
            proc = self.git.run("remote", "get-url", "--push", remote, check=False)
            if proc.returncode == 0:
                return proc.stdout.decode().strip(), remote
            if not Path(remote).exists():
                raise UserError(f"no remote named {remote!r} in {self.repo}; pass a remote "
                                "name, a path or a URL with --remote")
        if "://" not in remote and ":" not in remote.split("/", 1)[0]:
            url = str(Path(remote).expanduser().resolve())  # local path, relative to cwd
            return url, url
        return remote, display_url(remote)

    def _setup_env(self, token: str | None) -> None:
        env: dict[str, str] = {}
        parts = urlsplit(self.url)
        if parts.password:
            self.redact.add(parts.password)
        if token and _token_allowed(self.url):
            basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
            self.redact.add(token)
            self.redact.add(basic)
            # Through GIT_CONFIG_* (git >= 2.31): not in argv (visible in ps), not in
            # .git/config. The empty value first resets headers configured elsewhere
            # (actions/checkout persists its own under http.https://github.com/), so
            # only one Authorization is sent. Keyed by the full URL: git ignores a
            # less specific http.<url>.* entry once it has seen a more specific one.
            n = int(os.environ.get("GIT_CONFIG_COUNT", "0") or 0)
            key = f"http.{display_url(self.url)}.extraHeader"
            env[f"GIT_CONFIG_KEY_{n}"] = key
            env[f"GIT_CONFIG_VALUE_{n}"] = ""
            env[f"GIT_CONFIG_KEY_{n + 1}"] = key
            env[f"GIT_CONFIG_VALUE_{n + 1}"] = f"Authorization: Basic {basic}"
            env["GIT_CONFIG_COUNT"] = str(n + 2)
        # A bare CI runner has no identity; commit-tree would refuse to run.
        configured = self.git.run("config", "--get-regexp",
                                  r"^(user|author|committer)\.(name|email)$",
                                  check=False).stdout.decode()
        keys = {line.split(" ", 1)[0] for line in configured.splitlines()}
        for role in ("AUTHOR", "COMMITTER"):
            if not os.environ.get(f"GIT_{role}_NAME") and not keys & {
                    "user.name", f"{role.lower()}.name"}:
                env[f"GIT_{role}_NAME"] = FALLBACK_NAME
            if not os.environ.get(f"GIT_{role}_EMAIL") and not keys & {
                    "user.email", f"{role.lower()}.email"}:
                env[f"GIT_{role}_EMAIL"] = FALLBACK_EMAIL
        self.git.env.update(env)

    def _fetch_depth(self) -> int | None:
        shallow = self.git.out("rev-parse", "--is-shallow-repository") == "true"
        local = self.git.run("show-ref", "--verify", "--quiet", self.ref,
                             check=False).returncode == 0
        return 1 if shallow or not local else None

    def where(self) -> str:
        return f"branch {self.branch!r} of {self.remote_name}"

    # ---------------------------------------------------------------- reading

    def read(self) -> Snapshot:
        tip = self._fetch_tip()
        return Snapshot(tip, _TreeFiles(self.git, tip, self._blobs) if tip else _EMPTY)

    def _fetch_tip(self) -> str | None:
        for _ in range(5):
            tip = self.transport.ls_remote([self.ref]).get(self.ref)
            if tip is None or self.git.has_commit(tip):
                return tip
            self.transport.fetch(tip, self.ref, self._depth)
            if self.git.has_commit(tip):
                return tip
            # The ref moved (or was rewritten) between ls-remote and fetch; ask again.
        raise TransportError(f"{self.where()} kept moving while fetching it", transient=True)

    # ---------------------------------------------------------------- writing

    def transact(self, change_fn: ChangeFn, message: str, *,
                 snapshot: Snapshot | None = None) -> TransactResult:
        """Apply ``change_fn`` to the branch exactly once; see the class docstring."""
        return self._run(change_fn, message, tag=None, first=snapshot)

    def archive(self, change_fn: ChangeFn, message: str, tag: str) -> TransactResult:
        """Like :meth:`transact`, but keep the old tip as ``refs/tags/<tag>`` and, when
        the branch holds nothing but ``state/`` (a dedicated state branch), replace its
        history with one root commit. The tag and the branch are pushed atomically, the
        branch with the same lease; in single-branch mode the commit is an ordinary
        child of the tip (the project's history is never rewritten)."""
        if self.git.run("check-ref-format", f"refs/tags/{tag}", check=False).returncode:
            raise UserError(f"invalid tag name {tag!r}")
        return self._run(change_fn, message, tag=tag)

    def _check_tag_free(self, tag: str) -> None:
        try:
            taken = self.transport.ls_remote([f"refs/tags/{tag}"])
        except TransportError as exc:
            raise RemoteError(f"{self.where()}: {self.redact(exc.message)}") from None
        if taken:
            raise UserError(f"tag {tag!r} already exists on {self.remote_name}; "
                            "archive under another name (another --now)")

    def _run(self, change_fn: ChangeFn, message: str, tag: str | None,
             first: Snapshot | None = None) -> TransactResult:
        start = self._clock()
        # Commits whose push ended in a transient failure: they may have landed.
        unsure: dict[str, tuple[str, ...]] = {}
        attempt = 0
        while True:
            attempt += 1
            commit = ""
            began = self._clock()
            try:
                snap = first if attempt == 1 and first is not None else self.read()
                mine = self._which_landed(unsure, snap.tip)
                if mine:
                    return TransactResult(True, mine, attempt - 1, unsure[mine])
                change = effective(snap.files, change_fn(snap))
                if not change:
                    return TransactResult(False, snap.tip, attempt)
                if tag is not None and attempt == 1:
                    self._check_tag_free(tag)
                root = tag is not None and snap.tip is not None and all(
                    p.startswith(STATE_PREFIX) for p in snap.files)
                commit = self._commit(snap.tip, change, message, root=root)
                updates = [(commit, self.ref)]
                leases: list[tuple[str, str | None]] = [(self.ref, snap.tip)]
                if tag is not None and snap.tip is not None:
                    updates.append((snap.tip, f"refs/tags/{tag}"))
                    leases.append((f"refs/tags/{tag}", None))
                outcome = self.transport.push(updates, leases, atomic=tag is not None)
            except TransportError as exc:
                if not exc.transient:
                    raise RemoteError(f"{self.where()}: {self.redact(exc.message)}") from None
                outcome = PushOutcome(PushStatus.TRANSIENT, exc.message)
            if outcome.status is PushStatus.OK:
                return TransactResult(True, commit, attempt, tuple(sorted(change)))
            if outcome.status is PushStatus.PERMANENT:
                raise PushRejected(
                    f"push to {self.where()} was rejected: {self.redact(outcome.reason)}")
            last = f"{outcome.status.value}: {self.redact(outcome.reason)}"
            if tag is not None and outcome.status is PushStatus.LOST_RACE:
                self._check_tag_free(tag)  # lost to another compaction: no use retrying
            if outcome.status is PushStatus.TRANSIENT and commit:
                # The remote may have accepted the push before the connection broke:
                # ask it, so a landed change is never applied twice.
                unsure[commit] = tuple(sorted(change))
                with contextlib.suppress(TransportError):
                    tip = self.transport.ls_remote([self.ref]).get(self.ref)
                    mine = self._which_landed(unsure, tip)
                    if mine:
                        log.info("%s: push reported %r, but it had landed", self.where(),
                                 last)
                        return TransactResult(True, mine, attempt, unsure[mine])
            log.info("%s: attempt %d: %s", self.where(), attempt, last)
            self._backoff(attempt, start, last, slot=self._clock() - began)

    def _backoff(self, attempt: int, start: float, last: str, slot: float = 0.0) -> None:
        # The "slot time" of the exponential back-off is what one attempt costs here
        # (about 0.2 s against a local origin, a second or more against GitHub), but
        # never less than base_delay: the waits then scale with the remote by themselves.
        slot = max(self.base_delay, slot)
        delay = self._rand() * min(self.max_delay, slot * 2 ** (attempt - 1))
        elapsed = self._clock() - start
        if attempt >= self.max_attempts or elapsed + delay > self.max_seconds:
            raise CASExhausted(
                f"gave up writing {self.where()} after {attempt} attempts in "
                f"{elapsed:.1f}s; last failure: {last}")
        self._sleep(delay)

    def _which_landed(self, commits: Mapping[str, object], tip: str | None) -> str | None:
        """The one of ``commits`` that is the remote's ``tip`` or an ancestor of it."""
        if not commits or tip is None:
            return None
        if tip in commits:
            return tip
        if not self.git.has_commit(tip):
            self.transport.fetch(tip, self.ref, self._depth)
        if self._depth is not None:
            # A shallow tip hides its ancestors: deepen enough to see a recent one of ours.
            self.transport.fetch(tip, self.ref, 64)
        for commit in commits:
            if self.git.run("merge-base", "--is-ancestor", commit, tip,
                            check=False).returncode == 0:
                return commit
        return None

    def _commit(self, tip: str | None, change: Change, message: str, *, root: bool) -> str:
        with tempfile.TemporaryDirectory(prefix="orchestrator-commit-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if tip is not None:
                self.git.run("read-tree", tip, env=env)
            writes = [(p, d) for p, d in change.items() if d is not None]
            shas: list[str] = []
            if writes:
                paths = []
                for i, (_, data) in enumerate(writes):
                    blob = Path(tmp) / f"blob{i}"
                    blob.write_bytes(data)
                    paths.append(str(blob))
                shas = self.git.out("hash-object", "-w", "--no-filters", "--stdin-paths",
                                    input=("\n".join(paths) + "\n").encode()).split()
            info = [f"100644 {sha}\t{path}" for (path, _), sha in zip(writes, shas, strict=True)]
            info += [f"0 {'0' * 40}\t{p}" for p, d in change.items() if d is None]
            self.git.run("update-index", "-z", "--index-info",
                         input="".join(f"{line}\0" for line in info).encode(), env=env)
            tree = self.git.out("write-tree", env=env)
        parents = ["-p", tip] if tip is not None and not root else []
        # Two writers applying the same change to the same tip within one second would
        # otherwise build byte-identical commits, and the second push would report
        # "up to date": two increments, one landed. A nonce makes every commit unique.
        body = f"{message.rstrip()}\n\nOrchestrator-Nonce: {uuid.uuid4().hex[:16]}\n"
        return self.git.out("commit-tree", "--no-gpg-sign", tree, *parents, "-F", "-",
                            input=body.encode())
