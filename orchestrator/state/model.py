"""The state tree, parsed: everything under ``state/`` the planner reads.

- :func:`load` parses a file map into a :class:`State`; ``State.dump`` turns it back
  into files, leaving out records that are the same objects as in its base.
- Which files are records, and of what kind, is :func:`~.layout.locate`'s to say;
  :data:`RECORD_KINDS` says how each kind is read and where it lands in the state.
- A record that cannot be read is quarantined with one line naming it, and everything
  of its run is left alone (never rewritten).
- So is a record whose own id is not the one its path names, and every file under a
  ``state/runs`` entry that is no run id.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..store import StateFiles, as_state_files
from ..support import safejson
from .codec import (
    MAX_RECORD_BYTES,
    CorruptState,
    RecordT,
    first_error,
    parse_record,
    parse_with_spec,
    read_specs,
    record_bytes,
    to_json,
)
from .layout import (
    HEALTH,
    RUNS,
    Kind,
    Located,
    cursor_path,
    dead_letter_run,
    dlq_path,
    is_run_id,
    locate,
    run_path,
    runs_entry,
    runs_entry_path,
    specs_path,
    track_path,
    undo_path,
)

if TYPE_CHECKING:
    from .breaker import Breaker
    from .health import RunnerHealth
    from .queue import QueueBook
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
    queues: dict[str, QueueBook] = field(default_factory=dict)
    """Queue name -> the queue, read lazily (:mod:`orchestrator.state.queue`): a tick
    reads the summaries, and items only where it claims or records."""

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
            queues={k: v.copy() for k, v in self.queues.items()},
        )

    def queue(self, name: str) -> QueueBook:
        """The queue ``name``; a new, empty one when the branch has none of that name
        (a queue with any file on the branch is in :attr:`queues`)."""
        if name not in self.queues:
            from .queue import QueueBook

            self.queues[name] = QueueBook.empty(name, {})
        return self.queues[name]

    def held_schedules(self) -> set[str]:
        """Schedules whose cursor is quarantined: firing them would overwrite the record
        (and could fire again what it already fired), so they wait for a person."""
        return {found.name for found in map(locate, self.quarantined)
                if found is not None and found.kind is Kind.CURSOR}

    def quarantine_lines(self) -> list[str]:
        """One line per quarantined record, for the tick's output and ``status``."""
        return [f"quarantined {why}" for _, why in sorted(self.quarantined.items())]

    def dump(self, base: State | None = None) -> dict[str, bytes | None]:
        """The JSON records of this state as files (not the logs, briefs or index).

        With ``base`` (the state this one was derived from), records that are the very
        same objects as in ``base`` are left out: models are immutable, so an
        unchanged record is an identical object, and a tick over thousands of
        finished runs serialises only what it touched.
        """
        files: dict[str, bytes | None] = {
            cursor_path(sid): to_json(cursor) for sid, cursor
            in _fresh(self.cursors, base.cursors if base else None)}
        files.update((run_path(rid), to_json(run))
                     for rid, run in _fresh(self.runs, base.runs if base else None))
        specs = self._dump_tracks(files, base)
        files.update((dlq_path(key), record_bytes(letter, specs.get(letter.run_id, {})))
                     for key, letter in _fresh(self.dlq, base.dlq if base else None))
        self._dump_undos(files, base)
        health = self._dump_health(base)
        if health is not None:
            files[HEALTH] = health
        self._dump_queues(files, base)
        return files

    def _dump_undos(self, files: dict[str, bytes | None], base: State | None) -> None:
        """Write the changed undo records into ``files``."""
        for rid, undos in self.undos.items():
            files.update((undo_path(rid, name), to_json(undo)) for name, undo
                         in _fresh(undos, base.undos.get(rid) if base else None))

    def _dump_queues(self, files: dict[str, bytes | None], base: State | None) -> None:
        """Write into ``files`` what changed in each queue not the same book as in
        ``base``."""
        for name, book in sorted(self.queues.items()):
            if base is None or base.queues.get(name) is not book:
                files.update(book.dump())

    def _dump_tracks(self, files: dict[str, bytes | None], base: State | None
                     ) -> dict[str, dict[str, Any]]:
        """Write the changed tracks into ``files``; every run's specs, by track name."""
        specs: dict[str, dict[str, Any]] = {}
        for rid, tracks in self.tracks.items():
            # The tracks' specs are stored once per run, in specs.json (rewritten with
            # the same bytes whenever a track changes, so it costs no commit).
            specs[rid] = {n: t.spec.model_dump(mode="json", by_alias=True)
                          for n, t in tracks.items()}
            changed = [t for _, t in _fresh(tracks, base.tracks.get(rid) if base else None)]
            if changed:
                files[specs_path(rid)] = to_json(dict(sorted(specs[rid].items())))
            for track in changed:
                files[track_path(rid, track.name)] = record_bytes(track, specs[rid])
        return specs

    def _dump_health(self, base: State | None) -> bytes | None:
        """``state/health.json`` when it has anything to say that ``base`` did not."""
        if not (self.health or self.runners) or self._same_health(base):
            return None
        from .health import RUNNERS_KEY

        health: dict[str, Any] = {k: v.model_dump(mode="json") for k, v in self.health.items()}
        if self.runners:
            health[RUNNERS_KEY] = {k: v.model_dump(mode="json")
                                   for k, v in sorted(self.runners.items())}
        return to_json(health)

    def _same_health(self, base: State | None) -> bool:
        """Whether ``base`` has the very breakers and runner health of this state."""
        return base is not None and base.health == self.health and base.runners == self.runners


