"""A leg's outcome file: what one track attempt says about itself, without pushing.

On GitHub a leg never writes to the state branch: it writes one small JSON file,
named after its dispatch key (``<run_id>--<track>--<attempt>.json``), and uploads it as
an artifact of the same name. The batch's ``fan-in`` job downloads the batch's
artifacts into one folder and runs ``orchestrator tick --run RUN --outcomes DIR``,
which records them all in one commit; the cron tick reads the same files through the
artifacts API when a fan-in job never ran. This module owns the format: it is written
by ``orchestrator outcome`` (:func:`build`, :func:`write`) and read by both
(:func:`parse`, :func:`read_folder`), and :func:`observation` folds one into what the
planner already understands.

A folder of outcomes comes from a CI job and is read with care: only regular ``*.json``
files up to :data:`MAX_BYTES`, at most :data:`MAX_FILES` of them and two levels deep,
symbolic links never followed and FIFOs never opened. Every entry that is not used (a
file that is not a valid outcome or whose name does not match its key, a link, a FIFO,
a folder too deep, another kind of file) is named in one line with why, and the others
are still recorded.

Beside its outcome, a leg may leave the tail of its command's stdout,
``<dispatch key>.stdout`` (:func:`write_stdout`: at most :data:`STDOUT_BYTES`, uploaded in
the same artifact). It is for the brief the fan-in renders, never for the state branch:
the folder lists it (a regular file only, of a key whose outcome it holds) and
:meth:`Folder.stdout` reads its end when a brief shows it, no link followed, never a
FIFO waited on.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from ..config.fieldtypes import Frozen, UTCDateTime, check_id, check_run_id
from ..errors import InvalidId
from ..state.items import BadEnqueue, ItemReport, NewItem, new_item
from ..state.phases import TrackPhase
from ..support import safejson
from ..support.credentials import redactor
from ..support.safejson import tail_bytes
from ..support.text import error_location, last_lines
from .base import Observation

FORMAT = 1
"""Version of the outcome file; a reader refuses others instead of guessing."""
MAX_BYTES = 8 << 20
"""An outcome is a summary: its result is capped like ``orchestrator report``'s, a
drain worker's item reports at :data:`~orchestrator.state.items.MAX_ITEM_RESULT_BYTES`
of result each (at most 1,000 items), a track's enqueue file at 1 MiB."""
MAX_FILES = 4096
"""More files than any batch has legs (256) times a few re-runs: stop reading there."""
STDERR_LINES = 20
STDERR_CHARS = 4000
"""The tail of stderr kept: enough for the exception and its message."""
STDOUT_SUFFIX = ".stdout"
"""``<dispatch key>.stdout``: the tail of a leg's stdout, beside its outcome."""
STDOUT_BYTES = 16 * 1024
"""The end of stdout a leg keeps and the fan-in reads: the brief's 20 lines fit."""
TIMEOUT_EXITS = frozenset({124, 137})
"""The leg (:mod:`.leg_command`, as GNU ``timeout`` did) exits 124 after TERM ended the
command at its limit, 137 when KILL had to."""
TIMEOUT_SLACK = timedelta(seconds=1)

LegPhase = Literal["complete", "failed", "tapped_out", "waiting"]

EX_TEMPFAIL = 75
"""A poll's "not yet" (``sysexits.h``): the track waits for its next poll."""


