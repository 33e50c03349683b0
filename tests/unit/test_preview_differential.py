"""``validate``'s previews and warnings against their previous implementation
(``tests/preview_reference.py``) on random schedules: reading the timing warnings' sample
as seconds, and skipping the daylight-saving notes where the zone does not change,
changed no run shown and no warning."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from orchestrator.config import preview
from orchestrator.config.models import Schedule
from tests import preview_reference as ref
from tests.builders import schedule_spec
from tests.unit.test_cron_differential import ZONES, expression

RARE = ["0 0 29 2 *", "30 2 29 2 *", "0 0 31 * *", "0 0 31 3,5 *", "15 2 31 4,6 1",
        "0 0 29 2 1", "59 23 31 12 *", "* * 29 2 *", "*/3 2 * 3,10 0", "0,1,2,59 1,2 * * *",
        "30 1 * * *", "0 2 * * *", "0 */2 * * *", "*/20 * * * *", "7 * * * *", "0 0 * * *"]


def changes_near(rng: random.Random, zone: str) -> list[datetime]:
    """Instants from a day before to two hours after the zone's changes of a coming year."""
    from orchestrator.cron import zone_changes
    base = datetime(2026 + rng.randrange(3), 1, 1, tzinfo=UTC)
    found = zone_changes(ZoneInfo(zone), base, base + timedelta(days=366))
    return [c.at + timedelta(minutes=rng.choice([rng.randrange(-60 * 30, 0),
                                                  rng.randrange(-120, 150)]))
            for c in found]


def start_for(rng: random.Random, zone: str) -> datetime:
    near = changes_near(rng, zone)
    if near and rng.random() < 0.6:
        moment = rng.choice(near)
    else:
        moment = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(
            minutes=rng.randrange(40 * 366 * 24 * 60))
    return moment + timedelta(seconds=rng.choice([0, 0, 0, 30]),
                              microseconds=rng.choice([0, 0, 1]))


def spec_fields(rng: random.Random, zone: str, start: datetime) -> dict[str, Any]:
    fields: dict[str, Any] = {"timezone": zone, "catchup": rng.choice(["latest", "all"])}
    if rng.random() < 0.15:
        # a one-shot near the start, written as a local wall time (gaps and folds too)
        wall = start.astimezone(ZoneInfo(zone)).replace(tzinfo=None, second=0,
                                                        microsecond=0)
        wall += timedelta(minutes=rng.randrange(-120, 24 * 60))
        return {**fields, "cron": None, "at": wall.isoformat()}
    cron = rng.choice(RARE) if rng.random() < 0.4 else expression(rng)
    fields["cron"] = cron
    if rng.random() < 0.5:
        fields["dst"] = {"gap": rng.choice(["shift", "skip"]),
                         "fold": rng.choice(["first", "both"])}
    return fields


def shown(slots: list[Any]) -> list[tuple[object, ...]]:
    return [(s.at, s.wall, s.kind.value, s.fires, s.local, s.local.utcoffset())
            for s in slots]


@pytest.mark.parametrize("seed", range(6))
def test_previews_and_warnings_are_unchanged(seed: int) -> None:
    rng = random.Random(seed)
    checked = 0
    for _ in range(60):
        zone = rng.choice([*ZONES, "Australia/Lord_Howe", "Asia/Tokyo"])
        start = start_for(rng, zone)
        fields = spec_fields(rng, zone, start)
        cron = fields.pop("cron")
        try:
            spec = schedule_spec(cron, **fields)
        except ValueError:
            continue  # a random expression that never fires: not a valid schedule
        schedule = Schedule(id="s", spec=spec)
        n = rng.choice([0, 1, 3, 5, 70])
        ours, theirs = preview.preview(schedule, start, n), ref.preview(schedule, start, n)
        assert (shown(ours.upcoming), ours.warnings, ours.words) == (
            shown(theirs.upcoming), theirs.warnings, theirs.words), (cron, fields, start, n)
        checked += 1
    assert checked > 40


def test_the_rare_and_the_impossible_say_so() -> None:
    """29 February within the horizon, a 31st with no month that has one refused."""
    start = datetime(2026, 12, 1, 12, tzinfo=UTC)
    leap = preview.preview(Schedule(id="s", spec=schedule_spec("0 0 29 2 *")), start, 3)
    assert [s.at.date().isoformat() for s in leap.upcoming] == [
        "2028-02-29", "2032-02-29", "2036-02-29"]
    with pytest.raises(ValueError, match="never fires"):
        schedule_spec("0 0 31 2 *")
