"""Events from outside: a schedule's ``on_event`` (the inputs it takes) and the
payload an outside system sends, read as hostile input.

- An input is a string, an integer, a number or a boolean; it may be required, and
  may list the values it takes (``enum``), a ``pattern`` and a ``max_length``.
- A value reaches the tracks as text (``42``, ``true``), beside the tracks' own
  ``inputs``: a string given for an integer, a number or a boolean must parse as one.
- An input the schedule does not declare is refused, as is a missing required one.
- A payload is at most :data:`MAX_PAYLOAD_CHARS` characters of compact JSON with
  exactly the fields ``schedule``, ``event_id`` and ``inputs`` (the last optional).
- Every refusal is one :class:`EventRefused` line that names the field, never its value.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from ..support import safejson
from .fieldtypes import ID_RE, Frozen

MAX_PAYLOAD_CHARS = 65_535
"""Longest payload read: GitHub refuses a ``client_payload`` of 64 KB or more."""
INDENTED = 4
"""How many times that the text read may be: ``toJSON`` indents what it prints."""
MAX_EVENT_ID = 200
"""Longest event id, in characters."""
MAX_INPUTS = 32
"""Most inputs a schedule may declare."""
MAX_VALUE_CHARS = 4096
"""Longest value of any input; ``max_length`` may only lower it."""

INPUT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_INTEGER_RE = re.compile(r"-?(?:0|[1-9]\d{0,17})")
_NUMBER_RE = re.compile(r"-?(?:0|[1-9]\d{0,17})(?:\.\d{1,17})?(?:[eE][-+]?\d{1,3})?")

InputType = Literal["string", "integer", "number", "boolean"]


class EventRefused(ValueError):
    """An event that fires nothing: the message says which field is wrong."""


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    return value


class EventInput(Frozen):
    """One input an event may carry."""

    type: InputType = Field("string", description="string, integer, number or boolean.")
    required: bool = Field(False, description="An event without it fires nothing.")
    enum: list[str] | None = Field(
        None, min_length=1, max_length=100,
        description="The values it may take, as text (`\"42\"`, `\"true\"`).")
    pattern: Annotated[str, AfterValidator(_regex)] | None = Field(
        None, max_length=500,
        description="A regular expression the whole value, as text, must match.")
    max_length: int = Field(MAX_VALUE_CHARS, ge=1, le=MAX_VALUE_CHARS,
                            description="Longest value, in characters.")


def _names(inputs: dict[str, EventInput]) -> dict[str, EventInput]:
    bad = [n for n in inputs if not INPUT_NAME_RE.fullmatch(n)]
    if bad:
        raise ValueError(f"input name {bad[0][:64]!r}: give 1-64 characters of A-Z, a-z, "
                         "0-9 and '_', not starting with a digit")
    return inputs


class OnEvent(Frozen):
    """A schedule's ``on_event``: it fires once per event id an outside system sends."""

    inputs: Annotated[dict[str, EventInput], AfterValidator(_names)] = Field(
        default_factory=dict, max_length=MAX_INPUTS,
        description="The inputs an event may carry, by name: "
        "{\"version\": {\"type\": \"string\", \"required\": true}}.")


@dataclass(frozen=True)
class Event:
    """An event as sent: which schedule, its id, and its inputs (not yet checked)."""

    schedule_id: str
    event_id: str
    inputs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """The event id's hash, as run ids carry it."""
        return event_digest(self.event_id)


def event_digest(event_id: str) -> str:
    return hashlib.sha256(event_id.encode()).hexdigest()[:10]


