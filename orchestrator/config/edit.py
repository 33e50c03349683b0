"""Schedule files written from flags (``schedules add``) and edited in place
(``schedules enable``/``disable``).

- A flag the chosen form ignores is refused, never dropped (:class:`FlagError`, which
  the command shows as a usage error).
- An edit in place changes one line where it can, so a hand-formatted file keeps its
  layout and a pull request shows only that line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .fieldtypes import check_id
from .files import write_schedule


class FlagError(ValueError):
    """A command-line flag that does not fit the schedule being written."""


EVERY = ("minute", "hour", "day", "weekday")
_TIME_RE = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")


def refuse_what_does_not_apply(every: str | None, weekly: bool, time: str | None,
                                minute: int | None, on_days: tuple[int, ...]) -> None:
    """A flag the chosen form ignores is refused, never dropped: ``--time 07:10`` with
    ``--every hour`` would otherwise write a schedule that runs at minute 0."""
    if on_days and not weekly:
        raise FlagError("--on-day goes with --weekly")
    if minute is not None and every != "hour":
        raise FlagError("--minute goes with --every hour")
    if time is not None and not _takes_time(every, weekly):
        form = f"--every {every}" if every else "--cron or --at"
        raise FlagError(f"--time does not apply to {form}: it goes with --every "
                               "day|weekday and --weekly (--every hour takes --minute)")


def _takes_time(every: str | None, weekly: bool) -> bool:
    """Whether the form runs at a time of day (``--time``)."""
    return weekly or every in ("day", "weekday")


def build_cron(every: str | None, weekly: bool, time: str | None, minute: int | None,
               on_days: tuple[int, ...]) -> str:
    """The cron expression for ``--every`` / ``--weekly`` (local time of day ``--time``)."""
    refuse_what_does_not_apply(every, weekly, time, minute, on_days)
    if every == "minute":
        return "* * * * *"
    if every == "hour":
        return f"{minute or 0} * * * *"
    hh, mm = _time_of_day(time)
    if every == "day":
        return f"{mm} {hh} * * *"
    if every == "weekday":
        return f"{mm} {hh} * * 1-5"
    if not on_days:
        raise FlagError("--weekly needs --on-day 0-6 (0 = Sunday)")
    return f"{mm} {hh} * * {','.join(str(d) for d in sorted(set(on_days)))}"


def _time_of_day(time: str | None) -> tuple[int, int]:
    """The hour and minute of ``--time HH:MM``, which the form needs."""
    if time is None:
        raise FlagError("give the local time of day with --time HH:MM")
    match = _TIME_RE.fullmatch(time)
    if match is None:
        raise FlagError(f"--time: expected HH:MM, got {time!r}")
    return int(match[1]), int(match[2])


def _track(text: str) -> tuple[str, str]:
    name, sep, run = text.partition("=")
    if not sep or not run.strip():
        raise FlagError(f"--track: expected NAME=COMMAND, got {text!r}")
    return check_id(name.strip(), "track name"), run


def _per_track(option: str, values: tuple[str, ...], names: list[str]
               ) -> list[tuple[str, str]]:
    """``NAME=VALUE`` pairs of a per-track option, each naming a track given by --track."""
    pairs = []
    for text in values:
        name, sep, value = text.partition("=")
        name = name.strip()
        if not sep or not name:
            raise FlagError(f"{option}: expected TRACK=VALUE, got {text!r}")
        if name.split(":", 1)[0] not in names:
            raise FlagError(f"{option}: {name.split(':', 1)[0]!r} is not a --track")
        pairs.append((name, value))
    return pairs


def tracks_field(tracks: tuple[str, ...], common: dict[str, Any], needs: tuple[str, ...],
            inputs: tuple[str, ...], timeouts: tuple[str, ...]) -> list[dict[str, Any]]:
    """The ``tracks`` field: each --track with the common per-track options, then its own
    --needs, --input and --track-timeout."""
    given = {k: v for k, v in common.items() if v is not None}
    out = [{"name": name, "run": run, **given} for name, run in map(_track, tracks)]
    by_name = {t["name"]: t for t in out}
    names = list(by_name)
    for name, value in _per_track("--needs", needs, names):
        by_name[name]["needs"] = _names(value)
    for spot, value in _per_track("--input", inputs, names):
        name, key = _input_spot(spot)
        by_name[name].setdefault("inputs", {})[key] = value
    for name, value in _per_track("--track-timeout", timeouts, names):
        by_name[name]["timeout_minutes"] = _minutes(value)
    return out


def _names(value: str) -> list[str]:
    """The names in a comma-separated ``--needs`` value."""
    return [n.strip() for n in value.split(",") if n.strip()]


def _input_spot(spot: str) -> tuple[str, str]:
    """The track and the key of an ``--input TRACK:KEY=VALUE``."""
    name, sep, key = spot.partition(":")
    if not sep or not key:
        raise FlagError(f"--input: expected TRACK:KEY=VALUE, got {spot!r}")
    return name, key


def _minutes(value: str) -> float:
    """The minutes of a ``--track-timeout TRACK=MINUTES``."""
    try:
        return float(value)
    except ValueError:
        raise FlagError(f"--track-timeout: {value!r} is not a number of "
                               "minutes") from None


_ENABLED_RE = re.compile(r'(?<!\\)"enabled"(\s*:\s*)(true|false)\b')


def set_enabled(path: Path, enabled: bool) -> bool:
    """Set ``enabled`` in a schedule file, changing one line; False if already so.

    The value is edited in place in the text, so a hand-formatted file keeps its
    layout; only when that is not possible (no ``enabled`` key yet) is the file
    rewritten in the standard format, with ``enabled`` after the timing fields.
    """
    raw = path.read_text(encoding="utf-8")
    bom = "\ufeff" if raw.startswith("\ufeff") else ""  # the loader accepts one: keep it
    text = raw[len(bom):]
    data = json.loads(text)
    if data.get("enabled", True) is enabled:
        return False  # already so, or the default
    new = _edited_in_place(text, enabled, {**data, "enabled": enabled})
    if new is not None:
        write_schedule(path, bom + new)
        return True
    write_schedule(path, _with_enabled(data, enabled))
    return True


def _edited_in_place(text: str, enabled: bool, wanted: dict[str, Any]) -> str | None:
    """``text`` with its one ``enabled`` value changed, or ``None`` when it has not
    exactly one, or the change would not read back as ``wanted``."""
    hits = list(_ENABLED_RE.finditer(text))
    if len(hits) != 1:
        return None
    hit = hits[0]
    new = f"{text[:hit.start()]}\"enabled\"{hit[1]}{'true' if enabled else 'false'}" \
          f"{text[hit.end():]}"
    return new if json.loads(new) == wanted else None


def _with_enabled(data: dict[str, Any], enabled: bool) -> dict[str, Any]:
    """``data`` with ``enabled`` after the timing fields (else last)."""
    ordered: dict[str, Any] = {}
    anchor = next((k for k in ("timezone", "at", "cron") if k in data), None)
    for key, value in data.items():
        if key == "enabled":
            continue
        ordered[key] = value
        if key == anchor:
            ordered["enabled"] = enabled
    if "enabled" not in ordered:
        ordered["enabled"] = enabled
    return ordered
