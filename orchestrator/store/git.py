"""State on git: compare-and-swap commits, with push rejection as the lock.

The repository is the database. Every writer (a tick, a track reporting its phase,
``compact``) reads the state branch, computes its change from what it read, builds a
commit on top of exactly that tip and pushes it with a lease on that tip. The remote
updates the branch only if it still points where the writer saw it; otherwise the
writer re-reads and re-applies its change. No lock server, no textual merge.

:class:`GitStateStore` is the loop; a commit is built by :mod:`.commit`, how a push
ended is read by :mod:`.push`, the git commands and the remote are behind
:mod:`.plumbing`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from urllib.parse import unquote, urlsplit

from ..errors import CASExhausted, PushRejected, RemoteError, Rewound, UserError
from ..support.credentials import Redactor
from . import links
from .base import (
    STATE_PREFIX,
    Change,
    ChangeFn,
    Snapshot,
    TransactResult,
    effective,
)
from .memory import MemoryFiles
from .plumbing import Git, GitTransport, Transport, TransportError, auth_env, display_url
from .push import PushOutcome, PushStatus, refusal_advice
from .tree import TreeFiles

log = logging.getLogger(__name__)

HIGH_WATER_PREFIX = "refs/orchestrator/high-water/"
"""``<prefix><branch>``: the state commit most recently written, kept outside the branch
so that a rewound or deleted branch can be told from a fresh one."""

ACCEPT_REWIND = "orchestrator status --accept-rewind"
"""The command a person runs once they have checked a rewound state branch."""

# The identity of the state commits on a runner that has none configured.
FALLBACK_NAME = "orchestrator"
FALLBACK_EMAIL = "orchestrator@localhost"


_EMPTY = MemoryFiles(MappingProxyType({}), frozen=True)
"""The files of a branch that does not exist yet."""

_PLAIN_BRANCH = re.compile(r"[A-Za-z0-9_-]+(?:[./][A-Za-z0-9_-]+)*")



def _plain_branch(name: str) -> bool:
    """Whether git certainly accepts ``refs/heads/<name>`` (letters, digits, ``-``,
    ``_``, single dots and slashes inside), so that no process need ask it."""
    return bool(_PLAIN_BRANCH.fullmatch(name)) and not any(
        part.endswith(".lock") for part in name.split("/"))


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
    is lost. A write in a queue's items moves its ref too (:mod:`.links`), forced.

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
        self.high_water = f"{HIGH_WATER_PREFIX}{branch}"
        self.rewound: str | None = None
        """Why the branch looks rewound as of the last :meth:`read`, else ``None``."""
        # tip -> (the high-water mark seen with it, why that tip is rewound or None);
        # keyed by tip, not "the last read", because threads may share one store.
        self._marks: dict[str | None, tuple[str | None, str | None]] = {}
        self._marks_kept = 64  # a long-running serve reads thousands of tips
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
        if not self.repo.is_dir():
            raise UserError(f"not a git repository: {self.repo}")
        if not _plain_branch(branch) and self.git.run(
                "check-ref-format", self.ref, check=False).returncode != 0:
            raise UserError(f"invalid state branch name {branch!r}")
        self._shallow, local, git_dir = self._probe()
        self.url, self.remote_name = self._resolve(remote)
        # A git process killed mid-way (a tick killed while it fetched or pushed) leaves
        # its lock: the store clears stale ones in the checkout and in a remote folder.
        self.git.lock_folders = [self.repo, self.repo / git_dir, *self._remote_folder()]
        self.git.env.update(auth_env(self.url, token if token is not None
                                     else os.environ.get("GITHUB_TOKEN"), self.redact))
        self._identified = False
        self._depth: int | None = 1 if self._shallow or not local else None
        # A shallow clone is a CI runner's checkout: fetch the state without blobs and
        # then only the blobs a reader asks for, so a fresh runner does not download
        # every finished run's records. A full clone (a developer's machine) fetches
        # everything, as it keeps what it fetched.
        self._partial = self._depth is not None and self._shallow
        self.transport: Transport = transport or GitTransport(
            self.git, self.url, partial=self._partial)

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

    def _identify(self) -> None:
        """Give commits an identity when git has none (a bare CI runner: commit-tree
        would refuse to run). Asked when first committing: a tick with nothing to
        commit starts no git process for it."""
        if self._identified:
            return
        self._identified = True
        env: dict[str, str] = {}
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

    def _remote_folder(self) -> list[Path]:
        """The remote's folder when it is one on this machine (a path or ``file://``)."""
        parts = urlsplit(self.url)
        if parts.scheme == "file":
            return [Path(unquote(parts.path))]
        return [Path(self.url)] if not parts.scheme and Path(self.url).is_absolute() else []

    def _probe(self) -> tuple[bool, bool, str]:
        """``(a shallow clone, the branch is also a local branch, the git folder)``,
        asked with one git process (every tick pays for each one it starts)."""
        # Prints the git dir, "true"/"false", then the ref's sha when it exists; exits 1
        # without the sha when it does not, 128 outside a repository. The ref name was
        # checked first, so it cannot be read as a range or an option.
        proc = self.git.run("rev-parse", "--git-dir", "--is-shallow-repository",
                            "--verify", "--quiet", self.ref, check=False)
        lines = proc.stdout.decode().splitlines()
        if proc.returncode not in (0, 1) or len(lines) < 2:
            raise UserError(f"not a git repository: {self.repo}")
        return lines[1] == "true", proc.returncode == 0 and len(lines) > 2, lines[0]

    def where(self) -> str:
        return f"branch {self.branch!r} of {self.remote_name}"

    # ---------------------------------------------------------------- reading

    def read(self) -> Snapshot:
        tip = self._fetch_tip()
        if not tip:
            return Snapshot(tip, _EMPTY)
        fetch = self._fetch_blobs if self._partial else None
        return Snapshot(tip, TreeFiles(self.git, tip, self._blobs, fetch, self._resolve_link))

    def _resolve_link(self, blob: str, link: str) -> str | None:
        """The commit that the link ``blob`` of the folder ``link`` names, brought here
        with its trees (no blob in a partial clone); ``None`` when it names none."""
        if self._partial:
            self._fetch_blobs([blob])
        commit = links.target(self.git.run("cat-file", "blob", blob).stdout)
        if commit is not None and not self.git.present([commit]):
            self.transport.fetch(commit, links.side_ref(self.branch, link), self._depth)
        return commit

    def _fetch_blobs(self, shas: list[str]) -> None:
        # Which are here already (a clone that ticked before): rev-list names the
        # objects it has and, unlike cat-file, never fetches a missing one by itself.
        have = self.git.run("rev-list", "--objects", "--no-walk", "--missing=print",
                            "--ignore-missing", "--stdin",
                            input="".join(f"{s}\n" for s in shas).encode()).stdout
        present = {line.split(b" ")[0].decode() for line in have.splitlines()}
        shas = [s for s in shas if s not in present]
        if shas:
            self.transport.fetch_blobs(shas)

    def _fetch_tip(self) -> str | None:
        for attempt in range(5):
            refs = self.transport.ls_remote([self.ref, self.high_water])
            tip, mark = refs.get(self.ref), refs.get(self.high_water)
            here = tip is not None and self.git.has_commit(tip)
            if tip is not None and not here:
                self.transport.fetch(tip, self.ref, self._depth)
                here = self.git.has_commit(tip)
            if tip is None or here:
                why = self._rewind(tip, mark)
                # ls-remote reads the two refs one after the other: a push landing in
                # between shows an old tip with a new mark. Ask again before believing it.
                if why and attempt < 4 and self.transport.ls_remote(
                        [self.ref, self.high_water]) != refs:
                    continue
                self._marks[tip] = (mark, why)
                while len(self._marks) > self._marks_kept:
                    del self._marks[next(iter(self._marks))]
                self.rewound = why
                return tip
            # The ref moved (or was rewritten) between ls-remote and fetch; ask again.
        raise TransportError(f"{self.where()} kept moving while fetching it", transient=True)

    def _rewind(self, tip: str | None, mark: str | None) -> str | None:
        """Why ``tip`` is behind the high-water ``mark``, or ``None`` when it is not.

        Every state commit moves the mark in the same atomic push, so normally the two
        are equal; a tip that descends from the mark was written on top of it (a hand
        edit, an older version). Anything else (a restored backup, a mistaken force
        push, a deleted branch) would fire again slots that already ran.
        """
        if mark is None or mark == tip:
            return None
        if tip is not None and self._descends(tip, mark):
            return None
        now = f"is at {tip[:12]}" if tip else "was deleted"
        return (f"{self.where()} {now}, behind its high-water mark {mark[:12]} "
                f"({self.high_water}): it was rewound, and firing from it could launch "
                "again what already ran; nothing fires until a person has checked it and "
                f"run `{ACCEPT_REWIND}`")

    def _descends(self, tip: str, mark: str) -> bool:
        """Whether ``tip`` descends from ``mark``, deepening a shallow clone to see it."""
        # A shallow tip hides its history: deepen until the mark shows up, if ever
        # (2**31-1 is git's "all of it"). A full clone fetches without a depth, so
        # its local history is never cut.
        depths = (None,) if self._depth is None else (64, 2**31 - 1)
        for depth in (0, *depths):
            if depth != 0:
                self._deepen(tip, depth)
            if self.git.run("merge-base", "--is-ancestor", mark, tip,
                            check=False).returncode == 0:
                return True
        return False

    def _deepen(self, tip: str, depth: int | None) -> None:
        # Processes sharing this clone deepen it at once after a rewind, and git lets
        # one of them hold shallow.lock at a time: the others wait their turn.
        for attempt in range(1, 8):
            try:
                self.transport.fetch(tip, self.ref, depth)
                return
            except TransportError as exc:
                if "shallow.lock" not in exc.message or attempt == 7:
                    raise
                self._sleep(0.1 * attempt * (1 + self._rand()))

    def accept_rewind(self) -> str | None:
        """Move the high-water mark to the branch as it is now; what was accepted, or
        ``None`` when the branch was not rewound. Lease-guarded like every write."""
        tip = self._fetch_tip()
        mark, why = self._marks[tip]
        if why is None:
            return None
        update = [(tip, self.high_water)] if tip else [("", self.high_water)]
        outcome = self.transport.push(update, [(self.high_water, mark)])
        if outcome.status is not PushStatus.OK:
            raise RemoteError(f"could not move {self.high_water} on {self.remote_name}: "
                              f"{self.redact(outcome.reason)}")
        return why

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
            began = self._clock()
            pushed = self._attempt(change_fn, message, tag, first if attempt == 1 else None,
                                   attempt, unsure)
            if isinstance(pushed, TransactResult):
                return pushed
            commit, change, outcome = pushed
            if outcome.status is PushStatus.OK:
                return TransactResult(True, commit, attempt, tuple(sorted(change)))
            last = self._not_pushed(outcome, tag)
            if outcome.status is PushStatus.TRANSIENT and commit:
                landed = self._landed_after_all(unsure, commit, change, attempt, last)
                if landed is not None:
                    return landed
            log.info("%s: attempt %d: %s", self.where(), attempt, last)
            self._backoff(attempt, start, last, slot=self._clock() - began)

    def _not_pushed(self, outcome: PushOutcome, tag: str | None) -> str:
        """The line that says why a push did not land, when a retry may help;
        :class:`PushRejected` when it cannot, :class:`UserError` when ``tag`` is taken."""
        if outcome.status is PushStatus.PERMANENT:
            raise PushRejected(
                f"push to {self.where()} was rejected: {self.redact(outcome.reason)}"
                + refusal_advice(outcome.reason))
        if tag is not None and outcome.status is PushStatus.LOST_RACE:
            self._check_tag_free(tag)  # lost to another compaction: no use retrying
        return f"{outcome.status.value}: {self.redact(outcome.reason)}"

    def _attempt(self, change_fn: ChangeFn, message: str, tag: str | None,
                 first: Snapshot | None, attempt: int, unsure: Mapping[str, tuple[str, ...]]
                 ) -> TransactResult | tuple[str, Change, PushOutcome]:
        """One read, change and push: the transaction's result when it ends here (it
        had landed, or there is nothing to do), else ``(commit, change, outcome)``
        (``commit`` empty when the attempt failed before building it)."""
        commit, change = "", {}
        try:
            snap = first if first is not None else self.read()
            mark, why = self._marks.get(snap.tip, (None, None))
            if why is not None:
                raise Rewound(why)
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
            self._identify()
            from .commit import build_commit  # a tick with nothing to commit never needs it

            built = build_commit(self.git, snap.tip, change, message, root=root,
                                 resolve_link=self._resolve_link)
            commit, sides = built.commit, built.refs(self.branch)
            # The high-water mark and the items' refs move with the branch, in the same
            # atomic push; those refs are forced, as the branch's lease is the lock.
            updates = [(commit, self.ref), (commit, self.high_water), *sides]
            leases: list[tuple[str, str | None]] = [
                (self.ref, snap.tip), (self.high_water, mark)]
            if tag is not None and snap.tip is not None:
                updates.append((snap.tip, f"refs/tags/{tag}"))
                leases.append((f"refs/tags/{tag}", None))
            forced = [ref for _, ref in sides]
            return commit, change, self.transport.push(updates, leases, True, forced)
        except TransportError as exc:
            if not exc.transient:
                raise RemoteError(f"{self.where()}: {self.redact(exc.message)}") from None
            return commit, change, PushOutcome(PushStatus.TRANSIENT, exc.message)

    def _landed_after_all(self, unsure: dict[str, tuple[str, ...]], commit: str,
                          change: Change, attempt: int, last: str) -> TransactResult | None:
        """The transaction's result when ``commit``, or an earlier commit of it whose push
        failed the same way, is on the remote after all."""
        # The remote may have accepted the push before the connection broke: ask it, so
        # a landed change is never applied twice.
        unsure[commit] = tuple(sorted(change))
        with contextlib.suppress(TransportError):
            tip = self.transport.ls_remote([self.ref]).get(self.ref)
            mine = self._which_landed(unsure, tip)
            if mine:
                log.info("%s: push reported %r, but it had landed", self.where(), last)
                return TransactResult(True, mine, attempt, unsure[mine])
        return None

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
