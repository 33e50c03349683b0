"""Schedule files: loading (with errors that name file and field), schema, atomic writes.

A schedule is ``schedules/<id>.json``; its id is the file stem. Loading never stops
at the first bad file: :func:`load_all` returns the valid schedules and one
:class:`~orchestrator.errors.ScheduleError` per problem, so an invalid file never
blocks the others (the tick fires the valid ones, ``validate`` reports the rest).
A schedule that names shared calendars (``exclude_calendars``) gets their dates here,
read once per load (:mod:`orchestrator.config.calendars`); a calendar that cannot be
used makes only the schedules that name it invalid.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..errors import ScheduleError
from ..support import safejson
from ..support.atomic import write_text
from ..support.text import error_location
from .calendars import CalendarError, Calendars
from .fieldtypes import ID_RE, ID_RULE

if TYPE_CHECKING:
    from .models import Schedule

SCHEMA_FILE = "schedule.schema.json"
"""Lives beside the schedules for editors; not a schedule itself."""

SCHEMA_REF = f"./{SCHEMA_FILE}"
"""What new schedule files put in ``$schema``."""

MAX_BYTES = 1024 * 1024
"""A schedule file larger than this is refused rather than parsed."""


@dataclass
class LoadResult:
    """The outcome of :func:`load_all`."""

    schedules: list[Schedule] = field(default_factory=list)
    """The valid schedules, sorted by id."""
    errors: list[ScheduleError] = field(default_factory=list)
    """Every problem found, sorted by file; a file may have several."""

    @property
    def invalid_files(self) -> list[str]:
        return sorted({e.file for e in self.errors})


def display_path(path: Path, root: Path | None) -> str:
    """``path`` relative to ``root`` (the repository), else ``<folder>/<name>``."""
    if root is not None:
        try:
            # the folder resolved, not the file: a symlink is shown by its own name
            return (path.parent.resolve() / path.name).relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def load_schedule(path: Path, root: Path | None = None) -> Schedule:
    """Load one schedule file; raise :class:`ScheduleError` for the first problem.

    ``root`` is the repository root, used to show the file as ``schedules/<id>.json``;
    its calendars are read from ``path``'s repository, the folder above ``schedules/``.
    """
    from .models import Schedule

    loaded = _load(path, lambda: display_path(path, root or path.parent.parent),
                   calendars=Calendars(root or path.parent.parent))
    if isinstance(loaded, Schedule):
        return loaded
    assert loaded is not None, "parsed: nothing vouched for it"
    raise loaded[0]


def load_all(directory: Path, known: Callable[[str, bytes], bool] | None = None,
             calendars: Calendars | None = None) -> LoadResult:
    """Load every ``*.json`` in ``directory`` except the schema.

    Files are matched case-insensitively on the ``.json`` suffix. Of ``x.json`` and
    ``x.JSON`` side by side, ``x.json`` is the schedule and ``x.JSON`` is named as an
    error (never silently ignored); two files of one id without a lower-case ``.json``
    (``x.JSON`` and ``x.Json``) are both named as duplicates, and neither fires.
    A file whose id and bytes ``known`` vouches for is read but not parsed, and left
    out of the result (the tick's memo of quiet schedules: :mod:`orchestrator.tick.memo`).
    ``calendars`` is the calendar folder as the caller read it (default: the folder
    beside ``directory``, read as schedules name its files).
    """
    from .models import Schedule

    result = LoadResult()
    if not directory.is_dir():
        return result
    root = directory.parent
    if calendars is None:
        calendars = Calendars(root)
    # Directories and symlinks named *.json are kept: _load names them as errors
    # rather than skipping them silently.
    files = sorted((p for p in directory.iterdir()
                    if p.suffix.lower() == ".json" and p.name != SCHEMA_FILE),
                   key=lambda p: p.name)  # one folder: by name, without pathlib's compare
    by_id: dict[str, list[Path]] = {}
    for path in files:
        by_id.setdefault(path.stem, []).append(path)
    display = _namer(directory, root)
    for stem, paths in sorted(by_id.items()):
        chosen = paths[0] if len(paths) == 1 else _canonical(stem, paths, display, result)
        if chosen is None:
            continue
        loaded = _load(chosen, partial(display, chosen), known, calendars)
        if loaded is None:
            continue
        if isinstance(loaded, Schedule):
            result.schedules.append(loaded)
        else:
            result.errors.extend(loaded)
    result.errors.sort(key=lambda e: e.file)
    return result


def _namer(directory: Path, root: Path) -> Callable[[Path], str]:
    """How a file of ``directory`` is named in messages: relative to ``root``."""
    # The folder is resolved once, not once per file (resolving is a stat per part of
    # the path, thousands of them for a large repository); a symlinked file still is.
    folder = display_path(directory, root) if directory.resolve().is_relative_to(
        root.resolve()) else None

    def display(path: Path) -> str:
        if folder is None or path.is_symlink():
            return display_path(path, root)
        return f"{folder}/{path.name}" if folder != "." else path.name

    return display


def _canonical(stem: str, paths: list[Path], display: Callable[[Path], str],
               result: LoadResult) -> Path | None:
    """Of several files of one id, the one named ``<id>.json`` (each other one is named
    as an error); ``None`` when none is, and then every one is named."""
    shown = {p: display(p) for p in paths}
    winner = next((p for p in paths if p.suffix == ".json"), None)
    for path, here in shown.items():
        if path is winner:
            continue
        if winner is not None:
            result.errors.append(ScheduleError(here, "id", (
                f"not read: {shown[winner]} is schedule {stem!r}; a suffix other than "
                "lower-case .json names no schedule beside it: delete or rename this file")))
        else:
            others = ", ".join(s for p, s in shown.items() if p is not path)
            result.errors.append(ScheduleError(
                here, "id", f"duplicate id {stem!r} (also {others}); rename one file"))
    return winner


def _load(path: Path, show: Callable[[], str],
          known: Callable[[str, bytes], bool] | None = None,
          calendars: Calendars | None = None) -> Schedule | list[ScheduleError] | None:
    """A schedule, or every problem with it (at least one), the file named as
    ``show()`` says; ``None`` when ``known`` vouches for its bytes (then the file is
    not even named: naming a file can cost a ``stat``, and a tick skips thousands)."""
    from .models import Schedule, ScheduleSpec

    stem = path.stem
    if not ID_RE.fullmatch(stem):
        return [ScheduleError(show(), "id", f"file name {path.name!r} gives the invalid id "
                              f"{stem!r}: use {ID_RULE}")]
    read = _read(path, show, known)
    if not isinstance(read, tuple):
        return read  # vouched for, or unreadable
    raw, data = read
    shown = show()
    text = safejson.decode(raw)
    if not isinstance(data, dict):
        return [ScheduleError(shown, "(top level)",
                              f"expected a JSON object, got {_json_type(data)}")]
    try:
        spec = ScheduleSpec.model_validate_json(text)
    except ValidationError as exc:
        return [ScheduleError(shown, *describe_error(err)) for err in exc.errors()]
    if spec.exclude_calendars:
        try:
            dates = _calendar_dates(spec.exclude_calendars,
                                    calendars or Calendars(path.parent.parent))
        except CalendarError as exc:
            return [ScheduleError(shown, "exclude_calendars", str(exc))]
        spec = spec.with_calendars(dates)
    return Schedule(id=stem, spec=spec, path=shown)


def _read(path: Path, show: Callable[[], str], known: Callable[[str, bytes], bool] | None
          ) -> tuple[bytes, Any] | list[ScheduleError] | None:
    """The file's bytes and its JSON, or why they cannot be read; ``None`` when
    ``known`` vouches for the bytes."""
    try:
        raw = safejson.read_file(path, max_bytes=MAX_BYTES, root=path.parent.parent)
        if known is not None and known(path.stem, raw):
            return None
        data = safejson.loads(raw, max_bytes=MAX_BYTES, object_pairs_hook=_no_duplicate_keys)
    except FileNotFoundError:
        return [ScheduleError(show(), "(file)", "vanished while being read")]
    except safejson.UnsafeJSON as exc:
        return [ScheduleError(show(), exc.where or "(file)", exc.problem)]
    except _DuplicateKey as exc:
        return [ScheduleError(show(), error_location((exc.key,)),
                              "key appears twice in the same object")]
    return raw, data


def _calendar_dates(names: Iterable[str], source: Calendars) -> frozenset[date]:
    """The dates of the calendars ``names``, together."""
    dates: set[date] = set()
    for name in names:
        dates |= source.dates(name)
    return frozenset(dates)


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _allowed(loc: tuple[int | str, ...]) -> list[str]:
    """The field names allowed in the object at ``loc`` (for 'did you mean')."""
    from pydantic import BaseModel

    from .models import ScheduleSpec

    model: type[BaseModel] = ScheduleSpec
    for part in loc:
        if isinstance(part, int):
            continue
        info = model.model_fields.get(part)
        if info is None:
            return []
        inner = getattr(info.annotation, "__args__", (info.annotation,))
        nested = [a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)]
        if not nested:
            return []
        model = nested[0]
    names = []
    for name, info in model.model_fields.items():
        names.append(info.alias or name)
    return names


def describe_error(err: Mapping[str, Any]) -> tuple[str, str]:
    """(field path, problem) for one pydantic error, in words a schedule author knows."""
    loc = tuple(err.get("loc", ()))
    ctx = err.get("ctx") or {}
    path = (error_location(loc) if loc else "") or str(ctx.get("field", "")) or "(top level)"
    kind = err.get("type", "")
    given = err.get("input")
    if kind == "extra_forbidden":
        return path, f"unknown field{_did_you_mean(loc)}"
    if kind == "missing":
        return path, "required field is missing"
    if kind == "string_pattern_mismatch" and path == "workflow":
        return path, (f"{given!r} is not a workflow file name (e.g. 'track.yml', a file in "
                      ".github/workflows)")
    message = str(err.get("msg", "invalid value"))
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return path, (message + _got(kind, given))[:300]


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """For an unknown field at ``loc``: the allowed name closest to it, or them all."""
    allowed = _allowed(loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; allowed: {', '.join(allowed)}" if allowed else ""


def _got(kind: str, given: object) -> str:
    """What was given, for a value of the wrong type or not among those allowed."""
    if kind.endswith("_type"):
        return f", got {_json_type(given)}"
    if kind in {"enum", "literal_error"}:
        return f", got {given!r}" if isinstance(given, str) else f", got {_json_type(given)}"
    return ""


# --------------------------------------------------------------------------- schema


def schedule_json_schema() -> dict[str, Any]:
    """The JSON Schema of a schedule file (committed as ``schedules/schedule.schema.json``)."""
    from .models import ScheduleSpec

    schema = ScheduleSpec.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://orchestrator.invalid/schedule.schema.json",
        "title": "Orchestrator schedule",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def schema_text() -> str:
    return json.dumps(schedule_json_schema(), indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- writing


def dumps(data: Mapping[str, Any]) -> str:
    """The stable text of a schedule file: 2-space indent, keys as given, final newline."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_schedule(path: Path, data: Mapping[str, Any] | str) -> None:
    """Write a schedule file atomically (:func:`orchestrator.support.atomic.write_text`).

    Readers see the old file or the new one, never a half-written one. ``data`` is a
    mapping (written with :func:`dumps`) or the exact text to write.
    """
    write_text(path, data if isinstance(data, str) else dumps(data))
