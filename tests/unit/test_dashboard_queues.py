"""The dashboard's queue section and its small things: queues drawn from their summaries
alone, one time format, dead letters grouped, no percentage between sub-second medians."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from orchestrator import brief
from orchestrator.brief import dashboard, queueboard
from orchestrator.config.models import TrackSpec
from orchestrator.config.policies import Pause
from orchestrator.state import codec, layout
from orchestrator.state.phases import RunStatus
from orchestrator.state.queueformat import QueueSummary
from orchestrator.state.records import Cursor, DeadLetter, Run
from tests.builders import run_files, schedule

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
NOW = datetime(2026, 12, 4, 8, 0, tzinfo=UTC)
TICK = {layout.TICKS: codec.json_line({"at": "2026-12-04T07:55:00Z", "executor": "local"})}


def summary(name: str, **fields: object) -> dict[str, bytes]:
    return {layout.queue_summary_path(name): codec.to_json(
        QueueSummary.model_validate_json(json.dumps({"queue": name, **fields})))}


def pages() -> dict[str, bytes]:
    """Queue ``pages``: 3 ready, 1 to retry, 2 claimed, 2 dead (one discarded), 1,024
    done: 1,012 yesterday in two chunks, 5 four days ago, 7 a month ago."""
    at = "2026-12-03T10:00:00Z"
    return summary(
        "pages", next_seq=1032,
        counts={"ready": 3, "failed": 1, "claimed": 2, "dead": 2, "done": 1024},
        claims={"pages--20261204T0700Z--w1--0": {"run_id": "pages--20261204T0700Z",
                                                 "until": at, "items": ["a", "b"]}},
        dead={"x": {"reason": "failed 3 times", "at": at},
              "y": {"reason": "failed 3 times", "at": at, "discarded": True}},
        done={"20261203-0000": 1000, "20261203-0001": 12, "20261130-0000": 5,
              "20261101-0000": 7})


def test_each_queue_shows_backlog_in_flight_dead_done_and_a_chart_of_days() -> None:
    board = dashboard.from_files({**TICK, **pages()}, [schedule("nightly")], [], NOW)
    (row,) = board.queues
    assert (row.name, row.backlog, row.in_flight, row.dead, row.done) == (
        "pages", 4, 2, 1, 1024)
    days = {b.day: b.done for b in row.bars}
    assert len(days) == queueboard.THROUGHPUT_DAYS
    assert min(days) == "2026-11-21" and max(days) == "2026-12-04"
    assert (days["2026-12-03"], days["2026-11-30"], days["2026-12-04"]) == (1012, 5, 0)
    assert sum(days.values()) == 1017  # a month ago is outside the chart
    html = brief.render_index([], generated_at=NOW, board=board)
    section = html[html.index('id="queues"'):html.index('id="schedules"')]
    cells = re.findall(r'<td class="num[^"]*"[^>]*>(\d+)</td>', section)
    assert cells == ["4", "2", "1", "1024"]
    svg = section[section.index("<svg"):section.index("</svg>")]
    assert 'role="img"' in svg
    assert 'aria-label="1017 done in the last 14 days, oldest first: ' in svg
    assert "<title>2026-12-03: 1012 done</title>" in svg
    assert svg.count("<rect") == 2  # the days with none draw no bar
    assert section.count("1017 in 14 days") == 1
    assert "http" not in svg and "href" not in svg


def test_the_queue_section_reads_summaries_only_at_100000_items() -> None:
    """100,000 done over 100 chunks and 1,000 dead entries: nothing under a queue's
    folder is asked for, and the section stays a few rows."""
    done = {f"202612{d:02d}-{n:04d}": 1000 for d in range(1, 5) for n in range(25)}
    dead = {f"i{n:05d}": {"reason": "failed", "at": "2026-12-03T10:00:00Z"}
            for n in range(1000)}
    files = {**TICK, **summary("big", next_seq=101_000,
                               counts={"done": 100_000, "dead": 1000}, done=done, dead=dead)}
    asked: list[str] = []

    class Counting(dict[str, bytes]):
        def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
            asked.append(key)
            return super().get(key, default)

    board = dashboard.from_files(Counting(files), [], [], NOW)
    assert not [k for k in asked if k.startswith(layout.queue_dir("big") + "/")]
    (row,) = board.queues
    assert (row.done, row.dead, row.bars[-1].done) == (100_000, 1000, 25_000)
    html = brief.render_index([], generated_at=NOW, board=board)
    assert len(html) < 100_000


def test_every_instant_on_the_page_has_one_format_without_microseconds() -> None:
    paused_at = datetime(2026, 12, 2, 9, 30, 15, 123456, tzinfo=UTC)
    files = {layout.TICKS: codec.json_line({"at": "2026-12-04T07:55:47Z",
                                            "executor": "local"}),
             layout.cursor_path("nightly"): codec.to_json(Cursor(
                 schedule_id="nightly", since=T0,
                 paused=Pause(by="alice", at=paused_at, reason="vendor down")))}
    board = dashboard.from_files(files, [schedule("nightly")], [], NOW)
    html = brief.render_index([], generated_at=NOW, board=board)
    assert ("Last tick 2026-12-04 07:55:47 UTC · generated 2026-12-04 08:00:00 UTC"
            in html)
    assert "since 2026-12-02 09:30:15 UTC by alice" in board.cards[0].note
    assert "nightly is paused since 2026-12-02 09:30:15 UTC by alice" in html
    assert "123456" not in html
    assert not re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}", html)


def timed_run(slot: datetime, seconds: float) -> dict[str, bytes]:
    run_id = f"nightly--{slot:%Y%m%dT%H%MZ}"
    files = run_files(run_id, RunStatus.COMPLETED, slot + timedelta(minutes=1))
    run = codec.parse_record(Run, layout.run_path(run_id), files[layout.run_path(run_id)])
    files[layout.run_path(run_id)] = codec.to_json(run.model_copy(update={
        "work_started_at": slot, "work_finished_at": slot + timedelta(seconds=seconds)}))
    return files


def trend(*seconds: float) -> str:
    files = dict(TICK)
    for day, secs in enumerate(seconds):
        files.update(timed_run(T0 + timedelta(days=day), secs))
    return dashboard.from_files(files, [schedule("nightly")], [], NOW).cards[0].trend


def test_a_change_between_sub_second_medians_gives_no_percentage() -> None:
    assert trend(0.5, 0.35) == "median 0s lately, 0s before"
    assert trend(0.5, 40) == "median 40s lately, 0s before"
    assert trend(20, 30) == "median 30s lately, 20s before (+50%)"


def dead_letters(count: int) -> dict[str, bytes]:
    """``count`` dead tracks of ``nightly``, over its last three runs."""
    files = {}
    for n in range(count):
        run_id = f"nightly--{T0 + timedelta(days=n % 3):%Y%m%dT%H%MZ}"
        letter = DeadLetter(key=f"{run_id}--t{n:02d}", run_id=run_id, track=f"t{n:02d}",
                            reason="failed", parked_at=T0, attempts=1,
                            payload=TrackSpec(name=f"t{n:02d}", run="true"))
        files[layout.dlq_path(letter.key)] = codec.to_json(letter)
    return files


def test_dead_letters_are_grouped_by_schedule_and_queue_folded_on_the_page() -> None:
    files = {**TICK, **pages(), **dead_letters(30)}
    board = dashboard.from_files(files, [schedule("nightly")], [], NOW)
    groups = [(g.kind, g.name, g.count, len(g.items)) for g in board.dead_groups]
    # the report names the first 20 keys; the groups count every one
    assert groups == [("schedule", "nightly", 30, 20), ("queue", "pages", 1, 0)]
    assert board.dead_groups[0].command == "orchestrator dlq requeue --schedule nightly"
    html = brief.render_index([], generated_at=NOW, board=board)
    attention = html[html.index('id="attention"'):html.index("</section>")]
    assert attention.count('<li class="a-dead_letter">') == 2
    assert attention.count("<details>") == 2 and "<details open" not in attention
    summaries = re.findall(r"<summary>(.*?)</summary>", attention)
    assert summaries[0].startswith("30 dead letters of schedule <code>nightly</code> wait")
    assert summaries[1].startswith("1 dead letter of queue <code>pages</code> waits")
    folded = attention[attention.index("<details>"):attention.index("</details>")]
    assert folded.count("waits for a decision") == 20
    assert "10 more: <code>orchestrator dlq list</code>" in folded


def test_a_lone_dead_letter_is_named_with_its_own_command_not_folded() -> None:
    board = dashboard.from_files({**TICK, **dead_letters(1)}, [schedule("nightly")], [], NOW)
    html = brief.render_index([], generated_at=NOW, board=board)
    attention = html[html.index('id="attention"'):html.index("</section>")]
    assert "<details>" not in attention
    assert ("dead letter nightly--20261201T0700Z--t00 waits for a decision: "
            "<code>orchestrator dlq requeue nightly--20261201T0700Z--t00</code>") in attention


def test_a_card_says_when_a_schedule_fires_by_cron_instant_or_chain() -> None:
    from orchestrator.brief.dashboard import _when
    from orchestrator.config.models import ScheduleSpec

    track = [{"name": "a", "run": "true"}]
    after = ScheduleSpec.model_validate({"after": {"schedule": "ingest"}, "tracks": track})
    assert "None" not in _when(after) and "ingest" in _when(after)
    cron = ScheduleSpec.model_validate({"cron": "7 2 * * *", "tracks": track})
    assert _when(cron) == "7 2 * * * (UTC)"