V = TypeVar("V")


def _fresh(new: Mapping[str, V], old: Mapping[str, V] | None) -> Iterator[tuple[str, V]]:
    """The entries of ``new`` that are not the very same objects in ``old``."""
    return ((k, v) for k, v in new.items() if old is None or old.get(k) is not v)


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class RecordKind:
    """How one kind of record is read, and where it lands in a :class:`State`."""

    model: str
    """The name of its model in :mod:`.records`, imported with the first record read:
    a tick that reads no record never builds the records' models."""
    key: str
    """The record's field that must equal what its path names."""
    land: Callable[[State, Any, Located], str | None]
    """Puts the record in the state, or says why it does not belong where it was found."""
    of_run: bool = False
    """A file of a run's folder: not read once its run is left alone, and a bad one
    leaves the whole run alone."""
    open_runs_only: bool = False
    """Not read for a finished run (unless all tracks are asked for): the planner never
    needs it, and a branch with thousands of finished runs would pay a read for each."""
    specs_of: Callable[[Located], str] | None = None
    """The run whose ``specs.json`` holds the record's track spec."""

    @property
    def model_class(self) -> type[BaseModel]:
        from . import records

        model: type[BaseModel] = getattr(records, self.model)
        return model


def _land_cursor(state: State, cursor: Cursor, _: Located) -> None:
    state.cursors[cursor.schedule_id] = cursor


def _land_run(state: State, run: Run, _: Located) -> None:
    state.runs[run.run_id] = run


def _land_track(state: State, track: Track, where: Located) -> str | None:
    if track.run_id != where.run:
        return f"run_id: {track.run_id!r} is not the run of its folder"
    state.tracks.setdefault(track.run_id, {})[track.name] = track
    return None


def _land_undo(state: State, undo: Track, _: Located) -> None:
    state.undos.setdefault(undo.run_id, {})[undo.name] = undo


def _land_letter(state: State, letter: DeadLetter, _: Located) -> None:
    state.dlq[letter.key] = letter


def _own_run(where: Located) -> str:
    assert where.run is not None
    return where.run


def _letter_run(where: Located) -> str:
    return dead_letter_run(where.name)


RECORD_KINDS: dict[Kind, RecordKind] = {
    Kind.RUN: RecordKind("Run", "run_id", _land_run, of_run=True),
    Kind.CURSOR: RecordKind("Cursor", "schedule_id", _land_cursor),
    Kind.TRACK: RecordKind("Track", "name", _land_track, of_run=True, open_runs_only=True,
                           specs_of=_own_run),
    Kind.UNDO: RecordKind("Track", "name", _land_undo, of_run=True, open_runs_only=True,
                          specs_of=_own_run),
    Kind.DEAD_LETTER: RecordKind("DeadLetter", "key", _land_letter, specs_of=_letter_run),
}
"""Every record :func:`load` reads, but ``state/health.json`` (:func:`_load_health`)."""


def load(files: Mapping[str, bytes], *, all_tracks: bool = False) -> State:
    """Parse the state records out of a file map (paths relative to the repository root).

    Run records are read first; then, in path order, everything else, leaving out the
    records of finished runs :attr:`RecordKind.open_runs_only` names unless
    ``all_tracks``. Each pass loads its files with one :meth:`~.StateFiles.prefetch`.
    """
    loading = _Loading(as_state_files(files))
    found = {p: where for p in sorted(loading.files) if (where := locate(p)) is not None}
    loading.folders_first()
    loading.files.prefetch(p for p, where in found.items() if where.kind in _FIRST)
    loading.read_runs(found)
    if not all_tracks:
        loading.skip_finished()
    loading.files.prefetch(p for p, where in found.items() if loading.wanted_later(where))
    loading.read_the_rest(found)
    return loading.done()


