"""Advice on a schedule's time zone: the names that load but rarely mean what was meant.

- ``EST``, ``MST`` and ``HST`` are fixed offsets without daylight saving; a New York
  user who writes ``EST`` runs an hour off all summer while the December preview looks
  right. ``EST5EDT`` and its kind follow US rules of the past, not a place.
- ``US/Eastern`` and the other backward-compatible links load as their place does, but
  the tz database keeps them only so that old configurations still load.
- ``Etc/GMT+5`` is UTC-05:00: its sign is inverted (POSIX style), and it never shifts.
- Pure: advice is a function of the name and the tz database; nothing else is read.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

MEANT = {
    "EST": "America/New_York", "EST5EDT": "America/New_York",
    "CST6CDT": "America/Chicago",
    "MST": "America/Denver", "MST7MDT": "America/Denver",
    "PST8PDT": "America/Los_Angeles",
    "HST": "Pacific/Honolulu",
}
"""The place people usually mean by a US abbreviation (``MST`` without daylight saving
is Arizona's clock: ``America/Phoenix``)."""

PLACES = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia",
          "Europe", "Indian", "Pacific")
"""The areas of the tz database's canonical ``Area/Place`` names."""

UTC_NAMES = frozenset({"UTC", "Etc/UTC"})

_PROBE = [datetime(2026, month, 15, 12, tzinfo=UTC) for month in (1, 7)]
"""A winter and a summer instant: a zone whose offset is the same at both keeps no
daylight saving (today's rules; advice only, never a decision)."""


@functools.lru_cache(maxsize=256)
def advice(name: str) -> str | None:
    """One sentence on a zone name that is a fixed offset or a legacy alias, naming
    the zone people usually mean; ``None`` for a canonical place or UTC."""
    if name in UTC_NAMES or name.split("/", 1)[0] in PLACES:
        return None
    fixed = _fixed_offset(name)
    if name in MEANT:
        what = f"a fixed UTC{fixed} without daylight saving" if fixed else (
            "an old US rule set, not a place")
        return (f"timezone {name!r} is {what}: for the clock of a place write its name, "
                f"usually {MEANT[name]!r}")
    if fixed == "+00:00":
        return None  # GMT, Etc/GMT, Zulu: UTC by another name
    return _alias_advice(name, fixed)


def _alias_advice(name: str, fixed: str | None) -> str:
    """Advice on a name outside the table: a link to a place, or a fixed offset."""
    place = _place_of(name)
    if place:
        return (f"timezone {name!r} is a legacy alias kept for old configurations: "
                f"write a place with the same rules, such as {place!r}")
    if fixed:
        inverted = " (the sign of Etc/GMT names is inverted)" if name.startswith(
            "Etc/GMT") else ""
        return (f"timezone {name!r} is a fixed UTC{fixed}{inverted} without daylight "
                "saving: write a place such as 'America/New_York' if its clock is meant")
    return (f"timezone {name!r} is a legacy alias kept for old configurations: write a "
            "place such as 'Europe/Berlin'")


def _fixed_offset(name: str) -> str | None:
    """``"-05:00"`` for a zone whose offset is the same in winter and summer."""
    zone = ZoneInfo(name)
    offsets = {probe.astimezone(zone).utcoffset() for probe in _PROBE}
    if len(offsets) != 1:
        return None
    (offset,) = offsets
    return _hours(offset or timedelta())


def _hours(offset: timedelta) -> str:
    minutes = int(offset.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _place_of(name: str) -> str | None:
    """The canonical ``Area/Place`` zone whose compiled rules are the alias's own."""
    content = _content(name)
    return _places_by_content().get(content) if content else None


@functools.cache
def _places_by_content() -> dict[bytes, str]:
    found: dict[bytes, str] = {}
    for name in sorted(available_timezones(), reverse=True):  # the first name alphabetically wins
        if name.split("/", 1)[0] in PLACES and re.fullmatch(r"[A-Za-z_/+-]+", name):
            found[_content(name)] = name
    return found


def _content(name: str) -> bytes:
    """The zone's compiled file (TZif), the same bytes for a link and its target."""
    import importlib.resources

    try:
        return (importlib.resources.files("tzdata.zoneinfo") / name).read_bytes()
    except (FileNotFoundError, ModuleNotFoundError, OSError, ValueError):
        return b""