class Outcome(Frozen):
    """One leg's outcome, as written to ``<dispatch key>.json``."""

    format: Literal[1] = 1
    run_id: str
    track: str
    attempt: int = Field(ge=1)
    poll: int = Field(0, ge=0)
    compensating: bool = False
    """A compensation's leg (key ``<run_id>--<track>--undo--<attempt>``)."""
    """Which poll of a poll track this was (0: the first dispatch of the attempt)."""
    phase: LegPhase
    exit_code: int | None = None
    """The command's exit code; ``None`` when it never ran (no ``run`` command)."""
    started_at: UTCDateTime
    """When the command started and ended, as the leg measured them."""
    finished_at: UTCDateTime
    result: dict[str, Any] | None = None
    """The JSON object the command wrote to ``ORCHESTRATOR_RESULT``, if any."""
    error: str | None = None
    """Why the attempt did not complete, with the last lines of its stderr."""
    items: list[ItemReport] | None = None
    """A drain worker's account of each item it worked (its ``items.jsonl``)."""
    enqueue: list[dict[str, Any]] | None = None
    """The items the track asked to enqueue (its ``ORCHESTRATOR_ENQUEUE`` file), each
    checked again when read."""
    enqueue_error: str | None = None
    """Why its enqueue file was refused as a whole."""

    @property
    def key(self) -> str:
        undo = "--undo" if self.compensating else ""
        key = f"{self.run_id}--{self.track}{undo}--{self.attempt}"
        return f"{key}.{self.poll}" if self.poll else key


def phase_for(exit_code: int | None, elapsed: timedelta, limit: timedelta | None) -> LegPhase:
    """``complete`` for exit 0; ``tapped_out`` when the leg stopped the command at its
    limit (a command that exits 124 by itself, early, merely failed); else ``failed``."""
    if exit_code == 0:
        return "complete"
    if exit_code == EX_TEMPFAIL:
        return "waiting"
    if (exit_code in TIMEOUT_EXITS and limit is not None
            and elapsed >= limit - TIMEOUT_SLACK):
        return "tapped_out"
    return "failed"


def stderr_tail(text: str) -> str:
    """The last :data:`STDERR_LINES` non-empty lines of ``text``, at most
    :data:`STDERR_CHARS` characters (the end is kept: that is where the error is),
    cleaned and redacted with this process's credentials before they are cut."""
    return last_lines(text, STDERR_LINES, STDERR_CHARS, redactor(os.environ))


def build(*, run_id: str, track: str, attempt: int, poll: int = 0,
          compensating: bool = False, exit_code: int | None,
          started_at: datetime, finished_at: datetime, limit: timedelta | None = None,
          result: dict[str, Any] | None = None, stderr: str = "",
          message: str | None = None, items: list[ItemReport] | None = None,
          enqueue: list[NewItem] | None = None,
          enqueue_error: str | None = None) -> Outcome:
    """The outcome of a finished command (pure)."""
    check_run_id(run_id)
    check_id(track, "track name")
    phase = phase_for(exit_code, finished_at - started_at, limit)
    error = _error(phase, exit_code, limit, message)
    tail = stderr_tail(stderr)
    if error and tail:
        error = f"{error}; stderr ends with:\n{tail}"
    queued = [e.model_dump(mode="json", exclude_defaults=True) for e in enqueue or ()]
    return Outcome(run_id=run_id, track=track, attempt=attempt, poll=poll,
                   compensating=compensating, phase=phase,
                   exit_code=exit_code, started_at=started_at, finished_at=finished_at,
                   result=result, error=error, items=items,
                   enqueue=queued or None, enqueue_error=enqueue_error)


def _error(phase: str, exit_code: int | None, limit: timedelta | None,
           message: str | None) -> str | None:
    """Why a command in ``phase`` did not complete (``message`` when it says), or
    ``None`` when it did."""
    if phase == "tapped_out":
        assert limit is not None
        return f"stopped at its timeout of {limit.total_seconds() / 60:g} minutes"
    if phase == "failed":
        return message or (f"exit code {exit_code}" if exit_code is not None
                           else "the command did not run")
    return None


def dump(outcome: Outcome) -> bytes:
    data = outcome.model_dump(mode="json", exclude_none=True)
    return (json.dumps(data, sort_keys=True, indent=2) + "\n").encode()


def write(folder: Path, outcome: Outcome) -> Path:
    """Write ``outcome`` to ``folder/<dispatch key>.json`` (atomically) and return the path."""
    from ..support.atomic import write_text

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{outcome.key}.json"
    write_text(path, dump(outcome).decode())
    return path


