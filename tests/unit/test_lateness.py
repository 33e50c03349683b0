"""The lateness ledger (:mod:`orchestrator.cadence.lateness`): slots, figures, bounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orchestrator.cadence import lateness
from orchestrator.cadence.lateness import Sample

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def test_a_sample_is_of_the_latest_slot_of_its_line_at_or_before_the_run() -> None:
    created = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    found = lateness.sample("0 6 * * *", ["9 0,12 * * *", "0 6 * * *"], created,
                            created + timedelta(minutes=2), 7)
    assert found == Sample("0 6 * * *", datetime(2026, 12, 1, 6, tzinfo=UTC), created,
                           created + timedelta(minutes=2), 7)
    assert found.late == 3.5 * 3600


def test_a_zoned_entry_keeps_its_zone() -> None:
    zoned = "TZ=Europe/Berlin 0 6 * * *"
    created = datetime(2026, 12, 1, 6, 30, tzinfo=UTC)
    found = lateness.sample("0 6 * * *", [zoned], created, created, None)
    assert found is not None
    assert (found.cron, found.slot) == (zoned, datetime(2026, 12, 1, 5, tzinfo=UTC))


def test_figures_are_nearest_rank_percentiles_and_slots_never_sampled() -> None:
    line = "0 6 * * *"
    samples = [Sample(line, T0.replace(hour=6) + timedelta(days=d),
                      T0.replace(hour=6) + timedelta(days=d, hours=h), T0, None)
               for d, h in [(0, 1), (1, 2), (2, 3), (4, 4), (5, 5), (6, 6)]]
    f = lateness.by_line(samples, [line])[line]
    assert (f.samples, f.p50, f.p95, f.max, f.dropped) == (6, 3 * 3600, 6 * 3600, 6 * 3600, 1)


def test_the_ledger_stays_bounded_after_ten_thousand_ticks() -> None:
    data: bytes | None = None
    for n in range(10_000):
        slot = T0 + timedelta(minutes=15 * n)
        new = Sample("*/15 * * * *", slot, slot + timedelta(hours=3),
                     slot + timedelta(hours=3, minutes=1), n)
        data = lateness.append(data, new) or data
    kept = lateness.read(data)
    assert len(kept) <= lateness.KEEP
    assert kept[-1].run == 9_999
    assert kept[-1].started - kept[0].slot <= timedelta(days=lateness.KEEP_DAYS)
    assert data is not None and len(data) < lateness.KEEP * 200


def test_a_run_is_sampled_once() -> None:
    s = Sample("0 6 * * *", T0, T0, T0, 5)
    data = lateness.append(None, s)
    assert lateness.append(data, s) is None


def test_lateness_is_a_risk_only_with_enough_samples_over_a_tolerance() -> None:
    line = "0 * * * *"
    samples = [Sample(line, T0 + timedelta(hours=h), T0 + timedelta(hours=h + 3), T0, h)
               for h in range(6)]
    now = T0 + timedelta(hours=12)
    risk = lateness.at_risk(samples, {"tight": 30, "loose": 240, "none": None}, now)
    assert risk is not None
    assert (risk.schedules, risk.tolerance_minutes, risk.measured.p95) == (
        ("tight",), 30, 3 * 3600)
    assert lateness.at_risk(samples[:4], {"tight": 30}, now) is None  # no verdict yet
    punctual = lateness.at_risk(samples, {"loose": 240}, now)
    assert punctual is not None and punctual.schedules == ()


def test_a_hostile_ledger_line_costs_only_itself() -> None:
    good = Sample("0 6 * * *", T0, T0 + timedelta(hours=1), T0, 5)
    data = b"[" * 100_000 + b"\n" + b'{"cron": 1}\nnot json\n' + good.line()
    assert lateness.read(data) == [good]
