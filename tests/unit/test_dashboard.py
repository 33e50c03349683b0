"""The dashboard of ``state/index.html``: a pure view model on the in-memory store,
rendered by the autoescaped template; it and ``status`` name the same items."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from orchestrator import brief
from orchestrator.brief import dashboard
from orchestrator.config.models import TrackSpec
from orchestrator.config.policies import Pause
from orchestrator.runs import status
from orchestrator.state import codec, layout
from orchestrator.state import index as state_index
from orchestrator.state.history import INDEX_PAGE_RUNS, page_runs
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus
from orchestrator.state.records import Cursor, DeadLetter, Run
from orchestrator.store import InMemoryStateStore
from tests.builders import run_files, schedule

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=3, hours=1)
XSS = '<script>alert("x")</script>'


def finished_run(sid: str, slot: datetime, status_: RunStatus, seconds: int
                 ) -> dict[str, bytes]:
    run_id = f"{sid}--{slot:%Y%m%dT%H%MZ}"
    files = run_files(run_id, status_, slot + timedelta(seconds=seconds + 30), also=["brief"])
    run = codec.parse_record(Run, layout.run_path(run_id), files[layout.run_path(run_id)])
    files[layout.run_path(run_id)] = codec.to_json(run.model_copy(update={
        "work_started_at": slot, "work_finished_at": slot + timedelta(seconds=seconds)}))
    return files


def branch() -> dict[str, bytes]:
    """Three days of ``nightly`` (failed last), ``hourly`` paused by a person with a
    hostile reason, a dead letter of ``nightly`` waiting, one open run."""
    files: dict[str, bytes] = {layout.TICKS: codec.json_line(
        {"at": "2026-12-04T07:55:00Z", "executor": "local"})}
    for day, (outcome, secs) in enumerate([(RunStatus.COMPLETED, 60),
                                           (RunStatus.COMPLETED, 70),
                                           (RunStatus.FAILED, 200)]):
        files.update(finished_run("nightly", T0 + timedelta(days=day), outcome, secs))
    files.update(run_files(f"hourly--{NOW - timedelta(hours=1):%Y%m%dT%H%MZ}"))
    last = f"nightly--{T0 + timedelta(days=2):%Y%m%dT%H%MZ}"
    files[layout.cursor_path("nightly")] = codec.to_json(Cursor(
        schedule_id="nightly", since=T0, last_run_id=last, failures_in_a_row=1))
    files[layout.cursor_path("hourly")] = codec.to_json(Cursor(
        schedule_id="hourly", since=T0, paused=Pause(by="alice", at=T0, reason=XSS)))
    letter = DeadLetter(key=f"{last}--a", run_id=last, track="a", reason="failed",
                        parked_at=T0, attempts=1, payload=TrackSpec(name="a", run="true"))
    files[layout.dlq_path(letter.key)] = codec.to_json(letter)
    return files


SCHEDULES = [schedule("nightly", cron="15 2 * * *", timezone="America/New_York"),
             schedule("hourly", cron="0 * * * *"),
             schedule("quiet", cron="0 7 * * *", enabled=False)]
INVALID = [f"schedules/{XSS}.json: cron: not a cron expression"]


def snapshot_files() -> dict[str, bytes]:
    store = InMemoryStateStore(branch())
    return dict(store.read().files)


def board() -> dashboard.Dashboard:
    return dashboard.from_files(snapshot_files(), SCHEDULES, INVALID, NOW)


def test_attention_comes_first_and_names_what_status_names() -> None:
    files = snapshot_files()
    b = dashboard.from_files(files, SCHEDULES, INVALID, NOW)
    report = status.build(files, SCHEDULES, INVALID, NOW,
                          timedelta(minutes=status.DEFAULT_MAX_STALENESS))
    assert [(i["kind"], i["subject"]) for i in b.attention] == [
        (i["kind"], i["subject"]) for i in report["attention"]]
    kinds = [i["kind"] for i in b.attention]
    assert kinds == ["invalid", "failed", "dead_letter", "paused"]
    dead = b.attention[2]
    assert dead["command"] == "orchestrator dlq requeue nightly--20261203T0700Z--a"
    paused = b.attention[3]
    assert "alice" in paused["text"] and XSS in paused["text"]
    # status prints the same items, first after the clock (the page redraws instants)
    lines = status.text(report)
    assert lines[2] == "attention"
    assert all(any(i["text"] in dashboard.page_times(line) for line in lines)
               for i in b.attention)


def test_each_schedule_has_its_zone_s_next_slots_state_strip_rate_and_trend() -> None:
    cards = {c.id: c for c in board().cards}
    nightly = cards["nightly"]
    assert nightly.when == "15 2 * * * (America/New_York)"
    assert nightly.next_slots == ("Sat 2026-12-05 02:15 EST", "Sun 2026-12-06 02:15 EST",
                                  "Mon 2026-12-07 02:15 EST")
    assert [o.status for o in nightly.strip] == ["completed", "completed", "failed"]
    assert nightly.strip[-1].href == "runs/nightly--20261203T0700Z/brief.html"
    assert nightly.strip[-1].duration == timedelta(seconds=200)  # the work, not the ticks
    assert nightly.success == "2 of 3 finished runs succeeded (67%)"
    assert nightly.trend == "median 2m 15s lately, 1m 00s before (+125%)"
    assert nightly.spark.count(",") == 3
    assert nightly.attention and nightly.state == "active"
    hourly = cards["hourly"]
    assert (hourly.state, hourly.next_slots) == ("paused", ())
    assert "by alice" in hourly.note
    assert [o.status for o in hourly.strip] == ["running"] and hourly.strip[0].href is None
    assert cards["quiet"].state == "disabled"
    bad = cards[f"schedules/{XSS}.json"]
    assert (bad.state, bad.note) == ("invalid", "cron: not a cron expression")
    # those needing attention first, then by id
    assert [c.id for c in board().cards][-1] == "quiet"


def test_an_ended_schedule_says_so_and_start_exclude_shape_the_next_slots() -> None:
    ended = schedule("done", cron="0 7 * * *", end_at="2026-12-02T00:00:00Z")
    later = schedule("later", cron="0 7 * * *", start_at="2026-12-10T00:00:00Z",
                     exclude=["2026-12-11"])
    b = dashboard.from_files({}, [ended, later], [], NOW)
    cards = {c.id: c for c in b.cards}
    assert cards["done"].state == "ended" and cards["done"].next_slots == ()
    assert cards["later"].next_slots[:2] == ("Thu 2026-12-10 07:00 UTC",
                                             "Sat 2026-12-12 07:00 UTC")


def test_nothing_needs_attention_says_so_plainly() -> None:
    files = {layout.TICKS: codec.json_line({"at": "2026-12-04T07:55:00Z",
                                            "executor": "local"})}
    b = dashboard.from_files(files, [schedule("nightly")], [], NOW)
    assert b.attention == ()
    html = brief.render_index([], generated_at=NOW, board=b)
    assert "Nothing needs attention" in html


def test_a_stale_clock_is_named_first() -> None:
    b = dashboard.from_files({}, [schedule("nightly")], [], NOW)
    assert b.attention[0]["kind"] == "stale" and b.stale


def test_the_page_escapes_every_name_and_reason_and_links_relatively() -> None:
    files = snapshot_files()
    b = dashboard.from_files(files, SCHEDULES, INVALID, NOW)
    runs, older = page_runs(files, {})
    html = brief.render_index(list(runs.values()), generated_at=NOW, board=b, older=older)
    assert "<script" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    # attention first: before the schedules and the run list
    assert html.index('id="attention"') < html.index('id="schedules"') < html.index(
        'class="runs"')
    hrefs = re.findall(r'href="([^"]+)"', html)
    assert hrefs and all(h.startswith("runs/") or h.startswith("data:") for h in hrefs)
    assert 'href="runs/nightly--20261203T0700Z/brief.html"' in html
    assert "<svg" in html and "http" not in html.replace('http-equiv', '')
    assert "Open runs (1)" in html


def test_caps_bound_the_page_and_the_records_read_at_scale() -> None:
    """1,000 schedules, 10,000 runs: the page draws SCHEDULES_SHOWN cards of at most
    STRIP_RUNS runs each, and reads only those runs' records."""
    schedules = [schedule(f"s{i:04d}", cron="*/5 * * * *") for i in range(1000)]
    model = run_files("s0000--20261201T0700Z", RunStatus.COMPLETED,
                      T0 + timedelta(minutes=1))[layout.run_path("s0000--20261201T0700Z")]
    files: dict[str, bytes] = {}
    for i in range(10_000):  # the ids are what the strips are picked by
        run_id = f"s{i % 1000:04d}--{T0 + timedelta(minutes=5 * (i // 1000)):%Y%m%dT%H%MZ}"
        files[layout.run_path(run_id)] = model.replace(
            b"s0000--20261201T0700Z", run_id.encode()).replace(
            b'"s0000"', f'"{run_id[:5]}"'.encode())
    asked: list[str] = []

    class Counting(dict[str, bytes]):
        def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
            if key.endswith("/run.json"):
                asked.append(key)
            return super().get(key, default)

    # the state as the tick passes it (it loaded the open runs through the index);
    # its time is bench/dashboard.py's to measure, the records it reads are this test's
    b = dashboard.from_files(Counting(files), schedules, [], NOW, state=State(),
                             last_tick=NOW)
    html = brief.render_index([], generated_at=NOW, board=b)
    assert len(b.cards) == dashboard.SCHEDULES_SHOWN and b.cards_more == 900
    assert all(len(c.strip) == 10 for c in b.cards)  # every run of each shown
    assert len(asked) <= dashboard.SCHEDULES_SHOWN * dashboard.STRIP_RUNS
    assert "900 more schedules not shown" in html
    assert len(html) < 1_000_000


