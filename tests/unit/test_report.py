"""`orchestrator report` logic against the in-memory store, with plain datetimes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.config.models import TrackSpec
from orchestrator.errors import IllegalTransition, InvalidId, NotFound
from orchestrator.runs.reporting import Report, apply, report
from orchestrator.state.codec import to_json
from orchestrator.state.layout import run_path, track_path
from orchestrator.state.phases import TrackPhase
from orchestrator.state.records import Run, Track
from orchestrator.store import InMemoryStateStore

RUN = "nightly--20261201T0700Z"
T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def _state(phase: TrackPhase = TrackPhase.DISPATCHED, attempt: int = 1,
           track: str = "a") -> dict[str, bytes]:
    run = Run(run_id=RUN, schedule_id="nightly", slot=T0, fire_at=T0, created_at=T0,
              deadline=T0 + timedelta(hours=4), tracks=[track])
    t = Track(run_id=RUN, name=track, phase=phase, attempt=attempt, max_attempts=3,
              spec=TrackSpec(name=track, run="true"), dispatched_at=T0)
    return {run_path(RUN): to_json(run), track_path(RUN, track): to_json(t)}


def _track(store: InMemoryStateStore, name: str = "a") -> Track:
    return Track.model_validate_json(store.read().files[track_path(RUN, name)])


def _report(phase: TrackPhase, **kwargs: object) -> Report:
    return Report(run_id=RUN, track="a", phase=phase, at=T1, **kwargs)  # type: ignore[arg-type]


def test_running_sets_started_at_and_records_the_transition() -> None:
    store = InMemoryStateStore(_state())
    outcome = report(store, _report(TrackPhase.RUNNING))
    assert outcome.verdict == "recorded" and outcome.landed
    track = _track(store)
    assert track.phase is TrackPhase.RUNNING and track.started_at == T1
    assert track.finished_at is None
    assert [(h.from_, h.to, h.at) for h in track.state_history] == [("dispatched", "running",
                                                                       T1)]
    assert store.log[-1][1] == f"report {RUN}/a: running"
    assert store.log[-1][2] == (track_path(RUN, "a"),)  # exactly one file


def test_complete_stores_the_result_and_finished_at() -> None:
    store = InMemoryStateStore(_state(TrackPhase.RUNNING))
    report(store, _report(TrackPhase.COMPLETE, result={"summary": "42 rows", "rows": 42}))
    track = _track(store)
    assert track.phase is TrackPhase.COMPLETE and track.finished_at == T1
    assert track.result == {"summary": "42 rows", "rows": 42}


def test_complete_straight_from_dispatched_with_a_message_as_summary() -> None:
    store = InMemoryStateStore(_state(TrackPhase.DISPATCHED))
    report(store, _report(TrackPhase.COMPLETE, message="all good"))
    assert _track(store).result == {"summary": "all good"}


def test_failed_appends_the_message_to_the_error_log() -> None:
    store = InMemoryStateStore(_state(TrackPhase.RUNNING, attempt=2))
    report(store, _report(TrackPhase.FAILED, message="exit 2", result={"summary": "half"}))
    track = _track(store)
    assert track.phase is TrackPhase.FAILED
    assert track.error_log == ["attempt 2: exit 2"]
    assert track.result == {"summary": "half"}


def test_the_same_report_again_is_a_no_op() -> None:
    store = InMemoryStateStore(_state())
    report(store, _report(TrackPhase.COMPLETE, message="done"))
    commits = len(store.log)
    again = report(store, _report(TrackPhase.COMPLETE, message="done"))
    assert again.verdict == "unchanged" and not again.landed
    assert len(store.log) == commits


def test_a_late_report_from_an_old_attempt_is_ignored() -> None:
    store = InMemoryStateStore(_state(TrackPhase.DISPATCHED, attempt=2))
    outcome = report(store, _report(TrackPhase.FAILED, attempt=1, message="old"))
    assert outcome.verdict == "stale_attempt" and not outcome.landed
    assert outcome.track.attempt == 2
    assert _track(store).phase is TrackPhase.DISPATCHED and len(store.log) == 1
    assert report(store, _report(TrackPhase.RUNNING, attempt=2)).landed


def test_an_illegal_transition_raises_and_writes_nothing() -> None:
    store = InMemoryStateStore(_state(TrackPhase.COMPLETE))
    with pytest.raises(IllegalTransition, match="complete -> running"):
        report(store, _report(TrackPhase.RUNNING))
    assert len(store.log) == 1


@pytest.mark.parametrize(("run_id", "track", "error", "match"), [
    ("other--20261201T0700Z", "a", NotFound, "unknown run 'other--20261201T0700Z'"),
    (RUN, "zz", NotFound, "has no track 'zz'"),
    ("../../etc", "a", InvalidId, "invalid run id"),
    (RUN, "../a", InvalidId, "invalid track name"),
])
def test_unknown_or_invalid_run_and_track_are_user_errors(
        run_id: str, track: str, error: type[Exception], match: str) -> None:
    store = InMemoryStateStore(_state())
    with pytest.raises(error, match=match):
        report(store, Report(run_id=run_id, track=track, phase=TrackPhase.RUNNING, at=T1))
    assert len(store.log) == 1


def test_a_report_lost_to_a_race_is_re_applied_on_the_new_tip() -> None:
    files = _state()
    files.update({k: v for k, v in _state(track="b").items() if "tracks" in k})
    rival = {track_path(RUN, "b"): to_json(Track(
        run_id=RUN, name="b", phase=TrackPhase.COMPLETE, spec=TrackSpec(name="b", run="x")))}
    rivals = iter([rival])
    store = InMemoryStateStore(files, contention=lambda _: next(rivals, None))
    outcome = report(store, _report(TrackPhase.RUNNING))
    assert outcome.landed
    assert _track(store, "a").phase is TrackPhase.RUNNING
    assert _track(store, "b").phase is TrackPhase.COMPLETE


def test_apply_is_pure() -> None:
    files = _state()
    before = dict(files)
    verdict, track, change = apply(files, _report(TrackPhase.RUNNING))
    assert verdict == "recorded" and change is not None and track.phase is TrackPhase.RUNNING
    assert files == before
