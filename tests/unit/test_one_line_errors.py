"""A key the input chose, in the error line of every parser that names it.

A JSON key may hold a line break, a terminal escape, a line separator or kilobytes.
Each parser names the field at fault in one printable line, quoting such a key and
cutting a long one, as :func:`orchestrator.support.text.error_location` does.
The parsers of files (schedules, calendars) are checked the same way in
:mod:`tests.integration.test_file_error_lines`.
"""

from __future__ import annotations

import json

import pytest

from orchestrator.config.repository import parse_repo_config
from orchestrator.errors import OrchestratorError
from orchestrator.executors.outcomes import BadOutcome, parse
from orchestrator.state.items import BadEnqueue, parse_array, parse_lines

KEYS = ["\n", "a\nb", "\r", "\u2028", "\x1b[31mred", "k" * 5000]
IDS = ["newline", "inner-newline", "return", "line-separator", "escape", "5000-chars"]


def one_line(message: str, key: str) -> None:
    assert message.isprintable(), repr(message)  # no line break, escape or separator
    assert len(message) < 600 and key not in message  # quoted, or cut when long


@pytest.mark.parametrize("key", KEYS, ids=IDS)
def test_an_enqueue_line_quotes_an_unknown_field(key: str) -> None:
    with pytest.raises(BadEnqueue) as caught:
        parse_lines(json.dumps({"payload": 1, key: 1}).encode())
    one_line(str(caught.value), key)
    assert str(caught.value).startswith("line 1: ")
    with pytest.raises(BadEnqueue) as caught:
        parse_array([{"payload": 1}, {key: 1}])
    one_line(str(caught.value), key)


@pytest.mark.parametrize("key", KEYS, ids=IDS)
def test_orchestrator_json_quotes_an_unknown_field(key: str) -> None:
    with pytest.raises(OrchestratorError) as caught:
        parse_repo_config(json.dumps({"notify": {key: 1}}).encode())
    one_line(str(caught.value), key)


@pytest.mark.parametrize("key", KEYS, ids=IDS)
def test_an_outcome_file_quotes_an_unknown_field(key: str) -> None:
    with pytest.raises(BadOutcome) as caught:
        parse("x.json", json.dumps({key: 1}).encode())
    one_line(str(caught.value), key)
