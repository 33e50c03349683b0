"""Classifying push results, redaction and back-off of the git store (no remote needed)."""

from __future__ import annotations

import pytest

from orchestrator.store import (
    InMemoryStateStore,
    PushStatus,
    Snapshot,
    auth_env,
    check_path,
    classify_push,
    display_url,
    token_allowed,
)
from orchestrator.support.credentials import Redactor

REF = "refs/heads/orchestrator-state"
SHA = "90a5ceb0eb04a0f61279e28e10689c27c5314bda"


def _porcelain(flag: str, summary: str, ref: str = REF) -> str:
    return f"To ../origin.git\n{flag}\t{SHA}:{ref}\t{summary}\nDone\n"


@pytest.mark.parametrize(("stdout", "stderr", "rc", "status"), [
    (_porcelain(" ", "62851b5..90a5ceb"), "", 0, PushStatus.OK),
    (_porcelain("*", "[new branch]"), "", 0, PushStatus.OK),
    (_porcelain("+", "62851b5...90a5ceb (forced update)"), "", 0, PushStatus.OK),
    # Accepted, then the connection broke (post-receive killed): the line still says ok.
    (_porcelain(" ", "62851b5..90a5ceb").replace("Done\n", ""),
     "error: error in sideband demultiplexer", 1, PushStatus.OK),
    (_porcelain("!", "[rejected] (stale info)"), "", 1, PushStatus.LOST_RACE),
    (_porcelain("!", "[rejected] (fetch first)"), "", 1, PushStatus.LOST_RACE),
    (_porcelain("!", "[rejected] (non-fast-forward)"), "", 1, PushStatus.LOST_RACE),
    (_porcelain("!", "[remote rejected] (failed to update ref)"),
     "remote: error: cannot lock ref 'refs/heads/orchestrator-state': reference already "
     "exists", 1, PushStatus.LOST_RACE),
    (_porcelain("!", "[remote rejected] (cannot lock ref 'refs/heads/x': is at 1234 but "
                "expected 5678)"), "", 1, PushStatus.LOST_RACE),
    (_porcelain("!", "[remote rejected] (pre-receive hook declined)"),
     "remote: GH006: Protected branch update failed", 1, PushStatus.PERMANENT),
    (_porcelain("!", "[remote rejected] (protected branch hook declined)"), "", 1,
     PushStatus.PERMANENT),
    (_porcelain("!", "[remote rejected] (failed)"), "", 1, PushStatus.TRANSIENT),
    (_porcelain("!", "[remote rejected] (Internal Server Error)"), "", 1,
     PushStatus.TRANSIENT),
    (_porcelain("!", "[remote failure] (remote failed to report status)"), "", 1,
     PushStatus.TRANSIENT),
    ("", "send-pack: unexpected disconnect while reading sideband packet\n"
         "fatal: the remote end hung up unexpectedly", 128, PushStatus.TRANSIENT),
    ("", "error: RPC failed; HTTP 502 curl 22 The requested URL returned error: 502\n"
         "fatal: the remote end hung up unexpectedly", 128, PushStatus.TRANSIENT),
    ("", "fatal: unable to access 'https://github.com/o/r/': Could not resolve host: "
         "github.com", 128, PushStatus.TRANSIENT),
    ("", "remote: Permission to o/r.git denied to github-actions[bot].\nfatal: unable to "
         "access 'https://github.com/o/r/': The requested URL returned error: 403", 128,
     PushStatus.PERMANENT),
    ("", "fatal: '/nope.git' does not appear to be a git repository", 128,
     PushStatus.PERMANENT),
])
def test_push_results_are_classified_per_ref(stdout: str, stderr: str, rc: int,
                                             status: PushStatus) -> None:
    assert classify_push(rc, stdout, stderr, [REF]).status is status


def test_a_declined_push_names_the_remotes_reason() -> None:
    outcome = classify_push(1, _porcelain("!", "[remote rejected] (pre-receive hook declined)"),
                            "remote: GH006: Protected branch update failed        \n"
                            "error: failed to push some refs", [REF])
    assert outcome.reason == ("[remote rejected] (pre-receive hook declined); remote says: "
                              "GH006: Protected branch update failed")


def test_an_atomic_push_is_judged_by_the_ref_that_failed() -> None:
    tag = "refs/tags/orchestrator-archive/20261201T070000Z"
    stdout = (f"To x\n!\t{SHA}:{REF}\t[rejected] (atomic push failed)\n"
              f"!\t{SHA}:{tag}\t[rejected] (stale info)\nDone\n")
    assert classify_push(1, stdout, "", [REF, tag]).status is PushStatus.LOST_RACE
    ok = f"To x\n+\t{SHA}:{REF}\tforced\n*\t{SHA}:{tag}\t[new tag]\nDone\n"
    assert classify_push(0, ok, "", [REF, tag]).status is PushStatus.OK