_FIRST = frozenset({Kind.RUN, Kind.CURSOR, Kind.DEAD_LETTER, Kind.HEALTH})
"""What :func:`load` loads before it knows which runs are finished."""


@dataclass
class _Loading:
    """One :func:`load` under way."""

    files: StateFiles
    state: State = field(default_factory=State)
    bad_runs: set[str] = field(default_factory=set)
    """Run folders left alone: a record of theirs is bad, or the name is no run id."""
    finished: set[str] = field(default_factory=set)
    """Finished runs, whose :attr:`RecordKind.open_runs_only` records are not read."""
    specs: Callable[[str], dict[str, Any]] = field(init=False)
    """A run's track specs, read once."""

    def __post_init__(self) -> None:
        self.specs = functools.cache(lambda run_id: read_specs(self.files, run_id))

    def folders_first(self) -> None:
        """Quarantine every entry of ``state/runs`` that is no run id, once, by name."""
        for entry in sorted({e for e in map(runs_entry, self.files) if e is not None}):
            if not is_run_id(entry):
                self.bad_runs.add(entry)
                quarantine_folder(self.state, entry)

    def read_runs(self, found: Mapping[str, Located]) -> None:
        """Read the run records among ``found``, first: a run's status decides what
        else of it is read."""
        for path, where in found.items():
            if where.kind is Kind.RUN:
                self.read(path, where)

    def skip_finished(self) -> None:
        """Leave out, from now on, the records of the runs read as finished that only
        open runs need."""
        from .machine import RUN_TERMINAL

        self.finished = {r for r, run in self.state.runs.items()
                         if run.status in RUN_TERMINAL}

    def read_the_rest(self, found: Mapping[str, Located]) -> None:
        """Read every other record among ``found`` (the second pass), in path order."""
        for path, where in found.items():
            if where.kind is Kind.HEALTH:
                _load_health(self.state, path, self.files[path])
            elif where.kind is not Kind.RUN and where.kind in RECORD_KINDS:
                self.read(path, where)

    def wanted_later(self, where: Located) -> bool:
        """Whether the second pass reads the file (or its track specs)."""
        if where.kind is Kind.SPECS:
            return where.run not in self.bad_runs
        kind = RECORD_KINDS.get(where.kind)
        return kind is not None and where.kind not in _FIRST and not self._skips(kind, where)

    def _skips(self, kind: RecordKind, where: Located) -> bool:
        return kind.of_run and (where.run in self.bad_runs
                                or (kind.open_runs_only and where.run in self.finished))

    def read(self, path: str, where: Located) -> None:
        kind = RECORD_KINDS[where.kind]
        if self._skips(kind, where):
            return
        record = self._parsed(kind, path, where)
        why = kind.land(self.state, record, where) if record is not None else None
        if why is not None:
            self.state.quarantined[path] = f"{path}: {why}"
        if kind.of_run and (record is None or why is not None):
            assert where.run is not None
            self.bad_runs.add(where.run)

    def _parsed(self, kind: RecordKind, path: str, where: Located) -> BaseModel | None:
        """The record at ``path`` (with its track specs, for a kind that has them), or
        ``None`` after quarantining it."""
        specs = self.specs(kind.specs_of(where)) if kind.specs_of is not None else None
        return _record(self.state, kind.model_class, path, self.files, kind.key, where.name,
                       specs)

    def done(self) -> State:
        for run_id in self.bad_runs:
            # Everything of a quarantined run is left alone: the planner never sees a run
            # with only some of its records, and the dump never rewrites what it skipped.
            self.state.runs.pop(run_id, None)
            self.state.tracks.pop(run_id, None)
            self.state.undos.pop(run_id, None)
        return self.state


def _load_health(state: State, path: str, data: bytes) -> None:
    """The breakers and runner health of ``state/health.json``, or its quarantine."""
    from .breaker import Breaker
    from .health import RUNNERS_KEY, RunnerHealth

    try:
        raw = safejson.loads(data, max_bytes=MAX_RECORD_BYTES)
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


def quarantine_folder(state: State, name: str) -> None:
    """Quarantine the entry ``name`` of ``state/runs``, which is no run id: it is named
    on every load and never read."""
    # the name is quoted: it may hold anything a tree entry can
    state.quarantined.setdefault(runs_entry_path(name),
                                 f"{RUNS}/{name!r}: not a run id; that folder is left alone")


def _record(state: State, model: type[RecordT], path: str, files: Mapping[str, bytes],
            key: str, expected: str, specs: Mapping[str, Any] | None = None) -> RecordT | None:
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
