"""The state tree, parsed: everything under ``state/`` the planner reads.

- :func:`load` parses a file map into a :class:`State`; ``State.dump`` turns it back
  into files, leaving out records that are the same objects as in its base.
- A record that cannot be read is quarantined with one line naming it, and everything
  of its run is left alone (never rewritten).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..errors import InvalidId
from ..spec.fields import check_run_id
from ..store import as_state_files
from ..support import safejson
from .breaker import Breaker
from .codec import (
    MAX_RECORD_BYTES,
    CorruptState,
    R,
    first_error,
    parse_record,
    parse_with_spec,
    read_specs,
    record_bytes,
    to_json,
)
from .health import RUNNERS_KEY, RunnerHealth
from .layout import (
    HEALTH,
    ROOT,
    RUNS,
    Kind,
    cursor_path,
    dlq_path,
    locate,
    run_path,
    runs_entry_path,
    specs_path,
    track_path,
    undo_path,
)
from .records import Cursor, DeadLetter, Run, Track


@dataclass
class State:
    """Everything under ``state/`` the planner reads, parsed."""

    cursors: dict[str, Cursor] = field(default_factory=dict)
    runs: dict[str, Run] = field(default_factory=dict)
    tracks: dict[str, dict[str, Track]] = field(default_factory=dict)
    dlq: dict[str, DeadLetter] = field(default_factory=dict)
    health: dict[str, Breaker] = field(default_factory=dict)
    quarantined: dict[str, str] = field(default_factory=dict)
    """Path -> what is wrong, for each record that could not be read. A quarantined
    record is left alone (never rewritten), and so is everything of its run."""
    runners: dict[str, RunnerHealth] = field(default_factory=dict)
    """Runner label -> its health (``runs_on`` routing), in ``state/health.json``."""
    undos: dict[str, dict[str, Track]] = field(default_factory=dict)
    """Run id -> track -> the compensation of that track (``on_failure: compensate``)."""
    known_runs: Collection[str] = frozenset()
    """Ids of runs on the branch that ``runs`` may leave out (a tick loads only the open
    ones, see :mod:`orchestrator.state.index`): such a slot has fired already. Possibly
    listed only when first asked (:class:`~orchestrator.state.index.RunFolders`)."""

    def copy(self) -> State:
        return State(
            cursors=dict(self.cursors),
            runs=dict(self.runs),
            tracks={k: dict(v) for k, v in self.tracks.items()},
            dlq=dict(self.dlq),
            health=dict(self.health),
            quarantined=dict(self.quarantined),
            runners=dict(self.runners),
            undos={k: dict(v) for k, v in self.undos.items()},
            known_runs=self.known_runs,
        )

    def held_schedules(self) -> set[str]:
        """Schedules whose cursor is quarantined: firing them would overwrite the record
        (and could fire again what it already fired), so they wait for a person."""
        return {found.name for found in map(locate, self.quarantined)
                if found is not None and found.kind is Kind.CURSOR}

    def quarantine_lines(self) -> list[str]:
        """One line per quarantined record, for the tick's output and ``status``."""
        return [f"quarantined {why}" for _, why in sorted(self.quarantined.items())]

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
        specs: dict[str, dict[str, Any]] = {}
        for rid, tracks in self.tracks.items():
            # The tracks' specs are stored once per run, in specs.json (rewritten with
            # the same bytes whenever a track changes, so it costs no commit).
            specs[rid] = {n: t.spec.model_dump(mode="json", by_alias=True)
                          for n, t in tracks.items()}
            changed = [t for n, t in tracks.items()
                       if fresh(base.tracks.get(rid) if base else None, n, t)]
            if changed:
                files[specs_path(rid)] = to_json(dict(sorted(specs[rid].items())))
            for track in changed:
                files[track_path(rid, track.name)] = record_bytes(track, specs[rid])
        for key, letter in self.dlq.items():
            if fresh(base.dlq if base else None, key, letter):
                files[dlq_path(key)] = record_bytes(letter, specs.get(letter.run_id, {}))
        for rid, undos in self.undos.items():
            for name, undo in undos.items():
                if fresh(base.undos.get(rid) if base else None, name, undo):
                    files[undo_path(rid, name)] = to_json(undo)
        if (self.health or self.runners) and (
                base is None or base.health != self.health or base.runners != self.runners):
            health: dict[str, Any] = {k: v.model_dump(mode="json")
                                      for k, v in self.health.items()}
            if self.runners:
                health[RUNNERS_KEY] = {k: v.model_dump(mode="json")
                                       for k, v in sorted(self.runners.items())}
            files[HEALTH] = to_json(health)
        return files


