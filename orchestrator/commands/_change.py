"""What ``validate --base REF`` says: each schedule compared with its version at ``REF``.

- ``REF``'s schedule and calendar files are read with git plumbing (``ls-tree``,
  ``cat-file``), never by checking ``REF`` out, into a temporary folder the loader
  reads as it reads the checkout's.
- A ``REF`` that names no commit is one line (:class:`~orchestrator.errors.UserError`).
- A file invalid at ``REF`` is no schedule there: the pull request is not blamed for it.
- The comparison itself is :mod:`orchestrator.cadence.change`; this module renders it.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..brief.text import md
from ..cadence.change import Change, FirstTick, compare_all
from ..config.files import load_all
from ..config.models import Schedule, ScheduleSpec
from ..config.triggers import for_spec
from ..errors import UserError
from ..store.plumbing import Git
from ..store.tree import TreeFiles
from ..support.credentials import Redactor
from ..support.times import iso
from .schedules import fmt_local

FOLDERS = ("schedules", "calendars")
SHOWN = 5
"""Slots listed per kind of difference; the count says how many more."""


def commit_of(repo: Path, ref: str) -> str:
    """The commit ``ref`` names in ``repo``, or one line saying it names none."""
    git = Git(repo, Redactor())
    proc = git.run("rev-parse", "--verify", "--quiet", "--end-of-options",
                   f"{ref}^{{commit}}", check=False)
    if ref.startswith("-") or proc.returncode != 0:
        shown = ref if ref.isprintable() else repr(ref)
        raise UserError(f"--base {shown}: no such commit in {repo} (a pull request's "
                        "checkout may need the base fetched: fetch-depth: 0)")
    return proc.stdout.decode().strip()


def schedules_at(repo: Path, commit: str) -> list[Schedule]:
    """The valid schedules of ``commit``, with its calendars. ``repo`` may be a folder
    inside the git repository: its folders are looked for under the same prefix."""
    git = Git(repo, Redactor())
    prefix = git.out("rev-parse", "--show-prefix")
    files = TreeFiles(git, commit)
    listing = files.listdirs(f"{prefix}{folder}" for folder in FOLDERS)
    with tempfile.TemporaryDirectory(prefix="orchestrator-base-") as tmp:
        root = Path(tmp)
        for folder in FOLDERS:
            names = listing[f"{prefix}{folder}"]
            (root / folder).mkdir()
            for name in (n for n, is_dir in names.items() if not is_dir and _plain(n)):
                (root / folder / name).write_bytes(files[f"{prefix}{folder}/{name}"])
        return load_all(root / "schedules").schedules


def _plain(name: str) -> bool:
    return name not in ("", ".", "..") and "/" not in name


def changes(repo: Path, ref: str, head: list[Schedule], merged: datetime
            ) -> tuple[str, list[Change]]:
    """The commit ``ref`` names and every schedule that differs from it."""
    commit = commit_of(repo, ref)
    return commit, compare_all(schedules_at(repo, commit), head, merged)


# --------------------------------------------------------------------------- words


def _local(at: datetime, spec: ScheduleSpec | None, zone_of: Change) -> str:
    return fmt_local(at.astimezone(spec.zone if spec is not None else zone_of.zone))


def _moved(old: datetime, new: datetime, change: Change) -> str:
    """``Mon 2026-12-07 07:00 EST → 06:30 EST``: the day once when it is the same."""
    before = old.astimezone(change.old.zone if change.old else change.zone)
    after = new.astimezone(change.new.zone if change.new else change.zone)
    shown = f"{after:%H:%M %Z}" if after.date() == before.date() else fmt_local(after)
    return f"{fmt_local(before)} → {shown}"


def _listed(items: list[str]) -> str:
    more = len(items) - SHOWN
    return ", ".join(items[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def _late(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def slot_lines(change: Change) -> list[str]:
    """The added, removed and moved slots, each a count and a short list."""
    s, old, new = change.slots, change.old, change.new
    found = []
    if s.moved:
        found.append(f"**{len(s.moved)} moved** (a removed and an added slot of one "
                     "local day, paired in time order): " + _listed(
                         [_moved(a, b, change) for a, b in s.moved]))
    if s.removed:
        found.append(f"**{len(s.removed)} removed**: "
                     + _listed([_local(a, old, change) for a in s.removed]))
    if s.added:
        found.append(f"**{len(s.added)} added**: "
                     + _listed([_local(a, new, change) for a in s.added]))
    return found


def first_tick_words(tick: FirstTick, change: Change) -> str:
    """What the first tick after merging does, in one sentence."""
    spec = change.new
    assert spec is not None
    if not spec.enabled:
        return "fires nothing: the schedule is disabled"
    parts = []
    if tick.fired:
        parts.append(f"fires {_plural(len(tick.fired), 'slot')} at once: " + _listed(
            [f"{_local(a, spec, change)} ({_late(change.merged - a)} late)"
             for a in tick.fired]))
    parts += _left(tick, spec)
    if not parts:
        parts.append("fires nothing")
    if tick.next_slot is not None:
        parts.append(f"the next slot is {_local(tick.next_slot, spec, change)}")
    return "; ".join(parts)


def _left(tick: FirstTick, spec: ScheduleSpec) -> list[str]:
    """The due slots the first tick does not fire, and the policy that leaves each."""
    found = []
    if tick.skipped:
        found.append(f"skips {_plural(len(tick.skipped), 'earlier due slot')} "
                     f"(catchup {spec.catchup.value} fires the newest)")
    if tick.missed:
        found.append(f"records {_plural(len(tick.missed), 'slot')} older than the "
                     f"{spec.catchup_window_minutes}-minute catch-up window as missed")
    for why, word in (("overlap", f"overlap {spec.overlap.value}"),
                      ("daily_cap", f"max_runs_per_day {spec.max_runs_per_day}")):
        held = [at for at, reason in tick.held if reason == why]
        if held:
            found.append(f"does not fire {_plural(len(held), 'due slot')} ({word})")
    return found


def _cost(change: Change) -> str:
    before, after = change.minutes
    diff = round(after - before)
    sign = "+" if diff > 0 else "-" if diff < 0 else "±"
    return (f"{sign}{abs(diff):,} runner-minutes a month for its own jobs ({before:,.0f} "
            f"→ {after:,.0f}: its tracks and fan-in at every slot, each job taken as 1 "
            "minute)")


def _when(spec: ScheduleSpec) -> str:
    """When ``spec`` fires, in words, as inert Markdown (a zone name has underscores)."""
    return md(for_spec(spec).describe() + ("" if spec.enabled else " (disabled)"))


def one_line(change: Change) -> str | None:
    """The line of a schedule added or removed; ``None`` for one changed."""
    if change.new is not None and change.old is None:
        tick = change.first_tick
        first = f"; its first tick {first_tick_words(tick, change)}" if tick else ""
        return (f"`{change.schedule_id}` is new: {_when(change.new)}, "
                f"{_plural(change.new_count, 'slot')} in the next 30 days, "
                f"{_cost(change)}{first}.")
    if change.old is not None and change.new is None:
        return (f"`{change.schedule_id}` is removed: {_plural(change.old_count, 'slot')} "
                f"of the next 30 days no longer fire, {_cost(change)}.")
    return None


def section(change: Change) -> list[str]:
    """The Markdown of one changed schedule."""
    line = one_line(change)
    if line is not None:
        return [line, ""]
    assert change.old is not None and change.new is not None
    return [f"### `{change.schedule_id}`", "",
            f"Now {_when(change.new)}; was {_when(change.old)}.", "",
            *(f"- {item}" for item in _items(change)), ""]


def _items(change: Change) -> list[str]:
    """A changed schedule's differences, one item each."""
    items = [f"Slots in the next 30 days: {change.old_count} before, "
             f"{change.new_count} after" + ("." if change.slots else ", the same ones."),
             *slot_lines(change)]
    items += [f"Daylight saving, new: {md(n)}" for n in change.dst_gained]
    items += [f"Daylight saving, no longer: {md(n)}" for n in change.dst_lost]
    items += [f"Policy: {p}" for p in change.policies]
    if change.first_tick is not None:
        items.append(f"The first tick after merging ({iso(change.merged)}) "
                     f"{first_tick_words(change.first_tick, change)}.")
    return [*items, f"Cost: {_cost(change)}."]


