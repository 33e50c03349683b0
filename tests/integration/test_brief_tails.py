"""The brief shows each track's last lines of stdout and a log link a reader can use.

Real files in a temporary work folder, read as a tick reads them (:mod:`.tails`);
hostile ones too: a FIFO, a link to another file, a huge log, binary bytes, markup.
"""

from __future__ import annotations

import dataclasses
import os
from html.parser import HTMLParser
from pathlib import Path

from orchestrator import brief
from orchestrator.brief import tails
from orchestrator.brief.context import BriefContext
from orchestrator.state.phases import TrackPhase
from orchestrator.support.credentials import redactor
from tests.briefdata import four_track_run, many_track_run

TOKEN = "ghs_" + "Zz9" * 12


class Page(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.pres: list[str] = []
        self.codes: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        if self.tags and self.tags[-1][0] == "pre":
            self.pres.append(data)
        if self.tags and self.tags[-1][0] == "code":
            self.codes.append(data)

    def links(self) -> list[tuple[str | None, str | None]]:
        return [(a.get("href"), a.get("class")) for t, a in self.tags if t == "a"]


def _local(ctx: BriefContext) -> BriefContext:
    """``ctx`` as a run of the local executor: work folders, ``file://`` links."""
    tracks = [t.model_copy(update={"executor": "local", "url": f"file:///w/{t.key}"})
              for t in ctx.tracks]
    return dataclasses.replace(ctx, tracks=tracks)


def _stdout(work: Path, key: str, data: bytes) -> Path:
    (work / key).mkdir(parents=True, exist_ok=True)
    path = work / key / "stdout.log"
    path.write_bytes(data)
    return path


def test_a_local_track_s_last_lines_show_under_its_row_redacted_escaped_and_capped(
        tmp_path: Path) -> None:
    ctx = _local(four_track_run())
    first, second = ctx.tracks[0], ctx.tracks[1]
    lines = b"".join(b"line %d\n" % i for i in range(100))
    _stdout(tmp_path, first.key, lines + b"<script>alert(1)</script> \x1b[31mred\x1b[0m\x00\xff\n"
            + f"token {TOKEN}\n".encode())
    _stdout(tmp_path, second.key, b"x" * 50_000 + b"\n")  # one long line
    shown = tails.with_local_tails(ctx, tmp_path, redactor({"GITHUB_TOKEN": TOKEN}))
    html = brief.render_html(shown)
    page = Page(html)
    assert not [t for t, _ in page.tags if t == "script"]
    tail = shown.tails[first.name]
    assert tail.splitlines()[0] == "line 82" and "line 81" not in tail  # the last 20 lines
    assert "<script>alert(1)</script> red\ufffd" in tail and "token ***" in tail
    assert TOKEN not in html and "\x1b" not in html and "\x00" not in html
    assert tail in "".join(page.pres)  # shown, autoescaped
    assert len(shown.tails[second.name]) == tails.CHARS
    assert shown.tails_left_out == 0 and "are shown for the first" not in html


def test_hostile_stdout_files_cost_only_themselves(tmp_path: Path) -> None:
    ctx = _local(four_track_run())
    fifo, link, huge, folder = ctx.tracks
    (tmp_path / fifo.key).mkdir()
    os.mkfifo(tmp_path / fifo.key / "stdout.log")  # never waited on
    secret = tmp_path / "secret.txt"
    secret.write_text("do not show\n")
    (tmp_path / link.key).mkdir()
    (tmp_path / link.key / "stdout.log").symlink_to(secret)  # never followed
    with (tmp_path / "big").open("wb") as handle:  # 50 MB, sparse: read from its end
        handle.truncate(50 << 20)
    big = _stdout(tmp_path, huge.key, b"")
    big.unlink()
    (tmp_path / "big").rename(big)
    with big.open("ab") as handle:
        handle.write(b"\xfe\xff binary \x07 end\n")
    (tmp_path / folder.key / "stdout.log").mkdir(parents=True)
    shown = tails.with_local_tails(ctx, tmp_path, redactor({}))
    assert shown.tails == {huge.name: "\ufffd\ufffd binary  end"}
    assert "do not show" not in brief.render_html(shown)


def test_a_run_of_1000_tracks_reads_at_most_200_tails_failed_first_and_says_so(
        tmp_path: Path) -> None:
    ctx = _local(many_track_run(1000, polls=2))
    for track in ctx.tracks:
        _stdout(tmp_path, track.key, f"done {track.name}\n".encode())
    shown = tails.with_local_tails(ctx, tmp_path, redactor({}))
    assert len(shown.tails) == tails.MAX_TRACKS and shown.tails_left_out == 800
    failed = {t.name for t in ctx.tracks if t.phase is TrackPhase.FAILED}
    assert failed <= set(shown.tails)  # the ones a reader needs first
    html = brief.render_html(shown)
    assert "The last lines of stdout are shown for the first 200 tracks" in html
    assert "800 more print theirs with" in html


def test_a_local_row_names_the_logs_command_and_a_github_row_links_its_job(
        tmp_path: Path) -> None:
    ctx = _local(four_track_run())
    page = Page(brief.render_html(ctx))
    assert not any(href and href.startswith("file:") for href, _ in page.links())
    for track in ctx.tracks:
        assert f"orchestrator logs {ctx.run.run_id} {track.name}" in page.codes

    github = four_track_run()
    job = github.tracks[0].model_copy(update={
        "url": "https://github.com/acme/warehouse/actions/runs/7/job/42"})
    html = brief.render_html(dataclasses.replace(github, tracks=[job, *github.tracks[1:]]))
    assert '<a href="https://github.com/acme/warehouse/actions/runs/7/job/42" ' \
           'rel="noopener noreferrer">job</a>' in html
    assert ">CI run</a>" in html  # a leg whose job no tick has seen: its run
    assert "orchestrator logs" not in html
