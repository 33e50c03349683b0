"""A webhook receiver on 127.0.0.1 for tests: a real HTTP server in a thread.

It answers every POST as its ``mode`` says and records what arrived:

- ``ok``: ``200 ok`` (what Slack's incoming webhooks answer);
- ``fail``: ``500``;
- ``hang``: reads the request, then never answers until the receiver stops; it notes
  how long the sender kept the connection open (:attr:`Receiver.held`);
- ``slack-429``: ``429`` with ``Retry-After: 0`` the first time, then ``200``;
- ``echo-404``: ``404`` with Express's default page, which quotes the request's path;
- ``endless-200``, ``endless-400``: that status, then a body that never ends: a byte
  every 50 ms until the receiver stops (a minute at most), or until the sender hangs
  up, which it notes as ``hang`` does.

Each request notes when it arrived (:attr:`Received.at`, ``time.monotonic()``), so a
test can bound the span of a sender's tries by the receiver's clock, not by the time
the whole command took.

Use the ``receiver`` factory fixture (registered in ``tests/conftest.py``)::

    def test_it(receiver):
        hook = receiver("ok")
        env = {"SLACK_WEBHOOK": hook.url}
        ...
        assert [r.json["kind"] for r in hook.requests] == ["run_failed"]
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

EXPRESS_404 = ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
               '<title>Error</title>\n</head>\n<body>\n<pre>Cannot POST {path}</pre>\n'
               '</body>\n</html>\n')
"""What an Express app answers a POST it has no route for."""


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the request had arrived, body and all."""

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.requests: list[Received] = []
        self.held: list[float] = []
        """Seconds each hung request's sender waited before it hung up (``hang``), or
        read the endless body before it did (``endless-*``)."""
        self.lock = threading.Lock()
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def handle(self) -> None:
                # A sender that hangs up (its timeout passed, it closed a kept-alive
                # connection) is no error: a real receiver drops it without a word, and
                # a traceback here lands in the stderr of the CLI running in-process.
                try:
                    super().handle()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                got = Received(self.path, {k.lower(): v for k, v in self.headers.items()},
                               self.rfile.read(length))
                with receiver.lock:
                    receiver.requests.append(got)
                    count = len(receiver.requests)
                receiver.answer(self, count)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/T000/B000/secret"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def answer(self, handler: BaseHTTPRequestHandler, count: int) -> None:
        if self.mode == "hang":
            self._hang(handler.connection)
            return
        if self.mode.startswith("endless-"):
            self._endless(handler, int(self.mode.removeprefix("endless-")))
            return
        status, extra = 200, {}
        if self.mode == "fail":
            status = 500
        elif self.mode == "slack-429" and count == 1:
            status, extra = 429, {"Retry-After": "0"}
        body = b"ok" if status == 200 else b"no"
        if self.mode == "echo-404":
            status, body = 404, EXPRESS_404.format(path=handler.path).encode()
        handler.send_response(status)
        for name, value in extra.items():
            handler.send_header(name, value)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _endless(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(10**9))
        handler.end_headers()
        start = time.monotonic()
        try:
            while not self.release.wait(0.05) and time.monotonic() - start < 60:
                handler.wfile.write(b"x")
                handler.wfile.flush()
        except OSError:  # the sender hung up
            with self.lock:
                self.held.append(time.monotonic() - start)

    def _hang(self, connection: socket.socket) -> None:
        """Answer nothing; note when the sender closes its end (the socket reads EOF)."""
        start = time.monotonic()
        while not self.release.is_set() and time.monotonic() - start < 60:
            readable, _, _ = select.select([connection], [], [], 0.05)
            if readable and connection.recv(1, socket.MSG_PEEK) == b"":
                with self.lock:
                    self.held.append(time.monotonic() - start)
                return

    def events(self) -> list[Any]:
        """The JSON bodies received, in order."""
        with self.lock:
            return [r.json for r in self.requests]

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Callable[[str], Receiver]]:
    """Makes receivers (``receiver("ok")``), stopped after the test."""
    made: list[Receiver] = []

    def make(mode: str = "ok") -> Receiver:
        made.append(Receiver(mode))
        return made[-1]

    yield make
    for r in made:
        r.stop()
