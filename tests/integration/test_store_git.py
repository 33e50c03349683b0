"""The git store against real git: a bare repository in a temporary folder as origin."""

from __future__ import annotations

import base64
import http.server
import subprocess
import threading
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

from orchestrator.errors import EXIT_REMOTE, CASExhausted, PushRejected, RemoteError, UserError
from orchestrator.store import (
    Change,
    GitStateStore,
    GitTransport,
    InMemoryStateStore,
    PushOutcome,
    PushStatus,
    Snapshot,
    Stamped,
)
from tests.gitrepo import empty_clone, git

BRANCH = "orchestrator-state"


def _store(repo: Path, origin: Path | str, **kwargs: object) -> GitStateStore:
    return GitStateStore(repo, str(origin), sleep=lambda _: None, **kwargs)  # type: ignore[arg-type]


def _put(path: str, data: bytes) -> Change:
    return {path: data}


def _seed_main(tmp_path: Path, origin: Path) -> Path:
    """A project checkout with history on main, pushed to origin; returns the clone."""
    src = tmp_path / "project"
    git("init", "--quiet", "--initial-branch=main", str(src))
    (src / "README.md").write_text("project\n")
    (src / "schedules").mkdir()
    (src / "schedules" / "nightly.json").write_text("{}\n")
    git("add", ".", cwd=src)
    git("commit", "--quiet", "-m", "one", cwd=src)
    (src / "README.md").write_text("project, two\n")
    git("commit", "--quiet", "-am", "two", cwd=src)
    git("push", "--quiet", str(origin), "main", cwd=src)
    clone = tmp_path / "checkout"
    git("clone", "--quiet", str(origin), str(clone))
    return clone


# --------------------------------------------------------------------------- branch and tree


def test_the_state_branch_is_an_orphan_built_without_touching_the_checkout(
        tmp_path: Path, origin: Path) -> None:
    checkout = _seed_main(tmp_path, origin)
    (checkout / "README.md").write_text("local edit\n")
    refs_before = git("for-each-ref", cwd=checkout)
    status_before = git("status", "--porcelain", cwd=checkout)

    result = _store(checkout, "origin").transact(
        lambda _: _put("state/health.json", b"{}\n"), "first state")

    assert result.landed
    assert git("rev-list", "--parents", "-n1", BRANCH, cwd=origin) == result.tip  # no parent
    assert git("ls-tree", "-r", "--name-only", BRANCH, cwd=origin) == "state/health.json"
    assert git("log", "-1", "--format=%s", BRANCH, cwd=origin) == "first state"
    assert git("for-each-ref", cwd=checkout) == refs_before
    assert git("status", "--porcelain", cwd=checkout) == status_before
    assert not (checkout / ".git" / "FETCH_HEAD").exists()
    assert not (checkout / "state").exists()


def test_two_creators_of_the_branch_one_wins_the_other_retries_onto_it(
        tmp_path: Path, origin: Path) -> None:
    mine = _store(empty_clone(tmp_path / "a"), origin)
    rival = _store(empty_clone(tmp_path / "b"), origin)
    calls = 0

    def change(snap: Snapshot) -> Change:
        nonlocal calls
        calls += 1
        if calls == 1:
            assert snap.tip is None
            rival.transact(lambda _: _put("state/b", b"b"), "rival creates")
        return _put("state/a", b"a")

    result = mine.transact(change, "mine")
    assert result.attempts == 2
    log = git("log", "--format=%s|%P", BRANCH, cwd=origin).splitlines()
    rival_sha = git("rev-parse", f"{BRANCH}~1", cwd=origin)
    assert log == [f"mine|{rival_sha}", "rival creates|"]
    assert git("ls-tree", "-r", "--name-only", BRANCH, cwd=origin).split() == ["state/a",
                                                                               "state/b"]


