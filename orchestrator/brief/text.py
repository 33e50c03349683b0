"""Formatting and escaping shared by every rendering of the brief.

Everything a track wrote is untrusted text: :func:`safe_url` decides which links may be
put in an ``href``, :func:`md` makes any text inert Markdown, and :func:`shown` cleans
and redacts every value a template shows (with the credentials of this process's
environment, as :func:`redacting` fixes them for one rendering) before any cut.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..cron import describe as cron_in_words
from ..state.phases import TrackPhase
from ..support.credentials import environment_redactor
from ..support.text import Redact

SAFE_SCHEMES = frozenset({"http", "https", "file"})

PHASE_LABELS = {
    TrackPhase.PENDING: "pending",
    TrackPhase.DISPATCHED: "dispatched",
    TrackPhase.RUNNING: "running",
    TrackPhase.COMPLETE: "complete",
    TrackPhase.FAILED: "failed",
    TrackPhase.TAPPED_OUT: "tapped out",
    TrackPhase.CANCELLED: "cancelled",
    TrackPhase.SKIPPED: "skipped",
    TrackPhase.REJECTED: "rejected",
    TrackPhase.WAITING: "waiting to poll",
}
"""A phase in words, as every rendering of the brief names it."""


def fmt_duration(delta: timedelta | None) -> str:
    """``45s``, ``3m 12s``, ``1h 04m``, ``2d 3h``; ``-`` for none."""
    if delta is None:
        return "-"
    seconds = int(delta.total_seconds())
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days}d {hours}h"
    if hours:
        return f"{sign}{hours}h {minutes:02d}m"
    if minutes:
        return f"{sign}{minutes}m {secs:02d}s"
    return f"{sign}{secs}s"


def fmt_when(moment: datetime | None) -> str:
    """``2026-12-01 07:03:12 UTC``; ``-`` for none."""
    if moment is None:
        return "-"
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def fmt_clock(moment: datetime | None) -> str:
    """``07:03:12`` (UTC); ``-`` for none."""
    if moment is None:
        return "-"
    return f"{moment.astimezone(UTC):%H:%M:%S}"


def zone(name: str) -> ZoneInfo:
    """The named time zone, UTC when this machine does not know it (or the name is a
    folder of the zone tree, or too long for a file name)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return ZoneInfo("UTC")


def safe_url(url: str | None) -> str | None:
    """``url`` if it is safe to put in an ``href`` (http, https, file, or relative)."""
    if not url or any(c in url for c in "\x00\r\n\t") or url.strip() != url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme:
        return url if parts.scheme.lower() in SAFE_SCHEMES else None
    # No scheme: a relative path to a local log. "//host" would be scheme-relative, and
    # browsers read a backslash as a slash: "/\host" and "\\host" are "//host" too.
    slashed = url.replace("\\", "/")
    return None if slashed.startswith("//") or ":" in slashed.split("/", 1)[0] else url


def as_text(value: Any) -> str:
    """Any JSON value as one string (strings as they are, the rest as JSON)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def describe_cron(expr: str | None) -> str | None:
    """The cron expression in words (``None`` when there is none or it does not parse:
    a run record outlives changes to the cron parser)."""
    if not expr:
        return None
    try:
        return cron_in_words(expr) or None
    except ValueError:
        return None


_REDACT: ContextVar[Redact | None] = ContextVar("redact", default=None)


@contextmanager
def redacting() -> Iterator[None]:
    """One redactor for every value shown while rendering (not one per value)."""
    # remembered per text: a brief shows the same labels and durations many times
    token = _REDACT.set(functools.lru_cache(maxsize=4096)(environment_redactor()))
    try:
        yield
    finally:
        _REDACT.reset(token)


def shown(value: Any) -> Any:
    """``value`` as a template may show it: a string cleaned and redacted (a ``Markup``
    stays one: redaction adds no markup), anything else as it is."""
    if not isinstance(value, str):
        return value
    redact = _REDACT.get() or environment_redactor()
    text = redact(value)
    return text if type(value) is str else type(value)(text)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~$])")
"""Inline Markdown syntax (emphasis, code, links, tables, strike-through, math). Block
syntax needs no escape: escaped text never starts a line (newlines become ``<br>``)."""
_NEWLINES = re.compile(r"\r\n|\r|\n")


def md(text: Any, limit: int | None = None) -> str:
    """``text`` as inert Markdown: HTML neutralised, Markdown syntax escaped, one line.

    ``limit`` caps the characters kept and says how many were cut.
    """
    value = shown(as_text(text))  # redacted before it is cut: no secret's tail is left
    cut = ""
    if limit is not None and len(value) > limit:
        cut = f" … ({len(value) - limit:,} more characters in the HTML brief)"
        value = value[:limit]
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    value = _MD_SPECIAL.sub(r"\\\1", value)
    value = _NEWLINES.sub("<br>", value)
    return value + md(cut) if cut else value


def md_size(limit: int) -> str:
    """A byte limit in words: ``1 MiB``, ``40 KiB``."""
    if limit % (1024 * 1024) == 0:
        return f"{limit // (1024 * 1024)} MiB"
    return f"{limit / 1024:,.0f} KiB"
