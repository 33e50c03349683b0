"""A GitHub leg's last lines of stdout in the brief its batch's fan-in job renders.

The leg's ``Run the track`` step, played as ``track.yml`` writes it
(:mod:`tests.workflow_player`), streams stdout to the job's log and keeps a file of it;
``orchestrator outcome --stdout`` puts its last 16 KiB beside the outcome, in the same
artifact. The fan-in job downloads the batch's artifacts and renders the brief in the
same process: the tails come from that folder (:meth:`Folder.stdout`), never from the
state branch's records. The files a leg leaves are hostile: a link, a FIFO, a huge
sparse file, binary bytes each cost only themselves.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator import brief
from orchestrator.brief import tails
from orchestrator.brief.context import BriefContext
from orchestrator.executors import outcomes
from orchestrator.state import layout
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.support.credentials import redactor
from tests.briefdata import four_track_run, many_track_run
from tests.drive import github_tick, read_state
from tests.fakes.github import FakeGitHub
from tests.gitrepo import clone, make_origin
from tests.integration.test_brief_tails import Page
from tests.workflow_player import Player

CHATTY = ("for i in $(seq 0 99); do echo \"line $i\"; done; echo progress >&2; "
          "printf '<script>alert(1)</script> \\033[31mred\\033[0m\\n'; "
          # the player's steps see the fake's token, as a careless track might print one
          "echo \"token $GITHUB_TOKEN\"")
TRACKS: list[dict[str, Any]] = [
    {"name": "chatty", "run": CHATTY},
    {"name": "broken", "run": "echo 'loaded 3 tables'; echo 'ValueError: no table' >&2; exit 3"},
    {"name": "flood", "run": "python3 -c \"import sys; sys.stdout.write('x' * 200000 + "
                             "'\\nthe end\\n')\""},
    {"name": "quiet", "run": "true"},
]


@pytest.mark.slow
def test_a_fan_in_shows_each_leg_s_stdout_tail_in_the_brief_and_stores_none(
        tmp_path: Path, fake_github: FakeGitHub) -> None:
    slot = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    origin = make_origin(tmp_path, {"nightly": {"at": f"{slot:%Y-%m-%dT%H:%M}Z",
                                                "tracks": TRACKS}})
    repo = clone(origin, tmp_path / "repo")
    github_tick(repo, fake_github, datetime.now(UTC))
    fake_github.now = None  # the legs measure their own times on the real clock
    [call] = fake_github.dispatches
    [ci_run] = fake_github.runs
    inputs = call.body["inputs"]
    run_id = inputs["run_id"]
    player = Player(fake_github, origin, tmp_path / "play")
    played = {leg["track"]: player.play_leg(ci_run, inputs, leg)
              for leg in player.legs(inputs)}

    # the leg's log is as it was: all of stdout and stderr stream to the job's log
    [work] = [p for p in played["chatty"].output if "line 0\n" in p.stdout]
    assert "line 99\n" in work.stdout and "progress" in work.stderr
    # a failing command still fails the leg and its outcome, with the command's code
    assert played["broken"].outcomes["work"] == "failure"
    assert played["broken"].conclusion == "failure"
    assert played["chatty"].conclusion == played["quiet"].conclusion == "success"
    archives = {name.split("--")[-2]: files
                for name, files in fake_github.download_all(ci_run).items()}
    broken = json.loads(archives["broken"][f"{run_id}--broken--1.json"])
    assert broken["phase"] == "failed" and broken["exit_code"] == 3
    # the tail rides in the outcome's artifact, 16 KiB at most; none for a quiet leg
    assert set(archives["chatty"]) == {f"{run_id}--chatty--1.json",
                                       f"{run_id}--chatty--1.stdout"}
    assert archives["chatty"][f"{run_id}--chatty--1.stdout"].startswith(b"line 0\n")
    assert set(archives["quiet"]) == {f"{run_id}--quiet--1.json"}
    flood = archives["flood"][f"{run_id}--flood--1.stdout"]
    assert len(flood) == outcomes.STDOUT_BYTES and flood.endswith(b"x\nthe end\n")

    fan_in = player.play_fan_in(ci_run, inputs)
    assert fan_in.conclusion == "success", [p.stderr for p in fan_in.output]
    state, files = read_state(repo)
    assert state.runs[run_id].status is RunStatus.FAILED
    html = files[layout.brief_path(run_id)].decode()
    page = Page(html)
    shown = "".join(page.pres)
    assert "line 82\n" in shown and "line 81\n" not in shown  # the last 20 lines
    assert "<script>alert(1)</script> red" in shown  # as text, autoescaped
    assert not [t for t, _ in page.tags if t == "script"] and "\x1b" not in html
    assert "token ***" in shown and fake_github.token not in html
    assert "loaded 3 tables" in shown
    assert "the end" in shown and "x" * (tails.CHARS + 1) not in shown
    # the run's records on the state branch carry no tail: only the brief shows it
    # (`seq` prints the line; the schedule's spec, in the records, does not hold it)
    assert [path for path, data in files.items() if b"line 99" in data] == [
        layout.brief_path(run_id)]


T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


def _legs_folder(root: Path, ctx: BriefContext) -> None:
    """An outcome file per track of ``ctx``, as a fan-in job downloads them."""
    root.mkdir(parents=True, exist_ok=True)
    for track in ctx.tracks:
        (root / f"{track.key}.json").write_bytes(outcomes.dump(outcomes.build(
            run_id=track.run_id, track=track.name, attempt=track.attempt, exit_code=0,
            started_at=T0, finished_at=T0 + timedelta(seconds=5))))


def test_hostile_tail_files_in_an_outcome_folder_cost_only_themselves(tmp_path: Path) -> None:
    ctx = four_track_run()
    root = tmp_path / "outcomes"
    _legs_folder(root, ctx)
    link, fifo, huge, binary = ctx.tracks
    secret = tmp_path / "secret.txt"
    secret.write_text("do not show\n")
    (root / f"{link.key}.stdout").symlink_to(secret)  # never followed
    os.mkfifo(root / f"{fifo.key}.stdout")  # never waited on
    with (root / f"{huge.key}.stdout").open("wb") as handle:  # 50 MB, sparse: its end only
        handle.truncate(50 << 20)
        handle.seek(0, os.SEEK_END)
        handle.write(b"the last line\n")
    (root / f"{binary.key}.stdout").write_bytes(b"\xfe\xff binary \x07\x00 end\n")
    (root / f"{ctx.run.run_id}--nobody--1.stdout").write_text("whose?\n")  # no outcome

    folder = outcomes.read_folder(root, ctx.run.run_id)
    assert sorted(folder.outcomes) == sorted(t.key for t in ctx.tracks)  # all recorded
    assert folder.problems == sorted([
        f"outcome {ctx.run.run_id}--nobody--1.stdout skipped: a stdout tail without an "
        "outcome of its key in the folder",
        f"outcome {fifo.key}.stdout skipped: not a regular file (a FIFO)",
        f"outcome {link.key}.stdout skipped: a symbolic link (never followed)",
    ])
    shown = tails.with_outcome_tails(ctx, folder, redactor({}))
    assert shown.tails == {huge.name: "the last line", binary.name: "\ufffd\ufffd binary  end"}
    assert "do not show" not in brief.render_html(shown)

    # a file swapped for a link or a FIFO after the listing is not read either
    (root / f"{binary.key}.stdout").unlink()
    (root / f"{binary.key}.stdout").symlink_to(secret)
    (root / f"{huge.key}.stdout").unlink()
    os.mkfifo(root / f"{huge.key}.stdout")
    assert tails.with_outcome_tails(ctx, folder, redactor({})).tails == {}


def test_a_fan_in_of_300_legs_reads_at_most_200_tails_failed_first(tmp_path: Path) -> None:
    ctx = many_track_run(300, polls=2)
    root = tmp_path / "outcomes"
    _legs_folder(root, ctx)
    for track in ctx.tracks:
        (root / f"{track.key}.stdout").write_text(f"done {track.name}\n")
    folder = outcomes.read_folder(root, ctx.run.run_id)
    assert folder.problems == [] and len(folder.stdouts) == 300

    shown = tails.with_outcome_tails(ctx, folder, redactor({}))
    assert len(shown.tails) == tails.MAX_TRACKS and shown.tails_left_out == 100
    failed = {t.name for t in ctx.tracks if t.phase is TrackPhase.FAILED}
    assert failed <= set(shown.tails)  # the ones a reader needs first
