from datetime import UTC, datetime, timedelta, timezone

import pytest

from orchestrator.errors import UserError
from orchestrator.support.times import iso, parse_now, parse_utc

T = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-12-01T07:00:00Z", T),
    ("2026-12-01T02:00:00-05:00", T),
    ("2026-12-01T07:00:00", None),  # no offset: not trusted
    ("yesterday", None),
    ("", None),
    (None, None),
    (42, None),
])
def test_parse_utc(text: object, expected: datetime | None) -> None:
    assert parse_utc(text) == expected


def test_parse_now_needs_an_offset_and_names_the_option() -> None:
    assert parse_now("2026-12-01T08:00:00+01:00") == T
    with pytest.raises(UserError, match="--from: give a UTC offset"):
        parse_now("2026-12-01T07:00:00", "--from")
    with pytest.raises(UserError, match="--now: not an ISO datetime: 'soon'"):
        parse_now("soon")
    assert parse_now(None).tzinfo is UTC


def test_iso_is_utc_with_a_z() -> None:
    assert iso(T.astimezone(timezone(timedelta(hours=-5)))) == "2026-12-01T07:00:00Z"


def test_instants_out_of_range_are_user_errors_not_crashes() -> None:
    with pytest.raises(UserError, match="out of range"):
        parse_now("9999-12-31T23:00:00-05:00")
