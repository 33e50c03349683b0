"""Where every record of the state branch lives: the one place that builds and parses
its paths.

- Every id in a path built here is validated first
  (:func:`~orchestrator.config.fieldtypes.check_id`,
  :func:`~orchestrator.config.fieldtypes.check_run_id`), so no path built here can leave
  ``state/``. The one exception, :func:`unchecked_cursor_path`, is only looked up in
  listings, never read or written.
- A path read from a listing is parsed here by position alone (:func:`locate`,
  :func:`runs_entry`, :func:`run_of`); the names it returns are unvalidated, and the
  reader checks them (a record's own id must match its file name).
- A run id is ``<schedule-id>--<slot>``, the slot in UTC as ``YYYYMMDDTHHMMZ``: that
  text sorts as the time does. A manual run's id adds ``-manual-<n>`` after the minute
  it was triggered in (:func:`manual_run_id`); a run fired by ``after`` adds
  ``-after-<hash>`` of its upstream runs' ids after their slot (:func:`after_run_id`);
  one fired by ``on_queue`` adds ``-queue-<n>`` after its minute (:func:`queue_run_id`),
  one fired by an event ``-event-<hash>`` of its id after its minute (:func:`event_run_id`).
  :func:`parse_run_id` is the one parser of run ids.
- A dead letter's key is ``<run-id>--<track>`` (:func:`dlq_key`, :func:`parse_dlq_key`);
  an item's dead letter is named ``<queue>/<item-id>`` (:func:`item_letter_key`).
- A queue's summary is ``state/queues/<queue>.json`` and everything else of it lies in
  ``state/queues/<queue>/``, so the summary can name that folder's tree id. Items are
  sharded by the first three hex digits of their id (``items/ab/c/<id>.json``), so a
  commit touching a few items of 100,000 rewrites a few small trees.
"""

from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from ..config.fieldtypes import (
    AFTER_MARK,
    EVENT_MARK,
    MANUAL_MARK,
    QUEUE_MARK,
    RUN_ID_RE,
    check_id,
    check_run_id,
)
from ..errors import InvalidId

ITEM_ID_RE = re.compile(r"[0-9a-f]{24}")
"""An item id: 24 hex digits (a queue item's file name)."""


def check_item_id(value: str) -> str:
    """``value`` if it is an item id (no path can be built from anything else)."""
    if not isinstance(value, str) or not ITEM_ID_RE.fullmatch(value):
        raise InvalidId(f"invalid item id {value!r}: expected 24 hex digits")
    return value


ROOT = "state"
SCHEDULES = f"{ROOT}/schedules"
"""The cursors, one ``<schedule-id>.json`` each."""
RUNS = f"{ROOT}/runs"
"""One folder per run (``<run-id>/``): its record, tracks, undo records, specs, polls."""
DLQ = f"{ROOT}/dlq"
"""The dead letters, one ``<run-id>--<track>.json`` each."""

TICKS = f"{ROOT}/ticks.jsonl"
HEALTH = f"{ROOT}/health.json"
INDEX = f"{ROOT}/index.html"
OPEN_INDEX = f"{ROOT}/open.json"
"""The index of open runs (:mod:`orchestrator.state.index`)."""
QUIET = f"{ROOT}/quiet.json"
"""The memo of quiet schedules (:mod:`orchestrator.tick.memo`)."""
QUIET_FOLDER = f"{ROOT}/quiet-folder.json"
"""The memo's entry for the whole schedule folder."""
RETENTION = f"{ROOT}/retention.json"
"""The last compaction by a tick (:mod:`orchestrator.runs.retention`)."""
NOTIFY = f"{ROOT}/notify.json"
"""Notifications: failing streaks and their issues, events not yet delivered
(:mod:`orchestrator.notify.record`)."""
QUEUES = f"{ROOT}/queues"
"""The work queues: ``<queue>.json`` (the summary) and ``<queue>/`` (items, backlog)."""
WORKFLOWS = f"{ROOT}/workflows.json"
"""The scheduled workflows' state as a GitHub tick last found it
(:mod:`orchestrator.cadence.keepalive`)."""
LATENESS = f"{ROOT}/lateness.jsonl"
"""GitHub's cron lateness as scheduled ticks measured it (:mod:`orchestrator.cadence.lateness`)."""

