"""The one atomic file writer: content, mode, folder, and no debris on failure."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from orchestrator.support.atomic import DEFAULT_MODE, write_text


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_file_gets_the_default_mode_and_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "brief.html"
    write_text(path, "héllo\n")
    assert path.read_bytes() == "héllo\n".encode()
    assert _mode(path) == DEFAULT_MODE
    assert os.listdir(path.parent) == ["brief.html"]


def test_replacing_keeps_the_mode_of_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text("old\n")
    path.chmod(0o750)
    write_text(path, "new\n")
    assert path.read_text() == "new\n"
    assert _mode(path) == 0o750


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "nightly.json"
    path.write_text("{}\n")
    with pytest.raises(UnicodeEncodeError):
        write_text(path, "\udcff")  # a lone surrogate cannot be encoded
    assert path.read_text() == "{}\n"
    assert os.listdir(tmp_path) == ["nightly.json"]


def test_line_ends_are_written_as_given(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    write_text(path, "a\nb\r\n")
    assert path.read_bytes() == b"a\nb\r\n"
