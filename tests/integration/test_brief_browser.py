"""The brief in a real browser: Debian's chromium, headless, driven by playwright.

Nothing may leave the page (every request but the page itself is refused and counted),
the console stays clean, the timeline and the table are visible, and the layout never
scrolls sideways on a laptop (1280 px) or a phone (390 px); on a phone no table scrolls
sideways in its box either. Screenshots land in the test's temporary folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from briefdata import XSS, at, four_track_run, many_track_run
from playwright.sync_api import Browser, Page, Route, sync_playwright

from orchestrator import brief

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDTHS = (1280, 390)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        # CI installs it (.ci/run), and there its absence is a failure; on a machine
        # without Debian's chromium the rest of the suite still runs.
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is missing: .ci/run installs it")
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


class Visit:
    """One page load with every request, console message and dialog recorded."""

    def __init__(self, browser: Browser, path: Path, width: int, *, dark: bool = False):
        self.url = path.as_uri()
        self.context = browser.new_context(viewport={"width": width, "height": 900},
                                           color_scheme="dark" if dark else "light")
        self.page: Page = self.context.new_page()
        self.requests: list[str] = []
        self.refused: list[str] = []
        self.console: list[str] = []
        self.dialogs: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.console.append(f"pageerror: {e}"))
        self.page.on("dialog", self._dialog)
        self.page.goto(self.url, wait_until="load")

    def _route(self, route: Route) -> None:
        url = route.request.url
        self.requests.append(url)
        if url == self.url:
            route.continue_()
        else:
            self.refused.append(url)
            route.abort()

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def js(self, expression: str) -> Any:
        return self.page.evaluate(expression)

    def overflow(self) -> tuple[int, int]:
        return self.js("[document.documentElement.scrollWidth, window.innerWidth]")

    def sideways(self) -> list[str]:
        """Boxes whose content is wider than they are (the page scrolls, or they do)."""
        return self.js("[...document.querySelectorAll('.scroll, table')]"
                       ".filter(e => e.scrollWidth > e.clientWidth + 1)"
                       ".map(e => e.tagName + '.' + e.className)")

    def close(self) -> None:
        self.context.close()


def _write(tmp_path: Path, name: str, html: str) -> Path:
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    return path


@pytest.mark.parametrize("width", WIDTHS)
def test_brief_of_a_four_track_run(browser: Browser, tmp_path: Path, width: int) -> None:
    path = _write(tmp_path, "brief.html", brief.render_html(four_track_run()))
    visit = Visit(browser, path, width)
    try:
        assert visit.requests == [visit.url]
        assert visit.refused == []
        assert visit.console == []
        scroll_width, inner_width = visit.overflow()
        assert scroll_width <= inner_width, f"page scrolls sideways at {width}px"

        page = visit.page
        assert page.locator("#timeline svg").is_visible()
        assert page.locator("#timeline .tl-label").count() == 4
        # Five attempts (publish ran twice), each a queued and a running bar.
        assert page.locator("#timeline svg rect[class^='b-']").count() == 10
        assert page.locator("#timeline svg line.deadline").count() == 1
        assert page.locator("table.tracks").is_visible()
        assert page.locator("table.tracks tbody tr").count() == 4
        assert page.locator(".headline").inner_text().startswith("2 of 4 tracks need attention")
        counts = page.locator(".counts .count .n").all_inner_texts()
        assert counts[:3] == ["1", "1", "2"]  # failed, tapped out, dead letters come first
        # Wide tables scroll inside their own box, never the page (on a phone the
        # tracks table and the poll log turn into cards).
        for box_selector in ("#tracks .scroll", "#polls .scroll"):
            box = page.locator(box_selector).bounding_box()
            assert box is not None and box["x"] + box["width"] <= width
        # At 390 px the poll log stacks like the tracks table: no box scrolls sideways.
        assert visit.sideways() == []
        assert page.locator("#polls table.polls tbody tr").count() == 8
        assert page.locator("#polls td.observed").first.is_visible()
        page.screenshot(path=str(tmp_path / f"brief-{width}.png"), full_page=True)
    finally:
        visit.close()
    assert (tmp_path / f"brief-{width}.png").stat().st_size > 10_000


def test_dark_mode_at_phone_width(browser: Browser, tmp_path: Path) -> None:
    path = _write(tmp_path, "brief.html", brief.render_html(four_track_run()))
    visit = Visit(browser, path, 390, dark=True)
    try:
        background = visit.js("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(13, 17, 23)"
        assert visit.console == [] and visit.refused == []
        assert visit.overflow()[0] <= 390
        visit.page.screenshot(path=str(tmp_path / "brief-390-dark.png"), full_page=True)
    finally:
        visit.close()


def test_hostile_text_stays_text_in_the_browser(browser: Browser, tmp_path: Path) -> None:
    ctx = four_track_run(summaries={"ingest": XSS[0], "transform": XSS[1],
                                    "publish": XSS[2]}, errors=XSS)
    path = _write(tmp_path, "hostile.html", brief.render_html(ctx))
    visit = Visit(browser, path, 390)
    try:
        assert visit.dialogs == []
        assert visit.refused == []  # the <img src=x> never became a request
        assert visit.console == []
        assert visit.js("document.querySelectorAll('script, img, iframe').length") == 0
        cells = visit.page.locator("table.tracks .summary").all_inner_texts()
        assert set(XSS) <= set(cells)
        assert visit.overflow()[0] <= 390
    finally:
        visit.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_polls_the_tick_writes_at_phone_width(browser: Browser, tmp_path: Path,
                                              width: int) -> None:
    polls = [{"at": f"2026-12-01T07:{m:02d}:00Z", "executor": "github",
              "changes": ["publish-the-very-long-track-name-" * 3 + ": running -> complete"]}
             for m in range(10, 40, 5)]
    ctx = brief.BriefContext(**{**four_track_run().__dict__, "polls": polls})
    path = _write(tmp_path, "polls.html", brief.render_html(ctx))
    visit = Visit(browser, path, width)
    try:
        assert visit.overflow()[0] <= width and visit.sideways() == []
        assert visit.page.locator("#polls td.executor").all_inner_texts()[0].endswith("github")
    finally:
        visit.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_index_of_runs(browser: Browser, tmp_path: Path, width: int) -> None:
    first = four_track_run().run
    runs = [first, first.model_copy(update={
        "run_id": "a-schedule-with-a-rather-long-name--20261130T0700Z",
        "schedule_id": "a-schedule-with-a-rather-long-name", "slot": at(-1440)})]
    path = _write(tmp_path, "index.html", brief.render_index(runs, generated_at=at(60)))
    visit = Visit(browser, path, width)
    try:
        assert visit.console == [] and visit.refused == []
        assert visit.overflow()[0] <= width
        if width == 390:  # one card per run: not even the table's box scrolls sideways
            assert visit.sideways() == []
        assert visit.page.locator("table a").all_inner_texts() == [r.run_id for r in runs]
        visit.page.screenshot(path=str(tmp_path / f"index-{width}.png"), full_page=True)
    finally:
        visit.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_brief_of_a_256_track_run_with_long_names_and_errors(browser: Browser, tmp_path: Path,
                                                              width: int) -> None:
    """GitHub's largest matrix: the timeline, the tracks and the poll log of 256 tracks
    (every poll line observes them all) keep to the screen's width."""
    ctx = many_track_run(256, summary_chars=400, errors_per_track=3, error_chars=300)
    path = _write(tmp_path, "brief-256.html", brief.render_html(ctx))
    visit = Visit(browser, path, width)
    try:
        assert visit.console == [] and visit.refused == []
        assert visit.overflow()[0] <= width, f"page scrolls sideways at {width}px"
        if width == 390:
            assert visit.sideways() == []
        assert visit.page.locator("table.tracks tbody tr").count() == 256
        visit.page.screenshot(path=str(tmp_path / f"brief-256-{width}.png"))
    finally:
        visit.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_index_of_256_runs(browser: Browser, tmp_path: Path, width: int) -> None:
    """The page of runs once many have finished: one row (a card on a phone) each."""
    first = four_track_run().run
    runs = [first.model_copy(update={
        "run_id": f"a-schedule-with-a-rather-long-name-{i:03d}--20261130T0700Z",
        "schedule_id": f"a-schedule-with-a-rather-long-name-{i:03d}",
        "description": "a description that goes on " * 8, "slot": at(-i)})
        for i in range(256)]
    path = _write(tmp_path, "index-256.html", brief.render_index(runs, generated_at=at(60)))
    visit = Visit(browser, path, width)
    try:
        assert visit.console == [] and visit.refused == []
        assert visit.overflow()[0] <= width, f"the index scrolls sideways at {width}px"
        if width == 390:
            assert visit.sideways() == []
        assert visit.page.locator("table a").count() == 256
    finally:
        visit.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_brief_of_a_drain_of_10000_items(browser: Browser, tmp_path: Path, width: int) -> None:
    """A drain track's one rolled-up section (10 workers, 10,000 items, 200 failed) keeps
    to the screen's width, as the tick renders it from the state it committed."""
    from datetime import timedelta

    from orchestrator.state import layout
    from orchestrator.state.items import NewItem
    from orchestrator.store import InMemoryStateStore
    from tests.memory_executor import MemoryExecutor
    from tests.memory_tick import MemoryShell
    from tests.unit.test_drain import RUN, T0, drain_schedule, enqueue, finish

    shell = MemoryShell(InMemoryStateStore(), MemoryExecutor(),
                        [drain_schedule(task_cap=1000, max_workers=10, max_attempts=3)])
    enqueue(shell, [NewItem(payload={"url": f"https://example.org/{n}"}, key=f"k{n}")
                    for n in range(10_000)])
    shell.run(T0)
    finish(shell, T0 + timedelta(minutes=1), lambda _, n: "failed" if n % 50 == 0 else "done")
    shell.run(T0 + timedelta(minutes=2))
    html = shell.files[layout.brief_path(RUN)].decode()
    assert "9800 drained, 200 failed" in html
    visit = Visit(browser, _write(tmp_path, "brief-drain.html", html), width)
    try:
        assert visit.console == [] and visit.refused == []
        assert visit.overflow()[0] <= width, f"page scrolls sideways at {width}px"
        if width == 390:
            assert visit.sideways() == []
    finally:
        visit.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_drain_s_dead_item_is_on_the_first_screen_with_its_command(
        browser: Browser, tmp_path: Path, width: int) -> None:
    """The brief's attention-first promise where a backlog fails: the headline, on the
    first screen at either width, says one item died and how to requeue it."""
    from datetime import timedelta

    from orchestrator.state import layout
    from orchestrator.state.items import NewItem
    from orchestrator.store import InMemoryStateStore
    from tests.memory_executor import MemoryExecutor
    from tests.memory_tick import MemoryShell
    from tests.unit.test_drain import RUN, T0, drain_schedule, enqueue, finish

    shell = MemoryShell(InMemoryStateStore(), MemoryExecutor(),
                        [drain_schedule(task_cap=5, max_workers=1, max_attempts=1)])
    enqueue(shell, [NewItem(payload=n, key=f"k{n}") for n in range(2)])
    shell.run(T0)
    finish(shell, T0 + timedelta(minutes=1), lambda _, n: "failed" if n == 0 else "done")
    shell.run(T0 + timedelta(minutes=2))
    html = shell.files[layout.brief_path(RUN)].decode()
    visit = Visit(browser, _write(tmp_path, "brief-dead-item.html", html), width)
    try:
        assert visit.console == [] and visit.refused == []
        headline = visit.page.locator(".headline")
        text = headline.inner_text()
        assert "1 dead item of queue pages" in text
        assert "orchestrator dlq requeue --queue pages" in text
        box = headline.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 900, box  # first screen
        assert visit.page.locator(".counts .c-dlq .n").inner_text() == "1"
    finally:
        visit.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_dashboard_at_laptop_and_phone_width(browser: Browser, tmp_path: Path,
                                             width: int) -> None:
    """The index as a dashboard: what needs attention is the first thing on screen,
    the hostile schedule name and pause reason stay text, nothing scrolls sideways."""
    from orchestrator.brief import dashboard
    from orchestrator.state.history import page_runs
    from tests.unit.test_dashboard import INVALID, NOW, SCHEDULES, snapshot_files

    files = snapshot_files()
    runs, older = page_runs(files, {})
    board = dashboard.from_files(files, SCHEDULES, INVALID, NOW)
    path = _write(tmp_path, "index.html", brief.render_index(
        list(runs.values()), generated_at=NOW, board=board, older=older))
    visit = Visit(browser, path, width)
    try:
        assert visit.requests == [visit.url] and visit.refused == []
        assert visit.console == [] and visit.dialogs == []
        assert visit.js("document.querySelectorAll('script, img, iframe').length") == 0
        assert visit.overflow()[0] <= width, f"page scrolls sideways at {width}px"
        if width == 390:
            assert visit.sideways() == []
        page = visit.page
        attention = page.locator("#attention")
        assert attention.is_visible()
        box = attention.bounding_box()
        assert box is not None and box["y"] < 300  # on screen without scrolling
        first = visit.js("document.querySelector('main > section, main > .card').id")
        assert first == "attention"
        items = page.locator("#attention > ul > li").all_inner_texts()
        assert len(items) == 4 and any('<script>alert("x")</script>' in i for i in items)
        assert page.locator("#schedules .sched").count() == 4
        strip = page.locator("#schedules .strip a")
        assert strip.count() == 3  # nightly's three finished runs link to their briefs
        assert strip.first.get_attribute("href") == "runs/nightly--20261201T0700Z/brief.html"
        assert page.locator("#schedules svg.spark").count() == 1
        for card in page.locator("#schedules .sched").all():
            card_box = card.bounding_box()
            assert card_box is not None and card_box["x"] + card_box["width"] <= width
        page.screenshot(path=str(tmp_path / f"dashboard-{width}.png"), full_page=True)
    finally:
        visit.close()
    assert (tmp_path / f"dashboard-{width}.png").stat().st_size > 10_000


