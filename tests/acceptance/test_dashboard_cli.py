"""The dashboard a person opens in the morning: ``state/index.html`` as the tick writes
it, and ``orchestrator render --index`` writing it locally with links that work from
the file. Only the installed CLI and git, as subprocesses."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from tests.acceptance.cliuser import User

XSS = "<script>alert(1)</script>"


def test_render_index_writes_the_dashboard_with_working_links_and_agrees_with_status(
        scaffolded: tuple[User, Path]) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    user.run("schedules", "add", "hourly", "--cron", "0 * * * *", "--track", "c=false")
    user.run("schedules", "add", "daily", "--cron", "30 2 * * *", "--timezone",
             "Europe/Berlin", "--track", "t=true")
    for minute in ("01", "02", "03"):
        user.tick(f"2026-12-01T07:{minute}:00Z")
    # the page the tick committed leads with what needs attention, and shows every
    # schedule (also one the tick's memo left unparsed as quiet)
    committed = user.state_file("state/index.html")
    assert committed.index("Needs attention") < committed.index("Schedules")
    assert "orchestrator dlq requeue hourly--20261201T0700Z--c" in committed
    assert "<h2>daily</h2>" in committed and "<h2>hourly</h2>" in committed
    assert "Next: Wed 2026-12-02 02:30 CET" in committed  # in its own zone

    user.run("schedules", "pause", "daily", "--reason", XSS, "--by", "alice",
             "--now", "2026-12-01T07:04:00Z")
    paused = user.state_file("state/index.html")  # the pause redraws the page
    assert "by alice" in paused and XSS not in paused
    (user.cwd / "schedules" / "broken.json").write_text('{"cron": "61 * * * *"}')

    now = "2026-12-01T07:05:00Z"
    out = user.run("render", "--index", "--now", now).stdout.strip()
    page = Path(out) if Path(out).is_absolute() else user.cwd / out
    assert page == user.cwd / ".orchestrator" / "site" / "index.html"
    text = page.read_text()
    assert XSS not in text and html.escape(XSS, quote=True).replace("&#x27;", "&#39;") in text
    # every link resolves next to the file, as it does on GitHub Pages
    hrefs = [h for h in re.findall(r'href="([^"]+)"', text) if not h.startswith("data:")]
    assert "runs/hourly--20261201T0700Z/brief.html" in hrefs
    assert all((page.parent / h).is_file() for h in hrefs), hrefs
    # next slots in the schedule's zone; a paused one has none and says who and why
    assert "Europe/Berlin" in text and "paused" in text and "by alice" in text
    # status names the same items, in the same order
    report = user.run("status", "--json", "--now", now, expect=None).stdout
    items = json.loads(report)["attention"]
    kinds = list(dict.fromkeys(i["kind"] for i in items))  # a bad file may have two lines
    assert kinds == ["invalid", "failed", "dead_letter", "paused"]
    for item in items:  # the page writes instants as its header does
        line = re.sub(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)Z", r"\1 \2 UTC", item["text"])
        assert html.escape(line).replace("&#x27;", "&#39;") in text, item

    elsewhere = user.cwd / "out" / "board.html"
    user.run("render", "--index", "--out", str(elsewhere), "--now", now)
    assert (elsewhere.parent / "runs" / "hourly--20261201T0700Z" / "brief.html").is_file()
    both = user.run("render", "hourly--20261201T0700Z", "--index", expect=1)
    assert "give a RUN or --index, not both" in both.stderr
