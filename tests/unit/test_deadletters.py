"""The dead letter queue's pure changes and views, and the run views, on plain state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.config.models import TrackSpec
from orchestrator.errors import InvalidId, NotFound, UserError
from orchestrator.runs import deadletters
from orchestrator.runs.views import rows_text, run_rows, run_text
from orchestrator.state import codec, layout
from orchestrator.state import model as state_model
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import DeadLetter, Run, Track

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"
KEY = f"{RUN}--b"


def files(*, run_status: RunStatus = RunStatus.FAILED, phase: TrackPhase = TrackPhase.FAILED,
          discarded: bool = False) -> dict[str, bytes]:
    spec = TrackSpec(name="b", run="false", max_attempts=2)
    run = Run(run_id=RUN, schedule_id="nightly", slot=T0, fire_at=T0, created_at=T0,
              deadline=T0 + timedelta(hours=1), status=run_status, tracks=["a", "b"],
              finished_at=T0 + timedelta(minutes=30))
    a = Track(run_id=RUN, name="a", phase=TrackPhase.COMPLETE,
              spec=TrackSpec(name="a", run="true"))
    b = Track(run_id=RUN, name="b", phase=phase, attempt=2, max_attempts=2, spec=spec,
              handle={"pid": 1}, dispatch_key=f"{RUN}--b--2", error_log=["attempt 2: boom"])
    letter = DeadLetter(key=KEY, run_id=RUN, track="b", reason="failed",
                        parked_at=T0 + timedelta(minutes=20), attempts=2, payload=spec,
                        discarded=discarded)
    state = state_model.State(runs={RUN: run}, tracks={RUN: {"a": a, "b": b}}, dlq={KEY: letter})
    return state.dump()


def test_requeue_gives_a_fresh_budget_reopens_the_run_and_drops_the_letter() -> None:
    now = T0 + timedelta(hours=3)
    change = deadletters.requeue(files(), KEY, "ops", "flaky disk", now)
    assert change[layout.dlq_path(KEY)] is None
    # the spec is in the run's specs.json, not in the track record
    assert b'"spec"' not in (change[layout.track_path(RUN, "b")] or b"")
    after = state_model.load({**files(), **{p: d for p, d in change.items() if d is not None}},
                             all_tracks=True)
    track = after.tracks[RUN]["b"]
    assert track.spec.run == "false"
    assert (track.phase, track.attempt, track.max_attempts) == (TrackPhase.PENDING, 3, 4)
    assert track.handle is None and track.dispatch_key is None
    assert track.error_log == ["attempt 2: boom"]  # history stays
    assert track.state_history[-1].reason == "requeued by ops: flaky disk"
    run = Run.model_validate_json(change[layout.run_path(RUN)] or b"")
    assert run.status is RunStatus.RUNNING and run.finished_at is None
    assert run.deadline == now + timedelta(hours=1)  # its whole allowance, from now


def test_requeue_refuses_what_it_cannot_do() -> None:
    with pytest.raises(NotFound):
        deadletters.requeue(files(), f"{RUN}--zz", "ops", "", T0)
    with pytest.raises(UserError, match="discarded"):
        deadletters.requeue(files(discarded=True), KEY, "ops", "", T0)
    with pytest.raises(UserError, match="being consolidated"):
        deadletters.requeue(files(run_status=RunStatus.CONSOLIDATING), KEY, "ops", "", T0)
    with pytest.raises(UserError, match="not failed or tapped out"):
        deadletters.requeue(files(phase=TrackPhase.PENDING, run_status=RunStatus.RUNNING), KEY,
                            "ops", "", T0)


def test_discard_marks_who_and_why_once() -> None:
    change = deadletters.discard(files(), KEY, "ops", "known bug")
    assert change is not None
    path = layout.dlq_path(KEY)
    letter = codec.parse_with_spec(DeadLetter, path, change[path] or b"",
                                   codec.read_specs(files(), RUN))
    assert (letter.discarded, letter.discarded_by, letter.discarded_reason) == (
        True, "ops", "known bug")
    assert deadletters.discard(files(discarded=True), KEY, "ops", "again") is None


def test_views_list_show_and_hide_discarded_letters() -> None:
    state = state_model.load(files(discarded=True))
    assert deadletters.listed(state) == []
    assert deadletters.list_text([]) == ["dead letter queue is empty"]
    shown = deadletters.listed(state, show_all=True)
    assert deadletters.list_text(shown) == [f"{KEY}  2026-12-01T07:20:00Z  failed  (discarded)"]
    # a reason without a count gets one; the planner's own reasons already have it
    assert deadletters.letter_text(shown[0])[0] == f"{KEY}: failed (attempt 2)"
    counted = shown[0].model_copy(update={"reason": "failed after 2 attempt(s)"})
    assert deadletters.letter_text(counted)[0] == f"{KEY}: failed after 2 attempt(s)"


def test_run_rows_count_phases_newest_first() -> None:
    state = state_model.load(files(), all_tracks=True)
    rows = run_rows(state, state.runs.values())
    assert rows == [{"run_id": RUN, "schedule": "nightly", "status": "failed",
                     "slot": "2026-12-01T07:00:00Z", "finished_at": "2026-12-01T07:30:00Z",
                     "tracks": {"complete": 1, "failed": 1}, "origin": "cron", "acts": []}]
    assert rows_text(rows) == [f"{RUN}  failed         1 complete, 1 failed"]
    assert rows_text([]) == ["no runs"]
    lines = run_text(state.runs[RUN], state.tracks[RUN])
    assert lines[2].startswith("  slot      2026-12-01T07:00:00Z   fire at ")
    assert "  track b: failed (attempt 2/2)" in lines
    assert "    ! attempt 2: boom" in lines


def test_several_keys_make_one_change_each_applied_on_the_one_before() -> None:
    base = files()
    other = f"{RUN}--a"
    state = state_model.load(base, all_tracks=True)
    letter = state.dlq[KEY].model_copy(update={"key": other, "track": "a"})
    base[layout.dlq_path(other)] = codec.to_json(letter)
    change = deadletters.each(base, [KEY, other],
                              lambda f, k: deadletters.discard(f, k, "ops", "obsolete"))
    assert set(change) == {layout.dlq_path(KEY), layout.dlq_path(other)}
    after = state_model.load({**base, **{p: d for p, d in change.items() if d is not None}})
    assert all(d.discarded and d.discarded_by == "ops" for d in after.dlq.values())
    # selected by schedule or all, oldest first; named keys must exist
    assert deadletters.select(state_model.load(base), [], "nightly") == sorted([KEY, other])
    assert deadletters.select(state_model.load(base), [], "elsewhere") == []
    with pytest.raises(NotFound):
        deadletters.select(state_model.load(base), [f"{RUN}--zz"])


def test_a_requeued_run_is_a_repair() -> None:
    change = deadletters.requeue(files(), KEY, "ops", "", T0 + timedelta(hours=3))
    assert Run.model_validate_json(change[layout.run_path(RUN)] or b"").repair


def test_a_key_that_is_not_a_dead_letter_s_is_called_a_key() -> None:
    with pytest.raises(InvalidId, match="invalid dead letter key 'nope'"):
        deadletters.check_key("nope")
    with pytest.raises(InvalidId, match=f"its dead letter is '{KEY}'"):
        deadletters.check_key(f"{KEY}--2")
    assert deadletters.check_key(KEY) == KEY
