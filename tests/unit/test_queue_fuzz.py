"""The readers of work queues fed random bytes and hostile shapes, as the other readers
are (:mod:`tests.unit.test_json_fuzz`): the enqueue parser, an item record, a summary
or a backlog block, a worker's outcome file. Each returns or says why in one line,
within bounded memory, and the rest of the queue is served."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from orchestrator.executors.outcomes import BadOutcome, parse
from orchestrator.state import codec, layout, queueload, queueops
from orchestrator.state.items import BadEnqueue, Item, NewItem, parse_lines
from orchestrator.state.queue import QueueBook
from tests.hostile import hostile_texts, json_values, shapes
from tests.unit.test_json_fuzz import FUZZ, bounded_memory
from tests.unit.test_queue_state import commit

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
FEWER = settings(FUZZ, max_examples=60)
"""Fewer examples than the other readers': three readers, each over small files."""
KEYS = [f"k{n}" for n in range(4)]


def _valid() -> dict[str, bytes]:
    book = QueueBook.empty("pages", {})
    queueops.enqueue(book, [NewItem(payload={"n": n}, key=k) for n, k in enumerate(KEYS)],
                     T0, "me")
    queueops.claim(book, book.claimable(T0, 1), "r--20261201T0700Z--pages-w1--1",
                   T0 + timedelta(minutes=5), 2, T0, "tick")
    return commit({}, book.dump())


VALID = _valid()
RECORDS = [json.loads(data) for path, data in VALID.items() if path.endswith(".json")
           and "/backlog/" not in path]
LINES = [{"payload": {"n": 1}, "key": "a", "priority": 2}, {"payload": None},
         {"payload": "x", "not_before": "2026-12-01T07:00:00Z"}]


@FEWER
@given(st.one_of(st.binary(max_size=5000), shapes.map(str.encode),
                 hostile_texts(LINES),
                 st.lists(json_values.map(json.dumps), max_size=5).map(
                     lambda lines: "\n".join(lines).encode())))
@example(b'{"payload": "x", "not_before": "' + b"[" * 400 + b'"}')  # quoted in full once
@example(b'{"payload": "x", "\\n": 1}')  # found by the fuzzer: a field named with a line break
def test_the_enqueue_parser_takes_a_file_or_names_the_line_at_fault(data: bytes) -> None:
    with bounded_memory():
        try:
            items = parse_lines(data)
        except BadEnqueue as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 600
        else:
            for item in items:
                json.dumps(item.payload, ensure_ascii=False).encode()


@FEWER
@given(st.sampled_from(sorted(VALID)), hostile_texts(RECORDS))
def test_a_hostile_queue_file_costs_only_itself(path: str, data: bytes) -> None:
    files = {**VALID, path: data}
    with bounded_memory():
        books, stray = queueload.load(files)
        assert stray == []
        book = books["pages"]
        picked = book.claimable(T0 + timedelta(hours=1), 10)
    for why in book.problems.values():
        assert "\n" not in why
    for item in picked:  # only records that read as what their path names
        record = codec.parse_record(Item, layout.item_path("pages", item.id),
                                    files[layout.item_path("pages", item.id)])
        assert record.id == item.id and record.queue == "pages"
    if "/items/" not in path:  # a bad summary or block: rebuilt, every ready item served
        assert len(picked) == len(KEYS) - 1


OUTCOME = {"format": 1, "run_id": "r--20261201T0700Z", "track": "pages-w1", "attempt": 1,
           "phase": "complete", "exit_code": 0, "started_at": "2026-12-01T07:00:00Z",
           "finished_at": "2026-12-01T07:01:00Z",
           "items": [{"id": "0" * 24, "outcome": "done", "attempt": 1}],
           "enqueue": [{"queue": "pages", "payload": 1}]}


@FEWER
@given(hostile_texts([OUTCOME]))
def test_a_worker_s_outcome_file_is_read_or_named(data: bytes) -> None:
    with bounded_memory():
        try:
            outcome = parse("r--20261201T0700Z--pages-w1--1.json", data)
        except BadOutcome as exc:
            assert "\n" not in str(exc)
        else:
            assert layout.check_queue("pages") and outcome.key.endswith("--1")
