"""The brief: escaping, derived view, size limit of the Markdown twin, reading from state."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from briefdata import (
    MD_INJECTION,
    RUN_ID,
    SLOT,
    XSS,
    at,
    four_track_run,
    many_track_run,
    payload_run,
)
from markdown_it import MarkdownIt

from orchestrator import brief
from orchestrator.config.models import TrackSpec, When
from orchestrator.errors import InvalidId, NotFound
from orchestrator.state import codec, layout
from orchestrator.state import model as state_model
from orchestrator.state.machine import move_run, move_track
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Track

REPO = Path(__file__).resolve().parents[2]


class Page(HTMLParser):
    """Tags (with attributes) and the text a browser would show."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        if not self.tags or self.tags[-1][0] != "style":
            self.chunks.append(data)

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for t, attrs in self.tags if t == tag]


def markdown_to_html(text: str) -> str:
    """GitHub-like rendering: CommonMark with tables and strike-through, raw HTML allowed
    (the worst case: GitHub sanitises, but the summary must not rely on it)."""
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(
        text)


# --------------------------------------------------------------------------- templates


@pytest.mark.parametrize("name", ["brief.html.j2", "index.html.j2", "brief.md.j2"])
def test_repository_template_is_the_packaged_one(name: str) -> None:
    assert (REPO / "templates" / name).read_bytes() == (brief.DATA / name).read_bytes()


@pytest.mark.parametrize("phase", list(TrackPhase))
def test_every_track_phase_has_a_colour_in_the_brief(phase: TrackPhase) -> None:
    style = (brief.DATA / "brief.html.j2").read_text(encoding="utf-8").split("</style>")[0]
    assert f".p-{phase.value} " in style or f".p-{phase.value}," in style, phase


