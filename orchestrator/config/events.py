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
import importlib
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

# The parser ``re`` compiles with (Python 3.11+): a pattern's tree, to look for nesting.
re_parser: Any = importlib.import_module("re._parser")
re_constants: Any = importlib.import_module("re._constants")


class EventRefused(ValueError):
    """An event that fires nothing: the message says which field is wrong."""


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    return value


def pattern_warnings(inputs: Mapping[str, EventInput]) -> list[str]:
    """``validate``'s warnings about the inputs' patterns: a repeat inside a repeat can
    backtrack exponentially, and Python's ``re`` has no time limit, so a crafted value
    would hold the tick job until its timeout. A warning, not a refusal: the check sees
    a separator that makes the nesting harmless (``([a-z]+-)+``), not every such form."""
    return [f"on_event input {name!r}: its pattern repeats a repeat ({spec.pattern}); a "
            "crafted value can make it backtrack for minutes. Make the inner part atomic "
            "((?>...)) or possessive (a++), or write it without the nesting"
            for name, spec in inputs.items()
            if spec.pattern is not None
            and _nested_repeat(list(re_parser.parse(spec.pattern)), inside=False)]


_REPEATS = (re_constants.MAX_REPEAT, re_constants.MIN_REPEAT)


def _parts(op: Any, av: Any) -> list[Any]:
    """The sub-patterns a parsed node holds that may backtrack (an atomic group or a
    possessive repeat never backtracks into itself: none)."""
    if op is re_constants.SUBPATTERN:
        return [av[3]]
    if op is re_constants.BRANCH:
        return list(av[1])
    if op in (re_constants.ASSERT, re_constants.ASSERT_NOT):
        return [av[1]]
    return []


def _nested_repeat(items: list[Any], *, inside: bool) -> bool:
    """Whether a parsed pattern repeats a part of variable length inside another
    repeat: the nesting that backtracks exponentially (``(a+)+$``; ``(a|aa)*b`` is not
    caught). A repeated part pinned by a character its inner repeats cannot match
    (``(\\.\\d+)*``, ``([a-z]+-)+``) splits a value one way only: not counted."""
    for op, av in items:
        if op in _REPEATS:
            low, high, sub = av
            body = list(sub)
            outer = high != low and high > 1
            if (high != low and inside) or _nested_repeat(
                    body, inside=inside or (outer and not _pinned(body))):
                return True
        elif any(_nested_repeat(list(part), inside=inside) for part in _parts(op, av)):
            return True
    return False


def _repeats(items: list[Any]) -> list[list[Any]]:
    """The bodies of the variable repeats anywhere in ``items``."""
    found: list[list[Any]] = []
    for op, av in items:
        parts = [av[2]] if op in _REPEATS else _parts(op, av)
        if op in _REPEATS and av[0] != av[1]:
            found.append(list(av[2]))
        for part in parts:
            found += _repeats(list(part))
    return found


def _pinned(body: list[Any]) -> bool:
    """Whether ``body`` holds a character (a literal, a set) that none of its variable
    repeats can match: each repetition of it then ends (or starts) at one place only.
    Judged on the first 768 code points."""
    while len(body) == 1 and body[0][0] is re_constants.SUBPATTERN:
        body = list(body[0][1][3])
    inner = _repeats(body)
    return any(chars and not any(_may_match(r, c) for r in inner for c in chars)
               for chars in _pins(body))


def _pins(body: list[Any]) -> list[list[str]]:
    """The characters each literal or set of ``body`` matches, of :data:`_SAMPLE`."""
    return [[c for c in _SAMPLE if _item_may_match(op, av, c)] for op, av in body
            if op in (re_constants.LITERAL, re_constants.IN)]


_SAMPLE = [chr(n) for n in range(768)]


_CATEGORIES: dict[str, Any] = {
    "CATEGORY_DIGIT": str.isdigit, "CATEGORY_NOT_DIGIT": lambda c: not c.isdigit(),
    "CATEGORY_SPACE": str.isspace, "CATEGORY_NOT_SPACE": lambda c: not c.isspace(),
    "CATEGORY_WORD": lambda c: c.isalnum() or c == "_",
    "CATEGORY_NOT_WORD": lambda c: not (c.isalnum() or c == "_")}


def _may_match(items: list[Any], char: str) -> bool:
    """Whether some single-character part of ``items`` may match ``char``; anything it
    cannot judge (a group, a lookaround) counts as a match."""
    return any(_item_may_match(op, av, char) for op, av in items)


def _item_may_match(op: Any, av: Any, char: str) -> bool:
    test = _MATCHERS.get(op)
    return True if test is None else bool(test(av, char))


def _category(av: Any, char: str) -> bool:
    test = _CATEGORIES.get(str(av))
    return True if test is None else bool(test(char))


def _in_set(av: Any, char: str) -> bool:
    """A set (``[^a-z\\d]``): whether ``char`` may be in it; a part it cannot judge
    counts as a match."""
    negated = bool(av) and av[0][0] is re_constants.NEGATE
    parts = av[1:] if negated else av
    if any(op not in (re_constants.LITERAL, re_constants.RANGE, re_constants.CATEGORY)
           for op, _ in parts):
        return True
    hit = any(chr(a[0]) <= char <= chr(a[1]) if op is re_constants.RANGE
              else _item_may_match(op, a, char) for op, a in parts)
    return hit != negated


_MATCHERS: dict[Any, Any] = {
    re_constants.LITERAL: lambda av, c: chr(av) == c,
    re_constants.NOT_LITERAL: lambda av, c: chr(av) != c,
    re_constants.CATEGORY: _category,
    re_constants.IN: _in_set}


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
