"""Reading a folder of outcome files a CI job downloaded: what is used, what is named
and skipped."""

from __future__ import annotations

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

    found = outcomes.read_folder(root, RUN)
    assert sorted(found.outcomes) == [f"{RUN}--a--1", f"{RUN}--b--1"]
    assert sorted(found.problems) == [
        "outcome broken.json skipped: (root): Invalid JSON: EOF while parsing an object at "
        "line 1 column 1",
        f"outcome {RUN}--d--1.json skipped: holds the outcome of {RUN}--a--1, not of "
        f"{RUN}--d--1",
        "outcome other--20261201T0700Z--c--1.json skipped: it belongs to run "
        "other--20261201T0700Z",
    ]


def test_a_missing_folder_holds_no_outcomes(tmp_path: Path) -> None:
    found = outcomes.read_folder(tmp_path / "nothing-was-uploaded", RUN)
    assert found.outcomes == {} and found.problems == []
