"""``tick.yml`` and ``watchdog.yml`` as text: their cron lines read and rewritten
(``cron-sync``), and the check that they still cover every slot (``validate``).

- The files are edited as text, never re-dumped as YAML, so a user's comments and
  layout survive a sync.
- What the lines should be comes from :mod:`.derive`; this module only reads, compares
  and writes.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..config.models import Schedule
from ..config.repository import Cadence, RepoConfig
from ..support.times import iso_minute
from . import clock
from .derive import (
    BACKSTOP_LINE,
    HORIZON,
    SLACK,
    ZONED,
    backstop,
    derive,
    max_gap,
    uncovered,
    utc_spec,
    watchdog_for,
    window,
)

TICK = Path(".github/workflows/tick.yml")
WATCHDOG = Path(".github/workflows/watchdog.yml")


def staleness_limit(root: Path, start: datetime) -> int | None:
    """Minutes after which no tick means trouble, for ``root``'s tick.yml (None without
    one): what cron-sync gives the watchdog, so ``status`` agrees with it."""
    tick = root / TICK
    lines = read_crons(tick.read_text(encoding="utf-8")) if tick.is_file() else []
    watchdog = root / WATCHDOG
    if lines == [BACKSTOP_LINE] and watchdog.is_file():
        # a clock that confirms its calls: they set the limit, as cron-sync wrote it
        limit = read_staleness(watchdog.read_text(encoding="utf-8"))
        if limit is not None:
            return limit
    return watchdog_for(max_gap(lines, start))[1] if lines else None



_SCHEDULE = re.compile(r"(?m)^  schedule:\n((?:    .*\n|\s*\n)*)")
_CRON = re.compile(r'^\s*- cron:\s*["\']([^"\']+)["\']', re.M)
_ITEM = re.compile(r'^\s*(?P<dash>- )?(?P<key>cron|timezone):\s*["\']?(?P<value>[^"\'#]*?)'
                   r'["\']?\s*(?:#.*)?$')
_LINGER = re.compile(r"--linger\s+([0-9.]+)")
_MAX_LINGER = re.compile(r"--max-linger\s+([0-9.]+)")
_STALENESS = re.compile(r"(ORCHESTRATOR_MAX_STALENESS \|\| ')(\d+)(')")


def read_entries(text: str) -> list[tuple[str, str | None]]:
    """The ``schedule:`` entries of a workflow: ``(cron, timezone or None)`` each."""
    block = _SCHEDULE.search(text)
    entries: list[list[str | None]] = []
    for line in (block.group(1) if block else "").splitlines():
        item = _ITEM.match(line)
        if item is None:
            continue
        if item.group("dash") or not entries:
            entries.append([None, None])
        entries[-1][0 if item.group("key") == "cron" else 1] = item.group("value")
    return [(cron, zone) for cron, zone in entries if cron is not None]


def bad_zones(text: str) -> list[str]:
    """The ``timezone:`` values of the workflow's schedule that are no IANA zone."""
    return sorted({zone for _, zone in read_entries(text)
                   if zone is not None and not _is_zone(zone)})


def _is_zone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ValueError, ZoneInfoNotFoundError):
        return False
    return True


def read_crons(text: str) -> list[str]:
    """The ``schedule:`` cron lines of a workflow, each with its zone when its entry
    names one (:data:`ZONED`); an entry whose zone is unknown is left out (``validate``
    names it)."""
    return [cron if zone in (None, "UTC", "Etc/UTC") else f"{ZONED}{zone} {cron}"
            for cron, zone in read_entries(text) if zone is None or _is_zone(zone)]


def dropped_zones(text: str, lines: list[str]) -> list[str]:
    """The zoned entries of ``text`` that ``lines`` (what cron-sync writes) leave out."""
    kept = set(lines)
    return [line for line in read_crons(text) if line.startswith(ZONED) and line not in kept]


def read_linger(text: str) -> tuple[float, float]:
    """``--linger`` and ``--max-linger`` of the tick step (0 and 60 when absent)."""
    linger = _LINGER.search(text)
    most = _MAX_LINGER.search(text)
    return (float(linger.group(1)) if linger else 0.0, float(most.group(1)) if most else 60.0)


def read_staleness(text: str) -> int | None:
    found = _STALENESS.search(text)
    return int(found.group(2)) if found else None