SLOT_FORMAT = "%Y%m%dT%H%MZ"
"""How a run id writes its slot (in UTC)."""
_SLOT_CHARS = len("20261201T0700Z")


# --------------------------------------------------------------------------- run ids


def slot_stamp(moment: datetime) -> str:
    """``moment`` as a run id writes it: its UTC minute, ``20261201T0700Z``."""
    return f"{moment.astimezone(UTC):{SLOT_FORMAT}}"


def run_id_for(schedule_id: str, slot: datetime) -> str:
    """Deterministic run id: ``<schedule-id>--<slot UTC as YYYYMMDDTHHMMZ>``."""
    return f"{schedule_id}--{slot_stamp(slot)}"


def manual_run_id(schedule_id: str, minute: datetime, n: int) -> str:
    """The id of the ``n``-th manual run of ``schedule_id`` triggered in ``minute``."""
    return check_run_id(f"{run_id_for(schedule_id, minute)}{MANUAL_MARK}{n}")


def after_run_id(schedule_id: str, slot: datetime, upstream: list[str]) -> str:
    """The id of the run of ``schedule_id`` fired by the ends of ``upstream`` (whose
    newest slot is ``slot``). A hash, not the ids themselves: nested ids would grow with
    each link of a chain, and a run id must parse back as one schedule id and a slot."""
    digest = hashlib.sha256(" ".join(upstream).encode()).hexdigest()[:10]
    return check_run_id(f"{run_id_for(schedule_id, slot)}{AFTER_MARK}{digest}")


def queue_run_id(schedule_id: str, minute: datetime, enqueued: int) -> str:
    """The id of the run of ``schedule_id`` that its queue fired in ``minute``, when the
    queue had taken ``enqueued`` items in all: racing ticks that see the same queue in
    the same minute name the same run."""
    return check_run_id(f"{run_id_for(schedule_id, minute)}{QUEUE_MARK}{enqueued}")


def event_run_id(schedule_id: str, minute: datetime, digest: str) -> str:
    """The id of the run of ``schedule_id`` an event fired in ``minute``; ``digest`` is
    the hash of the event's id (:func:`~orchestrator.config.events.event_digest`)."""
    return check_run_id(f"{run_id_for(schedule_id, minute)}{EVENT_MARK}{digest}")


def fired_by_event(run_id: str, schedule_id: str, digest: str) -> bool:
    """Whether ``run_id`` is a run of ``schedule_id`` fired by the event of ``digest``."""
    return run_id.startswith(f"{schedule_id}--") and run_id.endswith(f"{EVENT_MARK}{digest}")


def is_manual(run_id: str) -> bool:
    """Whether ``run_id`` (valid) names a manual run."""
    return MANUAL_MARK in run_id.rpartition("--")[2]