def test_single_branch_mode_keeps_every_other_path_and_the_local_history(
        tmp_path: Path, origin: Path) -> None:
    checkout = _seed_main(tmp_path, origin)
    old_main = git("rev-parse", "main", cwd=origin)
    store = _store(checkout, "origin", branch="main")

    snap = store.read()
    assert snap.tip == old_main
    assert snap.files["schedules/nightly.json"] == b"{}\n"
    result = store.transact(lambda _: _put("state/ticks.jsonl", b"{}\n"), "tick")

    assert git("rev-parse", "main^", cwd=origin) == old_main
    assert git("ls-tree", "-r", "--name-only", "main", cwd=origin).split() == [
        "README.md", "schedules/nightly.json", "state/ticks.jsonl"]
    assert git("show", "main:README.md", cwd=origin) == "project, two"
    assert result.tip == git("rev-parse", "main", cwd=origin)
    # A full clone stays full: its main must not be cut by a shallow fetch.
    assert git("rev-parse", "--is-shallow-repository", cwd=checkout) == "false"
    git("pull", "--quiet", "--ff-only", cwd=checkout)
    assert git("rev-list", "--count", "main", cwd=checkout) == "3"


def test_a_fresh_runner_fetches_only_the_state_branch_and_only_its_tip(
        tmp_path: Path, origin: Path) -> None:
    _seed_main(tmp_path, origin)
    writer = _store(empty_clone(tmp_path / "writer"), origin)
    for i in range(3):
        writer.transact(lambda _, i=i: _put(f"state/{i}", b"x"), f"write {i}")
    runner = empty_clone(tmp_path / "runner")

    snap = _store(runner, origin).read()

    assert sorted(snap.files) == ["state/0", "state/1", "state/2"]
    assert git("rev-parse", "--is-shallow-repository", cwd=runner) == "true"
    assert git("rev-list", "--count", snap.tip or "", cwd=runner) == "1"
    assert git("for-each-ref", cwd=runner) == ""  # no ref written, no main fetched
    # main's commits were never fetched.
    probe = subprocess.run(["git", "cat-file", "-e", git("rev-parse", "main", cwd=origin)],
                           cwd=runner, capture_output=True)
    assert probe.returncode != 0


