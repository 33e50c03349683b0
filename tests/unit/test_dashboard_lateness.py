"""The dashboard's cron lateness (:mod:`orchestrator.brief.lateboard`): a chart and a
table per week from the ledger, beside the schedules' tolerances; nothing without a
sample; a hostile ledger line costs only itself."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from orchestrator import brief
from orchestrator.brief import dashboard, lateboard
from orchestrator.cadence import lateness
from orchestrator.state import codec, layout
from tests.builders import schedule

NOW = datetime(2026, 12, 4, 8, 0, tzinfo=UTC)
LINE = "0 */6 * * *"
TICK = {layout.TICKS: codec.json_line({"at": "2026-12-04T07:55:00Z", "executor": "local"})}
SCHEDULES = [schedule("nightly", max_lateness_minutes=60),
             schedule("hourly", cron="0 * * * *", max_lateness_minutes=60),
             schedule("reports", cron="0 9 * * 1")]
DEFAULT = 120.0
"""orchestrator.json's ``max_lateness_minutes``: the reports' tolerance."""


def _sample(slot: datetime, late: timedelta, run: int) -> bytes:
    return lateness.Sample(LINE, slot, slot + late, slot + late + timedelta(minutes=1),
                           run).line()


def ledger() -> bytes:
    """Three weeks with samples and one without, from four weeks back; the newest has
    the 12:00 slot of 1 December dropped."""
    day = datetime(2026, 12, 1, tzinfo=UTC)
    h, m = timedelta(hours=1), timedelta(minutes=1)
    return b"".join([
        _sample(datetime(2026, 11, 10, tzinfo=UTC), 30 * m, 1),
        _sample(datetime(2026, 11, 22, tzinfo=UTC), 10 * m, 2),
        _sample(datetime(2026, 11, 22, 6, tzinfo=UTC), 20 * m, 3),
        _sample(day, 1 * h, 4),
        _sample(day.replace(hour=6), 3 * h, 5),
        _sample(day.replace(hour=18), 5 * h, 6)])


def board(data: bytes | None) -> dashboard.Dashboard:
    files = {**TICK, **({layout.LATENESS: data} if data is not None else {})}
    return dashboard.from_files(files, SCHEDULES, [], NOW, tick_lines=[LINE],
                                max_lateness_minutes=DEFAULT)


def section(html: str) -> str:
    return html[html.index('id="lateness"'):html.index('<h2 class="section">Runs')]


def test_the_chart_and_table_give_each_week_s_figures_beside_the_tolerances() -> None:
    late = board(ledger()).lateness
    assert late is not None
    weeks = late.weeks
    assert [w.name for w in weeks] == ["Nov 6", "Nov 13", "Nov 20", "Nov 27"]
    assert [w.cells for w in weeks] == [
        ("1", "30m", "30m", "30m", "0"),
        ("0", "-", "-", "-", "0"),
        ("2", "10m", "20m", "20m", "0"),
        ("3", "3h 00m", "5h 00m", "5h 00m", "1")]
    # the newest week is the 7 days status --json and `lateness` report
    report = lateness.report(ledger(), [LINE], NOW, lateness.RISK_DAYS)
    assert weeks[-1].figures.to_json() == {k: report[k] for k in (
        "samples", "p50_seconds", "p95_seconds", "max_seconds", "dropped")}
    assert [(n.minutes, n.ids) for n in late.needs] == [(60, ("hourly", "nightly")),
                                                        (120, ("reports",))]
    assert [w.over for w in weeks] == [False, False, False, True]  # p95 over an hour
    # the tallest bar is the newest week's max (5 hours), the hour's line beneath it
    assert weeks[-1].max_y == 2.0 and late.need_y == round(80 - 78 / 5, 1)
    assert weeks[1].max_height == 0

    html = section(brief.render_index([], generated_at=NOW, board=board(ledger())))
    svg = html[html.index("<svg"):html.index("</svg>")]
    assert 'role="img"' in svg and 'aria-labelledby="late-title late-desc"' in svg
    desc = re.search(r'<desc id="late-desc">(.*?)</desc>', svg)
    assert desc is not None
    assert "week from Nov 27: p50 3h 00m, p95 5h 00m, max 5h 00m, 3 sample(s), 1 dropped" \
        in desc.group(1)
    assert desc.group(1).endswith("; the strictest tolerance is hourly, nightly: 1h 00m")
    assert svg.count('class="l-p95 l-over"') == 1 and svg.count('class="l-need"') == 1
    assert ">1 dropped</text>" in svg
    rows = re.findall(r"<tr[^>]*><td[^>]*>([^<]*)</td>((?:<td[^>]*>[^<]*</td>)*)</tr>", html)
    assert [(name, re.findall(r">([^<]*)</td>", cells)) for name, cells in rows] == [
        ("Nov 27", ["3", "3h 00m", "5h 00m", "5h 00m", "1"]),
        ("Nov 20", ["2", "10m", "20m", "20m", "0"]),
        ("Nov 13", ["0", "-", "-", "-", "0"]),
        ("Nov 6", ["1", "30m", "30m", "30m", "0"])]
    assert "hourly, nightly: 1h 00m; reports: 2h 00m." in html
    assert "<script" not in html and "http" not in svg.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


def test_an_empty_ledger_shows_nothing() -> None:
    for data in (None, b"", b"not json\n", _sample(NOW - timedelta(days=40), timedelta(0), 9)):
        found = board(data)
        assert found.lateness is None, data
        html = brief.render_index([], generated_at=NOW, board=found)
        assert 'id="lateness"' not in html and "cron lateness" not in html


def test_without_a_tolerance_the_chart_has_no_line_and_says_so() -> None:
    files = {**TICK, layout.LATENESS: ledger()}
    found = dashboard.from_files(files, [schedule("nightly")], [], NOW)
    assert found.lateness is not None and found.lateness.needs == ()
    html = section(brief.render_index([], generated_at=NOW, board=found))
    assert "l-need" not in html and "l-over" not in html
    assert "No schedule says how late it may start" in html


def test_a_hostile_ledger_line_costs_only_itself() -> None:
    slot = datetime(2026, 12, 2, tzinfo=UTC)
    forged = [
        b"not json",
        b"[" * 5000 + b"]" * 5000,
        b'{"cron": 5, "slot": "2026-12-02T00:00:00Z", "created": "2026-12-02T01:00:00Z",'
        b' "started": "2026-12-02T01:00:00Z"}',
        b'{"cron": "0 */6 * * *", "slot": "2026-13-45T00:00:00Z", "created": "x"}',
        # a run ten years after its slot, and one before it: no tick writes either
        _sample(slot, timedelta(days=3650), 7).rstrip(b"\n"),
        _sample(slot, timedelta(hours=-2), 8).rstrip(b"\n"),
        b'{"cron": "<script>alert(1)</script>", "slot": 1e999}',
        b"\xff\xfe" * 100,
    ]
    good = ledger().splitlines()
    mixed = b"\n".join([forged[0], *good[:3], *forged[1:], *good[3:]]) + b"\n"
    assert board(mixed).lateness == board(ledger()).lateness
    report = lateness.report(mixed, [LINE], NOW, lateness.RISK_DAYS)
    assert report == lateness.report(ledger(), [LINE], NOW, lateness.RISK_DAYS)


def test_the_weeks_are_bounded_and_a_sample_after_now_is_left_out() -> None:
    h = timedelta(hours=1)
    data = b"".join(_sample(NOW - timedelta(days=d), h, d) for d in range(0, 60, 3))
    data += _sample(NOW + timedelta(days=1), h, 99)
    late = lateboard.section(data, [LINE], {}, NOW)
    assert late is not None and len(late.weeks) == lateboard.WEEKS
    assert sum(w.figures.samples for w in late.weeks) == len(range(0, 35, 3))
    assert late.width == lateboard.WEEKS * (lateboard.COLUMN + lateboard.GAP)
    assert late.weeks[-1].x + lateboard.COLUMN < late.width
