"""Field types shared by the schedule and state models: ids, time zones, aware UTC
datetimes, and the strict frozen base model.

Used by :mod:`orchestrator.config.models` and :mod:`orchestrator.state.records` alike.
"""

from __future__ import annotations

import difflib
import functools
import re
from datetime import UTC, datetime
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from ..errors import InvalidId

ID_RE = re.compile(r"[a-z0-9](?:[a-z0-9_]|-(?=[a-z0-9_])){0,63}")
"""Schedule ids and track names: safe as a file name, a path segment and a git ref part.
No ``--`` and no trailing ``-``: ``--`` separates the parts of run ids, dispatch keys and
dead-letter keys, which must split back unambiguously."""

ID_RULE = ("1-64 characters of a-z, 0-9, '_' and '-', starting with a letter or digit, "
           "without '--' or a trailing '-'")

WORKFLOW_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\.ya?ml")

MANUAL_MARK = "-manual-"
"""What a manual run's id (``orchestrator trigger``) has after its minute."""

AFTER_MARK = "-after-"
"""What a run fired by ``after`` has after its minute: a hash of its upstream runs."""

QUEUE_MARK = "-queue-"
"""What a run fired by ``on_queue`` has after its minute: the queue's enqueue count."""

EVENT_MARK = "-event-"
"""What a run fired by an event has after its minute: a hash of the event's id."""

RUN_ID_RE = re.compile(ID_RE.pattern + r"--\d{8}T\d{4}Z"
                       r"(?:-manual-[1-9]\d{0,5}|-after-[0-9a-f]{10}|-queue-[1-9]\d{0,11}"
                       r"|-event-[0-9a-f]{10})?")
"""``<schedule-id>--<slot in UTC>``, the idempotency key of one firing; a manual run
adds ``-manual-<n>`` (its minute's n-th), a run fired by ``after`` ``-after-<hash>``
(of its upstream runs' ids), one fired by ``on_queue`` ``-queue-<n>`` (the items its
queue had taken), one fired by an event ``-event-<hash>`` (of its id), so each still
sorts by its minute."""


def check_id(value: str, what: str = "id") -> str:
    """Return ``value`` if it is a valid id, else raise :class:`InvalidId`.

    Ids end up in file paths (``state/runs/<run_id>/tracks/<track>.json``), so this
    is also the guard against path traversal: no ``/``, no ``..``, no upper case.
    """
    if not isinstance(value, str) or not ID_RE.fullmatch(value):
        raise InvalidId(
            f"invalid {what} {value!r}: use {ID_RULE}"
        )
    return value


def check_run_id(value: str) -> str:
    if not isinstance(value, str) or not RUN_ID_RE.fullmatch(value):
        raise InvalidId(
            f"invalid run id {value!r}: expected <schedule-id>--<YYYYMMDDTHHMMZ>"
            "[-manual-<n>|-after-<hash>|-event-<hash>], e.g. nightly--20261201T0700Z"
        )
    return value


def _id(value: str) -> str:
    if not ID_RE.fullmatch(value):
        raise ValueError(
            f"must be {ID_RULE}"
        )
    return value


@functools.lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    # The system's zones plus the tzdata package's, minus aliases of the host's own
    # zone: a schedule must mean the same on every machine.
    return frozenset(available_timezones() - {"localtime", "posixrules"})


def _zone(value: str) -> str:
    # A state record is checked here too: a value read from it may be a megabyte.
    shown = repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
    if value not in _zone_names():
        close = difflib.get_close_matches(value, sorted(_zone_names()), n=1, cutoff=0.8)
        hint = f"did you mean {close[0]!r}?" if close else (
            "use an IANA name such as 'America/New_York' or 'UTC'")
        raise ValueError(f"unknown time zone {shown} ({hint})")
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"time zone {shown} cannot be loaded: {exc}") from exc
    return value


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must include a UTC offset (e.g. 2026-12-01T07:00:00Z)")
    return value.astimezone(UTC)


Id = Annotated[str, AfterValidator(_id),
               Field(json_schema_extra={"pattern": f"^{ID_RE.pattern}$"})]
ZoneName = Annotated[str, AfterValidator(_zone)]
def _valid_cron(text: str) -> str:
    from ..cron import validate_cron  # the evaluator only once a cron text is validated

    return validate_cron(text)


CronText = Annotated[str, AfterValidator(_valid_cron)]
UTCDateTime = Annotated[datetime, AfterValidator(_utc)]


class Frozen(BaseModel):
    # defer_build: a model's validator is built on its first use, not at import, so a
    # command pays only for the models it reads (a no-op tick reads a few of dozens)
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", use_enum_values=False,
                              defer_build=True)


MAX_RUN_BYTES = 64 * 1024
"""Longest track command, in UTF-8 bytes: far below the argument list limit of any OS
(128 KiB per argument on Linux), and it is committed with every run."""

AT_YEARS = (1970, 9000)
"""Years an ``at`` may name: its run id needs a four-digit year, and every later
computation (offsets, deadlines, catch-up windows) stays far from datetime's edges."""


def _run_command(value: str) -> str:
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_RUN_BYTES:
        raise PydanticCustomError("run_too_long", "a command of {size} bytes; the limit is "
                                  "{limit} (put a long script in a file and run that)",
                                  {"size": size, "limit": MAX_RUN_BYTES})
    return value


RunCommand = Annotated[str, AfterValidator(_run_command)]
