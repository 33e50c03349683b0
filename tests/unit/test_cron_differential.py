"""The cron evaluator against its previous implementation (``tests/cron_reference.py``)
on random expressions, zones, policies and windows: caching the zones' transitions and
the faster search changed no slot, no daylight-saving verdict and no zone change."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from orchestrator import cron
from orchestrator.cron import DstFold, DstGap, DstPolicy
from tests import cron_reference as ref

ZONES = ["UTC", "Europe/Berlin", "Europe/London", "Europe/Dublin", "America/New_York",
         "America/Santiago", "America/St_Johns", "Australia/Sydney", "Australia/Lord_Howe",
         "Pacific/Chatham", "Asia/Kolkata", "Asia/Tehran", "Africa/Casablanca",
         "America/Sao_Paulo", "Pacific/Apia"]


def field(rng: random.Random, low: int, high: int) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return "*"
    if kind == 1:
        return f"*/{rng.randint(2, max(2, (high - low) // 2))}"
    if kind == 2:
        return str(rng.randint(low, high))
    if kind == 3:
        a = rng.randint(low, high)
        return f"{a}-{rng.randint(a, high)}"
    if kind == 4:
        return ",".join(str(v) for v in sorted(rng.sample(range(low, high + 1), 3)))
    a = rng.randint(low, high)
    return f"{a}-{high}/{rng.randint(1, 3)}"


def expression(rng: random.Random) -> str:
    hours = field(rng, 0, 23) if rng.random() < 0.7 else rng.choice(["1", "2", "1,2,3", "0-3"])
    return " ".join([field(rng, 0, 59), hours, field(rng, 1, 28), field(rng, 1, 12),
                     field(rng, 0, 6)])


def policy(rng: random.Random) -> DstPolicy:
    return DstPolicy(gap=rng.choice(list(DstGap)), fold=rng.choice(list(DstFold)))


def moment(rng: random.Random) -> datetime:
    return (datetime(2000, 1, 1, tzinfo=UTC)
            + timedelta(minutes=rng.randrange(40 * 366 * 24 * 60)))


def explained(items: list[cron.SlotInfo] | list[ref.SlotInfo]) -> list[tuple[object, ...]]:
    return [(s.at, s.wall, s.kind.value, s.fires, s.local, s.local.utcoffset()) for s in items]


@pytest.mark.parametrize("seed", range(8))
def test_slots_and_their_dst_verdicts_are_unchanged(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        expr, zone, dst = expression(rng), ZoneInfo(rng.choice(ZONES)), policy(rng)
        after = moment(rng)
        until = after + timedelta(hours=rng.choice([1, 6, 30, 24 * 9, 24 * 40]))
        assert explained(cron.explain(expr, zone, dst, after, until)) == explained(
            ref.explain(expr, zone, dst, after, until)), (expr, zone, dst, after, until)


@pytest.mark.parametrize("seed", range(4))
def test_next_slots_and_searches_are_unchanged(seed: int) -> None:
    rng = random.Random(100 + seed)
    for _ in range(12):
        expr, zone, dst = expression(rng), ZoneInfo(rng.choice(ZONES)), policy(rng)
        start, n = moment(rng), rng.choice([1, 5, 40])
        assert cron.next_slots(expr, zone, dst, start, n) == ref.next_slots(
            expr, zone, dst, start, n), (expr, zone, dst, start, n)
        ours, theirs = cron.search(expr, zone, dst, start, n), ref.search(
            expr, zone, dst, start, n)
        assert explained(list(ours.found)) == explained(list(theirs.found))
        assert ours.horizon == theirs.horizon


def test_a_rare_expression_and_the_horizon_are_unchanged() -> None:
    zone, dst = ZoneInfo("Europe/Berlin"), DstPolicy()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for expr in ("0 0 29 2 *", "30 2 29 2 1", "0 0 31 12 *"):
        assert cron.next_slots(expr, zone, dst, start, 3) == ref.next_slots(
            expr, zone, dst, start, 3)
        assert cron.search(expr, zone, dst, start, 50).horizon == ref.search(
            expr, zone, dst, start, 50).horizon


@pytest.mark.parametrize("zone", ZONES)
def test_zone_changes_are_unchanged(zone: str) -> None:
    rng = random.Random(zone)
    tz = ZoneInfo(zone)
    for _ in range(6):
        after = moment(rng)
        until = after + timedelta(days=rng.choice([1, 40, 400, 900]))
        ours = [(c.at, c.before, c.after) for c in cron.zone_changes(tz, after, until)]
        assert ours == [(c.at, c.before, c.after) for c in ref.zone_changes(tz, after, until)]


RARE = ["0 0 29 2 *", "30 2 29 2 *", "* * 29 2 *", "0 0 31 * *", "0 0 31 1,3,5 *",
        "15 2 31 4,6,9,11 1", "0 0 29 2 1", "59 23 31 12 *", "30 1 * 3,10 0",
        "0,1,2,59 1,2 * * *", "*/7 0-3 * * *", "30 1 * * *", "0 2 * * *"]


def near_change(rng: random.Random, zone: ZoneInfo) -> datetime:
    """An instant from a day before to two hours after one of the zone's changes (a
    zone without any gives a random instant)."""
    base = moment(rng)
    found = cron.zone_changes(zone, base, base + timedelta(days=366))
    if not found:
        return base
    return rng.choice(found).at + timedelta(minutes=rng.randrange(-24 * 60, 120),
                                            microseconds=rng.choice([0, 0, 1, 999_999]))


@pytest.mark.parametrize("seed", range(4))
def test_rare_expressions_and_starts_beside_a_change_are_unchanged(seed: int) -> None:
    """Searches that skip whole years (29 February, the 31st) or begin beside a gap or
    a fold find what the day-by-day walk found, and give up at the same horizon."""
    rng = random.Random(200 + seed)
    for _ in range(25):
        zone, dst = ZoneInfo(rng.choice(ZONES)), policy(rng)
        expr = rng.choice(RARE) if rng.random() < 0.6 else expression(rng)
        start, n = near_change(rng, zone), rng.choice([1, 3, 64])
        ours, theirs = cron.search(expr, zone, dst, start, n), ref.search(
            expr, zone, dst, start, n)
        assert explained(list(ours.found)) == explained(list(theirs.found)), (
            expr, zone, dst, start, n)
        assert ours.horizon == theirs.horizon
        assert cron.next_slots(expr, zone, dst, start, n) == [s.at for s in theirs.found]
        assert cron.spacing(expr, zone, dst, start, n) == reference_spacing(
            list(theirs.found), theirs.horizon), (expr, zone, dst, start, n)


OFF_THE_HOUR = ["Asia/Kolkata", "Pacific/Chatham", "Australia/Lord_Howe", "America/St_Johns",
                "Asia/Kathmandu", "Pacific/Chatham"]
SPACED = [
    # closest across midnight, not within a day
    "5 2,13,22 * * *", "0 0,23 * * *", "58 23 * * *", "59 0,23 * * 1-5", "1,59 0,23 * * *",
    # minute 0 UTC only in zones 30 or 45 minutes off the hour, or only outside them
    "45 */3 * * *", "15 4 * * *", "30 */2 * * *", "0 6 * * *", "0,30 9 * * 0",
    # close within a day, on a few days
    "0,3 12 1,15 * *", "*/4 1 * * 1", "10,12 3 29 2 *", "0-2 5 * * *",
]


def reference_spacing(found: list[ref.SlotInfo], horizon: datetime | None) -> cron.Spacing:
    gaps = [b.at - a.at for a, b in itertools.pairwise(found)]
    return cron.Spacing(len(found), min(gaps, default=None), any(
        s.at.minute == 0 and s.kind.value != "shifted" for s in found), horizon)


@pytest.mark.parametrize("seed", range(4))
def test_the_spacing_of_64_slots_is_that_of_the_slots(seed: int) -> None:
    """Read off the expression's structure (one offset, every time of day among the
    slots) or from the slots, the spacing is that of the slots the walk finds."""
    rng = random.Random(300 + seed)
    for _ in range(60):
        zone, dst = ZoneInfo(rng.choice([*ZONES, *OFF_THE_HOUR])), policy(rng)
        pick = rng.random()
        expr = (rng.choice(RARE) if pick < 0.2 else rng.choice(SPACED) if pick < 0.6
                else expression(rng))
        start = near_change(rng, zone) if rng.random() < 0.3 else moment(rng)
        if rng.random() < 0.3:  # exactly at a slot: the search starts after it
            first = ref.search(expr, zone, dst, start, 1).found
            start = first[0].at if first else start
        n = rng.choice([2, 64, 64, 100])
        theirs = ref.search(expr, zone, dst, start, n)
        assert cron.spacing(expr, zone, dst, start, n) == reference_spacing(
            list(theirs.found), theirs.horizon), (expr, zone, dst, start, n)