def check_event_id(value: object) -> str:
    """``value`` if it is an event id: 1-200 printable characters."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_EVENT_ID \
            or not value.isprintable():
        raise EventRefused(f"event_id: give 1-{MAX_EVENT_ID} printable characters")
    return value


def read_payload(text: str) -> Event:
    """The event a payload sends (``{"schedule", "event_id", "inputs"}``), or one line
    saying what is wrong with it."""
    too_large = EventRefused(f"event payload: larger than {MAX_PAYLOAD_CHARS} characters")
    if len(text) > MAX_PAYLOAD_CHARS * INDENTED:
        raise too_large
    try:
        data = safejson.loads(text, max_bytes=MAX_PAYLOAD_CHARS * INDENTED, max_depth=8)
    except safejson.UnsafeJSON as exc:
        raise EventRefused(f"event payload: {exc}") from None
    if len(json.dumps(data, separators=(",", ":"))) > MAX_PAYLOAD_CHARS:
        raise too_large
    if not isinstance(data, dict):
        raise EventRefused("event payload: expected a JSON object")
    unknown = sorted(set(data) - {"schedule", "event_id", "inputs"})
    if unknown:
        raise EventRefused(f"event payload: unknown field {unknown[0][:64]!r} (give "
                           "schedule, event_id and inputs)")
    schedule = data.get("schedule")
    if not isinstance(schedule, str) or not ID_RE.fullmatch(schedule):
        raise EventRefused("schedule: give the id of a schedule")
    inputs = data.get("inputs", {})
    if not isinstance(inputs, dict):
        raise EventRefused("inputs: expected a JSON object")
    return Event(schedule, check_event_id(data.get("event_id")), inputs)


def check_inputs(on_event: OnEvent, given: Mapping[str, Any]) -> dict[str, str]:
    """``given`` checked against ``on_event``, each value as text; :class:`EventRefused`
    names the first input that is wrong."""
    unknown = sorted(set(given) - set(on_event.inputs))
    if unknown:
        shown = unknown[0] if INPUT_NAME_RE.fullmatch(unknown[0]) else repr(unknown[0][:64])
        raise EventRefused(f"inputs.{shown}: not an input of the schedule "
                           f"(it takes: {', '.join(sorted(on_event.inputs)) or 'none'})")
    checked: dict[str, str] = {}
    for name, spec in sorted(on_event.inputs.items()):
        if name in given:
            checked[name] = _checked(name, spec, given[name])
        elif spec.required:
            raise EventRefused(f"inputs.{name}: required")
    return checked


def _checked(name: str, spec: EventInput, value: Any) -> str:
    text = _as_text(spec.type, value)
    if text is None:
        raise EventRefused(f"inputs.{name}: expected {_ARTICLES[spec.type]}")
    if len(text) > spec.max_length:
        raise EventRefused(f"inputs.{name}: longer than {spec.max_length} characters")
    if spec.enum is not None and text not in spec.enum:
        raise EventRefused(f"inputs.{name}: not one of {', '.join(spec.enum)}")
    if spec.pattern is not None and not re.fullmatch(spec.pattern, text):
        raise EventRefused(f"inputs.{name}: does not match {spec.pattern}")
    return text


_ARTICLES = {"string": "a string", "integer": "an integer", "number": "a number",
             "boolean": "a boolean (true or false)"}


def _as_text(kind: InputType, value: Any) -> str | None:
    """``value`` as the text a track reads, or ``None`` when it is not of ``kind``."""
    if isinstance(value, str):
        return _text_as(kind, value)
    if isinstance(value, bool):
        return json.dumps(value) if kind == "boolean" else None
    if isinstance(value, int) and kind in ("integer", "number"):
        return _text_as(kind, str(value))
    if isinstance(value, float) and kind == "number":
        return _text_as(kind, json.dumps(value))
    return None


def _text_as(kind: InputType, text: str) -> str | None:
    """``text`` when it reads as ``kind``: any string, or the JSON form of the others."""
    if kind == "string":
        return text
    if kind == "boolean":
        return text if text in ("true", "false") else None
    pattern = _INTEGER_RE if kind == "integer" else _NUMBER_RE
    return text if pattern.fullmatch(text) else None