def load(files: Mapping[str, bytes], *, all_tracks: bool = False) -> State:
    """Parse the state records out of a file map (paths relative to the repository root).

    Track records of finished runs are skipped unless ``all_tracks``: the planner
    never needs them, and a state branch with thousands of finished runs would
    otherwise cost a blob read per track on every tick.
    """
    from .machine import RUN_TERMINAL

    files = as_state_files(files)
    state = State()
    paths = sorted(files)
    files.prefetch(p for p in paths
                   if p.startswith(ROOT + "/") and p.endswith(".json") and "/tracks/" not in p
                   and "/undo/" not in p)
    finished = set()
    bad_runs: set[str] = set()
    specs = functools.cache(lambda run_id: read_specs(files, run_id))
    for path in paths:
        parts = path.split("/")
        if len(parts) >= 3 and parts[:2] == [ROOT, "runs"] and not _run_dir_ok(parts[2]):
            bad_runs.add(parts[2])
            quarantine_folder(state, parts[2])
            continue
        if len(parts) == 4 and parts[:2] == [ROOT, "runs"] and parts[3] == "run.json":
            run = _record(state, Run, path, files, "run_id", parts[2])
            if run is None:
                bad_runs.add(parts[2])
                continue
            state.runs[run.run_id] = run
            if run.status in RUN_TERMINAL and not all_tracks:
                finished.add(parts[2])
    files.prefetch(p for p in paths if p.startswith(f"{ROOT}/runs/")
                   and ("/tracks/" in p or "/undo/" in p)
                   and p.split("/")[2] not in finished | bad_runs)
    for path in paths:
        if not path.startswith(ROOT + "/") or not path.endswith(".json"):
            continue
        parts = path.split("/")
        if parts[1] == "schedules" and len(parts) == 3:
            cursor = _record(state, Cursor, path, files, "schedule_id", parts[2][:-5])
            if cursor is not None:
                state.cursors[cursor.schedule_id] = cursor
        elif parts[1] == "runs" and len(parts) == 5 and parts[3] == "tracks":
            if parts[2] in finished or parts[2] in bad_runs:
                continue
            track = _record(state, Track, path, files, "name", parts[4][:-5],
                            specs(parts[2]))
            if track is None:
                bad_runs.add(parts[2])
            elif track.run_id != parts[2]:
                state.quarantined[path] = (f"{path}: run_id: {track.run_id!r} is not the "
                                           "run of its folder")
                bad_runs.add(parts[2])
            elif track is not None:
                state.tracks.setdefault(track.run_id, {})[track.name] = track
        elif parts[1] == "runs" and len(parts) == 5 and parts[3] == "undo":
            if parts[2] in finished or parts[2] in bad_runs:
                continue
            undo = _record(state, Track, path, files, "name", parts[4][:-5], specs(parts[2]))
            if undo is None:
                bad_runs.add(parts[2])
            else:
                state.undos.setdefault(undo.run_id, {})[undo.name] = undo
        elif parts[1] == "dlq" and len(parts) == 3:
            letter = _record(state, DeadLetter, path, files, "key", parts[2][:-5],
                             specs(parts[2][:-5].rpartition("--")[0]))
            if letter is not None:
                state.dlq[letter.key] = letter
        elif path == HEALTH:
            try:
                raw = safejson.loads(files[path], max_bytes=MAX_RECORD_BYTES)
                if not isinstance(raw, dict):
                    raise ValueError(f"a JSON object is expected, not {type(raw).__name__}")
                runners = raw.pop(RUNNERS_KEY, {})
                if not isinstance(runners, dict):
                    raise ValueError(f"{RUNNERS_KEY}: a JSON object is expected")
                breakers = {k: Breaker.model_validate(v, strict=False) for k, v in raw.items()}
                state.runners = {k: RunnerHealth.model_validate(v, strict=False)
                                 for k, v in runners.items()}
                state.health = breakers
            except ValidationError as exc:
                # A broken breaker file costs only the breaker: it starts closed again.
                state.quarantined[path] = first_error(path, exc)
            except (ValueError, AttributeError) as exc:
                state.quarantined[path] = f"{path}: (root): {exc}"
    for run_id in bad_runs:
        # Everything of a quarantined run is left alone: the planner never sees a run
        # with only some of its records, and the dump never rewrites what it skipped.
        state.runs.pop(run_id, None)
        state.tracks.pop(run_id, None)
        state.undos.pop(run_id, None)
    return state


def quarantine_folder(state: State, name: str) -> None:
    """Quarantine the entry ``name`` of ``state/runs``, which is no run id: it is named
    on every load and never read."""
    # the name is quoted: it may hold anything a tree entry can
    state.quarantined.setdefault(runs_entry_path(name),
                                 f"{RUNS}/{name!r}: not a run id; that folder is left alone")


def _run_dir_ok(name: str) -> bool:
    try:
        check_run_id(name)
    except InvalidId:
        return False
    return True


def _record(state: State, model: type[R], path: str, files: Mapping[str, bytes],
            key: str, expected: str, specs: Mapping[str, Any] | None = None) -> R | None:
    """The record at ``path``, or ``None`` after quarantining it with the reason.

    A record whose identifying field (``key``) disagrees with its file name is
    quarantined too: the dump would write it to another path than the one it was
    read from (``../../evil`` in a ``run_id`` is caught here).
    """
    try:
        record = (parse_record(model, path, files[path]) if specs is None
                  else parse_with_spec(model, path, files[path], specs))
    except CorruptState as exc:
        state.quarantined[path] = exc.message
        return None
    except (KeyError, OSError) as exc:  # listed but unreadable (a tree entry like '..')
        state.quarantined[path] = f"{path}: cannot be read: {exc}"
        return None
    found = getattr(record, key)
    if found != expected:
        state.quarantined[path] = (f"{path}: {key}: {found!r} does not match the file name "
                                   f"({expected!r})")
        return None
    return record