@pytest.mark.parametrize("form", ["name", "path", "file-url", "relative-path"])
def test_the_remote_may_be_a_name_a_path_or_a_file_url(
        tmp_path: Path, origin: Path, form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = empty_clone(tmp_path / "repo")
    remote = {"name": "upstream", "path": str(origin), "file-url": origin.as_uri(),
              "relative-path": "origin.git"}[form]
    if form == "name":
        git("remote", "add", "upstream", str(origin), cwd=repo)
    monkeypatch.chdir(tmp_path)
    result = GitStateStore(repo, remote).transact(lambda _: _put("state/a", b"1"), "one")
    assert git("rev-parse", BRANCH, cwd=origin) == result.tip


def test_an_unknown_remote_name_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no remote named 'origin'"):
        GitStateStore(empty_clone(tmp_path / "repo"), "origin")


def test_a_missing_remote_fails_at_once_with_exit_3(tmp_path: Path) -> None:
    store = _store(empty_clone(tmp_path / "repo"), tmp_path / "missing.git")
    with pytest.raises(RemoteError, match="does not appear to be a git repository") as info:
        store.transact(lambda _: _put("state/a", b"1"), "one")
    assert info.value.exit_code == EXIT_REMOTE


def test_snapshots_load_blobs_in_bulk_and_share_them_by_blob_id(
        tmp_path: Path, origin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = _store(empty_clone(tmp_path / "w"), origin)
    writer.transact(lambda _: {**{f"state/runs/r{i}/run.json": f"{i}\n".encode()
                                  for i in range(300)},
                               **{f"state/runs/r{i}/brief.html": b"<p>big</p>" * 100
                                  for i in range(300)}}, "many")
    reader = _store(empty_clone(tmp_path / "r"), origin)
    calls: list[tuple[str, ...]] = []
    real_run = reader.git.run

    def counting_run(*args: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        calls.append(args)
        return real_run(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reader.git, "run", counting_run)
    snap = reader.read()
    runs = [p for p in snap.files if p.endswith("/run.json")]
    snap.files.prefetch(runs)  # type: ignore[attr-defined]
    contents = {path: snap.files[path] for path in runs}
    assert len(contents) == 300 and contents["state/runs/r7/run.json"] == b"7\n"
    batches = [c for c in calls if c[:2] == ("cat-file", "--batch")]
    assert len(batches) == 1  # one bulk load, and no brief was read
    assert [c[:1] for c in calls].count(("ls-tree",)) == 1
    # a miss loads the file with its siblings: one call for a run's folder
    assert snap.files["state/runs/r3/brief.html"].startswith(b"<p>big")
    assert len([c for c in calls if c[:2] == ("cat-file", "--batch")]) == 2
    # the same tip read again costs a tree listing, no blob loads
    again = reader.read()
    assert again.files["state/runs/r9/run.json"] == b"9\n"
    assert len([c for c in calls if c[:2] == ("cat-file", "--batch")]) == 2


def test_a_stamped_file_names_the_tree_its_folder_gets_in_the_same_commit(
        tmp_path: Path, origin: Path) -> None:
    store = _store(empty_clone(tmp_path / "w"), origin)

    def stamp(tree: str | None) -> bytes:
        return f"{tree}\n".encode()

    def write(change: Change) -> str:
        result = store.transact(lambda _: change, "write")
        assert result.landed
        assert result.tip is not None
        return result.tip

    tip = write({"state/runs/a/run.json": b"a\n", "state/index": Stamped.of("state/runs", stamp)})
    named = store.read().files["state/index"].decode().strip()
    assert named == git("rev-parse", f"{tip}:state/runs", cwd=origin)
    # a change under the folder moves the tree, and the stamp with it
    tip = write({"state/runs/a/tracks/t.json": b"t\n",
                 "state/index": Stamped.of("state/runs", stamp)})
    moved = store.read().files["state/index"].decode().strip()
    assert moved != named and moved == git("rev-parse", f"{tip}:state/runs", cwd=origin)
    # a stamp alone is no change: nothing is committed
    assert not store.transact(lambda _: {"state/index": Stamped.of("state/runs", stamp)},
                              "alone").landed
    assert git("rev-parse", f"refs/heads/{BRANCH}", cwd=origin) == tip
    # a folder that is not there is named as such
    write({"state/runs/a/tracks/t.json": None, "state/runs/a/run.json": None,
           "state/other": b"1\n", "state/index": Stamped.of("state/runs", stamp)})
    assert store.read().files["state/index"] == b"None\n"
    # a stamp cannot name the folder it is in: its own bytes would change the id
    with pytest.raises(ValueError, match="cannot name the tree"):
        store.transact(lambda _: {"state/runs/x": Stamped.of("state/runs", stamp)}, "self")
    # the in-memory store names the tree git gives the same files
    memory = InMemoryStateStore()
    memory.transact(lambda _: {"state/runs/a/run.json": b"a\n",
                               "state/index": Stamped.of("state/runs", stamp)}, "write")
    assert memory.read().files["state/index"].decode().strip() == named


# --------------------------------------------------------------------------- hooks


def _hook(origin: Path, name: str, body: str) -> None:
    hook = origin / "hooks" / name
    hook.write_text("#!/bin/sh\n" + body)
    hook.chmod(0o755)


def test_a_declining_hook_fails_the_first_attempt_naming_branch_and_reason(
        tmp_path: Path, origin: Path) -> None:
    count = tmp_path / "count"
    _hook(origin, "pre-receive",
          f'echo x >> "{count}"\necho "GH006: Protected branch update failed" >&2\nexit 1\n')
    store = _store(empty_clone(tmp_path / "repo"), origin)
    with pytest.raises(PushRejected) as info:
        store.transact(lambda _: _put("state/a", b"1"), "one")
    message = info.value.message
    assert info.value.exit_code == EXIT_REMOTE
    assert "'orchestrator-state'" in message and str(origin) in message
    assert "pre-receive hook declined" in message
    assert "GH006: Protected branch update failed" in message
    assert count.read_text() == "x\n"  # no retry loop


def test_a_remote_that_dies_once_is_retried_and_the_change_lands(
        tmp_path: Path, origin: Path) -> None:
    count = tmp_path / "count"
    # The first time, the hook kills receive-pack: the client sees the connection drop.
    _hook(origin, "pre-receive",
          f'echo x >> "{count}"\n'
          f'if [ "$(wc -l < "{count}")" -eq 1 ]; then kill -9 $PPID; exit 1; fi\nexit 0\n')
    store = _store(empty_clone(tmp_path / "repo"), origin)
    result = store.transact(lambda _: _put("state/a", b"1"), "one")
    assert result.landed and result.attempts == 2
    assert count.read_text() == "x\nx\n"
    assert git("show", f"{BRANCH}:state/a", cwd=origin) == "1"


# --------------------------------------------------------------------------- transient


class FlakyTransport:
    """The real transport, with a broken connection reported after (or instead of) a push."""

    def __init__(self, real: GitTransport, *, accept_first: bool,
                 after_accept: GitStateStore | None = None) -> None:
        self.real = real
        self.accept_first = accept_first
        self.after_accept = after_accept
        self.pushes = 0

    def ls_remote(self, refs: list[str]) -> dict[str, str]:
        return self.real.ls_remote(refs)

    def fetch(self, sha: str, ref: str, depth: int | None) -> None:
        self.real.fetch(sha, ref, depth)

    def fetch_blobs(self, shas: list[str]) -> None:
        self.real.fetch_blobs(shas)

    def push(self, updates: list[tuple[str, str]], leases: list[tuple[str, str | None]],
             atomic: bool = False, forced: Collection[str] = ()) -> PushOutcome:
        self.pushes += 1
        if self.pushes > 1:
            return self.real.push(updates, leases, atomic, forced)
        if self.accept_first:
            assert self.real.push(updates, leases, atomic, forced).status is PushStatus.OK
            if self.after_accept is not None:  # another writer lands on top at once
                self.after_accept.transact(lambda _: _put("state/rival", b"r"), "rival")
        return PushOutcome(PushStatus.TRANSIENT, "fatal: the remote end hung up unexpectedly")


def _counter(snap: Snapshot) -> Change:
    return _put("state/counter", str(int(snap.files.get("state/counter", b"0")) + 1).encode())


def _flaky_store(tmp_path: Path, origin: Path, **kwargs: object
                 ) -> tuple[GitStateStore, FlakyTransport]:
    store = _store(empty_clone(tmp_path / "repo"), origin)
    flaky = FlakyTransport(GitTransport(store.git, store.url), **kwargs)  # type: ignore[arg-type]
    store.transport = flaky
    return store, flaky


def test_a_transient_failure_after_the_remote_accepted_is_not_pushed_twice(
        tmp_path: Path, origin: Path) -> None:
    store, flaky = _flaky_store(tmp_path, origin, accept_first=True)
    result = store.transact(_counter, "inc")
    assert result.landed and result.attempts == 1 and result.changed == ("state/counter",)
    assert flaky.pushes == 1
    assert result.tip == git("rev-parse", BRANCH, cwd=origin)
    assert git("show", f"{BRANCH}:state/counter", cwd=origin) == "1"


def test_a_landed_push_is_recognised_even_after_another_writer_built_on_it(
        tmp_path: Path, origin: Path) -> None:
    rival = _store(empty_clone(tmp_path / "rival"), origin)
    store, flaky = _flaky_store(tmp_path, origin, accept_first=True, after_accept=rival)
    store.transact(_counter, "seed")  # the flaky first push; the rival lands on top of it
    assert flaky.pushes == 1
    result = store.transact(_counter, "inc")
    assert result.landed and flaky.pushes == 2
    assert git("show", f"{BRANCH}:state/counter", cwd=origin) == "2"
    assert git("log", "--format=%s", BRANCH, cwd=origin).split() == ["inc", "rival", "seed"]


def test_a_transient_failure_before_the_remote_accepted_is_retried(
        tmp_path: Path, origin: Path) -> None:
    store, flaky = _flaky_store(tmp_path, origin, accept_first=False)
    result = store.transact(_counter, "inc")
    assert result.landed and result.attempts == 2 and flaky.pushes == 2
    assert git("show", f"{BRANCH}:state/counter", cwd=origin) == "1"
    assert git("rev-list", "--count", BRANCH, cwd=origin) == "1"


def test_retries_are_bounded_by_attempts_and_by_seconds(tmp_path: Path, origin: Path) -> None:
    repo = empty_clone(tmp_path / "repo")
    delays: list[float] = []
    store = GitStateStore(repo, str(origin), max_attempts=4, base_delay=1.0, max_delay=3.0,
                          max_seconds=1000, sleep=delays.append, rand=lambda: 1.0,
                          clock=lambda: 0.0)
    store.transport = FlakyTransport(GitTransport(store.git, store.url), accept_first=False)
    store.transport.pushes = -100  # every push "breaks the connection"
    with pytest.raises(CASExhausted, match="after 4 attempts"):
        store.transact(_counter, "inc")
    assert delays == [1.0, 2.0, 3.0]

    now = [0.0]
    timed = GitStateStore(repo, str(origin), max_attempts=100, base_delay=1.0, max_delay=4.0,
                          max_seconds=10, sleep=lambda d: now.__setitem__(0, now[0] + d),
                          clock=lambda: now[0], rand=lambda: 1.0)
    timed.transport = store.transport
    with pytest.raises(CASExhausted, match=r"attempts in 7\.0s"):
        timed.transact(_counter, "inc")


# --------------------------------------------------------------------------- https token


class _Recorder(http.server.BaseHTTPRequestHandler):
    status = 403
    seen: list[tuple[str, str | None]] = []  # noqa: RUF012 - class-level test recorder

    def do_GET(self) -> None:
        auth = self.headers.get_all("Authorization") or []
        type(self).seen.append((self.path, ", ".join(auth) or None))
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def fake_server() -> Iterator[tuple[str, type[_Recorder]]]:
    handler = type("Handler", (_Recorder,), {"seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/o/r.git", handler
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("status", "error"), [(403, RemoteError), (503, CASExhausted)])
def test_a_token_is_sent_but_never_stored_or_shown(
        tmp_path: Path, fake_server: tuple[str, type[_Recorder]], status: int,
        error: type[Exception]) -> None:
    url, handler = fake_server
    handler.status = status
    token = "ghs_s3cr3tT0ken"
    repo = empty_clone(tmp_path / "repo")
    # What actions/checkout persists: a header for the whole host. It must be replaced,
    # not sent alongside ours.
    host = url.split("/o/")[0] + "/"
    git("config", f"http.{host}.extraheader", "AUTHORIZATION: basic b2xkOm9sZA==", cwd=repo)
    store = _store(repo, url, token=token, max_attempts=2)
    with pytest.raises(error) as info:
        store.transact(lambda _: _put("state/a", b"1"), "one")
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    assert handler.seen and all(auth == f"Basic {basic}" for _, auth in handler.seen)
    # 403 is permanent: one request; 503 is transient: retried until the bound.
    assert len(handler.seen) == (1 if status == 403 else 2)
    message = str(info.value)
    assert token not in message and basic not in message
    assert str(status) in message
    assert token not in (repo / ".git" / "config").read_text()
    assert basic not in (repo / ".git" / "config").read_text()


def test_a_runner_without_a_git_identity_commits_as_orchestrator(
        tmp_path: Path, origin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.delenv(f"GIT_{role}_NAME")
        monkeypatch.delenv(f"GIT_{role}_EMAIL")
    repo = empty_clone(tmp_path / "repo")
    _store(repo, origin).transact(lambda _: _put("state/a", b"1"), "one")
    assert git("log", "-1", "--format=%an <%ae>|%cn <%ce>", BRANCH, cwd=origin) == (
        "orchestrator <orchestrator@localhost>|orchestrator <orchestrator@localhost>")
    git("config", "user.name", "Release Bot", cwd=repo)
    git("config", "user.email", "bot@example.invalid", cwd=repo)
    _store(repo, origin).transact(lambda _: _put("state/a", b"2"), "two")
    assert git("log", "-1", "--format=%an <%ae>", BRANCH, cwd=origin) == (
        "Release Bot <bot@example.invalid>")
