"""Hypothesis strategies for hostile JSON inputs, shared by the fuzz tests of every reader.

Random bytes, random JSON values, and the shapes that broke readers before: deep
nesting, integers of thousands of digits, lone surrogates, NaN, byte order marks,
and valid records with one field swapped for something hostile.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from orchestrator.config.models import TrackSpec
from orchestrator.state import model as state_model
from orchestrator.state.breaker import Breaker
from orchestrator.state.records import Cursor, DeadLetter, Run, Track

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=5),
    max_leaves=30,
)

SHAPES = [
    lambda n: "[" * n + "]" * n,
    lambda n: '{"a":' * n + "1" + "}" * n,
    lambda n: "[" * n,  # unterminated
    lambda n: "9" * n,
    lambda n: '{"summary": ' + "-" + "1" * n + "}",
    lambda n: '{"s": "' + "\\ud800" * (n % 50 + 1) + '"}',
    lambda n: '{"s": "\\udc00\\ud800"}',
    lambda n: "NaN" if n % 2 else '{"x": Infinity}',
    lambda n: '"' + "\\" * n + '"',
    lambda n: "\ufeff{}",
]

shapes = st.builds(lambda i, n: SHAPES[i](n), st.integers(0, len(SHAPES) - 1),
                   st.integers(0, 120_000))


def swap_field(record: dict[str, Any], value: Any, key_index: int) -> str:
    """``record`` as JSON with one of its fields (or a new one) set to ``value``."""
    keys = [*sorted(record), "unexpected"]
    out = dict(record)
    out[keys[key_index % len(keys)]] = value
    return json.dumps(out)


def hostile_texts(valid: list[dict[str, Any]]) -> st.SearchStrategy[bytes]:
    """Bytes a reader of records like ``valid`` may be handed."""
    swapped = st.builds(
        lambda record, value, i: swap_field(record, value, i).encode(),
        st.sampled_from(valid), json_values | shapes.map(lambda s: s[:2000]),
        st.integers(0, 50))
    spliced = st.builds(
        lambda record, shape, i: swap_field(record, "@@", i).replace('"@@"', shape).encode(),
        st.sampled_from(valid), shapes, st.integers(0, 50))
    return st.one_of(st.binary(max_size=3000), json_values.map(lambda v: json.dumps(v).encode()),
                     shapes.map(lambda s: s.encode("utf-8", "surrogatepass")), swapped, spliced)


def valid_state(run_id: str = "job--20261201T0700Z") -> state_model.State:
    """A small state with one record of every kind, to mutate."""
    slot = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
    schedule_id = run_id.split("--")[0]
    state = state_model.State()
    spec = TrackSpec(name="a", run="true")
    state.runs[run_id] = Run(run_id=run_id, schedule_id=schedule_id, slot=slot, fire_at=slot,
                             created_at=slot, deadline=slot + timedelta(hours=1),
                             tracks=["a"])
    state.tracks[run_id] = {"a": Track(run_id=run_id, name="a", spec=spec)}
    state.cursors[schedule_id] = Cursor(schedule_id=schedule_id, since=slot)
    key = f"{run_id}--a"
    state.dlq[key] = DeadLetter(key=key, run_id=run_id, track="a", reason="x", parked_at=slot,
                                attempts=1, payload=spec)
    state.health["local"] = Breaker()
    return state


VALID_RECORDS = [json.loads(data) for data in valid_state().dump().values()]
"""One valid record of each kind, as parsed JSON."""
