"""The GitHub REST API client: one place for authentication, paging, rate limits,
retries and the circuit breaker.

``Retry-After``, ``x-ratelimit-remaining``/``x-ratelimit-reset`` and secondary rate
limits (``403``/``429``) are waited out within a bounded budget of seconds per tick.
Server errors and network failures are retried with exponential backoff (only for
requests that may be repeated) and counted by the circuit breaker
(:mod:`orchestrator.state.breaker`); while it is open and its cooldown has not passed, no
HTTP request is made at all.

The client never reads the clock: ``now`` is the tick's time, advanced by the seconds
the client sleeps, so breaker and rate-limit decisions are reproducible.

The token is sent only in the ``Authorization`` header; it never appears in a
message, a log line or ``repr``.
"""

from __future__ import annotations

import email.utils
import logging
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx

from .. import __version__
from ..errors import CircuitOpen, ExecutorError
from ..state.breaker import Breaker, BreakerPolicy, breaker_failure, breaker_now, breaker_success
from ..support.credentials import environment_redactor
from ..support.text import outgoing
from ..support.times import iso

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
"""Pinned REST API version, the one GitHub Enterprise Server 3.17 to 3.19 supports too."""
DETAILS_ALWAYS = "2026-03-10"
"""From this API version on, a dispatch always answers ``200`` with the new run's id and
``return_run_details`` no longer exists (the description's ``x-github-breaking-changes``).
Before it, the field asks for that answer; GitHub Enterprise Server (3.17 to 3.19) has
no such field at all."""
ENTERPRISE_HEADER = "x-github-enterprise-version"
SECONDARY_WAIT = 60.0
"""GitHub asks to wait at least a minute after a secondary rate limit without
``Retry-After``."""


