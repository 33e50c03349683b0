"""The unit tier's guard (tests/unit/conftest.py) stops I/O before it happens."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

Failed = pytest.fail.Exception


def test_a_subprocess_fails_the_test() -> None:
    with pytest.raises(Failed, match="started a subprocess"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_a_connection_or_a_listener_fails_the_test() -> None:
    with socket.socket() as sock:
        with pytest.raises(Failed, match="opened a connection"):
            sock.connect(("127.0.0.1", 9))
        with pytest.raises(Failed, match="listened on a socket"):
            sock.bind(("127.0.0.1", 0))


def test_a_temporary_folder_fails_the_test(request: pytest.FixtureRequest) -> None:
    with pytest.raises(Failed, match="asked for a temporary folder"):
        request.getfixturevalue("tmp_path")