def write_stdout(folder: Path, key: str, data: bytes) -> Path | None:
    """Write the last :data:`STDOUT_BYTES` of ``data`` (a leg's stdout, read by the
    caller) to ``folder/<key>.stdout``; ``None`` when there was nothing to write."""
    from ..support.atomic import write_bytes

    data = data[-STDOUT_BYTES:]
    if not data:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key}{STDOUT_SUFFIX}"
    write_bytes(path, data)
    return path


class BadOutcome(ValueError):
    """An outcome file that cannot be used; the message names the file and the fault."""


def parse(name: str, data: bytes) -> Outcome:
    """The outcome in ``data`` (from a file called ``name``), or :class:`BadOutcome`."""
    if len(data) > MAX_BYTES:
        raise BadOutcome(f"{name}: larger than {MAX_BYTES} bytes")
    try:
        outcome = Outcome.model_validate_json(data, strict=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = error_location(first["loc"])
        raise BadOutcome(f"{name}: {where}: {first['msg']}") from None
    _check(name, outcome)
    stem = Path(name).name.removesuffix(".json")
    if stem != outcome.key:
        raise BadOutcome(f"{name}: holds the outcome of {outcome.key}, not of {stem}")
    return outcome


def _check(name: str, outcome: Outcome) -> None:
    """:class:`BadOutcome` unless ``outcome``'s ids, times and enqueued items hold."""
    try:
        check_run_id(outcome.run_id)
        check_id(outcome.track, "track name")
    except InvalidId as exc:
        raise BadOutcome(f"{name}: {exc.message}") from None
    if outcome.finished_at < outcome.started_at:
        raise BadOutcome(f"{name}: finished_at is before started_at")
    if outcome.enqueue is not None:
        try:
            [new_item(entry, queue_required=True) for entry in outcome.enqueue]
        except BadEnqueue as exc:
            raise BadOutcome(f"{name}: enqueue: {exc}") from None


@dataclass
class Folder:
    """What a folder of outcome files held: outcomes by dispatch key, and one line per
    file that was skipped."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    stdouts: dict[str, Path] = field(default_factory=dict)
    """Dispatch key -> its leg's ``<key>.stdout``, listed but not read (see
    :meth:`stdout`); only of keys in :attr:`outcomes`."""

    def stdout(self, key: str) -> bytes:
        """The end of the stdout the leg ``key`` left, at most :data:`STDOUT_BYTES`;
        nothing when it left none or the file is no longer a regular one."""
        path = self.stdouts.get(key)
        return b"" if path is None else tail_bytes(path, STDOUT_BYTES)

    def skip(self, name: str, why: str) -> None:
        """Name the entry ``name`` (relative to the folder) as skipped, and why."""
        self.problems.append(f"outcome {name!r} skipped: {why}" if _odd(name)
                             else f"outcome {name} skipped: {why}")


def _odd(name: str) -> bool:
    """Whether ``name`` must be quoted to stay one printable line of UTF-8."""
    return not name.isprintable() or name != name.encode("utf-8", "replace").decode()


def _entries(root: Path, out: Folder, tails: dict[str, Path]) -> list[Path]:
    """The ``*.json`` entries directly in ``root`` or one folder down
    (``download-artifact`` puts each artifact in a folder named after it unless told to
    merge them), in name order, and the ``*.stdout`` ones in ``tails`` by name; every
    other entry is named in ``out.problems``."""
    found: list[Path] = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False):
            for sub in sorted(os.scandir(entry.path), key=lambda e: e.name):
                if sub.is_dir(follow_symlinks=False):
                    out.skip(f"{entry.name}/{sub.name}", "a folder two levels down (outcomes "
                             "are read at most one folder deep)")
                else:
                    found += _candidate(Path(sub.path), f"{entry.name}/{sub.name}", out,
                                        tails)
        else:
            found += _candidate(Path(entry.path), entry.name, out, tails)
    return found


def _candidate(path: Path, name: str, out: Folder, tails: dict[str, Path]) -> list[Path]:
    """``[path]`` when it may be an outcome file; else ``[]``, and ``out`` says why (a
    stdout tail goes to ``tails``)."""
    if name.endswith(STDOUT_SUFFIX):
        tails[name] = path
        return []
    if not name.endswith(".json"):
        out.skip(name, "not a .json file")
        return []
    if path.is_symlink():
        out.skip(name, "a symbolic link (never followed)")
        return []
    return [path]


def read_folder(root: Path, run_id: str | None = None) -> Folder:
    """Every outcome under ``root`` (of ``run_id`` only, when given); a missing folder is
    an empty one (no leg got as far as uploading). Every entry that is not used is
    named, with why."""
    out = Folder()
    if not root.is_dir():
        return out
    tails: dict[str, Path] = {}
    paths = _entries(root, out, tails)
    if len(paths) > MAX_FILES:
        out.problems.append(f"outcomes: {len(paths) - MAX_FILES} file(s) past the first "
                            f"{MAX_FILES} not read")
    for path in paths[:MAX_FILES]:
        outcome = _read_one(path, str(path.relative_to(root)), run_id, out)
        if outcome is not None:
            out.outcomes[outcome.key] = outcome
    for name, path in tails.items():
        _stdout(path, name, out)
    out.problems.sort()  # by name, as the entries are
    return out


def _read_one(path: Path, name: str, run_id: str | None, out: Folder) -> Outcome | None:
    """The outcome in the file ``path`` (``name`` in the folder), if it is one of
    ``run_id`` (when given); else ``None``, and ``out`` says why."""
    try:
        # a regular file only, opened without blocking (a FIFO named <key>.json is
        # never waited on) and without following a link put there since the listing
        outcome = parse(path.name, safejson.read_file(path, max_bytes=MAX_BYTES))
    except BadOutcome as exc:
        out.skip(name, str(exc).split(": ", 1)[-1])
        return None
    except safejson.UnsafeJSON as exc:
        out.skip(name, str(exc))
        return None
    except FileNotFoundError:
        out.skip(name, "vanished while being read")
        return None
    if run_id is not None and outcome.run_id != run_id:
        out.skip(name, f"it belongs to run {outcome.run_id}")
        return None
    return outcome


def _stdout(path: Path, name: str, out: Folder) -> None:
    """List the stdout tail ``path`` in ``out`` when it is a regular file beside its
    outcome; else name it in ``out.problems``. It is not read here."""
    key = path.name.removesuffix(STDOUT_SUFFIX)
    if key not in out.outcomes:
        out.skip(name, "a stdout tail without an outcome of its key in the folder")
        return
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        out.skip(name, "vanished while being read")
        return
    if stat.S_ISLNK(mode):
        out.skip(name, "a symbolic link (never followed)")
    elif kind := safejson.kind_of(mode):
        out.skip(name, f"not a regular file ({kind})")
    else:
        out.stdouts[key] = path


_PHASES: Mapping[str, TrackPhase] = {"complete": TrackPhase.COMPLETE,
                                     "failed": TrackPhase.FAILED,
                                     "tapped_out": TrackPhase.TAPPED_OUT,
                                     "waiting": TrackPhase.WAITING}


def observation(outcome: Outcome, *, url: str | None = None,
                details: Mapping[str, Any] | None = None) -> Observation:
    """``outcome`` as the planner folds executor news into a track."""
    enqueue = tuple(new_item(e, queue_required=True) for e in outcome.enqueue or ())
    return Observation(key=outcome.key, phase=_PHASES[outcome.phase],
                       started_at=outcome.started_at, finished_at=outcome.finished_at,
                       result=outcome.result, error=outcome.error, url=url,
                       details={"source": "outcome", "exit_code": outcome.exit_code,
                                **(details or {})},
                       items=tuple(outcome.items) if outcome.items is not None else None,
                       enqueue=enqueue, enqueue_error=outcome.enqueue_error)
