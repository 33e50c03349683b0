"""The fake GitHub's HTTP server itself: a client that hangs up is dropped without a
word, as a real server drops it, and an error in the fake's own code is still reported.

A client hangs up when its timeout passes or its process is killed mid-request; the
suite does both, so a server that printed a traceback then would litter passing runs.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from tests.fakes.github import FakeGitHub


def _request(fake: FakeGitHub, *, body: bytes = b"", length: int | None = None) -> bytes:
    """A list-runs request as bytes; ``length`` may claim more body than is sent."""
    head = (f"GET /repos/{fake.repository}/actions/runs HTTP/1.1\r\n"
            f"Host: 127.0.0.1\r\nAuthorization: Bearer {fake.token}\r\n"
            "X-GitHub-Api-Version: 2022-11-28\r\nAccept: application/vnd.github+json\r\n")
    if length is not None:
        head += f"Content-Length: {length}\r\n"
    return head.encode() + b"\r\n" + body


def _until(done: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + 10
    while not done():
        assert time.monotonic() < end, what
        time.sleep(0.01)


def _handlers(before: set[threading.Thread]) -> list[threading.Thread]:
    """The server's request threads started since ``before`` and not ended yet (one
    still being started is not alive yet: the callers wait until theirs runs)."""
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


def _handlers_done(before: set[threading.Thread]) -> None:
    """Wait for the server's request threads started since ``before`` to end, so all
    they print is printed."""
    for thread in _handlers(before):
        thread.join(timeout=10)
        assert not thread.is_alive(), f"{thread.name} still serving"


def _hang_up(fake: FakeGitHub, request: bytes, *, answered: bool) -> None:
    """Send ``request``, then close with a reset (SO_LINGER 0), as a killed process's
    socket is; ``answered``: only once the fake has taken the request in hand."""
    host, port = fake.url.removeprefix("http://").split(":")
    before = set(threading.enumerate())
    client = socket.create_connection((host, int(port)))
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.sendall(request)
    _until(lambda: bool(_handlers(before)), "the connection was not accepted")
    if answered:
        _until(lambda: bool(fake.requests), "the request did not arrive")
    client.close()
    _handlers_done(before)


def test_a_client_gone_before_the_answer_is_dropped_quietly(
        fake_github: FakeGitHub, capfd: pytest.CaptureFixture[str]) -> None:
    # the answer is written half a second after the client hung up
    fake_github.slow("runs", delay=0.5)
    _hang_up(fake_github, _request(fake_github), answered=True)
    [record] = fake_github.requests
    assert record.status == 200  # it took effect; only the answer found nobody
    assert capfd.readouterr().err == ""


def test_a_client_gone_in_the_middle_of_its_request_is_dropped_quietly(
        fake_github: FakeGitHub, capfd: pytest.CaptureFixture[str]) -> None:
    # the body it announced never comes: the fake is still reading when it hangs up
    _hang_up(fake_github, _request(fake_github, body=b"{", length=100), answered=False)
    assert fake_github.requests == []
    assert capfd.readouterr().err == ""


def test_the_server_still_answers_after_a_client_hung_up(fake_github: FakeGitHub) -> None:
    fake_github.slow("runs", delay=0.2)
    _hang_up(fake_github, _request(fake_github), answered=True)
    answer = httpx.get(f"{fake_github.url}/repos/{fake_github.repository}/actions/runs",
                       headers={"Authorization": f"Bearer {fake_github.token}",
                                "X-GitHub-Api-Version": "2022-11-28"})
    assert answer.status_code == 200


@pytest.mark.parametrize("error", [KeyError("workflow"), ConnectionResetError("not a client")])
def test_an_error_in_the_fakes_own_code_is_reported(
        fake_github: FakeGitHub, capfd: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    # A bug of a route: even one raising what a hung-up client raises is no hang-up.
    def broken(*args: object) -> None:
        raise error

    monkeypatch.setattr(fake_github, "handle", broken)
    before = set(threading.enumerate())
    with pytest.raises(httpx.RemoteProtocolError):  # no answer: the connection closed
        httpx.get(f"{fake_github.url}/repos/{fake_github.repository}/actions/runs")
    _handlers_done(before)
    err = capfd.readouterr().err
    assert "Traceback" in err and f"{type(error).__name__}: {error}" in err
