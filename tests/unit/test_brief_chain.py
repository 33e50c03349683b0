"""The brief along a chain: a run links to the upstream runs that fired it and to the
runs it fired, in HTML and Markdown; a run fired by an event or a queue says so."""

from __future__ import annotations

from dataclasses import replace

from briefdata import RUN_ID, SLOT, XSS, at, four_track_run
from builders import schedule_spec

from orchestrator import brief
from orchestrator.state.layout import after_run_id, event_run_id, queue_run_id
from orchestrator.state.model import State
from orchestrator.state.records import Run
from tests.unit.test_brief import Page, markdown_to_html

UP = RUN_ID
DOWN = after_run_id("report", SLOT, [UP])
OTHER = after_run_id("report", SLOT, ["nightly-refresh--20261130T0700Z"])


def run(run_id: str, **fields: object) -> Run:
    base = four_track_run().run
    return base.model_copy(update={"run_id": run_id, "schedule_id": run_id.partition("--")[0],
                                   **fields})


def branch(*runs: Run) -> dict[str, bytes]:
    return State(runs={r.run_id: r for r in runs}).dump()


def hrefs(html: str) -> list[str | None]:
    return [a.get("href") for a in Page(html).named("a")]


def test_an_upstream_run_s_brief_links_to_the_runs_it_fired_and_back() -> None:
    files = branch(run(UP), run(DOWN, origin="after", upstream=[UP]),
                   run(OTHER, origin="after", upstream=["nightly-refresh--20261130T0700Z"]))
    up = brief.context_from_files(files, UP, now=at(40))
    assert up.downstream == (DOWN,)
    assert f"../{DOWN}/brief.html" in hrefs(brief.render_html(up))
    # the Markdown goes to job summaries and issues, where a relative link would break
    assert f"**Fired in turn** `{DOWN}`" in brief.render_markdown(up)

    down = brief.context_from_files(files, DOWN, now=at(40))
    html = brief.render_html(down)
    assert f"../{UP}/brief.html" in hrefs(html)
    assert f"Fired after {UP}" in Page(html).text
    assert f"**Fired after** `{UP}`" in brief.render_markdown(down)


def test_a_name_that_is_no_run_id_is_shown_as_text_and_never_linked() -> None:
    ctx = four_track_run()
    names = ["../../index", *XSS]
    ctx = replace(ctx, run=ctx.run.model_copy(update={"origin": "after", "upstream": names}))
    html = brief.render_html(ctx)
    assert all(h is None or not h.endswith("/brief.html") for h in hrefs(html))
    assert not Page(html).named("script")
    shown = Page(markdown_to_html(brief.render_markdown(ctx)))
    assert not shown.named("script") and not shown.named("img")


def test_a_run_fired_by_an_event_or_a_queue_says_so_in_one_line() -> None:
    ctx = four_track_run()
    event = ctx.run.model_copy(update={"run_id": event_run_id("nightly-refresh", SLOT,
                                                              "e884953412"),
                                       "origin": "event", "event_id": "deploy-1842"})
    line = "Fired by event 'deploy-1842' (hash e884953412)"
    assert line in Page(brief.render_html(replace(ctx, run=event))).text
    assert line in brief.render_markdown(replace(ctx, run=event))

    queued = ctx.run.model_copy(update={"run_id": queue_run_id("nightly-refresh", SLOT, 100),
                                        "origin": "queue"})
    drains = schedule_spec(None, on_queue={"queue": "jobs", "min_ready": 100},
                           tracks=[{"name": "work", "run": "true", "drain": {"queue": "jobs"}}])
    text = Page(brief.render_html(replace(ctx, run=queued, schedule=drains))).text
    assert "Fired by queue jobs, when it had taken 100 items in all" in text
    text = Page(brief.render_html(replace(ctx, run=queued, schedule=None))).text
    assert "Fired by its queue, when it had taken 100 items in all" in text
