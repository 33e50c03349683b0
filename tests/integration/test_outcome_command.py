"""``orchestrator outcome`` reads the files a track left as hostile input: a symlink to
any file on the runner, a FIFO, a directory or 50 MB each cost one warning line, and
the outcome is still written. The CLI runs in a subprocess, except where its memory is
measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cli import main
from orchestrator.executors import outcomes

RUN = "nightly--20261201T0700Z"
KEY = f"{RUN}--load--1"


def _args(out: Path, *files: str) -> list[str]:
    return ["outcome", "--run", RUN, "--track", "load", "--attempt", "1", "--exit-code", "1",
            "--started-at", "2026-12-01T07:00:05Z", "--finished-at", "2026-12-01T07:01:05Z",
            *files, "--output", str(out)]


def _outcome(tmp_path: Path, *files: str) -> tuple[dict[str, Any], str]:
    """Run the command in a subprocess; the outcome it wrote and its stderr."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "orchestrator", *_args(out, *files)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{KEY}: failed -> {out / (KEY + '.json')}"
    return json.loads((out / f"{KEY}.json").read_text()), proc.stderr


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text('{"password": "hunter2"}\n')
    return path


def test_a_symlinked_stderr_stdout_or_result_is_never_followed(tmp_path: Path,
                                                               secret: Path) -> None:
    for name in ("err", "std", "res"):
        (tmp_path / name).symlink_to(secret)
    outcome, warned = _outcome(tmp_path, "--stderr", str(tmp_path / "err"),
                               "--stdout", str(tmp_path / "std"),
                               "--result", str(tmp_path / "res"))
    assert "hunter2" not in json.dumps(outcome) and "result" not in outcome
    assert not (tmp_path / "out" / f"{KEY}{outcomes.STDOUT_SUFFIX}").exists()
    assert outcome["error"] == (f"exit code 1; stderr ends with:\norchestrator: --stderr "
                                f"{tmp_path / 'err'} not read: a symlink (to {secret})")
    lines = warned.splitlines()
    assert lines == [
        f"orchestrator: warning: --result {tmp_path / 'res'} not read: a symlink (to "
        f"{secret}); result left out",
        f"orchestrator: warning: --stderr {tmp_path / 'err'} not read: a symlink (to {secret})",
        f"orchestrator: warning: --stdout {tmp_path / 'std'} not read: a symlink (to {secret})",
    ]


def test_a_fifo_or_a_directory_is_named_and_never_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "err")  # nobody ever writes it: a blocking open would hang
    os.mkfifo(tmp_path / "res")
    (tmp_path / "std").mkdir()
    outcome, warned = _outcome(tmp_path, "--stderr", str(tmp_path / "err"),
                               "--stdout", str(tmp_path / "std"),
                               "--result", str(tmp_path / "res"))
    assert outcome["phase"] == "failed" and "result" not in outcome
    assert outcome["error"].endswith(f"--stderr {tmp_path / 'err'} not read: not a regular "
                                     "file (a FIFO)")
    assert warned.splitlines() == [
        f"orchestrator: warning: --result {tmp_path / 'res'} not read: not a regular file "
        "(a FIFO); result left out",
        f"orchestrator: warning: --stderr {tmp_path / 'err'} not read: not a regular file "
        "(a FIFO)",
        f"orchestrator: warning: --stdout {tmp_path / 'std'} not read: not a regular file "
        "(a directory)",
    ]


def test_absent_or_empty_files_are_no_tail_and_no_result_without_a_word(tmp_path: Path) -> None:
    (tmp_path / "res").write_bytes(b"")
    outcome, warned = _outcome(tmp_path, "--stderr", str(tmp_path / "none"),
                               "--stdout", str(tmp_path / "none"),
                               "--result", str(tmp_path / "res"))
    assert outcome["error"] == "exit code 1" and "result" not in outcome
    assert warned == ""


def _huge(path: Path, end: bytes) -> None:
    """50 MB, sparse (written in no time), then ``end``."""
    with path.open("wb") as handle:
        handle.truncate(50 << 20)
        handle.seek(0, os.SEEK_END)
        handle.write(end)


def test_50_mb_of_stderr_and_stdout_are_read_by_their_tails_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _huge(tmp_path / "err", b"\nValueError: the last line\n")
    _huge(tmp_path / "std", b"\nthe end of stdout\n")
    out = tmp_path / "out"
    tracemalloc.start()
    try:
        code = main(_args(out, "--stderr", str(tmp_path / "err"),
                          "--stdout", str(tmp_path / "std")))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 0
    assert peak < 4 << 20, f"{peak} bytes allocated"  # not 50 MB: the tails only
    outcome = json.loads((out / f"{KEY}.json").read_text())
    assert outcome["error"].endswith("\nValueError: the last line")
    kept = (out / f"{KEY}{outcomes.STDOUT_SUFFIX}").read_bytes()
    assert len(kept) == outcomes.STDOUT_BYTES and kept.endswith(b"\nthe end of stdout\n")
    size = (50 << 20) + len(b"\nthe end of stdout\n")
    assert (f"orchestrator: warning: --stdout {tmp_path / 'std'} holds {size:,} bytes: only "
            f"its last {outcomes.STDOUT_BYTES:,} are kept") in capsys.readouterr().err