def markdown(ref: str, commit: str, found: list[Change]) -> str:
    verdict = {0: "no schedule differs", 1: "1 schedule differs"}.get(
        len(found), f"{len(found)} schedules differ")
    out = ["## What this pull request changes", "",
           f"Compared with `{ref}` ({commit[:12]}): {verdict}.", ""]
    for change in found:
        out += section(change)
    return "\n".join(out).rstrip("\n") + "\n"


def text(found: list[Change]) -> str:
    lines = []
    for c in found:
        s = c.slots
        lines.append(f"{c.schedule_id}: {c.kind}: in the next 30 days {len(s.moved)} "
                     f"moved, {len(s.removed)} removed, {len(s.added)} added; "
                     f"{_cost(c)}")
    return "".join(f"{line}\n" for line in lines)


def to_json(ref: str, commit: str, found: list[Change]) -> dict[str, Any]:
    return {"ref": ref, "commit": commit, "schedules": [{
        "id": c.schedule_id, "kind": c.kind, "slots_before": c.old_count,
        "slots_after": c.new_count,
        "added": [iso(a) for a in c.slots.added],
        "removed": [iso(a) for a in c.slots.removed],
        "moved": [[iso(a), iso(b)] for a, b in c.slots.moved],
        "dst_new": list(c.dst_gained), "dst_gone": list(c.dst_lost),
        "first_tick_fires": [iso(a) for a in c.first_tick.fired] if c.first_tick else [],
        "runner_minutes": [round(m) for m in c.minutes]} for c in found]}