def test_the_tick_draws_the_state_it_commits_with_the_cursors_it_did_not_read() -> None:
    """A tick loads the open runs and the cursors of the schedules it plans; the board
    shows the decision's records over them, the other open runs of a scoped tick, and
    the cursors of quiet schedules read from the branch."""
    from orchestrator.state import model as state_model
    from orchestrator.tick.consolidate import board_state

    opened = run_files("nightly--20261204T0700Z")
    finished = run_files("nightly--20261204T0700Z", RunStatus.FAILED, NOW)
    other = run_files("hourly--20261204T0700Z")
    loaded = state_model.load(opened)
    after = state_model.load(finished)
    others = state_model.load(other).runs
    quiet = Cursor(schedule_id="quiet", since=T0,
                   paused=Pause(by="bob", at=T0, reason="vendor down"))
    old = {layout.cursor_path("quiet"): codec.to_json(quiet)}
    merged = board_state(loaded, after, others, old, ["quiet", "nightly"])
    assert merged.runs["nightly--20261204T0700Z"].status is RunStatus.FAILED
    assert "hourly--20261204T0700Z" in merged.runs
    assert merged.cursors["quiet"].paused == quiet.paused
    assert loaded.runs["nightly--20261204T0700Z"].status is RunStatus.RUNNING  # untouched
    b = dashboard.build([schedule("quiet")], [], merged, NOW, lambda ids: {}, NOW)
    assert [i["subject"] for i in b.attention] == ["quiet"]
    assert [r["run_id"] for r in b.open_runs] == ["hourly--20261204T0700Z"]


