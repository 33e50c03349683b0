"""The logs a tick appends: each touched run's ``polls.jsonl`` and ``state/ticks.jsonl``.

- A run's poll log gets one line per poll a track answered, then the tick's own line
  (what changed); it is kept under :data:`~orchestrator.state.codec.POLLS_MAX_BYTES`.
- The heartbeat gets one line per tick that changes anything, and one from an idle
  tick once ``heartbeat_every`` has passed; it keeps the newest
  :data:`~orchestrator.state.codec.TICKS_KEEP` lines.
- Logs are only ever appended beside a change: they never make a commit of their own,
  except the idle heartbeat.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..planner import Decision
from ..state import codec, layout
from ..support.times import iso


def append_lines(files: Mapping[str, bytes], path: str, lines: list[bytes],
                 keep: int | None = None) -> bytes:
    """``path``'s bytes in ``files`` with ``lines`` appended, cut to its limit."""
    joined = files.get(path, b"") + b"".join(lines)
    if keep is not None:
        return b"".join(joined.splitlines(keepends=True)[-keep:])
    if layout.kind_of(path) is layout.Kind.POLLS and len(joined) > codec.POLLS_MAX_BYTES:
        return codec.cut_lines(joined, codec.POLLS_MAX_BYTES)
    return joined


def poll_row(now: datetime, executor: str, changes: list[str]) -> bytes:
    return codec.json_line({"at": iso(now), "executor": executor, "changes": changes})


def poll_rows(decision: Decision, run_id: str, changes: list[str], now: datetime,
              executor: str) -> list[bytes]:
    """The tick's line for ``run_id``, after one line per poll a track answered."""
    answers = [codec.json_line({**entry, "executor": executor})
               for entry in decision.polls.get(run_id, [])]
    return [*answers, poll_row(now, executor, changes)]


AHEAD_TOLERANCE = timedelta(minutes=5)
"""A heartbeat this far ahead of a tick's ``now`` is no heartbeat: a tick ``--now`` in
the future wrote it, and real ticks write their own at once instead of waiting an hour
past it."""


def _heartbeat_due(changed: Mapping[str, object], last: datetime | None, now: datetime,
                   every: timedelta) -> bool:
    """Whether the tick writes its heartbeat line: it changed something, or the last
    line is missing, ``every`` old, or in the future."""
    return bool(changed) or last is None or now - last >= every or last - now > AHEAD_TOLERANCE


def append_logs(files: dict[str, bytes | None], changed: Mapping[str, object],
                old: Mapping[str, bytes], decision: Decision, now: datetime,
                executor: str, heartbeat_every: timedelta, clock: str | None = None,
                ran_at: datetime | None = None) -> None:
    """Append the poll lines of every run ``decision`` touched, and the heartbeat line
    when ``changed`` is not empty or the last one is older than ``heartbeat_every`` (or
    in the future). ``clock`` says where ``now`` came from: the machine's clock or
    ``tick --now`` (:data:`~orchestrator.state.codec.CLOCK_MACHINE`, ``CLOCK_GIVEN``);
    ``ran_at``, the machine's clock of a ``tick --now``, tells ``status`` when it ran."""
    for run_id, lines in sorted(decision.touched_runs.items()):
        if run_id in decision.state.runs:
            path = layout.polls_path(run_id)
            files[path] = append_lines(old, path,
                                       poll_rows(decision, run_id, lines, now, executor))
    if _heartbeat_due(changed, codec.last_tick_at(old), now, heartbeat_every):
        line = _tick_line(changed, old, decision, now, executor)
        if clock is not None:
            line["clock"] = clock
        if ran_at is not None and clock == codec.CLOCK_GIVEN:
            line["ran_at"] = iso(ran_at)
        files[layout.TICKS] = append_lines(old, layout.TICKS, [codec.json_line(line)],
                                           keep=codec.TICKS_KEEP)


def _tick_line(changed: Mapping[str, object], old: Mapping[str, bytes],
               decision: Decision, now: datetime, executor: str) -> dict[str, object]:
    """The heartbeat line's counts: what this tick fired, dispatched and rendered."""
    return {
        "at": iso(now),
        "executor": executor,
        "fired": sum(1 for p in changed
                     if layout.kind_of(p) is layout.Kind.RUN and p not in old),
        "dispatched": len(decision.dispatch),
        "rendered": len(decision.render),
        "invalid": len(decision.invalid),
    }
