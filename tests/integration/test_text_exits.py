"""What a track prints reaches no record and no view with a secret or a terminal escape
in it, and every reason an operator gives is held to one rule.

Real ticks of the local executor, real git, the CLI as an operator runs it (its output
not a terminal, as in CI logs or ``| tee``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.state.phases import RunStatus
from tests.builders import spec_data
from tests.drive import cli, launches, state_of, tick, wait_until
from tests.receiver import Receiver

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"
TOKEN = "ghs_" + "Tk7" * 12 + "tail"
"""A runner's credential: 44 characters, as a GitHub token is."""
OTHER = "ghp_" + "Ot5" * 12 + "Zend"
"""A token the orchestrator never held, printed with a colour code inside."""
HOOK = "https://hooks.example.com/services/T0/B0/" + "Wh4" * 8
WINDOW = 16 * 1024
"""The end of stderr.log the local executor reads."""
ESCAPES = ("\x1b", "\x07", "\x08", "\x9b", "\x9d")


def _script(folder: Path) -> Path:
    """A track that prints hostile text to stderr, writes a hostile summary and fails."""
    lines = [
        f"refused: Cannot POST /services/T0/B0/{'Wh4' * 8}",
        f"other {OTHER[:20]}\x1b[31m{OTHER[20:]}\x1b[0m printed",
        "\x1b]0;owned title\x07\x1b]8;;https://evil.invalid\x1b\\click\x1b]8;;\x1b\\ here",
        "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07bell\x07 back\x08\x08space",
        "Traceback: the end",
    ]
    tail = "\n" + "\n".join(lines) + "\n"
    # the token straddles the start of the window the executor reads: 20 of its
    # characters fall inside
    filler = " " * (WINDOW - 20 - len(tail.encode()))
    script = folder / "hostile.py"
    script.write_text(
        "import json, os, sys\n"
        f"sys.stderr.write('noise ' * 100 + {TOKEN!r} + {filler!r} + {tail!r})\n"
        "with open(os.environ['ORCHESTRATOR_RESULT'], 'w') as fh:\n"
        f"    json.dump({{'summary': 'rows \\x1b]52;c;eA==\\x07 ok ' + {OTHER!r}}}, fh)\n"
        "sys.exit(3)\n")
    return script


def _leaks(text: str, secrets: tuple[str, ...] = (TOKEN, OTHER, HOOK)) -> list[str]:
    """The pieces of ``secrets`` (any eight characters of one) and the escape bytes in
    ``text``."""
    found = [c for c in ESCAPES if c in text]
    for secret in secrets:
        found += [secret[i:i + 8] for i in range(len(secret) - 7) if secret[i:i + 8] in text]
    return found


@pytest.fixture()
def hostile(tmp_path: Path, repo_with_origin: Callable[..., Path],
            monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", TOKEN)
    monkeypatch.setenv("TEAM_WEBHOOK", HOOK)
    script = _script(tmp_path)
    repo = repo_with_origin({"nightly": spec_data(tracks=[
        {"name": "bad", "run": f"{sys.executable} {script}"}])})
    work = tmp_path / "work"
    tick(repo, T0 + timedelta(minutes=1), work)
    wait_until(lambda: len(launches(work)) == 1)
    time.sleep(0.5)
    tick(repo, T0 + timedelta(minutes=2), work)
    return repo, work


@pytest.mark.slow
def test_a_hostile_track_leaves_no_secret_and_no_escape_in_records_or_views(
        hostile: tuple[Path, Path]) -> None:
    repo, work = hostile
    state, snap = state_of(repo)
    assert state.runs[RUN].status is RunStatus.FAILED
    error = state.tracks[RUN]["bad"].error_log[-1]
    assert not _leaks(error), error
    assert "Traceback: the end" in error and "click here" in error
    for path, data in snap.files.items():  # every record, the briefs too
        assert not _leaks(data.decode("utf-8", "replace")), path
    shown = [cli(repo, *args, work=work) for args in (
        ("runs", "show", RUN), ("runs", "show", RUN, "--json"), ("dlq", "show", f"{RUN}--bad"),
        ("status",), ("logs", RUN, "bad"))]
    for proc in shown:
        assert not _leaks(proc.stdout + proc.stderr), proc.args
    assert "bell back" in shown[-1].stdout  # what is left of the log is shown


@pytest.mark.parametrize("args", [
    ("schedules", "pause", "nightly"), ("schedules", "resume", "nightly"),
    ("schedules", "unpause", "nightly"), ("dlq", "discard", f"{RUN}--bad"),
    ("dlq", "requeue", f"{RUN}--bad"), ("trigger", "nightly")])
@pytest.mark.parametrize("reason", ["r" * 2001, "paused \x1b]0;owned\x07", "bell\x07",
                                    "\x9b31m"])
def test_every_reason_over_2000_characters_or_with_a_control_is_refused_with_one_line(
        repo_with_origin: Callable[..., Path], args: tuple[str, ...], reason: str) -> None:
    repo = repo_with_origin({"nightly": spec_data()})
    proc = cli(repo, *args, "--reason", reason)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr == "orchestrator: --reason: give at most 2000 printable characters\n"
    assert proc.stdout == ""


def test_a_reason_of_2000_characters_and_a_newline_pauses(
        repo_with_origin: Callable[..., Path]) -> None:
    repo = repo_with_origin({"nightly": spec_data()})
    reason = "line one\n" + "r" * 1991
    assert cli(repo, "schedules", "pause", "nightly", "--reason", reason).returncode == 0
    shown = json.loads(cli(repo, "schedules", "show", "nightly", "--json").stdout)
    assert json.dumps(reason) in json.dumps(shown)


def test_a_receiver_that_quotes_the_webhook_s_path_has_it_shown_nowhere(
        tmp_path: Path, repo_with_origin: Callable[..., Path],
        receiver: Callable[[str], Receiver]) -> None:
    echo = receiver("echo-404")
    repo = repo_with_origin({"nightly": spec_data()})
    (repo / "orchestrator.json").write_text(json.dumps({"notify": {"webhooks": [
        {"url_secret": "TEAM_WEBHOOK", "events": ["run_failed"]}]}}))
    summary = tmp_path / "summary.md"
    proc = cli(repo, "notify", "test", env={"TEAM_WEBHOOK": echo.url,
                                            "GITHUB_STEP_SUMMARY": str(summary)})
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "answered 404" in said and "Cannot POST" in said, said
    path = echo.url.split(":", 2)[2].split("/", 1)[1]  # hooks/T000/B000/secret
    assert echo.requests and echo.requests[0].path == f"/{path}"
    assert "B000/secret" not in said, said
