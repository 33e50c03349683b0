"""Every reader of JSON held in memory, fed random bytes and hostile shapes.

Whatever a record holds, a reader either returns or raises its own one-line error
(never ``RecursionError``, ``ValueError`` from a 5,000-digit integer, or
``UnicodeEncodeError`` from a lone surrogate), within bounded time and memory; the
state loader quarantines the record and the planner goes on with the rest.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from orchestrator.brief import context_from_files
from orchestrator.planner import Observations, plan
from orchestrator.state import codec, layout
from orchestrator.state import model as state_model
from orchestrator.support import safejson
from orchestrator.support.credentials import Redactor, redact_value
from tests.builders import schedule
from tests.hostile import hostile_texts, json_values, shapes, valid_state

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN_ID = "job--20261201T0700Z"
FUZZ = settings(max_examples=150, deadline=timedelta(seconds=3),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MEMORY_LIMIT = 64 * 1024 * 1024
"""Peak Python allocations allowed while reading one hostile input."""


@contextmanager
def bounded_memory() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
        _, peak = tracemalloc.get_traced_memory()
        assert peak < MEMORY_LIMIT, f"{peak} bytes allocated"
    finally:
        tracemalloc.stop()


VALID = dict(valid_state().dump().items())
RECORDS = [json.loads(data) for data in VALID.values()]
PATHS = [*sorted(VALID), layout.polls_path(RUN_ID), layout.TICKS]


def _run_with(**fields: Any) -> bytes:
    return json.dumps({**json.loads(VALID[layout.run_path(RUN_ID)]), **fields}).encode()


@FUZZ
@given(st.one_of(st.binary(max_size=5000), shapes.map(str.encode, ),
                 json_values.map(lambda v: json.dumps(v).encode())))
def test_safejson_returns_or_says_why(data: bytes) -> None:
    with bounded_memory():
        try:
            value = safejson.loads(data)
        except safejson.UnsafeJSON as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 400
        else:
            json.dumps(value, ensure_ascii=False).encode()  # can be written back


@FUZZ
@given(st.sampled_from(PATHS), hostile_texts(RECORDS))
@example(layout.run_path(RUN_ID), _run_with(timezone=""))  # found by the fuzzer: no zone
@example(layout.run_path(RUN_ID), _run_with(timezone="[]"))
def test_a_hostile_record_is_quarantined_and_the_planner_goes_on(path: str, data: bytes
                                                                 ) -> None:
    files = {**VALID, path: data}
    with bounded_memory():
        state = state_model.load(files)
        schedules = [schedule(sid, cron="* * * * *") for sid in ("job", "other")
                     if sid not in state.held_schedules()]  # as the tick holds them
        decision = plan(schedules, state, Observations(), T0 + timedelta(minutes=2))
    assert any(r.startswith("other--") for r in decision.state.runs)  # it fired
    for why in state.quarantine_lines():
        assert "\n" not in why
    if path in state.quarantined:
        assert path not in decision.state.dump(base=state)  # left alone, never rewritten
    codec.last_tick_at(files)


@FUZZ
@given(st.sampled_from([layout.polls_path(RUN_ID), layout.track_path(RUN_ID, "a")]),
       hostile_texts(RECORDS))
def test_the_brief_context_reads_hostile_logs_and_records(path: str, data: bytes) -> None:
    files = {**VALID, path: data}
    with bounded_memory():
        try:
            ctx = context_from_files(files, RUN_ID, now=T0)
        except codec.CorruptState as exc:
            assert path.endswith(".json") and "\n" not in exc.message
        else:
            assert ctx.run.run_id == RUN_ID


@FUZZ
@given(json_values)
def test_redaction_covers_every_string_of_a_result(value: Any) -> None:
    secret = "s3cr3t-t0ken-value"
    redact = Redactor([secret])
    planted: Callable[[Any], Any] = lambda v: {"deep": [v, secret], secret: v}  # noqa: E731
    out = json.dumps(redact_value(planted(value), redact))
    assert secret not in out
