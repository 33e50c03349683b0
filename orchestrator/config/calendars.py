"""Shared calendars: ``calendars/<name>.json``, dates that schedules exclude by name.

A calendar is a JSON object with a list of dates (``YYYY-MM-DD``); a schedule names it
in ``exclude_calendars`` and its dates are read in the schedule's own time zone, as its
``exclude`` dates are. One holiday list then serves every schedule.

- :class:`Calendars` is the folder as one reader sees it: each file is read at most
  once, through the safe JSON reader, and parsed on first use.
- A calendar name is an id (``check_id``'s rule), so ``../`` never reaches the disk.
- A bad calendar (missing, invalid JSON, huge, a symlink out, a FIFO, a bad date)
  is one line naming its file; it costs only the schedules that name it.
- :meth:`Calendars.key` digests every calendar file's bytes: the tick's memo of quiet
  schedules keys on it, so an edited calendar is read again at once.
- The file's model and JSON Schema are in :mod:`.calendar_file`.
"""

from __future__ import annotations

import hashlib
import os
from datetime import date
from pathlib import Path
from typing import Any

from ..support import safejson
from ..support.text import error_location
from .fieldtypes import ID_RE, ID_RULE

FOLDER = "calendars"
"""Beside ``schedules/``, at the repository's root."""

SCHEMA_FILE = "calendar.schema.json"
"""Lives beside the calendars for editors; not a calendar itself."""

MAX_BYTES = 1024 * 1024
"""A calendar file larger than this is refused rather than parsed."""


class CalendarError(ValueError):
    """A calendar that cannot be used; ``str()`` is one line naming its file."""

    def __init__(self, file: str, problem: str, field: str = "") -> None:
        super().__init__(f"{file}: {field}: {problem}" if field else f"{file}: {problem}")
        self.file = file
        self.field = field
        self.problem = problem


def display(name: str) -> str:
    """``calendars/<name>.json``, as messages name the file."""
    return f"{FOLDER}/{name}.json"


class Calendars:
    """The calendar folder of the repository at ``root``, read lazily, once per file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.folder = root / FOLDER
        self._raw: dict[str, bytes | CalendarError] = {}
        self._dates: dict[str, frozenset[date] | CalendarError] = {}

    def _read(self, name: str) -> bytes:
        found = self._raw.get(name)
        if found is None:
            found = self._raw[name] = self._read_file(name)
        if isinstance(found, CalendarError):
            raise found
        return found

    def _read_file(self, name: str) -> bytes | CalendarError:
        shown = display(name)
        if not ID_RE.fullmatch(name):
            return CalendarError(shown, f"the file name gives the invalid calendar name "
                                 f"{name!r}: use {ID_RULE}")
        if self.folder.is_symlink():
            return CalendarError(shown, f"{FOLDER}/ is a symlink; calendars are read from "
                                 "the repository only")
        try:
            return safejson.read_file(self.folder / f"{name}.json", max_bytes=MAX_BYTES,
                                      root=self.root)
        except FileNotFoundError:
            return CalendarError(shown, "does not exist")
        except safejson.UnsafeJSON as exc:
            return CalendarError(shown, exc.problem)

    def dates(self, name: str) -> frozenset[date]:
        """The dates of calendar ``name``; :class:`CalendarError` when it cannot be used."""
        found = self._dates.get(name)
        if found is None:
            found = self._dates[name] = self._parse(name)
        if isinstance(found, CalendarError):
            raise found
        return found

    def _parse(self, name: str) -> frozenset[date] | CalendarError:
        # the model only when a schedule names a calendar: a tick that reads none
        # never builds it
        from pydantic import ValidationError

        from .calendar_file import Calendar

        shown = display(name)
        try:
            raw = self._read(name)
            data = safejson.loads(raw, max_bytes=MAX_BYTES)
            if not isinstance(data, dict):
                return CalendarError(shown, "expected a JSON object with a 'dates' list")
            calendar = Calendar.model_validate_json(safejson.decode(raw))
        except CalendarError as exc:
            return exc
        except safejson.UnsafeJSON as exc:
            return CalendarError(shown, exc.problem, exc.where)
        except ValidationError as exc:
            return CalendarError(shown, *_problem(exc.errors()[0]))
        return frozenset(calendar.dates)

    def names(self) -> list[str]:
        """The calendars in the folder, by file stem (the schema left out)."""
        try:
            entries = os.listdir(self.folder)
        except OSError:
            return []
        return sorted(n[:-5] for n in entries if n.endswith(".json") and n != SCHEMA_FILE)

    def problems(self) -> list[CalendarError]:
        """One error per calendar file that cannot be used, for ``validate``."""
        found = []
        for name in self.names():
            try:
                self.dates(name)
            except CalendarError as exc:
                found.append(exc)
        return found

    def key(self) -> bytes:
        """A digest of every calendar file as read (bytes, or the problem with it)."""
        h = hashlib.sha256()
        for name in self.names():
            try:
                part = self._read(name)
            except CalendarError as exc:
                part = str(exc).encode("utf-8", "surrogateescape")
            # a name that is not UTF-8 comes back with surrogates: kept as its bytes
            h.update(f"{name}\0{len(part)}\0".encode("utf-8", "surrogateescape"))
            h.update(part)
        return h.hexdigest().encode()


def _problem(err: Any) -> tuple[str, str]:
    """(problem, field) for one pydantic error of a calendar file."""
    parts = tuple(err.get("loc", ()))
    loc = error_location(parts) if parts else "(top level)"
    kind = str(err.get("type", ""))
    if kind == "missing":
        return "required field is missing", loc
    if kind == "extra_forbidden":
        return "unknown field; allowed: $schema, description, dates", loc
    return str(err.get("msg", "invalid value"))[:200], loc