class GitHubError(ExecutorError):
    """The GitHub API call failed."""

    def __init__(self, message: str, *, status: int | None = None, ambiguous: bool = False,
                 rate_limited: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.ambiguous = ambiguous
        """No answer arrived: the request may or may not have taken effect."""
        self.rate_limited = rate_limited


def message(response: httpx.Response) -> str:
    """GitHub's error message of ``response``, short enough for a log line: redacted
    before it is cut (a proxy's page may quote the request's credentials)."""
    try:
        data = response.json()
    except ValueError:
        return outgoing(response.text, environment_redactor(), _short)
    if isinstance(data, dict):
        return outgoing(str(data.get("message", "")), environment_redactor(), _short)
    return ""


def _short(text: str) -> str:
    return text[:200].strip()


class GitHubClient:
    """Calls the API of one GitHub (``api_url``) with one token, within one tick.

    ``max_wait_seconds`` bounds all sleeping (backoff and rate limits) of the client,
    that is of one tick.
    """

    def __init__(
        self,
        token: str,
        *,
        api_url: str = DEFAULT_API_URL,
        now: datetime,
        breaker: Breaker | None = None,
        policy: BreakerPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_wait_seconds: float = 120.0,
        client: httpx.Client | None = None,
        timeout: float = 20.0,
        max_attempts: int = 3,
        api_version: str = API_VERSION,
    ) -> None:
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware")
        self.api_url = api_url.rstrip("/")
        self.api_version = api_version
        self.enterprise = urlsplit(self.api_url).path.endswith("/api/v3")
        """Whether this is GitHub Enterprise Server: its API lives under ``/api/v3``, and
        every answer names its version in ``X-GitHub-Enterprise-Version``."""
        self.policy = policy or BreakerPolicy()
        self.max_attempts = max(1, max_attempts)
        self._start = now.astimezone(UTC)
        self._slept = 0.0
        self._budget = max(0.0, max_wait_seconds)
        self._sleep = sleep
        self.breaker = breaker_now(breaker or Breaker(), self._start, self.policy)
        """The breaker after this client's calls so far."""
        self._limited_until: datetime | None = None
        self._headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": api_version,
            "User-Agent": f"orchestrator/{__version__}",
        }
        self._own_client = client is None
        self._client = client or httpx.Client(base_url=self.api_url + "/", timeout=timeout)
        if self._own_client:
            # The Executor protocol has no close(): release the connections when the
            # client goes away (a tick builds one executor and drops it).
            weakref.finalize(self, self._client.close)
        self.calls = 0
        """HTTP requests sent (for the tick's log and tests)."""

    def __repr__(self) -> str:
        return f"GitHubClient(api_url={self.api_url!r})"

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    # ------------------------------------------------------------------ time

    def now(self) -> datetime:
        """The tick's time plus the seconds slept since."""
        return self._start + timedelta(seconds=self._slept)

    def sleep_for(self, seconds: float) -> bool:
        """Sleep ``seconds`` if the budget allows; False (and no sleep) otherwise."""
        seconds = max(0.0, seconds)
        if self._slept + seconds > self._budget:
            return False
        if seconds:
            self._sleep(seconds)
            self._slept += seconds
        return True

    def _backoff(self, attempt: int) -> bool:
        return self.sleep_for(min(2.0 ** attempt, 30.0))

    # ------------------------------------------------------------------ breaker

    def _failed(self, error: str) -> None:
        self.breaker = breaker_failure(self.breaker, self.now(), error, self.policy)
        if self.breaker.state == "open":
            log.warning("GitHub circuit breaker opened after %d failures: %s",
                        self.breaker.failures, error)

    def _gate(self) -> None:
        self.breaker = breaker_now(self.breaker, self.now(), self.policy)
        if self.breaker.state == "open":
            opened = self.breaker.opened_at
            until = f" until {iso(opened + self.policy.cooldown)}" if opened else ""
            raise CircuitOpen(
                f"GitHub circuit breaker is open{until} after {self.breaker.failures} "
                f"failed calls (last: {self.breaker.last_error}); no call was made")
        if self._limited_until is not None:
            wait = (self._limited_until - self.now()).total_seconds()
            if wait > 0 and not self.sleep_for(wait):
                raise GitHubError(
                    f"GitHub rate limit exhausted until "
                    f"{iso(self._limited_until)}; no call was made",
                    rate_limited=True)
            self._limited_until = None

    # ------------------------------------------------------------------ rate limits

    def _rate_wait(self, response: httpx.Response, streak: int) -> float | None:
        """Seconds to wait before retrying a rate-limited response; None if not one."""
        if response.status_code not in (403, 429):
            return None
        retry_after = response.headers.get("retry-after")
        wait = self._retry_after(retry_after) if retry_after else None
        if wait is not None:
            return wait
        if response.headers.get("x-ratelimit-remaining") == "0":
            return self._until_reset(response)
        if response.status_code == 429 or "rate limit" in response.text.lower():
            return SECONDARY_WAIT * 2 ** streak
        return None

    def _retry_after(self, value: str) -> float | None:
        """The seconds a ``Retry-After`` header asks for (a number or an HTTP date), at
        least one; ``None`` when it is neither."""
        try:
            return max(1.0, float(value))
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                return None
            return max(1.0, (when - self.now()).total_seconds())

    def _until_reset(self, response: httpx.Response) -> float:
        """The seconds until the exhausted window resets (``x-ratelimit-reset``), at
        least one; a secondary limit's wait when the header is unreadable."""
        try:
            reset = float(response.headers.get("x-ratelimit-reset", ""))
        except ValueError:
            reset = self.now().timestamp() + SECONDARY_WAIT
        return max(1.0, reset - self.now().timestamp())

    def _note_answer(self, response: httpx.Response) -> None:
        """What any answer says of the server: GitHub Enterprise, and the window left."""
        if response.headers.get(ENTERPRISE_HEADER):
            self.enterprise = True
        self._note_limits(response)

    def _note_limits(self, response: httpx.Response) -> None:
        """A successful answer that spends the last request of the window blocks the
        next call until the window resets."""
        if response.status_code < 400 and response.headers.get("x-ratelimit-remaining") == "0":
            try:
                reset = float(response.headers.get("x-ratelimit-reset", ""))
            except ValueError:
                return
            self._limited_until = datetime.fromtimestamp(reset, UTC)

    # ------------------------------------------------------------------ requests

    def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                body: Mapping[str, Any] | None = None, retry: bool = True,
                timeout: float | None = None) -> httpx.Response:
        """One API call with rate-limit waits, and retries of transient failures when
        ``retry`` (never for requests that must not be repeated blindly). ``timeout``
        overrides the client's seconds for this call (a caller with a deadline)."""
        attempt = 0
        limited = 0
        while True:
            self._gate()
            self.calls += 1
            try:
                response = self._send(method, path, params, body, timeout)
            except httpx.TransportError as exc:
                error = f"{method} {path}: no answer ({type(exc).__name__})"
                self._failed(error)
                if self._may_retry(retry, attempt):
                    attempt += 1
                    continue
                raise GitHubError(error, ambiguous=True) from None
            self._note_answer(response)
            wait = self._rate_wait(response, limited)
            if wait is not None:
                limited += 1
                self._wait_out(method, path, response, wait, limited)
                continue
            if response.status_code >= 500:
                error = f"{method} {path}: {response.status_code} {message(response)}".strip()
                self._failed(error)
                if self._may_retry(retry, attempt):
                    attempt += 1
                    continue
                raise GitHubError(error, status=response.status_code)
            if response.status_code == 401:
                raise GitHubError(f"{method} {path}: 401 bad credentials: check the token",
                                  status=401)
            self.breaker = breaker_success(self.breaker)
            return response

    def _send(self, method: str, path: str, params: Mapping[str, str] | None,
              body: Mapping[str, Any] | None, timeout: float | None) -> httpx.Response:
        """One HTTP request with the client's headers (``timeout``: the client's when
        ``None``)."""
        return self._client.request(
            method, path, params=params, json=body, headers=self._headers,
            timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout)

    def _may_retry(self, retry: bool, attempt: int) -> bool:
        """Whether a transient failure is tried again: ``retry`` allows it, an attempt
        is left, and the back-off slept within the budget."""
        return retry and attempt + 1 < self.max_attempts and self._backoff(attempt)

    def _wait_out(self, method: str, path: str, response: httpx.Response, wait: float,
                  limited: int) -> None:
        """Sleep the ``wait`` a rate limit asks for; :class:`GitHubError` (the breaker
        counting it) after the fifth in a row, or when the budget cannot cover it."""
        until = self.now() + timedelta(seconds=wait)
        log.info("%s %s: rate limited (%s), waiting %.0fs", method, path,
                 response.status_code, wait)
        if limited > 5 or not self.sleep_for(wait):
            error = (f"{method} {path}: rate limited ({response.status_code}) "
                     f"until {iso(until)}")
            self._limited_until = until
            self._failed(error)
            raise GitHubError(error, status=response.status_code, rate_limited=True)

    def fetch_signed(self, url: str, limit: int) -> bytes | None:
        """GET a signed URL GitHub redirected to (an artifact's archive), at most
        ``limit`` bytes; ``None`` when it fails or is larger. The token is never sent:
        the URL is off the API and carries its own signature."""
        got = self._stream_signed(url, keep=limit, head=True)
        return None if got is None else got[0]

    def fetch_signed_tail(self, url: str, keep: int) -> tuple[bytes, int] | None:
        """GET a signed URL GitHub redirected to (a job's log) without the token, and
        keep only its last ``keep`` bytes however large it is: (those bytes, the size
        read). ``None`` when it fails or the URL is not http(s)."""
        return self._stream_signed(url, keep=keep, head=False)

    def _stream_signed(self, url: str, *, keep: int, head: bool
                       ) -> tuple[bytes, int] | None:
        """Stream a signed URL without the token: (the bytes kept, the size read).

        ``head`` keeps the whole body and gives up (``None``) past ``keep`` bytes;
        otherwise only the last ``keep`` bytes are kept. Not http(s), an answer other
        than ``200`` or a transport failure is ``None`` too."""
        if not url.startswith(("https://", "http://")):
            return None
        self.calls += 1
        try:
            with self._client.stream("GET", url, headers={"User-Agent": self._headers[
                    "User-Agent"]}) as response:
                if response.status_code != 200:
                    return None
                got = _kept(response.iter_bytes(), keep, head)
        except httpx.HTTPError:
            return None
        if got is None:
            return None
        data, total = got
        if head:
            return bytes(data), total
        return (bytes(data[-keep:]) if keep else b""), total

    def paged(self, path: str, params: Mapping[str, str], key: str,
              max_pages: int) -> list[dict[str, Any]]:
        """The items under ``key`` of up to ``max_pages`` pages, following ``Link: next``."""
        items: list[dict[str, Any]] = []
        url: str | None = path
        query: Mapping[str, str] | None = params
        for _ in range(max_pages):
            if url is None:
                break
            response = self.request("GET", url, params=query)
            items.extend(_page_items(path, response, key))
            url, query = self._next_page(path, response), None
        return items

    def _next_page(self, path: str, response: httpx.Response) -> str | None:
        """The URL of the page after ``response`` (``Link: next``), or ``None`` after
        the last; :class:`GitHubError` when it leads off the API."""
        following = response.links.get("next", {}).get("url")
        if following and not str(following).startswith(self.api_url + "/"):
            # the token goes with every request: never follow a link off the API
            raise GitHubError(f"GET {path}: pagination link leaves {self.api_url}")
        return following or None


