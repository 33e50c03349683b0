"""Timestamps in and out: aware UTC everywhere, ``Z`` on the wire.

Nothing here reads the clock except :func:`parse_now` when no ``--now`` was given:
the shell decides what "now" is once, and passes it down.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ..errors import UserError


def parse_utc(value: object) -> datetime | None:
    """An ISO timestamp with an offset (``Z`` allowed) as aware UTC, else ``None``.

    For timestamps read from files and APIs: one unreadable value must not stop a
    tick, and a timestamp without an offset is as good as unreadable.
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else None


def parse_now(value: str | None, option: str = "--now") -> datetime:
    """A command-line instant (offset required); the clock when ``value`` is ``None``."""
    if value is None:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"{option}: not an ISO datetime: {value!r}") from None
    if moment.tzinfo is None:
        raise UserError(f"{option}: give a UTC offset, e.g. {value}Z")
    if not 1970 <= moment.year <= 9000:
        raise UserError(f"{option}: {value!r} is out of range (years 1970-9000)")
    return moment.astimezone(UTC)


def iso(moment: datetime) -> str:
    """``2026-12-01T07:00:00Z``: UTC, seconds, a ``Z`` suffix."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_minute(moment: datetime) -> str:
    """``2026-12-01T07:00Z``: UTC to the minute, as slots and run ids are named."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")
