"""Reading a folder of outcome files a CI job downloaded: what is used, what is named
and skipped."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.executors import outcomes

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"


def _outcome(track: str, run_id: str = RUN) -> outcomes.Outcome:
    return outcomes.build(run_id=run_id, track=track, attempt=1, exit_code=0,
                          started_at=T0, finished_at=T0 + timedelta(seconds=5))


def test_a_folder_of_outcomes_is_read_with_care(tmp_path: Path) -> None:
    root = tmp_path / "outcomes"
    outcomes.write(root, _outcome("a"))  # merged: directly in the folder
    outcomes.write(root / f"{RUN}--b--1", _outcome("b"))  # one folder per artifact
    outcomes.write(root / "x" / "y", _outcome("deep"))  # deeper than any download puts it
    outcomes.write(root, _outcome("c", "other--20261201T0700Z"))  # another run's
    (root / f"{RUN}--d--1.json").write_bytes(outcomes.dump(_outcome("a")))  # misnamed
    (root / "broken.json").write_text("{")
    (root / "notes.txt").write_text("not an outcome")
    secret = tmp_path / "secret.json"
    secret.write_bytes(outcomes.dump(_outcome("e")))
    (root / f"{RUN}--e--1.json").symlink_to(secret)  # never followed

    os.mkfifo(root / f"{RUN}--f--1.json")  # a FIFO: never opened, never waited on
    (root / f"{RUN}--g--1.json").write_bytes(outcomes.dump(_outcome("g"))[:40])  # cut short
    (root / "x" / "y" / "z.txt").write_text("deeper still")

    found = outcomes.read_folder(root, RUN)
    assert sorted(found.outcomes) == [f"{RUN}--a--1", f"{RUN}--b--1"]
    assert found.problems == [
        "outcome broken.json skipped: (root): Invalid JSON: EOF while parsing an object at "
        "line 1 column 1",
        f"outcome {RUN}--d--1.json skipped: holds the outcome of {RUN}--a--1, not of "
        f"{RUN}--d--1",
        f"outcome {RUN}--e--1.json skipped: a symbolic link (never followed)",
        f"outcome {RUN}--f--1.json skipped: not a regular file (a FIFO)",
        f"outcome {RUN}--g--1.json skipped: (root): Invalid JSON: EOF while parsing a "
        "value at line 3 column 22",
        "outcome notes.txt skipped: not a .json file",
        "outcome other--20261201T0700Z--c--1.json skipped: it belongs to run "
        "other--20261201T0700Z",
        "outcome x/y skipped: a folder two levels down (outcomes are read at most one "
        "folder deep)",
    ]


def test_an_entry_with_an_odd_name_is_named_on_one_line(tmp_path: Path) -> None:
    root = tmp_path / "outcomes"
    root.mkdir()
    (root / "two\nlines.json").write_text("{}")
    (root / os.fsdecode(b"\xff.json")).write_text("{}")
    found = outcomes.read_folder(root, RUN)
    assert all("\n" not in p and p.encode("utf-8") for p in found.problems)
    assert [p.split(" skipped")[0] for p in found.problems] == [
        "outcome '\\udcff.json'", "outcome 'two\\nlines.json'"]


def test_a_missing_folder_holds_no_outcomes(tmp_path: Path) -> None:
    found = outcomes.read_folder(tmp_path / "nothing-was-uploaded", RUN)
    assert found.outcomes == {} and found.problems == []
