"""The badges in a real browser (Debian's chromium, headless): each loads alone, asks
for nothing else, and draws its text inside its own box."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser

from orchestrator.api import badges
from tests.integration.test_brief_browser import Visit, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

CASES = [("nightly", "completed 3h ago", "completed"), ("a" * 64, "failing x12", "failed"),
         ("weekly", "paused", "paused"), ("schedules", "1000 passing", "completed")]


@pytest.mark.parametrize(("label", "message", "key"), CASES)
def test_a_badge_draws_its_text_inside_its_box(browser: Browser, tmp_path: Path,  # noqa: F811
                                              label: str, message: str, key: str) -> None:
    path = tmp_path / "badge.svg"
    path.write_text(badges.svg(label, message, badges.COLOURS[key]), encoding="utf-8")
    visit = Visit(browser, path, 800)
    try:
        assert visit.requests == [visit.url] and visit.console == []
        drawn = visit.js("""[...document.querySelectorAll('text')].map((t, i) => {
            const box = t.getBBox(), rect = document.querySelectorAll('rect')[i];
            const left = rect.x.baseVal.value, right = left + rect.width.baseVal.value;
            return [t.textContent, box.width > 0, box.x >= left, box.x + box.width <= right];
        })""")
        assert drawn == [[label, True, True, True], [message, True, True, True]]
        assert visit.js("document.querySelector('title').textContent") == f"{label}: {message}"
    finally:
        visit.close()