def test_redactor_removes_token_basic_form_and_url_passwords() -> None:
    redact = Redactor(["s3cr3t"])
    redact.add("czNjcjN0")
    text = "https://x-access-token:s3cr3t@github.com/o/r fatal s3cr3t czNjcjN0 " \
           "https://user:other@host/p"
    out = redact(text)
    assert "s3cr3t" not in out and "czNjcjN0" not in out and "other" not in out
    assert "https://***@github.com/o/r" in out


def test_display_url_drops_user_info() -> None:
    assert display_url("https://u:p@github.com/o/r.git") == "https://github.com/o/r.git"
    assert display_url("/srv/origin.git") == "/srv/origin.git"


def test_check_path_accepts_nested_state_paths() -> None:
    assert check_path("state/runs/a--20261201T0700Z/tracks/t.json")


def test_in_memory_contention_forces_retries_then_lands() -> None:
    rivals = iter([{"state/r1": b"1"}, {"state/r2": b"2"}])
    store = InMemoryStateStore(contention=lambda attempt: next(rivals, None))
    seen: list[set[str]] = []

    def change(snap: Snapshot) -> dict[str, bytes | None]:
        seen.append(set(snap.files))
        return {"state/mine": b"m"}

    result = store.transact(change, "mine")
    assert result.landed and result.attempts == 3
    assert seen == [set(), {"state/r1"}, {"state/r1", "state/r2"}]
    assert [m for _, m, _ in store.log] == ["rival", "rival", "mine"]


def test_a_github_token_goes_only_to_github_or_loopback(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.delenv("GITHUB_SERVER_URL", raising=False)
    assert token_allowed("https://github.com/o/r.git")
    assert not token_allowed("https://gitlab.com/o/r.git")
    assert not token_allowed("http://github.com/o/r.git")  # never in clear text
    assert token_allowed("http://127.0.0.1:8080/o/r.git")
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://ghe.example.com")
    assert token_allowed("https://ghe.example.com/o/r.git")


def test_the_token_header_goes_after_configuration_set_elsewhere(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A wrapper may already pass two GIT_CONFIG_* entries: ours are numbered after them,
    # an empty header first so that only one Authorization is sent.
    monkeypatch.setenv("GIT_CONFIG_COUNT", "2")
    redact = Redactor()
    env = auth_env("https://github.com/o/r.git", "s3cr3t", redact)
    key = "http.https://github.com/o/r.git.extraHeader"
    basic = "eC1hY2Nlc3MtdG9rZW46czNjcjN0"  # base64 of x-access-token:s3cr3t
    assert env == {"GIT_CONFIG_KEY_2": key, "GIT_CONFIG_VALUE_2": "",
                   "GIT_CONFIG_KEY_3": key, "GIT_CONFIG_VALUE_3": f"Authorization: Basic {basic}",
                   "GIT_CONFIG_COUNT": "4"}
    assert redact(f"s3cr3t {basic}") == "*** ***"


def test_no_token_header_for_another_forge_but_its_url_password_is_redacted() -> None:
    redact = Redactor()
    assert auth_env("https://u:pw0rd@gitlab.com/o/r.git", "s3cr3t", redact) == {}
    assert redact("pw0rd s3cr3t") == "*** s3cr3t"


def test_an_atomic_transaction_that_failed_on_every_ref_is_judged_by_the_remote() -> None:
    # Two creators of the branch: the loser's refs all say only "atomic transaction
    # failed"; receive-pack says why on stderr.
    other = "refs/orchestrator/high-water/s"
    stdout = (f"To x\n!\t{SHA}:{REF}\t[remote rejected] (atomic transaction failed)\n"
              f"!\t{SHA}:{other}\t[remote rejected] (atomic transaction failed)\nDone\n")
    stderr = (f"remote: error: cannot lock ref '{REF}': reference already exists\n"
              "error: failed to push some refs to 'x'\n")
    outcome = classify_push(1, stdout, stderr, [REF, other])
    assert outcome.status is PushStatus.LOST_RACE
    assert "reference already exists" in outcome.reason
    broke = classify_push(1, stdout, "error: failed to push some refs to 'x'\n", [REF, other])
    assert broke.status is PushStatus.TRANSIENT
