"""A schedule's life span and exclusions (``start_at``, ``end_at``, ``exclude``): no
slot outside them for the planner, the previews and the tick's cron alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from orchestrator.cadence.derive import schedule_slots
from orchestrator.config.models import Schedule
from orchestrator.config.triggers import for_spec
from orchestrator.runs import status
from orchestrator.state.model import State
from tests.builders import schedule
from tests.planning import tick

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def daily(**fields: object) -> Schedule:
    return schedule("daily", cron="0 7 * * *", timezone="Europe/Paris", tracks=1, **fields)


def test_no_slot_before_start_after_end_or_on_an_excluded_local_date() -> None:
    s = daily(start_at="2026-12-03T00:00:00", end_at="2026-12-07T07:00:00",
              exclude=["2026-12-05"])
    found = [f.at for f in for_spec(s.spec).next(T0, 10).found]
    # 07:00 Paris is 06:00 UTC; the 7th's slot is at end_at exactly: still inside
    assert found == [datetime(2026, 12, d, 6, tzinfo=UTC) for d in (3, 4, 6, 7)]
    assert schedule_slots(s, T0, T0 + timedelta(days=10)) == found  # what cron-sync reads
    assert "from 2026-12-02T23:00:00Z" in for_spec(s.spec).describe()


def test_the_planner_fires_nothing_on_an_excluded_date_and_nothing_past_the_end() -> None:
    s = daily(exclude=["2026-12-25"], end_at="2026-12-27T00:00:00")
    first = tick([s], State(), datetime(2026, 12, 24, 6, 1, tzinfo=UTC))
    assert [r.slot for r in first.state.runs.values()] == [
        datetime(2026, 12, 24, 6, tzinfo=UTC)]
    holiday = tick([s], first.state, datetime(2026, 12, 25, 6, 1, tzinfo=UTC))
    assert len(holiday.state.runs) == 1
    boxing = tick([s], holiday.state, datetime(2026, 12, 26, 6, 1, tzinfo=UTC))
    assert len(boxing.state.runs) == 2
    after = tick([s], boxing.state, datetime(2026, 12, 28, 6, 1, tzinfo=UTC))
    assert len(after.state.runs) == 2


def test_status_says_a_schedule_past_its_end_has_ended() -> None:
    s = daily(end_at="2026-12-10T00:00:00Z")
    report = status.build({}, [s], [], datetime(2026, 12, 11, tzinfo=UTC),
                          timedelta(minutes=90))
    row = report["schedules"][0]
    assert row["ended"] == "2026-12-10T00:00:00Z" and row["next"] is None
    assert any("ENDED at 2026-12-10T00:00:00Z" in line for line in status.text(report))
    before = status.build({}, [s], [], datetime(2026, 12, 9, tzinfo=UTC),
                          timedelta(minutes=90))
    assert before["schedules"][0]["ended"] is None


@pytest.mark.parametrize(("fields", "field"), [
    ({"start_at": "2026-12-10T00:00:00", "end_at": "2026-12-01T00:00:00"}, "end_at"),
    ({"exclude": ["2026-13-01"]}, "exclude"),
])
def test_an_impossible_span_is_refused(fields: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        daily(**fields)
    assert field in str(err.value)


def test_a_one_shot_takes_no_span() -> None:
    with pytest.raises(ValidationError, match="applies to 'cron' only"):
        schedule("once", cron=None, at="2026-12-24T18:00:00", tracks=1,
                 exclude=["2026-12-24"])


def test_unbounded_is_the_plain_cron() -> None:
    assert type(for_spec(daily().spec)).__name__ == "CronTrigger"