def parse_run_id(run_id: str) -> tuple[str, datetime]:
    """``(schedule id, slot)`` of ``run_id``; :class:`~orchestrator.errors.InvalidId`
    unless it is ``<schedule-id>--<YYYYMMDDTHHMMZ>[-manual-<n>]`` and the slot is a real
    minute (a manual run's slot is the minute it was triggered in)."""
    schedule_id, _, stamp = check_run_id(run_id).rpartition("--")
    stamp = stamp[:_SLOT_CHARS]  # before -manual-<n>, -after-<hash> or -event-<hash>
    try:
        slot = datetime.strptime(stamp, SLOT_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise InvalidId(f"invalid run id {run_id!r}: {stamp} is no minute of the "
                        "calendar") from None
    return schedule_id, slot


def is_run_id(name: str) -> bool:
    """Whether a name read from a listing has the form of a run id (its slot may still
    be no real minute: :func:`run_slot` tells)."""
    return RUN_ID_RE.fullmatch(name) is not None


def run_slot(name: str) -> datetime | None:
    """The slot of ``name`` when it is a run id, else ``None``: for names read from a
    listing, where a folder made by hand is no error."""
    try:
        return parse_run_id(name)[1]
    except InvalidId:
        return None


def slot_text(run_id: str) -> str:
    """The slot of a run id as text, unparsed: it sorts as the slot does. Meaningful
    only for a valid run id (a sort key, cheap enough to take from every run id)."""
    if MANUAL_MARK not in run_id and AFTER_MARK not in run_id and EVENT_MARK not in run_id:
        return run_id[-_SLOT_CHARS:]
    return run_id.rpartition("--")[2][:_SLOT_CHARS]


# --------------------------------------------------------------------------- building


def cursor_path(schedule_id: str) -> str:
    return f"{SCHEDULES}/{check_id(schedule_id, 'schedule id')}.json"


def unchecked_cursor_path(schedule_id: str) -> str:
    """Where the cursor of ``schedule_id`` would be, without validating the id: only to
    look up in listings (thousands per tick), never to read or write."""
    return f"{SCHEDULES}/{schedule_id}.json"


def run_dir(run_id: str) -> str:
    return f"{RUNS}/{check_run_id(run_id)}"


def run_path(run_id: str) -> str:
    return f"{run_dir(run_id)}/run.json"


def tracks_dir(run_id: str) -> str:
    return f"{run_dir(run_id)}/tracks"


def track_path(run_id: str, track: str) -> str:
    return f"{tracks_dir(run_id)}/{check_id(track, 'track name')}.json"


def specs_path(run_id: str) -> str:
    return f"{run_dir(run_id)}/specs.json"


def undo_dir(run_id: str) -> str:
    return f"{run_dir(run_id)}/undo"


def undo_path(run_id: str, track: str) -> str:
    """The compensation record of ``track`` (a :class:`Track` with ``compensating``)."""
    return f"{undo_dir(run_id)}/{check_id(track, 'track name')}.json"


def polls_path(run_id: str) -> str:
    return f"{run_dir(run_id)}/polls.jsonl"


def brief_path(run_id: str) -> str:
    return f"{run_dir(run_id)}/brief.html"


def dlq_key(run_id: str, track: str) -> str:
    return f"{check_run_id(run_id)}--{check_id(track, 'track name')}"


def parse_dlq_key(key: str) -> tuple[str, str]:
    """``(run id, track)`` of a dead letter's key, both validated."""
    run_id, sep, track = key.rpartition("--")
    if not sep:
        check_run_id(key)  # raises with a clear message
    check_run_id(run_id)
    return run_id, check_id(track, "track name")


def dlq_path(key: str) -> str:
    return f"{DLQ}/{dlq_key(*parse_dlq_key(key))}.json"


def check_queue(queue: str) -> str:
    return check_id(queue, "queue")


def queue_summary_path(queue: str) -> str:
    return f"{QUEUES}/{check_queue(queue)}.json"


def queue_dir(queue: str) -> str:
    return f"{QUEUES}/{check_queue(queue)}"


def item_folder(queue: str, item: str) -> str:
    check_item_id(item)
    return f"{queue_dir(queue)}/items/{item[:2]}/{item[2]}"


def item_path(queue: str, item: str) -> str:
    return f"{item_folder(queue, item)}/{item}.json"


def items_dir(queue: str) -> str:
    return f"{queue_dir(queue)}/items"


def backlog_dir(queue: str) -> str:
    return f"{queue_dir(queue)}/backlog"


def backlog_path(queue: str, rank: str) -> str:
    if not BLOCK_RE.fullmatch(rank):
        raise InvalidId(f"invalid backlog block {rank!r}")
    return f"{backlog_dir(queue)}/{rank}.json"


def done_dir(queue: str) -> str:
    return f"{queue_dir(queue)}/done"


def done_path(queue: str, chunk: str) -> str:
    if not CHUNK_RE.fullmatch(chunk):
        raise InvalidId(f"invalid done chunk {chunk!r}")
    return f"{done_dir(queue)}/{chunk}.json"


BLOCK_RE = re.compile(r"\d{7}-\d{8}")
"""A backlog block: ``<priority rank>-<seq block>``, which sorts in claim order."""
CHUNK_RE = re.compile(r"\d{8}-\d{4}")
"""A chunk of the ids done on one UTC day: ``<YYYYMMDD>-<n>``."""


def item_letter_key(queue: str, item: str) -> str:
    """The dead-letter key of a dead item: ``<queue>/<item-id>``."""
    return f"{check_queue(queue)}/{check_item_id(item)}"


def parse_item_letter_key(key: str) -> tuple[str, str] | None:
    """``(queue, item id)`` of an item's dead-letter key, both validated; ``None`` for a
    key without a slash (a track's)."""
    queue, sep, item = key.partition("/")
    if not sep:
        return None
    return check_queue(queue), check_item_id(item)


def runs_entry_path(name: str) -> str:
    """The path of the entry ``name`` of ``state/runs``, as listed (unvalidated: a name
    that is no run id is quarantined under this path, never read)."""
    return f"{RUNS}/{name}"


# --------------------------------------------------------------------------- parsing


class Kind(enum.Enum):
    """What a file of the state branch is, by where it is."""

    CURSOR = "cursor"
    """``state/schedules/<schedule-id>.json``"""
    RUN = "run record"
    """``state/runs/<run-id>/run.json``"""
    TRACK = "track record"
    """``state/runs/<run-id>/tracks/<track>.json``"""
    UNDO = "undo record"
    """``state/runs/<run-id>/undo/<track>.json``"""
    SPECS = "track specs"
    """``state/runs/<run-id>/specs.json``"""
    POLLS = "poll log"
    """``state/runs/<run-id>/polls.jsonl``"""
    DEAD_LETTER = "dead letter"
    """``state/dlq/<run-id>--<track>.json``"""
    HEALTH = "health"
    """``state/health.json``"""


@dataclass(frozen=True)
class Located:
    """What a path's place says about it (every name as found, unvalidated)."""

    kind: Kind
    name: str
    """The schedule id, run id, track name or dead-letter key its file name says."""
    run: str | None = None
    """The run folder it is in, for the files of a run."""


_RUN_FILES = {"run.json": Kind.RUN, "specs.json": Kind.SPECS, "polls.jsonl": Kind.POLLS}
_RUN_FOLDERS = {"tracks": Kind.TRACK, "undo": Kind.UNDO}
_TOP_FOLDERS = {"schedules": Kind.CURSOR, "dlq": Kind.DEAD_LETTER}


def locate(path: str) -> Located | None:
    """What ``path`` is by its place, or ``None`` for any other file."""
    if path == HEALTH:
        return Located(Kind.HEALTH, "")
    parts = path.split("/")
    if parts[0] != ROOT or len(parts) < 3:
        return None
    if parts[1] == "runs":
        return _in_a_run(path, parts)
    if len(parts) == 3 and parts[1] in _TOP_FOLDERS and path.endswith(".json"):
        return Located(_TOP_FOLDERS[parts[1]], parts[2][:-5])
    return None


def _in_a_run(path: str, parts: list[str]) -> Located | None:
    """What a path under ``state/runs`` is: a run's own file, or a record in one of
    its folders."""
    if len(parts) == 4 and parts[3] in _RUN_FILES:
        return Located(_RUN_FILES[parts[3]], parts[2], parts[2])
    if len(parts) == 5 and parts[3] in _RUN_FOLDERS and path.endswith(".json"):
        return Located(_RUN_FOLDERS[parts[3]], parts[4][:-5], parts[2])
    return None


def kind_of(path: str) -> Kind | None:
    """:attr:`Located.kind` of ``path``, or ``None`` for any other file."""
    found = locate(path)
    return found.kind if found is not None else None


def runs_entry(path: str) -> str | None:
    """The entry of ``state/runs`` that ``path`` is or lies under (unvalidated), or
    ``None`` for a path outside ``state/runs/``."""
    if not path.startswith(RUNS + "/"):
        return None
    return path[len(RUNS) + 1:].partition("/")[0]


def run_of(path: str) -> str | None:
    """The run folder that holds ``path`` (unvalidated), or ``None`` for a path that is
    not inside a run's folder (``state/runs/<name>`` itself is not)."""
    if not path.startswith(RUNS + "/"):
        return None
    name, sep, _ = path[len(RUNS) + 1:].partition("/")
    return name if sep else None


def dead_letter_run(key: str) -> str:
    """The run part of a dead letter's key as found (unvalidated)."""
    return key.rpartition("--")[0]
