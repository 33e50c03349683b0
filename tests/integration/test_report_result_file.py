"""The result file a track leaves for ``orchestrator report``, read from disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import UserError
from orchestrator.reporting import load_result


@pytest.mark.parametrize(("content", "match"), [
    (b"[1, 2]", "must hold a JSON object, not list"),
    (b"{not json", "is not valid JSON"),
    (b"\xff\xfe", "is not valid JSON"),
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