def test_a_branch_without_its_open_index_lists_only_the_newest_runs() -> None:
    """A branch written before ``state/open.json`` existed: loading it rebuilds the state
    from every record, yet the page lists the open runs and the newest
    INDEX_PAGE_RUNS others, and says how many more ``runs list`` shows."""
    count = INDEX_PAGE_RUNS + 100
    files: dict[str, bytes] = {}
    for i in range(count):
        files.update(finished_run("nightly", T0 - timedelta(days=i), RunStatus.COMPLETED, 60))
    files.update(run_files("hourly--20260101T0600Z"))  # open, and older than all
    assert state_index.OPEN_INDEX not in files
    state = state_index.load(files).state  # as render --index and the pause verbs read it
    assert len(state.runs) == count + 1  # every record, rebuilt
    runs, older = page_runs(files, state.runs)
    assert len(runs) == INDEX_PAGE_RUNS + 1 and older == 100
    newest = sorted(runs, key=lambda r: r.rpartition("--")[2])
    assert "hourly--20260101T0600Z" in runs
    assert newest[-1] == "nightly--20261201T0700Z"
    assert f"nightly--{T0 - timedelta(days=count - 1):%Y%m%dT%H%MZ}" not in runs
    b = dashboard.from_files(files, [schedule("nightly"), schedule("hourly")], [], NOW)
    html = brief.render_index(list(runs.values()), generated_at=NOW, board=b, older=older)
    assert html.count('<td class="run">') == INDEX_PAGE_RUNS + 1
    assert ("100 older not listed here (<code>orchestrator runs list</code> shows every run)"
            in html)


def test_a_chain_is_drawn_between_the_cards_it_links() -> None:
    """``ingest`` -> ``transform`` -> ``report`` and ``audit``; ``audit`` fires after a
    schedule whose file is invalid, so that one is named and not linked."""
    chain = [schedule("ingest", cron="0 2 * * *"),
             schedule("transform", cron=None, after={"schedule": "ingest"}),
             schedule("report", cron=None, after={"schedule": "transform"}),
             schedule("audit", cron=None, after=[{"schedule": "transform"},
                                                 {"schedule": "broken"}])]
    b = dashboard.from_files({}, chain, ["schedules/broken.json: cron: bad"], NOW)
    cards = {c.id: c for c in b.cards}
    transform = cards["transform"]
    assert [(u.id, u.href) for u in transform.upstreams] == [("ingest", "#schedule-ingest")]
    assert [d.id for d in transform.downstreams] == ["audit", "report"]
    assert [(u.id, u.href) for u in cards["audit"].upstreams] == [
        ("transform", "#schedule-transform"), ("broken", None)]
    assert cards["ingest"].upstreams == () and cards["schedules/broken.json"].downstreams == ()
    html = brief.render_index([], generated_at=NOW, board=b)
    assert 'id="schedule-transform"' in html
    line = re.search(r'<p class="chain">(.*?)</p>', html.split('id="schedule-transform"')[1])
    assert line is not None and line.group(1) == (
        'Chain: <a href="#schedule-ingest">ingest</a> → <strong>transform</strong> → '
        '<a href="#schedule-audit">audit</a>, <a href="#schedule-report">report</a>')