def with_crons(text: str, lines: list[str], comment: list[str]) -> str:
    """``text`` with its ``schedule:`` block replaced by ``comment`` and ``lines``."""
    block = _SCHEDULE.search(text)
    if block is None:
        raise ValueError("no 'on: schedule:' block")
    body = "".join(f"    # {c}\n" if c else "    #\n" for c in comment)
    for line in lines:
        spec = utc_spec(line)
        body += f'    - cron: "{spec.cron}"\n'
        if line.startswith(ZONED):
            body += f'      timezone: "{spec.timezone}"\n'

    return text[:block.start(1)] + body + text[block.end(1):]


def tick_comment(config: RepoConfig) -> list[str]:
    cadence = config.cadence
    if cadence.mode == "external" and cadence.clock_confirms:
        return ["External clock that confirms its calls (orchestrator.json: cadence.mode",
                "\"external\", clock_confirms): `orchestrator serve --clock-only` dispatches this",
                "workflow at each slot and again until the state branch shows the slot fired,",
                "and warns when ticks stop. Written by `orchestrator cron-sync`, in UTC: a",
                "weekly backstop tick, for a clock that stopped (watchdog.yml checks weekly)."]
    if cadence.mode == "external":
        return ["External clock (orchestrator.json: cadence.mode \"external\"): a clock "
                "outside",
                "GitHub dispatches this workflow at each slot (.github/orchestrator-clock.json;",
                "`orchestrator cron-sync --external` says how). Written by `orchestrator",
                "cron-sync`, in UTC: the safety ticks alone, a few minutes after each slot that",
                "a tick would otherwise linger for (a call the clock missed fires there) and",
                f"at least every {cadence.safety_every_hours} hours for retries and deadlines."]
    if cadence.mode == "fixed":
        return ["Fixed cadence (orchestrator.json: cadence.mode \"fixed\"); written by",
                "`orchestrator cron-sync`. Every tick computes from committed state and the",
                "time, so a late or missing tick only delays work."]
    leads = ", ".join(str(m) for m in cadence.lead_minutes)
    hours = f"{cadence.linger_min_interval_hours:g}"
    return ["Written by `orchestrator cron-sync` from schedules/ (do not edit by hand;",
            "`orchestrator validate` fails when it no longer covers a slot), in UTC on both",
            "sides of daylight-saving changes. A slot with no other slot of its schedule in",
            f"the {hours} hours before it gets ticks {leads} minutes (up to 5 more) before it",
            "(the first to arrive lingers until the slot); any other slot a tick in the",
            f"{cadence.gather_minutes} minutes after it (no runner waits for it). A safety "
            "tick every",
            f"{cadence.safety_every_hours} hours for retries and deadlines, where the slots' "
            "ticks leave a longer gap."]


def sync(root: Path, schedules: list[Schedule], config: RepoConfig,
         start: datetime) -> dict[Path, str]:
    """The workflow files cron-sync would write (only those that change)."""
    derived = derive(schedules, config, start)
    changed: dict[Path, str] = {}
    tick = root / TICK
    if not tick.is_file():
        raise FileNotFoundError(f"{TICK} not found (run orchestrator init)")
    old = tick.read_text(encoding="utf-8")
    new = with_crons(old, derived.tick_cron, tick_comment(config))
    if new != old:
        changed[tick] = new
    if config.cadence.mode == "external":
        path = root / clock.CLOCK_FILE
        text = clock.file_text(schedules)
        if not path.is_file() or path.read_text(encoding="utf-8", errors="replace") != text:
            changed[path] = text
    watchdog = root / WATCHDOG
    if watchdog.is_file():
        old = watchdog.read_text(encoding="utf-8")
        new = with_crons(old, [derived.watchdog_cron], [
            "Written by `orchestrator cron-sync`: about once per staleness limit, which",
            "allows the tick cadence's longest gap (see tick.yml) and one dropped tick."])
        new = _STALENESS.sub(lambda m: f"{m.group(1)}{derived.max_staleness_minutes}"
                             f"{m.group(3)}", new)
        if new != old:
            changed[watchdog] = new
    return changed


_DISPATCH = re.compile(r"(?m)^  repository_dispatch:\s*\n\s+types:\s*\[([^\]]*)\]")