def _page_items(path: str, response: httpx.Response, key: str) -> list[dict[str, Any]]:
    """The items under ``key`` of one page of ``path``, those with an integer id;
    :class:`GitHubError` when the answer is not such a page."""
    if response.status_code != 200:
        raise GitHubError(f"GET {path}: {response.status_code} {message(response)}",
                          status=response.status_code)
    try:
        data = response.json()
    except ValueError:  # e.g. an HTML error page from a proxy
        raise GitHubError(f"GET {path}: the answer is not JSON") from None
    page = data.get(key) if isinstance(data, dict) else None
    if not isinstance(page, list):
        raise GitHubError(f"GET {path}: unexpected answer (no {key!r} list)")
    # every caller needs an integer id; anything else is not a run or a job
    return [item for item in page if isinstance(item, dict) and isinstance(item.get("id"), int)]


def _kept(chunks: Iterable[bytes], keep: int, head: bool) -> tuple[bytearray, int] | None:
    """The bytes of ``chunks`` to keep and the size read: all of them, ``None`` past
    ``keep`` bytes (``head``), else at least the last ``keep`` (trimmed now and then)."""
    data = bytearray()
    total = 0
    for chunk in chunks:
        total += len(chunk)
        data += chunk
        if head and total > keep:
            return None
        if not head and len(data) > 2 * keep:  # trim now and then
            del data[:len(data) - keep]
    return data, total
