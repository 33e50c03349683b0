"""A user's own brief template, read from a file: escaping and errors that name it."""

from __future__ import annotations

from pathlib import Path

import pytest
from briefdata import XSS, four_track_run

from orchestrator import brief
from orchestrator.errors import NotFound, UserError


def test_user_template_is_autoescaped(tmp_path: Path) -> None:
    template = tmp_path / "mine.html.j2"
    template.write_text("<p>{{ tracks[0].result.summary }}</p><p>{{ view.counts.total }}</p>")
    ctx = four_track_run(summaries={"ingest": "\n".join(XSS), "publish": XSS[0],
                                    "transform": XSS[1], "backfill-2019": XSS[2]})
    html = brief.render_html(ctx, template)
    assert "<script>" not in html and "<img" not in html
    assert "&lt;" in html
    assert html.endswith("<p>4</p>")


def test_user_template_errors_name_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html.j2"
    broken.write_text("ok\n{% if %}\n")
    with pytest.raises(UserError, match=r"broken\.html\.j2:2: template syntax error"):
        brief.render_html(four_track_run(), broken)
    unknown = tmp_path / "unknown.html.j2"
    unknown.write_text("{{ no_such_name }}")
    with pytest.raises(UserError, match=r"unknown\.html\.j2: template uses an unknown name"):
        brief.render_html(four_track_run(), unknown)
    with pytest.raises(NotFound, match="template not found"):
        brief.render_html(four_track_run(), tmp_path / "missing.j2")
