"""Reading one run's records (run, tracks, dead letters, poll log) into a plain context.

Nothing here renders: :class:`BriefContext` is what every rendering starts from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..config.fieldtypes import check_run_id
from ..config.models import ScheduleSpec
from ..errors import NotFound
from ..state.codec import POLLS_MAX_BYTES, CorruptState, cut_lines, heartbeat_at
from ..state.health import RunnerHealth, describe
from ..state.layout import DLQ, HEALTH, polls_path, run_dir, run_path, specs_path
from ..state.model import load
from ..state.records import DeadLetter, Run, Track
from ..support import safejson
from .causes import downstream_of

DEFAULT_STALE_AFTER = timedelta(minutes=90)
"""As ``orchestrator status``: an idle tick writes its heartbeat line only once an hour
(``--heartbeat-every``), and GitHub's cron runs late; older than this, the clock has
probably stopped."""


@dataclass(frozen=True)
class BriefContext:
    """Everything one brief is rendered from (read by :func:`context_from_files`)."""

    run: Run
    tracks: list[Track]
    dead_letters: list[DeadLetter]
    polls: list[dict[str, Any]]
    """Lines of ``polls.jsonl``: at least ``at`` (ISO UTC). The tick writes
    ``executor`` and ``changes`` ([str]); ``tick``, ``observed`` ({track: phase}) and
    ``notes`` ([str]) are shown when present."""
    generated_at: datetime
    last_tick: datetime | None
    schedule: ScheduleSpec | None = None
    """``None`` when the schedule file is gone; the run record carries its description,
    cron and time zone."""
    stale_after: timedelta = DEFAULT_STALE_AFTER
    compensations: tuple[Track, ...] = ()
    """The run's compensations (``on_failure: compensate``), in the order they run:
    the newest completed track's first."""
    runners: tuple[str, ...] = ()
    """The health of each runner label the run's tracks were sent to, in words."""
    tails: Mapping[str, str] = field(default_factory=dict)
    """Track name -> the last lines of its stdout, ready to show (:mod:`.tails`): a local
    track's read from its work folder by whoever renders."""
    tails_left_out: int = 0
    """Tracks that show no tail because of :data:`.tails.MAX_TRACKS`."""
    downstream: tuple[str, ...] = ()
    """The runs this run fired (``after`` runs naming it upstream), by id."""





def _labels(tracks: list[Track], schedule: ScheduleSpec | None) -> list[str]:
    """The runner labels the run's tracks went to or may go to, in order of preference."""
    labels = list(schedule.runs_on or []) if schedule is not None else []
    for track in tracks:
        labels += [label for label in _track_labels(track) if label not in labels]
    return labels


def _track_labels(track: Track) -> list[str]:
    """The labels one track may go to, then the runner it went to, each once."""
    found = [*(track.spec.runs_on or []), *([track.runner] if track.runner else [])]
    return list(dict.fromkeys(found))


def _read_polls(data: bytes | None) -> list[dict[str, Any]]:
    polls: list[dict[str, Any]] = []
    if not data:
        return polls
    # A log too large to show whole (kept short by the tick, unless edited by hand) is
    # read from its newest lines, after one saying what was left out.
    data = cut_lines(data, POLLS_MAX_BYTES)
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = safejson.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict):
            # One bad line must not cost the reader the whole brief; say so instead.
            entry = {"at": "", "notes": [f"line {number} of polls.jsonl is not a JSON object"]}
        polls.append(entry)
    return polls


def _run_files(files: Mapping[str, bytes], run_id: str) -> dict[str, bytes]:
    """The files one run's brief reads: the run's record and specs, its tracks and undo
    records, its dead letters, and the runners' health."""
    exact = {run_path(run_id), specs_path(run_id), HEALTH}
    prefix = run_dir(run_id) + "/"
    prefixes = (prefix + "tracks/", prefix + "undo/", f"{DLQ}/{run_id}--")
    # Filter on paths first: a git snapshot loads contents lazily, on access.
    return {p: files[p] for p in files if p in exact or p.startswith(prefixes)}


def context_from_files(
    files: Mapping[str, bytes],
    run_id: str,
    *,
    now: datetime,
    schedule: ScheduleSpec | None = None,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    last_tick: datetime | None = None,
) -> BriefContext:
    """Read one run's brief context out of a state file map (paths from the repo root).

    ``last_tick`` overrides the last line of ``state/ticks.jsonl``: a tick rendering a
    brief passes its own time, since its heartbeat line is written after the brief.
    """
    check_run_id(run_id)
    if run_path(run_id) not in files:
        raise NotFound(f"no run {run_id!r} on the state branch")
    state = load(_run_files(files, run_id), all_tracks=True)
    if run_id not in state.runs:  # quarantined: its run record or a track is unreadable
        raise CorruptState("; ".join(state.quarantine_lines()))
    run = state.runs[run_id]
    by_name = state.tracks.get(run_id, {})
    tracks = _in_run_order(run, by_name)
    letters = sorted((d for d in state.dlq.values() if d.run_id == run_id),
                     key=lambda d: d.track)
    undos = _compensations(state.undos.get(run_id, {}).values(), by_name)
    return BriefContext(
        run=run,
        tracks=tracks,
        dead_letters=letters,
        polls=_read_polls(files.get(polls_path(run_id))),
        generated_at=now.astimezone(UTC),
        last_tick=last_tick if last_tick is not None else heartbeat_at(files),
        schedule=schedule,
        stale_after=stale_after,
        compensations=undos,
        runners=tuple(describe(label, state.runners.get(label, RunnerHealth()))
                      for label in _labels(tracks, schedule)),
        downstream=downstream_of(files, run),
    )


def _in_run_order(run: Run, by_name: Mapping[str, Track]) -> list[Track]:
    """The run's tracks in the run's own order, then any it does not name by name."""
    order = {name: i for i, name in enumerate(run.tracks)}
    return sorted(by_name.values(), key=lambda t: (order.get(t.name, len(order)), t.name))


def _compensations(undos: Iterable[Track],
                   by_name: Mapping[str, Track]) -> tuple[Track, ...]:
    """The compensations in the order they run: the newest completed track's first."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return tuple(sorted(undos, reverse=True, key=lambda u: (
        getattr(by_name.get(u.name), "finished_at", None) or epoch, u.name)))
