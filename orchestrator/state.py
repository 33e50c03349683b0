"""The state tree: where each record lives and how it is (de)serialised.

``State`` is the whole of ``state/`` that the planner needs, parsed. ``dump`` turns
it back into files; :func:`changes` diffs two file maps so a commit only carries
what really changed (a tick with nothing to do produces no change at all).

JSON is written with sorted keys, two-space indent and a trailing newline, so the
history of the state branch stays small and readable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .breaker import Breaker
from .errors import OrchestratorError
from .models import Cursor, DeadLetter, Run, Track, check_id, check_run_id
from .store import changes as changes  # re-exported: the tick diffs its files with it

ROOT = "state"
TICKS = f"{ROOT}/ticks.jsonl"
HEALTH = f"{ROOT}/health.json"
INDEX = f"{ROOT}/index.html"
TICKS_KEEP = 500
"""Lines kept in ``ticks.jsonl``; older ones are dropped when a tick appends."""


class CorruptState(OrchestratorError):
    """A state file could not be parsed."""


def cursor_path(schedule_id: str) -> str:
    return f"{ROOT}/schedules/{check_id(schedule_id, 'schedule id')}.json"


def run_dir(run_id: str) -> str:
    return f"{ROOT}/runs/{check_run_id(run_id)}"


def run_path(run_id: str) -> str:
    return f"{run_dir(run_id)}/run.json"


def track_path(run_id: str, track: str) -> str:
    return f"{run_dir(run_id)}/tracks/{check_id(track, 'track name')}.json"


def polls_path(run_id: str) -> str:
    return f"{run_dir(run_id)}/polls.jsonl"


def brief_path(run_id: str) -> str:
    return f"{run_dir(run_id)}/brief.html"


def dlq_key(run_id: str, track: str) -> str:
    return f"{check_run_id(run_id)}--{check_id(track, 'track name')}"


def dlq_path(key: str) -> str:
    run_id, sep, track = key.rpartition("--")
    if not sep:
        check_run_id(key)  # raises with a clear message
    return f"{ROOT}/dlq/{dlq_key(run_id, track)}.json"


def to_json(model: BaseModel | Mapping[str, Any]) -> bytes:
    """Stable JSON: sorted keys, 2-space indent, trailing newline."""
    data = model.model_dump(mode="json", by_alias=True) if isinstance(model, BaseModel) else model
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def json_line(data: Mapping[str, Any]) -> bytes:
    return (json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            + "\n").encode()


@dataclass
class State:
    """Everything under ``state/`` the planner reads, parsed."""

    cursors: dict[str, Cursor] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)
    tracks: dict[str, dict[str, Track]] = field(default_factory=dict)
    dlq: dict[str, DeadLetter] = field(default_factory=dict)
    health: dict[str, Breaker] = field(default_factory=dict)
    known_runs: frozenset[str] = frozenset()
    """Ids of runs on the branch that ``runs`` may leave out (a tick loads only the open
    ones, see :mod:`orchestrator.state_index`): such a slot has fired already."""

    def copy(self) -> State:
        return State(
            cursors=dict(self.cursors),
            runs=dict(self.runs),
            tracks={k: dict(v) for k, v in self.tracks.items()},
            dlq=dict(self.dlq),
            health=dict(self.health),
            known_runs=self.known_runs,
        )

    def dump(self, base: State | None = None) -> dict[str, bytes]:
        """The JSON records of this state as files (not the logs, briefs or index).

        With ``base`` (the state this one was derived from), records that are the very
        same objects as in ``base`` are left out: models are immutable, so an
        unchanged record is an identical object, and a tick over thousands of
        finished runs serialises only what it touched.
        """

        def fresh(old: Mapping[str, Any] | None, key: str, value: Any) -> bool:
            return old is None or old.get(key) is not value

        files: dict[str, bytes] = {}
        for sid, cursor in self.cursors.items():
            if fresh(base.cursors if base else None, sid, cursor):
                files[cursor_path(sid)] = to_json(cursor)
        for rid, run in self.runs.items():
            if fresh(base.runs if base else None, rid, run):
                files[run_path(rid)] = to_json(run)
        for rid, tracks in self.tracks.items():
            for name, track in tracks.items():
                if fresh(base.tracks.get(rid) if base else None, name, track):
                    files[track_path(rid, name)] = to_json(track)
        for key, letter in self.dlq.items():
            if fresh(base.dlq if base else None, key, letter):
                files[dlq_path(key)] = to_json(letter)
        if self.health and (base is None or base.health != self.health):
            files[HEALTH] = to_json({k: v.model_dump(mode="json") for k, v in self.health.items()})
        return files


R = TypeVar("R", bound=BaseModel)


def parse_record(model: type[R], path: str, data: bytes) -> R:
    """The record of type ``model`` in the file ``path``, or :class:`CorruptState` naming
    the file and the first field at fault (invalid JSON is reported at the root)."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise CorruptState(f"{path}: {where}: {first['msg']}") from exc


def last_tick_at(files: Mapping[str, bytes]) -> datetime | None:
    """The ``at`` of the newest readable line of ``state/ticks.jsonl``, if any."""
    from .times import parse_utc

    data = files.get(TICKS)
    if not data:
        return None
    for line in reversed(data.decode("utf-8", "replace").splitlines()):
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # one bad line must not hide the heartbeat before it
        moment = parse_utc(entry.get("at")) if isinstance(entry, dict) else None
        if moment is not None:
            return moment
    return None


def load(files: Mapping[str, bytes], *, all_tracks: bool = False) -> State:
    """Parse the state records out of a file map (paths relative to the repository root).

    Track records of finished runs are skipped unless ``all_tracks``: the planner
    never needs them, and a state branch with thousands of finished runs would
    otherwise cost a blob read per track on every tick.
    """
    from .machine import RUN_TERMINAL

    state = State()
    paths = sorted(files)
    prefetch = getattr(files, "prefetch", None)  # the git store loads blobs in bulk
    if prefetch is not None:
        prefetch(p for p in paths
                 if p.startswith(ROOT + "/") and p.endswith(".json") and "/tracks/" not in p)
    finished = set()
    for path in paths:
        parts = path.split("/")
        if len(parts) == 4 and parts[:2] == [ROOT, "runs"] and parts[3] == "run.json":
            run = parse_record(Run, path, files[path])
            state.runs[run.run_id] = run
            if run.status in RUN_TERMINAL and not all_tracks:
                finished.add(parts[2])
    if prefetch is not None:
        prefetch(p for p in paths if p.startswith(f"{ROOT}/runs/") and "/tracks/" in p
                 and p.split("/")[2] not in finished)
    for path in paths:
        if not path.startswith(ROOT + "/") or not path.endswith(".json"):
            continue
        parts = path.split("/")
        if parts[1] == "schedules" and len(parts) == 3:
            cursor = parse_record(Cursor, path, files[path])
            state.cursors[cursor.schedule_id] = cursor
        elif parts[1] == "runs" and len(parts) == 5 and parts[3] == "tracks":
            if parts[2] in finished:
                continue
            track = parse_record(Track, path, files[path])
            state.tracks.setdefault(track.run_id, {})[track.name] = track
        elif parts[1] == "dlq" and len(parts) == 3:
            letter = parse_record(DeadLetter, path, files[path])
            state.dlq[letter.key] = letter
        elif path == HEALTH:
            try:
                raw = json.loads(files[path])
                state.health = {k: Breaker.model_validate(v, strict=False) for k, v in raw.items()}
            except (ValueError, ValidationError, AttributeError) as exc:
                raise CorruptState(f"{path}: {exc}") from exc
    return state
