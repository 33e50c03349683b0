"""A webhook channel: each event POSTed as JSON, or as a Slack message.

- The URL comes from an environment variable named in ``orchestrator.json``; it is
  never written to a log line (the channel is named by its variable).
- ``https`` only, but for the loopback interface (a receiver on the same machine):
  the URL is the secret, and plain ``http`` would send it in the clear.
- Every request carries the event's id, in the body and as ``Idempotency-Key``.
- A ``2xx`` answer delivers. ``429``, ``5xx``, a timeout or no answer is tried again
  with back-off (``Retry-After`` when given) while the deadline allows; any other
  answer, or the deadline, drops the event with one line. Redirects are not followed.
- An answer's body is read only to quote the start of a refusal, at most
  :data:`SAID_READ` bytes: a receiver that answers without end costs nothing. It is
  cleaned and redacted (the URL's path and query too: a 404 page may quote them)
  before it is cut to :data:`SAID_LIMIT` characters.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .. import __version__
from ..support.credentials import Redactor
from ..support.text import before_last_word, decode, outgoing
from .channel import Deadline, Delivery, Item, Status, dropped
from .text import json_payload, slack_payload

if TYPE_CHECKING:  # httpx is imported when a webhook is called: most ticks call none
    import httpx

REQUEST_TIMEOUT = 10.0
"""Seconds one request may take at most (less when the deadline is nearer)."""
FIRST_BACKOFF = 0.5
SAID_LIMIT = 200
"""Characters of a refusal's body a line quotes."""
SAID_READ = 4 * SAID_LIMIT
"""Bytes of a refusal's body read: room for a secret that straddles the quoted part to
be redacted whole before the cut."""
SAID_SECONDS = 1.0
"""Seconds spent reading a refusal's body at most: it is only quoted."""
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def url_problem(url: str) -> str | None:
    """Why ``url`` is not a webhook this channel posts to, or ``None``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a URL"
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname in LOOPBACK:
        return None
    return "must be an https:// URL (http:// only to this machine)"


class Webhook:
    """POSTs events to one URL (see the module docstring)."""

    def __init__(self, name: str, variable: str, url: str, fmt: str, redact: Redactor, *,
                 client: httpx.Client | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.name = name
        self.variable = variable
        self.url = url
        self.format = fmt
        self.redact = redact
        self.redact.add(url)
        self.client = client
        """``None``: a client of its own for each :meth:`deliver`, closed after it."""
        self.sleep = sleep

    def body(self, item: Item) -> bytes:
        event = item.pending.event
        payload = (slack_payload(event, self.redact) if self.format == "slack"
                   else json_payload(event, self.redact))
        return json.dumps(payload, ensure_ascii=False).encode()

    def deliver(self, items: Sequence[Item], deadline: Deadline) -> list[Delivery]:
        if self.client is not None:
            return [self._one(self.client, item, deadline) for item in items]
        import httpx

        with httpx.Client(follow_redirects=False) as client:
            return [self._one(client, item, deadline) for item in items]

    def _one(self, client: httpx.Client, item: Item, deadline: Deadline) -> Delivery:
        headers = {"Content-Type": "application/json", "User-Agent": f"orchestrator/{__version__}",
                   "Idempotency-Key": item.event_id,
                   "X-Orchestrator-Event": item.pending.event.kind.value}
        body = self.body(item)
        wait, tries, last = FIRST_BACKOFF, 0, "no time left in the budget"
        while not deadline.passed:
            tries += 1
            pause, last, final = self._post(client, body, headers, deadline)
            if final is not None:
                return Delivery(self.name, item.event_id, final,
                                f"notify: {self.name}: {item.event_id}: {last}")
            pause = wait if pause is None else pause
            if pause >= deadline.left():
                break
            self.sleep(pause)
            wait *= 2
        return dropped(self.name, item, f"{last}; gave up after {tries} attempt(s) within "
                       f"the {deadline.budget:g}s budget")

    def _post(self, client: httpx.Client, body: bytes, headers: dict[str, str],
              deadline: Deadline) -> tuple[float | None, str, Status | None]:
        """One attempt: (seconds to wait before the next, what happened, ``delivered``
        or ``dropped`` when there is no next)."""
        import httpx

        timeout = max(0.1, min(REQUEST_TIMEOUT, deadline.left()))
        try:
            with client.stream("POST", self.url, content=body, headers=headers,
                               timeout=timeout) as response:
                status = response.status_code
                if 200 <= status < 300:  # the status says it all: the body is not read
                    return None, f"delivered ({status})", "delivered"
                said = outgoing(_start_of(response, deadline), self.redact, _one_line)
        except httpx.TimeoutException:
            return None, f"no answer within {timeout:.1f}s", None
        except httpx.HTTPError as exc:
            return None, f"no answer ({type(exc).__name__})", None
        if status == 429 or status >= 500:
            return _retry_after(response), f"answered {status} {said}".strip(), None
        return None, f"answered {status} {said}".strip(), "dropped"


def _start_of(response: httpx.Response, deadline: Deadline) -> str:
    """The first :data:`SAID_READ` bytes of an answer (what came within
    :data:`SAID_SECONDS`): a receiver that answers without end, or a byte
    at a time, costs neither memory nor the budget."""
    import httpx

    start, until = b"", time.monotonic() + SAID_SECONDS
    try:
        for chunk in response.iter_raw():
            start += chunk
            if len(start) >= SAID_READ or deadline.passed or time.monotonic() > until:
                break
    except httpx.HTTPError:
        pass  # the status is the answer; its text is a courtesy
    text = decode(start[:SAID_READ])
    # a body read to the limit ends inside a word: it could be the start of a secret
    return before_last_word(text) if len(start) >= SAID_READ else text


def _one_line(text: str) -> str:
    return " ".join(text.split())[:SAID_LIMIT]


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None