def test_brief_is_self_contained() -> None:
    page = Page(brief.render_html(four_track_run()))
    assert not page.named("script")
    assert not page.named("img")
    assert [a.get("rel") for a in page.named("link")] == ["icon"]
    assert page.named("link")[0]["href"] == "data:,"
    csp = [m for m in page.named("meta") if m.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in (csp[0]["content"] or "")
    # Every link goes to a track's CI run; nothing is loaded from anywhere.
    hrefs = {a["href"] for a in page.named("a")}
    assert hrefs == {t.url for t in four_track_run().tracks}
    assert page.named("svg")


# --------------------------------------------------------------------------- escaping


def test_html_shows_payloads_as_text() -> None:
    ctx = payload_run()
    html = brief.render_html(ctx)
    page = Page(html)
    assert not page.named("script")
    assert not page.named("img")
    assert all(not k.startswith("on") for _, attrs in page.tags for k in attrs)
    for payload in XSS:
        assert payload in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_html_index_escapes_and_links_terminal_runs_only() -> None:
    done = four_track_run().run
    open_run = many_track_run(3).run.model_copy(
        update={"run_id": "fanout--20261202T0700Z", "slot": SLOT + timedelta(days=1),
                "status": RunStatus.RUNNING, "finished_at": None})
    html = brief.render_index([done, open_run], generated_at=at(60))
    page = Page(html)
    assert [a["href"] for a in page.named("a")] == [f"runs/{RUN_ID}/brief.html"]
    text = page.text
    assert text.index("fanout--20261202T0700Z") < text.index(RUN_ID)  # newest first
    assert "35m 30s" in text  # duration of the finished run
    assert not page.named("script")


def test_unsafe_track_urls_are_not_links() -> None:
    ctx = four_track_run()
    bad = ["javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,<script>",
           "//evil.invalid/x", " https://padded.invalid", "vbscript:x"]
    tracks = [t.model_copy(update={"url": u}) for t, u in zip(ctx.tracks, bad, strict=False)]
    html = brief.render_html(brief.BriefContext(**{**ctx.__dict__, "tracks": tracks}))
    assert Page(html).named("a") == []
    markdown = brief.render_markdown(brief.BriefContext(**{**ctx.__dict__, "tracks": tracks}))
    assert Page(markdown_to_html(markdown)).named("a") == []


@pytest.mark.parametrize("url", ["https://github.com/o/r/actions/runs/1", "http://x.invalid/",
                                 "file:///tmp/log.txt", "logs/ingest-1.log"])
def test_safe_urls_stay(url: str) -> None:
    assert brief.safe_url(url) == url


def test_markdown_shows_payloads_as_text() -> None:
    ctx = payload_run()
    markdown = brief.render_markdown(ctx)
    page = Page(markdown_to_html(markdown))
    allowed = {"h2", "h3", "p", "strong", "em", "code", "table", "thead", "tbody", "tr", "th",
               "td", "ul", "li", "a", "br"}
    assert {t for t, _ in page.tags} <= allowed
    # The only links are the tracks' own CI runs.
    assert {a["href"] for a in page.named("a")} == {t.url for t in ctx.tracks}
    for payload in XSS + MD_INJECTION:
        assert payload in page.text, payload
    # "|" inside a cell did not add cells: every row of the tracks table has six.
    tables = markdown_to_html(markdown).split("<table>")[1:]
    track_table = next(t for t in tables if "<th>Summary</th>" in t)
    for row in track_table.split("<tr>")[1:]:
        assert row.count("<td") + row.count("<th") == 6


def test_md_keeps_one_line_and_caps_with_a_note() -> None:
    assert brief.md("a\nb\r\nc") == "a<br>b<br>c"
    capped = brief.md("x" * 1000, 10)
    assert capped.startswith("x" * 10 + " … (990 more characters")


# --------------------------------------------------------------------------- the view


def test_four_track_run_counts_and_headline() -> None:
    view = brief.build_view(four_track_run())
    c = view.counts
    assert (c.total, c.complete, c.failed, c.tapped_out, c.cancelled, c.open,
            c.dead_letters) == (4, 2, 1, 1, 0, 0, 2)
    assert view.headline.level == "bad"
    assert view.headline.title == "2 of 4 tracks need attention"
    assert view.headline.detail == "1 failed after retrying, 1 tapped out."
    assert view.headline.command == "orchestrator dlq list"
    # Attention first: failed, tapped out, then complete in schedule order.
    assert [r.track.name for r in view.rows] == ["publish", "backfill-2019", "ingest",
                                                 "transform"]
    # The work's own times: the first command started at 07:05:00 (dispatched at
    # 07:04:30), the last ended at 07:36:12 (the run finished at the tick of 07:40).
    assert view.late_by == timedelta(minutes=5)
    assert view.duration == timedelta(minutes=31, seconds=12)
    assert not view.stale


def test_attempts_are_rebuilt_from_history() -> None:
    publish = next(t for t in four_track_run().tracks if t.name == "publish")
    attempts = brief.attempts_of(publish)
    assert [(a.number, a.dispatched, a.started, a.finished, a.outcome) for a in attempts] == [
        (1, at(4.5), at(5.3), at(9.0), "failed"),
        (2, at(11.1), at(11.7), at(16.9), "failed"),
    ]


def test_attempt_from_fields_when_history_is_empty() -> None:
    track = Track(run_id=RUN_ID, name="t", spec=TrackSpec(name="t", run="true"),
                  phase=TrackPhase.RUNNING, dispatched_at=at(1), started_at=at(2))
    [attempt] = brief.attempts_of(track)
    assert (attempt.dispatched, attempt.started, attempt.finished, attempt.outcome) == (
        at(1), at(2), None, "running")


def test_timeline_draws_deadline_slot_and_every_attempt() -> None:
    ctx = four_track_run()
    tl = brief.build_view(ctx).timeline
    assert tl.deadline_x is not None and 900 < tl.deadline_x < 1000
    assert tl.slot_x is not None and tl.slot_x < 50
    publish = next(r for r in tl.rows if r.name == "publish")
    assert [b.kind for b in publish.bars] == ["queued", "failed", "queued", "failed"]
    assert publish.attempts == 2
    bars = [b for r in tl.rows for b in r.bars]
    assert all(b.x >= 0 and b.x + b.width <= 1000.5 for b in bars)
    assert tl.now_x is None  # a finished run has no "now"


def test_far_deadline_is_named_not_drawn() -> None:
    ctx = four_track_run()
    run = ctx.run.model_copy(update={"deadline": at(24 * 60)})
    ctx = brief.BriefContext(**{**ctx.__dict__, "run": run})
    assert brief.build_view(ctx).timeline.deadline_x is None
    assert "beyond the right edge" in Page(brief.render_html(ctx)).text


def test_open_run_with_stale_tick_says_so() -> None:
    ctx = four_track_run()
    spec = TrackSpec(name="late", run="true")
    late = move_track(Track(run_id=RUN_ID, name="late", spec=spec), TrackPhase.DISPATCHED,
                      at(30), dispatched_at=at(30))
    run = move_run(ctx.run.model_copy(update={"status": RunStatus.SCHEDULED,
                                              "state_history": [], "finished_at": None}),
                   RunStatus.RUNNING, at(30))
    ctx = brief.BriefContext(run=run, tracks=[late], dead_letters=[], polls=[],
                             generated_at=at(180), last_tick=at(31))
    view = brief.build_view(ctx)
    assert view.stale and view.last_tick_age == timedelta(minutes=149)
    assert view.headline.level == "warn"
    assert "2h 29m" in view.headline.detail
    assert view.timeline.now_x is not None
    assert "stale" in Page(brief.render_html(ctx)).text
    assert "**stale**" in brief.render_markdown(ctx)
    fresh = brief.BriefContext(**{**ctx.__dict__, "stale_after": timedelta(hours=3)})
    assert not brief.build_view(fresh).stale


def test_no_tick_recorded_is_stale() -> None:
    ctx = brief.BriefContext(**{**four_track_run().__dict__, "last_tick": None})
    view = brief.build_view(ctx)
    assert view.stale and view.last_tick_age is None
    assert "none recorded" in Page(brief.render_html(ctx)).text


def test_all_complete_is_good_news() -> None:
    ctx = many_track_run(12)
    tracks = [t for t in ctx.tracks if t.phase is TrackPhase.COMPLETE]
    ctx = brief.BriefContext(**{**ctx.__dict__, "tracks": tracks, "dead_letters": []})
    view = brief.build_view(ctx)
    assert (view.headline.level, view.headline.title) == ("ok", "All 11 tracks complete")


def test_rendering_is_a_function_of_the_context() -> None:
    ctx = four_track_run()
    assert brief.render_html(ctx) == brief.render_html(ctx)
    assert brief.render_markdown(ctx) == brief.render_markdown(ctx)
    later = brief.BriefContext(**{**ctx.__dict__, "generated_at": at(41)})
    assert brief.render_html(later) != brief.render_html(ctx)


def test_cron_in_words_and_local_slot() -> None:
    view = brief.build_view(four_track_run())
    assert view.cron == "0 2 * * 1-5"
    assert view.slot_local == "2026-12-01 02:00 EST"
    assert view.cron_words == "at 02:00 on Monday through Friday"
    assert brief.describe_cron("not a cron") is None


# --------------------------------------------------------------------------- Markdown size


def test_small_run_markdown_is_whole() -> None:
    markdown = brief.render_markdown(four_track_run())
    assert "Left out" not in markdown
    assert markdown.count("\n| ") >= 4 + 8  # 4 track rows, 8 poll rows


def test_256_tracks_stay_under_one_mib_and_say_what_was_cut() -> None:
    ctx = many_track_run(256, summary_chars=6000, errors_per_track=40, error_chars=4000,
                         polls=2000)
    markdown = brief.render_markdown(ctx)
    size = len(markdown.encode())
    assert size <= brief.MARKDOWN_LIMIT
    # The 1,980 old poll lines made the difference: every track row is still there.
    assert markdown.count("\n| shard-") == 256
    assert markdown.count("\n| 2026-") == 20
    assert "Left out to stay under GitHub's 1 MiB summary limit" in markdown
    assert "1,980 older poll log lines" in markdown
    assert "long texts cut to 160 characters" in markdown
    # Every track that needs attention is still listed.
    failing = [t.name for t in ctx.tracks if t.phase is not TrackPhase.COMPLETE]
    for name in failing:
        assert f"| {brief.md(name)} |" in markdown


def test_tight_limit_cuts_rows_and_counts_them() -> None:
    ctx = many_track_run(256, summary_chars=600, polls=50)
    limit = 40 * 1024
    markdown = brief.render_markdown(ctx, limit_bytes=limit)
    assert len(markdown.encode()) <= limit
    complete = sum(1 for t in ctx.tracks if t.phase is TrackPhase.COMPLETE)
    assert f"{complete:,} complete track rows" in markdown
    shown = markdown.count("\n| shard")
    not_complete = len(ctx.tracks) - complete
    if shown < not_complete:
        assert f"{not_complete - shown:,} track rows" in markdown
    assert "40 KiB" in markdown


# --------------------------------------------------------------------------- reading state


def _files(ctx: brief.BriefContext) -> dict[str, bytes]:
    state = state_model.State(runs={ctx.run.run_id: ctx.run},
                     tracks={ctx.run.run_id: {t.name: t for t in ctx.tracks}},
                     dlq={d.key: d for d in ctx.dead_letters})
    files = state.dump()
    files[layout.polls_path(ctx.run.run_id)] = b"".join(codec.json_line(p) for p in ctx.polls)
    return files


def test_context_from_files_reads_one_run() -> None:
    ctx = four_track_run()
    other = many_track_run(3)
    files = {**_files(ctx), **_files(other)}
    files[layout.TICKS] = (codec.json_line({"at": "2026-12-01T07:30:00Z"})
                       + codec.json_line({"at": "2026-12-01T07:35:00Z", "runs": 1}))
    got = brief.context_from_files(files, RUN_ID, now=at(40))
    assert got.run == ctx.run
    assert got.tracks == ctx.tracks  # in the run's order, finished run included
    assert got.dead_letters == sorted(ctx.dead_letters, key=lambda d: d.track)
    assert got.polls == ctx.polls
    assert got.last_tick == at(35)
    assert got.generated_at == at(40)
    assert brief.context_from_files(files, RUN_ID, now=at(40),
                                    last_tick=at(40)).last_tick == at(40)
    assert brief.render_html(got) == brief.render_html(
        brief.BriefContext(**{**ctx.__dict__, "dead_letters": got.dead_letters,
                              "schedule": None}))


def test_context_from_files_survives_a_bad_poll_line() -> None:
    files = _files(four_track_run())
    files[layout.polls_path(RUN_ID)] += b"{not json\n[1, 2]\n"
    got = brief.context_from_files(files, RUN_ID, now=at(40))
    assert got.polls[-2]["notes"] == ["line 9 of polls.jsonl is not a JSON object"]
    assert got.polls[-1]["notes"] == ["line 10 of polls.jsonl is not a JSON object"]
    assert got.last_tick is None
    assert "line 9 of polls.jsonl" in Page(brief.render_html(got)).text


def test_context_from_files_unknown_or_invalid_run() -> None:
    files = _files(four_track_run())
    with pytest.raises(NotFound, match="no run 'other--20261201T0700Z'"):
        brief.context_from_files(files, "other--20261201T0700Z", now=at(40))
    with pytest.raises(InvalidId):
        brief.context_from_files(files, "../../etc--20261201T0700Z", now=at(40))


def test_polls_written_by_the_tick_show_their_changes() -> None:
    ctx = brief.BriefContext(**{**four_track_run().__dict__, "polls": [
        {"at": "2026-12-01T07:10:00Z", "executor": "github",
         "changes": ["publish: failed -> pending (retry in 60s)"]}]})
    page = Page(brief.render_html(ctx))
    assert "publish: failed -> pending (retry in 60s)" in page.text
    assert "Executor" in page.text and "Observed" not in page.text
    assert "executor=github" not in page.text  # a column of its own, not an extra note


def test_markdown_poll_log_has_no_empty_columns_for_lines_the_tick_writes() -> None:
    # What the tick appends to polls.jsonl: at, executor, changes (no tick, no observed).
    polls = [{"at": f"2026-12-01T07:{m:02d}:00Z", "executor": "github",
              "changes": [f"publish: running -> complete (minute {m})"]} for m in (10, 20)]
    ctx = brief.BriefContext(**{**four_track_run().__dict__, "polls": polls})
    log = brief.render_markdown(ctx).split("### Poll log (newest first)\n\n")[1]
    header, rule, *rows = log.split("\n\n")[0].splitlines()
    assert header == "| At | Executor | Notes |"
    assert rule == "|---|---|---|"
    assert rows == [
        "| 2026-12-01 07:20:00 UTC | github | publish: running -&gt; complete (minute 20) |",
        "| 2026-12-01 07:10:00 UTC | github | publish: running -&gt; complete (minute 10) |"]
    for row in rows:
        assert all(cell.strip() for cell in row.strip("|").split("|"))


def test_markdown_poll_log_shows_tick_and_observed_when_lines_have_them() -> None:
    markdown = brief.render_markdown(four_track_run())
    assert "| At | Tick | Observed | Notes |" in markdown
    log = markdown.split("### Poll log (newest first)\n\n")[1].splitlines()[2:]
    first = log[0].strip("|").split("|")
    assert first[1].strip() and first[2].strip()  # tick and observed are filled in


def test_datetimes_in_polls_are_shown_in_utc() -> None:
    ctx = brief.BriefContext(**{**four_track_run().__dict__, "polls": [
        {"at": "2026-12-01T02:10:00-05:00", "tick": 1}]})
    assert "2026-12-01 07:10:00 UTC" in Page(brief.render_html(ctx)).text


def test_fmt_duration() -> None:
    seconds = (0, 45, 192, 3840, 2 * 86400 + 3 * 3600)
    assert [brief.fmt_duration(timedelta(seconds=s)) for s in seconds] == [
        "0s", "45s", "3m 12s", "1h 04m", "2d 3h"]
    assert brief.fmt_duration(None) == "-"
    assert brief.fmt_when(datetime(2026, 12, 1, 2, 0, tzinfo=UTC)) == "2026-12-01 02:00:00 UTC"


def test_polls_jsonl_round_trip_is_plain_json() -> None:
    # The fixture's poll lines are what the tick writes: JSON objects with "at".
    for poll in four_track_run().polls:
        assert json.loads(codec.json_line(poll))["at"].endswith("Z")


def test_start_reported_without_a_running_phase_is_used() -> None:
    # The local executor may go dispatched -> complete in one tick, with the start time
    # in its observation: the attempt still gets its start and the track a duration,
    # from the command's own times rather than the tick that noticed the end (at 3).
    spec = TrackSpec(name="quick", run="true")
    track = move_track(Track(run_id=RUN_ID, name="quick", spec=spec), TrackPhase.DISPATCHED,
                       at(1), dispatched_at=at(1))
    track = move_track(track, TrackPhase.COMPLETE, at(3), started_at=at(1.5),
                       finished_at=at(2.5))
    [attempt] = brief.attempts_of(track)
    assert (attempt.started, attempt.finished, attempt.outcome) == (
        at(1.5), at(2.5), "complete")
    ctx = brief.BriefContext(**{**four_track_run().__dict__, "tracks": [track],
                                "dead_letters": []})
    [row] = brief.build_view(ctx).rows
    assert row.duration == "1m 00s"


def test_tapped_out_while_waiting_for_a_retry_keeps_the_failed_attempt() -> None:
    spec = TrackSpec(name="flaky", run="false", max_attempts=2)
    track = move_track(Track(run_id=RUN_ID, name="flaky", spec=spec, max_attempts=2),
                       TrackPhase.DISPATCHED, at(1), dispatched_at=at(1))
    track = move_track(track, TrackPhase.FAILED, at(2), finished_at=at(2))
    track = move_track(track, TrackPhase.PENDING, at(2), attempt=2, not_before=at(60))
    track = move_track(track, TrackPhase.TAPPED_OUT, at(50), "run deadline")
    [attempt] = brief.attempts_of(track)
    assert (attempt.number, attempt.finished, attempt.outcome) == (1, at(2), "failed")
    row = brief.build_view(brief.BriefContext(**{**four_track_run().__dict__,
                                                 "tracks": [track]})).timeline.rows[0]
    assert [b.kind for b in row.bars] == ["failed"]


def test_lost_dispatch_redispatched_is_one_attempt() -> None:
    spec = TrackSpec(name="t", run="true")
    track = move_track(Track(run_id=RUN_ID, name="t", spec=spec), TrackPhase.DISPATCHED,
                       at(1), dispatched_at=at(1))
    track = move_track(track, TrackPhase.PENDING, at(12), "no CI run seen: re-dispatch")
    track = move_track(track, TrackPhase.DISPATCHED, at(12), dispatched_at=at(12))
    track = move_track(track, TrackPhase.RUNNING, at(13), started_at=at(13))
    [attempt] = brief.attempts_of(track)
    assert (attempt.number, attempt.dispatched, attempt.started, attempt.outcome) == (
        1, at(12), at(13), "running")


def _polled() -> Track:
    """A poll track: not yet twice (at 2 and 5), then complete at 8."""
    spec = TrackSpec(name="ready", run="check", poll_interval_minutes=1)
    track = move_track(Track(run_id=RUN_ID, name="ready", spec=spec), TrackPhase.DISPATCHED,
                       at(1), dispatched_at=at(1))
    track = move_track(track, TrackPhase.RUNNING, at(1.5), started_at=at(1.5))
    track = move_track(track, TrackPhase.WAITING, at(2), "poll 1: not yet", polls=1,
                       started_at=None)
    track = move_track(track, TrackPhase.DISPATCHED, at(4), dispatched_at=at(4))
    track = move_track(track, TrackPhase.WAITING, at(5), "poll 2: not yet", polls=2)
    track = move_track(track, TrackPhase.DISPATCHED, at(7), dispatched_at=at(7))
    return move_track(track, TrackPhase.COMPLETE, at(8), started_at=at(7.5),
                      finished_at=at(8))


def test_a_poll_track_is_one_attempt_with_a_mark_per_answer() -> None:
    track = _polled()
    [attempt] = brief.attempts_of(track)
    assert (attempt.dispatched, attempt.started, attempt.finished, attempt.outcome) == (
        at(1), at(1.5), at(8), "complete")
    ctx = brief.BriefContext(**{**four_track_run().__dict__, "tracks": [track],
                                "dead_letters": []})
    [row] = brief.build_view(ctx).timeline.rows
    assert [m.title.split(" · ")[1] for m in row.marks] == [
        "poll answered not yet", "poll answered not yet", "poll answered complete"]
    assert [m.x for m in row.marks] == sorted(m.x for m in row.marks)
    assert brief.render_html(ctx).count('class="poll-mark"') == 3


def test_skipped_and_waiting_tracks_are_labelled_and_counted() -> None:
    spec = TrackSpec(name="after", run="true", needs=["x"])
    skipped = move_track(Track(run_id=RUN_ID, name="after", spec=spec), TrackPhase.SKIPPED,
                         at(3), "needs did not complete: x failed")
    waiting = move_track(move_track(_polled().model_copy(update={
        "state_history": [], "phase": TrackPhase.PENDING, "name": "wait"}),
        TrackPhase.DISPATCHED, at(1)), TrackPhase.WAITING, at(2), polls=1)
    ctx = brief.BriefContext(**{**four_track_run().__dict__,
                                "tracks": [*four_track_run().tracks, skipped, waiting]})
    view = brief.build_view(ctx)
    labels = {r.track.name: r.phase_label for r in view.rows}
    assert (labels["after"], labels["wait"]) == ("skipped", "waiting to poll")
    assert (view.counts.skipped, view.counts.open) == (1, 1)
    assert "1 skipped" in view.headline.detail
    assert next(r for r in view.timeline.rows if r.name == "after").note == "skipped"
    page = Page(brief.render_html(ctx))
    assert "skipped" in page.text
    assert "| Skipped |" in brief.render_markdown(ctx)


def test_the_consolidate_step_heads_the_brief() -> None:
    base = four_track_run()
    spec = TrackSpec(name="consolidate", run="merge", when=When.ALWAYS,
                     needs=[t.name for t in base.tracks])
    step = move_track(move_track(Track(run_id=RUN_ID, name="consolidate", spec=spec),
                                 TrackPhase.DISPATCHED, at(30)), TrackPhase.COMPLETE, at(31),
                      result={"summary": "merged 2 of 4 outputs"})
    ctx = brief.BriefContext(**{**base.__dict__, "tracks": [*base.tracks, step]})
    view = brief.build_view(ctx)
    assert view.consolidation is not None and view.consolidation.summary == (
        "merged 2 of 4 outputs")
    page = Page(brief.render_html(ctx)).text
    assert page.index("merged 2 of 4 outputs") < page.index("need attention")
    md = brief.render_markdown(ctx)
    assert md.index("**Consolidation: complete**: merged 2 of 4 outputs") < md.index("| Failed")
    # a track merely named so, without the step's shape, is an ordinary track
    plain = step.model_copy(update={"spec": TrackSpec(name="consolidate", run="merge")})
    assert brief.build_view(brief.BriefContext(**{**base.__dict__, "tracks": [
        *base.tracks, plain]})).consolidation is None


# --------------------------------------------------------------------------- sandbox

@pytest.mark.parametrize("url", ["/\\evil.com", "\\\\evil.com/x", "\\/evil.com", "//evil.com",
                                 "javascript:alert(1)", " https://x.invalid/", "c:\\x"])
def test_unsafe_urls_go(url: str) -> None:
    assert brief.safe_url(url) is None


@pytest.mark.parametrize("name", ["", "[]", "America", "x" * 10_000, "UTC\x00"],
                         ids=["empty", "brackets", "a-folder", "10kB", "null-byte"])
def test_a_zone_the_brief_cannot_load_is_shown_in_utc(name: str) -> None:
    from orchestrator.brief.text import zone

    assert zone(name).key == "UTC"
    assert zone("Asia/Kolkata").key == "Asia/Kolkata"
