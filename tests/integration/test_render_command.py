"""``orchestrator render`` against a real state branch on a bare origin."""

from __future__ import annotations

from pathlib import Path

import pytest
from briefdata import RUN_ID, XSS, four_track_run

from orchestrator.brief import BriefContext
from orchestrator.cli import main
from orchestrator.state import codec, layout
from orchestrator.state import model as state_model
from orchestrator.store import GitStateStore
from tests.gitrepo import git

BRANCH = "orchestrator-state"


def state_files(ctx: BriefContext) -> dict[str, bytes | None]:
    state = state_model.State(runs={ctx.run.run_id: ctx.run},
                     tracks={ctx.run.run_id: {t.name: t for t in ctx.tracks}},
                     dlq={d.key: d for d in ctx.dead_letters})
    files: dict[str, bytes | None] = dict(state.dump())
    files[layout.polls_path(ctx.run.run_id)] = b"".join(codec.json_line(p) for p in ctx.polls)
    files[layout.TICKS] = codec.json_line({"at": "2026-12-01T07:35:00Z"})
    return files


@pytest.fixture
def repo(tmp_path: Path, origin: Path) -> Path:
    """A clone whose origin's state branch holds the four-track run."""
    work = tmp_path / "work"
    git("clone", "--quiet", str(origin), str(work), cwd=tmp_path)
    ctx = four_track_run(summaries={"ingest": XSS[0]})
    store = GitStateStore(work, "origin", BRANCH, sleep=lambda _: None)
    assert store.transact(lambda _snap: state_files(ctx), "state for the test").landed
    return work


def render(repo: Path, *args: str) -> int:
    return main(["--repo", str(repo), "--state-branch", BRANCH, "render", *args])


def test_render_html_to_a_file(repo: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out" / "brief.html"
    assert render(repo, RUN_ID, "-o", str(out)) == 0
    html = out.read_text()
    assert html.startswith("<!doctype html>")
    assert RUN_ID in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and XSS[0] not in html
    assert "2 of 4 tracks need attention" in html
    assert capsys.readouterr().out == ""
    assert not list(out.parent.glob(".*.tmp"))


def test_render_markdown_to_stdout(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert render(repo, RUN_ID, "--format", "markdown") == 0
    out = capsys.readouterr().out
    assert out.startswith(f"## Brief: {RUN_ID} (failed)")
    assert "&lt;script&gt;" in out and "<script>" not in out


def test_repository_template_wins_and_option_overrides_it(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "templates").mkdir()
    (repo / "templates" / "brief.html.j2").write_text("repo: {{ run.run_id }}\n")
    assert render(repo, RUN_ID) == 0
    assert capsys.readouterr().out == f"repo: {RUN_ID}\n"
    mine = tmp_path / "mine.j2"
    mine.write_text("mine: {{ view.counts.failed }} {{ tracks[0].result.summary }}\n")
    assert render(repo, RUN_ID, "--template", str(mine)) == 0
    assert capsys.readouterr().out == "mine: 1 &lt;script&gt;alert(1)&lt;/script&gt;\n"


def test_unknown_run_is_a_user_error(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert render(repo, "nightly-refresh--20261202T0700Z") == 1
    err = capsys.readouterr().err
    assert err == ("orchestrator: no run 'nightly-refresh--20261202T0700Z' on the state "
                   "branch\n")


def test_invalid_run_id_is_a_user_error(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert render(repo, "../../etc/passwd") == 1
    assert capsys.readouterr().err.startswith("orchestrator: invalid run id '../../etc/passwd'")


def test_broken_template_is_one_line(repo: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.j2"
    broken.write_text("{% for %}")
    assert render(repo, RUN_ID, "--template", str(broken)) == 1
    err = capsys.readouterr().err
    assert err.startswith("orchestrator: ") and "broken.j2:1: template syntax error" in err
    assert err.count("\n") == 1


MD_TEMPLATE = ("{% macro head() %}repo md: {{ run.run_id | md }}\n{% endmacro %}"
               "{% macro opening(name) %}{% endmacro %}{% macro row(name, x) %}{% endmacro %}"
               "{{ head() }}")


def test_repository_markdown_template_wins_for_markdown_only(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "templates").mkdir()
    (repo / "templates" / "brief.md.j2").write_text(MD_TEMPLATE)
    assert render(repo, RUN_ID, "--format", "markdown") == 0
    assert capsys.readouterr().out == f"repo md: {RUN_ID}\n"
    assert render(repo, RUN_ID) == 0  # the HTML brief keeps the packaged template
    assert capsys.readouterr().out.startswith("<!doctype html>")
    mine = tmp_path / "mine.md.j2"
    mine.write_text(MD_TEMPLATE.replace("repo md", "mine"))
    assert render(repo, RUN_ID, "--format", "markdown", "--template", str(mine)) == 0
    assert capsys.readouterr().out == f"mine: {RUN_ID}\n"


def test_hostile_repository_template_is_refused(repo: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "templates").mkdir()
    (repo / "templates" / "brief.html.j2").write_text(
        "{{ lipsum.__globals__['os'].popen('id').read() }}")
    assert render(repo, RUN_ID) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "templates/brief.html.j2: template " in err
    assert "access to attribute '__globals__' of 'function' object is unsafe" in err
    assert "uid=" not in err