def test_dashboard_of_many_dead_letters_and_a_queue_at_phone_width(browser: Browser,
                                                                   tmp_path: Path) -> None:
    """30 dead letters fold into one line of their schedule: the first screen of a phone
    still reaches the queue section, whose chart keeps to the screen's width."""
    from orchestrator.brief import dashboard
    from tests.builders import schedule
    from tests.unit.test_dashboard_queues import NOW, TICK, dead_letters, pages

    files = {**TICK, **pages(), **dead_letters(30)}
    board = dashboard.from_files(files, [schedule("nightly")], [], NOW)
    path = _write(tmp_path, "index.html", brief.render_index([], generated_at=NOW,
                                                             board=board))
    visit = Visit(browser, path, 390)
    try:
        assert visit.console == [] and visit.refused == []
        assert visit.overflow()[0] <= 390 and visit.sideways() == []
        page = visit.page
        assert page.locator("#attention details").count() == 2
        assert not page.locator("#attention details li").first.is_visible()  # folded
        chart = page.locator("#queues svg.bars")
        box = chart.bounding_box()
        assert box is not None and box["y"] + box["height"] < 900  # on the first screen
        assert box["x"] + box["width"] <= 390
        assert chart.get_attribute("aria-label").startswith("1017 done")
        page.screenshot(path=str(tmp_path / "dashboard-dead-390.png"), full_page=True)
    finally:
        visit.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_dashboard_s_cron_lateness_at_laptop_and_phone_width(browser: Browser, tmp_path: Path,
                                                             width: int) -> None:
    """The cron lateness chart draws inside the screen, its table does not scroll
    sideways, and a screen reader finds the chart by its title."""
    from orchestrator.brief import dashboard
    from orchestrator.state import layout
    from tests.unit.test_dashboard import INVALID, NOW, SCHEDULES, snapshot_files
    from tests.unit.test_dashboard_lateness import ledger

    files = {**snapshot_files(), layout.LATENESS: ledger()}
    board = dashboard.from_files(files, SCHEDULES, INVALID, NOW, max_lateness_minutes=60)
    assert board.lateness is not None
    path = _write(tmp_path, "index.html", brief.render_index([], generated_at=NOW,
                                                             board=board))
    visit = Visit(browser, path, width, dark=width == 390)
    try:
        assert visit.requests == [visit.url] and visit.refused == []
        assert visit.console == [] and visit.dialogs == []
        assert visit.overflow()[0] <= width, f"page scrolls sideways at {width}px"
        assert visit.sideways() == []
        page = visit.page
        chart = page.get_by_role("img", name="GitHub's cron lateness per week")
        assert chart.count() == 1 and chart.is_visible()
        box = chart.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width and box["height"] > 50
        assert page.locator("#lateness svg rect.l-p95").count() == len(board.lateness.weeks)
        rows = page.locator("#lateness tbody tr").all_inner_texts()
        assert rows[0].split() == ["Nov", "27", "3", "3h", "00m", "5h", "00m", "5h", "00m",
                                   "1"]
        page.locator("#lateness").screenshot(path=str(tmp_path / f"lateness-{width}.png"))
    finally:
        visit.close()
    assert (tmp_path / f"lateness-{width}.png").stat().st_size > 2_000
