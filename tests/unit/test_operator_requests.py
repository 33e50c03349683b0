"""The operator's requests as the planner honours them: pure, with the times a test
gives (:mod:`orchestrator.planner.requests`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orchestrator.executors.base import Observation
from orchestrator.planner import BackfillRequest, CancelRequest, TriggerRequest
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Act, Track
from tests.builders import schedule
from tests.planning import tick

NOW = datetime(2026, 12, 1, 14, 12, 30, tzinfo=UTC)
ACT = Act(by="alice", at=NOW, reason="hotfix")
MANUAL = "nightly--20261201T1412Z-manual-1"


def completed(track: Track) -> dict[str, Observation]:
    """What the executor says of ``track``'s attempt once it completed."""
    key = track.dispatch_key or ""
    return {key: Observation(key=key, phase=TrackPhase.COMPLETE)}


def trigger(rid: str = "r1", **kw: object) -> TriggerRequest:
    return TriggerRequest("nightly", rid, ACT, **kw)  # type: ignore[arg-type]


def test_a_trigger_starts_one_manual_run_and_the_same_request_again_starts_none() -> None:
    nightly = schedule(tracks=["a", "b"], overlap="allow")
    first = tick(nightly, State(), NOW, requests=[trigger()])
    assert list(first.state.runs) == [MANUAL]
    run = first.state.runs[MANUAL]
    assert (run.origin, run.requested) == ("manual", ACT)
    assert sorted(r.key for r in first.dispatch) == [f"{MANUAL}--a--1", f"{MANUAL}--b--1"]
    assert first.answers == {"r1": f"{MANUAL}: started by request r1"}
    again = tick(nightly, first.state, NOW + timedelta(seconds=5), requests=[trigger()])
    assert list(again.state.runs) == [MANUAL] and not again.dispatch
    other = tick(nightly, again.state, NOW + timedelta(seconds=9), requests=[trigger("r2")])
    assert "nightly--20261201T1412Z-manual-2" in other.state.runs  # a new request


def test_a_trigger_honours_overlap_skip_and_needs_force_when_disabled() -> None:
    busy = schedule(tracks=["a"], overlap="skip")
    first = tick(busy, State(), NOW, requests=[trigger()])
    second = tick(busy, first.state, NOW, requests=[trigger("r2")])
    assert second.answers["r2"] == "nightly: not triggered: a run is still open (overlap=skip)"
    assert len(second.state.runs) == 1
    off = schedule(tracks=["a"], enabled=False)
    refused = tick(off, State(), NOW, requests=[trigger()])
    assert refused.answers["r1"].endswith("the schedule is disabled (--force starts it anyway)")
    assert not refused.state.runs
    forced = tick(off, State(), NOW, requests=[trigger(force=True)])
    assert list(forced.state.runs) == [MANUAL]


def test_trigger_inputs_override_the_tracks_own() -> None:
    nightly = schedule(tracks=[{"name": "a", "run": "true", "inputs": {"env": "prod"}}])
    decision = tick(nightly, State(), NOW, requests=[trigger(inputs={"env": "dev", "n": "2"})])
    assert decision.state.tracks[MANUAL]["a"].spec.inputs == {"env": "dev", "n": "2"}
    assert decision.dispatch[0].spec.inputs == {"env": "dev", "n": "2"}


def test_a_backfill_fires_oldest_first_one_run_at_a_time() -> None:
    nightly = schedule(tracks=["a"], overlap="allow")
    slots = tuple(datetime(2026, 11, d, 7, tzinfo=UTC) for d in (27, 28, 29))
    request = BackfillRequest("nightly", slots, ACT)
    state = tick(nightly, State(), NOW, requests=[request]).state
    ids = [f"nightly--202611{d}T0700Z" for d in (27, 28, 29)]
    assert [r for r in state.runs if r in ids] == ids[:1]
    backfill = state.cursors["nightly"].backfill
    assert backfill is not None and backfill.slots == list(slots[1:])
    for i, run_id in enumerate(ids):
        assert state.runs[run_id].origin == "backfill"
        now = NOW + timedelta(minutes=i + 1)
        state = tick(nightly, state, now, completed(state.tracks[run_id]["a"])).state
        assert state.runs[run_id].status is RunStatus.CONSOLIDATING
        open_backfills = [r for r in state.runs.values() if r.origin == "backfill"
                          and r.status in (RunStatus.SCHEDULED, RunStatus.RUNNING)]
        assert len(open_backfills) == (1 if i < 2 else 0)
    assert state.cursors["nightly"].backfill is None


def test_a_cancel_stops_open_tracks_and_compensates_completed_ones() -> None:
    saga = schedule(on_failure="compensate", tracks=[
        {"name": "done", "run": "true", "compensate": {"run": "undo"}},
        {"name": "busy", "run": "sleep 99"}])
    first = tick(saga, State(), NOW, requests=[trigger()])
    state = tick(saga, first.state, NOW, completed(first.state.tracks[MANUAL]["done"])).state
    cancel = CancelRequest(MANUAL, Act(by="carol", at=NOW, reason="wrong"))
    decision = tick(saga, state, NOW + timedelta(minutes=1), requests=[cancel])
    assert decision.state.tracks[MANUAL]["busy"].phase is TrackPhase.CANCELLED
    assert decision.state.runs[MANUAL].cancelled == cancel.act
    assert [r.key for r in decision.dispatch] == [f"{MANUAL}--done--undo--1"]
    assert decision.answers[f"cancel {MANUAL}"] == f"{MANUAL}: cancelled by carol: wrong"
    late = tick(saga, decision.state, NOW + timedelta(minutes=2), requests=[cancel])
    assert late.answers[f"cancel {MANUAL}"] == (f"{MANUAL}: not cancelled: already "
                                                "cancelled by carol: wrong")
    assert not late.dispatch and not late.cancel