def _external_check(text: str, lines: list[str], cadence: Cadence,
                    start: datetime) -> list[str]:
    """Warnings about tick.yml under an external clock: the safety tick is missing, or
    the clock's repository_dispatch would start nothing."""
    warnings = []
    limit = timedelta(hours=cadence.safety_every_hours) + SLACK
    if cadence.clock_confirms:
        if BACKSTOP_LINE not in lines:
            warnings.append(f"{TICK}: no weekly backstop tick ({BACKSTOP_LINE}): a clock "
                            "that stopped leaves its slots unfired; run `orchestrator "
                            "cron-sync`")
    elif max_gap(lines, start) > limit:
        warnings.append(f"{TICK}: no safety tick at least every {cadence.safety_every_hours} "
                        "hours: a call the clock misses, a retry or a lost fan-in waits "
                        "longer; run `orchestrator cron-sync`")
    types = _DISPATCH.search(text)
    if types is None or clock.EVENT_TYPE not in types.group(1):
        warnings.append(f"{TICK}: no `repository_dispatch` trigger of type "
                        f"{clock.EVENT_TYPE}: the clock's repository dispatch starts nothing "
                        "(its workflow dispatch still works); see docs/how-to/cadence.md")
    return warnings


EVENT_TYPE = "orchestrator-event"
"""The ``repository_dispatch`` type of an outside event (``on_event``)."""


def _event_check(text: str, schedules: list[Schedule]) -> list[str]:
    """A warning when a schedule takes events but tick.yml would not answer them: GitHub
    accepts the dispatch (204) and starts nothing."""
    takers = sorted(s.id for s in schedules if s.spec.on_event is not None)
    types = _DISPATCH.search(text)
    if not takers or (types is not None and EVENT_TYPE in types.group(1)):
        return []
    return [f"{TICK}: no `repository_dispatch` trigger of type {EVENT_TYPE}: an event "
            f"sent to {takers[0]!r} on GitHub starts nothing; see docs/how-to/chains.md"]


def check(root: Path, schedules: list[Schedule], config: RepoConfig,
          start: datetime) -> tuple[list[str], list[str]]:
    """(problems, warnings) about tick.yml, watchdog.yml and, under an external clock,
    the clock's file for ``validate``."""
    cadence = config.cadence
    problems: list[str] = []
    if cadence.mode == "external":
        problems += clock.check(root, schedules, start, start + HORIZON)
    tick = root / TICK
    if not tick.is_file():
        return problems, []
    text = tick.read_text(encoding="utf-8")
    lines = read_crons(text)
    problems += [f"{TICK}: timezone {zone!r} of a schedule entry is not an IANA "
                 "zone: GitHub refuses the workflow" for zone in bad_zones(text)]
    warnings = _event_check(text, schedules)
    if cadence.mode == "external":
        warnings += _external_check(text, lines, cadence, start)
    elif cadence.mode == "derived":
        missing = uncovered(lines, schedules, cadence, start, start + HORIZON)
        for sid, slots in sorted(missing.items()):
            problems.append(
                f"{TICK}: no tick in the {int(window(cadence).total_seconds() // 60)} minutes "
                f"before (or, for a slot not worth lingering for, the "
                f"{cadence.gather_minutes} minutes after) "
                f"{len(slots)} slot(s) of {sid!r} (first {iso_minute(slots[0])}); "
                "run `orchestrator cron-sync` and commit the workflow with the schedule")
        linger, _ = read_linger(text)
        need = window(cadence).total_seconds() / 60
        if linger < need:
            warnings.append(f"{TICK}: --linger {linger:g} is shorter than the {need:g} minutes "
                            "a lead tick may wait for its slot: slots fire at the next tick")
    elif [utc_spec(line).cron for line in lines if not line.startswith(ZONED)] != \
            list(cadence.fixed_cron) or any(line.startswith(ZONED) for line in lines):
        problems.append(f"{TICK}: its cron differs from orchestrator.json's fixed_cron; run "
                        "`orchestrator cron-sync`")
    watchdog = root / WATCHDOG
    if watchdog.is_file() and lines:
        staleness = backstop(schedules, config, start).max_staleness_minutes \
            if cadence.clock_confirms else watchdog_for(max_gap(lines, start))[1]
        limit = read_staleness(watchdog.read_text(encoding="utf-8"))
        if limit is not None and limit < staleness:
            warnings.append(f"{WATCHDOG}: its staleness limit ({limit} minutes) is shorter "
                            f"than the tick cadence needs ({staleness}): it would report a "
                            "healthy repository stale; run `orchestrator cron-sync`")
    return problems, warnings


def without_cadence(text: str) -> str:
    """``text`` without what ``cron-sync`` writes (the ``schedule:`` blocks, the
    staleness limit): two workflows that differ only there are the same workflow."""
    return _STALENESS.sub(r"\g<1>0\g<3>", _SCHEDULE.sub("  schedule:\n", text))
