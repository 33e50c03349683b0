"""A key the input chose, in the error line of a schedule file or a calendar, read from
disk: one printable line, as :mod:`tests.unit.test_one_line_errors` checks the parsers
of bytes in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config.calendars import CalendarError, Calendars
from orchestrator.config.files import load_all
from tests.unit.test_one_line_errors import IDS, KEYS, one_line


@pytest.mark.parametrize("key", KEYS, ids=IDS)
def test_a_schedule_file_quotes_an_unknown_or_twice_given_field(key: str,
                                                                tmp_path: Path) -> None:
    folder = tmp_path / "schedules"
    folder.mkdir()
    track = {"name": "a", "run": "true"}
    (folder / "extra.json").write_text(json.dumps(
        {"cron": "* * * * *", "tracks": [{**track, key: 1}]}))
    named = json.dumps(key)
    (folder / "twice.json").write_text(  # json.dumps cannot write a key twice
        f'{{"cron": "* * * * *", "tracks": [{json.dumps(track)}], {named}: 1, {named}: 2}}')
    errors = load_all(folder).errors
    assert [e.file for e in errors] == ["schedules/extra.json", "schedules/twice.json"]
    for error in errors:
        one_line(str(error), key)
    assert "key appears twice" in str(errors[1])


@pytest.mark.parametrize("key", KEYS, ids=IDS)
def test_a_calendar_quotes_an_unknown_field(key: str, tmp_path: Path) -> None:
    (tmp_path / "calendars").mkdir()
    (tmp_path / "calendars" / "holidays.json").write_text(json.dumps({"dates": [], key: 1}))
    with pytest.raises(CalendarError) as caught:
        Calendars(tmp_path).dates("holidays")
    one_line(str(caught.value), key)
