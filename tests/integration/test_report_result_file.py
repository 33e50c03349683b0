"""The result file a track leaves for ``orchestrator report``, read from disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.errors import UserError
from orchestrator.runs.reporting import load_result


@pytest.mark.parametrize(("content", "match"), [
    (b"[1, 2]", "must hold a JSON object, not list"),
    (b"{not json", "is refused: line 1 column 2: invalid JSON"),
    (b"\xff\xfe", "is refused: not UTF-8 text"),
    (b'{"summary": "\\ud800"}', "is refused: a lone surrogate"),
    (b"[" * 30_000 + b"]" * 30_000, "is refused: nested deeper than 64 levels"),
    (b'{"n": ' + b"7" * 5000 + b"}", "is refused: an integer of 5000 digits"),
])
def test_a_bad_result_file_is_a_user_error(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "result.json"
    path.write_bytes(content)
    with pytest.raises(UserError, match=match):
        load_result(path)


def test_a_missing_or_huge_result_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read result file"):
        load_result(tmp_path / "missing.json")
    huge = tmp_path / "huge.json"
    huge.write_bytes(b'{"a": "' + b"x" * (1 << 20) + b'"}')
    with pytest.raises(UserError, match="larger than"):
        load_result(huge)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_a_result_that_is_not_a_regular_file_is_refused_without_blocking(
        tmp_path: Path, kind: str) -> None:
    path = tmp_path / "result.json"
    if kind == "fifo":
        os.mkfifo(path)  # nobody writes it: a blocking open would never return
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")  # endless, and its size reads as 0
    else:
        path.mkdir()
    with pytest.raises(UserError, match=r"is refused: (not a regular file|a symlink)"):
        load_result(path)
