"""Which definition ``runs retry`` gives a retried track: pure, on the records."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from orchestrator.config.models import TrackSpec
from orchestrator.errors import UserError
from orchestrator.runs.retry import retry
from orchestrator.state import model as state_model
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Act
from tests.builders import RUN_ID, run_files

AT = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
ACT = Act(by="dave", at=AT)


def failed_run() -> dict[str, bytes]:
    return run_files(RUN_ID, RunStatus.FAILED, AT, tracks=("a", "b"),
                     phase=TrackPhase.FAILED)


def retried(change: dict[str, bytes | None], files: dict[str, bytes]) -> state_model.State:
    merged = {**files, **{k: v for k, v in change.items() if v is not None}}
    return state_model.load(merged, all_tracks=True)


def test_the_current_definition_replaces_the_fired_one_and_the_run_says_so() -> None:
    files = failed_run()
    now = {"a": TrackSpec(name="a", run="fixed"), "b": TrackSpec(name="b", run="true")}
    state = retried(retry(files, RUN_ID, ["a"], False, ACT, now), files)
    assert state.tracks[RUN_ID]["a"].spec.run == "fixed"
    assert state.runs[RUN_ID].retries[-1].definition == "current"
    fired = retried(retry(files, RUN_ID, ["a"], False, ACT), files)
    assert fired.tracks[RUN_ID]["a"].spec.run == "true"
    assert fired.runs[RUN_ID].retries[-1].definition == "as-fired"


@pytest.mark.parametrize(("now", "words"), [
    ({"b": TrackSpec(name="b", run="true")}, "no longer has track 'a'"),
    ({"a": TrackSpec(name="a", run="true", needs=["c"])}, "now needs 'c', which run"),
])
def test_a_definition_the_run_cannot_take_is_refused_with_one_line(
        now: dict[str, TrackSpec], words: str) -> None:
    with pytest.raises(UserError) as caught:
        retry(failed_run(), RUN_ID, ["a"], False, ACT, now)
    assert words in caught.value.message and "--as-fired" in caught.value.message
    assert "\n" not in caught.value.message
