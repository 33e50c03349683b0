"""A user's own brief template, read from a file: escaping and errors that name it."""

from __future__ import annotations

from pathlib import Path

import pytest
from briefdata import RUN_ID, XSS, at, four_track_run, payload_run

from orchestrator import brief
from orchestrator.errors import NotFound, UserError

REPO = Path(__file__).resolve().parents[2]


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


PAYLOADS = ["{{ lipsum.__globals__['os'].popen('id').read() }}",
            "{{ lipsum.__globals__['os'].environ }}",
            "{{ cycler.__init__.__globals__.os.popen('touch MARKER').read() }}",
            "{{ ''.__class__.__mro__[1].__subclasses__() }}"]
SECRET = "s3cret-never-rendered"


def _render_kind(kind: str, template: Path) -> str:
    ctx = four_track_run()
    if kind == "html":
        return brief.render_html(ctx, template)
    if kind == "markdown":
        return brief.render_markdown(ctx, template=template)
    return brief.render_index([ctx.run], generated_at=at(60), template=template)


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("kind", ["html", "markdown", "index"])
def test_a_template_cannot_run_python(kind: str, payload: str, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_SANDBOX_PROBE", SECRET)
    monkeypatch.chdir(tmp_path)
    template = tmp_path / f"hostile.{kind}.j2"
    # The Markdown template needs its macros, else it fails before the payload runs.
    macros = ("{% macro head() %}" + payload + "{% endmacro %}"
              "{% macro opening(name) %}{% endmacro %}{% macro row(name, x) %}{% endmacro %}"
              if kind == "markdown" else "")
    template.write_text(macros + "<p>" + payload + "</p>\n")
    with pytest.raises(UserError, match=rf"hostile\.{kind}\.j2: template (uses an unknown "
                                        r"name: access to attribute .* is unsafe|refused)"):
        _render_kind(kind, template)
    assert not (tmp_path / "MARKER").exists()


def test_the_packaged_templates_render_in_the_sandbox(tmp_path: Path) -> None:
    for kind, name in (("html", "brief.html.j2"), ("markdown", "brief.md.j2"),
                       ("index", "index.html.j2")):
        assert _render_kind(kind, brief.DATA / name) == _render_kind(kind, REPO / "templates"
                                                                     / name)


def test_markdown_template_is_replaceable(tmp_path: Path) -> None:
    template = tmp_path / "brief.md.j2"
    template.write_text(
        "{% macro head() %}# {{ run.run_id | md }}\n{% endmacro %}"
        "{% macro opening(name) %}\n## {{ name }}\n{% endmacro %}"
        "{% macro row(name, x) %}{% if name == 'tracks' %}- {{ x.summary | md(cell) }}\n"
        "{% endif %}{% endmacro %}"
        "{{ head() }}{% for s in sections %}{{ opening(s.name) }}"
        "{% for x in s.rows %}{{ row(s.name, x) }}{% endfor %}{% endfor %}")
    markdown = brief.render_markdown(payload_run(), template=template)
    assert markdown.startswith(f"# {RUN_ID}\n## tracks\n- ")
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown
    bare = tmp_path / "bare.md.j2"
    bare.write_text("{{ run.run_id }}")
    with pytest.raises(UserError, match=r"bare\.md\.j2: a Markdown brief template must "
                                        r"define the macros .*missing: head, opening, row"):
        brief.render_markdown(four_track_run(), template=bare)
