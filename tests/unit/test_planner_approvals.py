"""Approval gates in the planner: a gated track waits for ``approve`` or ``reject``,
its dependants with it; past its ``timeout_minutes`` it is tapped out; the wait counts
neither against the track's timeout nor against the run's deadline."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.brief import BriefContext, build_view, dashboard
from orchestrator.cadence.wake import due_moments
from orchestrator.config.channels import EventKind
from orchestrator.config.files import describe_error
from orchestrator.config.models import Schedule, ScheduleSpec
from orchestrator.executors.base import Observation
from orchestrator.notify.events import Links, Seen, derive
from orchestrator.planner import ApprovalRequest, Decision
from orchestrator.runs import status
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Act
from tests.builders import schedule
from tests.planning import tick

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "g--20261201T0700Z"
BY = {"by": ["alice", "bob"], "timeout_minutes": 60}


def gated(approval: dict[str, Any] = BY, **fields: Any) -> Schedule:
    """Schedule ``g``: ``build``, then ``deploy`` behind a gate, then ``smoke``."""
    return schedule("g", tracks=[
        {"name": "build", "run": "true"},
        {"name": "deploy", "run": "true", "needs": ["build"], "approval": approval},
        {"name": "smoke", "run": "true", "needs": ["deploy"]}], **fields)


def phases(state: State) -> dict[str, str]:
    return {n: t.phase.value for n, t in sorted(state.tracks[RUN].items())}


def request(verdict: str, by: str, at: datetime, track: str = "deploy") -> ApprovalRequest:
    return ApprovalRequest(RUN, track, verdict,  # type: ignore[arg-type]
                           Act(by=by, at=at, reason="change 42"))


def built(s: Schedule) -> tuple[Decision, datetime]:
    """Fire the run and see ``build`` complete: ``deploy`` begins to wait."""
    d = tick(s, State(), T0)
    [build] = d.dispatch
    done = {build.key: Observation(key=build.key, phase=TrackPhase.COMPLETE,
                                   started_at=T0, finished_at=T0 + timedelta(minutes=1))}
    at = T0 + timedelta(minutes=2)
    return tick(s, d.state, at, done), at


def test_a_gated_track_waits_and_its_dependants_with_it() -> None:
    d, at = built(gated())
    assert d.dispatch == []
    assert phases(d.state) == {"build": "complete", "deploy": "pending", "smoke": "pending"}
    gate = d.state.tracks[RUN]["deploy"].gate
    assert gate is not None and gate.since == at and gate.decided is None
    assert "deploy: waiting for approval by alice, bob" in d.touched_runs[RUN]
    later = tick(gated(), d.state, at + timedelta(minutes=30))
    assert later.dispatch == [] and later.state.tracks[RUN]["deploy"].gate == gate


def test_approve_dispatches_it_and_a_second_approve_starts_nothing() -> None:
    d, at = built(gated())
    when = at + timedelta(minutes=5)
    ok = tick(gated(), d.state, when, requests=[request("approve", "Alice", when)])
    assert [r.track for r in ok.dispatch] == ["deploy"]
    assert ok.answers[f"approve {RUN}/deploy"] == f"{RUN}/deploy: approved by Alice: change 42"
    gate = ok.state.tracks[RUN]["deploy"].gate
    assert gate is not None and gate.approved is not None and gate.approved.by == "Alice"
    again = tick(gated(), ok.state, when, requests=[request("approve", "bob", when)])
    assert again.dispatch == []
    assert again.answers[f"approve {RUN}/deploy"] == (
        f"{RUN}/deploy: already approved by Alice: change 42")


def test_an_approver_not_in_by_is_refused_and_a_team_lets_anyone() -> None:
    d, at = built(gated())
    no = tick(gated(), d.state, at, requests=[request("approve", "mallory", at)])
    assert no.dispatch == [] and no.answers[f"approve {RUN}/deploy"] == (
        f"{RUN}/deploy: not approved: mallory is not in its approval.by (alice, bob)")
    team = gated({"by": ["alice", "team-ops"]})
    d, at = built(team)
    yes = tick(team, d.state, at, requests=[request("approve", "mallory", at)])
    assert [r.track for r in yes.dispatch] == ["deploy"]


def test_reject_ends_it_rejected_and_its_dependants_skipped() -> None:
    d, at = built(gated())
    no = tick(gated(), d.state, at, requests=[request("reject", "bob", at)])
    assert no.dispatch == []
    assert phases(no.state) == {"build": "complete", "deploy": "rejected", "smoke": "skipped"}
    assert no.state.runs[RUN].status is RunStatus.CONSOLIDATING
    assert no.state.dlq == {}  # never parked, never retried
    tracks = [no.state.tracks[RUN][n] for n in ("build", "deploy", "smoke")]
    view = build_view(BriefContext(run=no.state.runs[RUN], tracks=tracks, dead_letters=[],
                                   polls=[], generated_at=at, last_tick=at))
    assert (view.headline.title, view.headline.detail) == (
        "1 of 3 tracks rejected",
        "deploy rejected by bob: change 42. 1 complete, 1 skipped.")
    late = tick(gated(), no.state, at, requests=[request("approve", "alice", at)])
    assert late.answers[f"approve {RUN}/deploy"] == (
        f"{RUN}/deploy: not approved: already rejected by bob: change 42")


def test_an_early_approval_lets_the_track_go_when_its_needs_end() -> None:
    s = gated()
    d = tick(s, State(), T0)
    [build] = d.dispatch
    early = tick(s, d.state, T0, requests=[request("approve", "alice", T0)])
    assert early.dispatch == [] and early.state.tracks[RUN]["deploy"].gate is not None
    done = {build.key: Observation(key=build.key, phase=TrackPhase.COMPLETE,
                                   started_at=T0, finished_at=T0)}
    after = tick(s, early.state, T0 + timedelta(minutes=1), done)
    assert [r.track for r in after.dispatch] == ["deploy"]


def test_past_its_wait_it_is_tapped_out_and_the_run_deadline_spares_it() -> None:
    s = gated({"by": ["alice"], "timeout_minutes": 600}, deadline_minutes=30)
    d, at = built(s)
    # the run's deadline (30 minutes) passes: the waiting track is not tapped out
    later = tick(s, d.state, at + timedelta(minutes=90))
    assert phases(later.state)["deploy"] == "pending"
    gone = tick(s, later.state, at + timedelta(minutes=600))
    assert phases(gone.state) == {"build": "complete", "deploy": "tapped_out",
                                  "smoke": "skipped"}
    assert "no approval by alice within 600 minutes" in (
        gone.state.tracks[RUN]["deploy"].state_history[-1].reason)


def test_the_end_of_a_wait_is_a_due_moment() -> None:
    s = gated({"by": ["alice"], "timeout_minutes": 600})
    d, at = built(s)
    reasons = {w.reason: w.at for w in due_moments([s], d.state, at)}
    assert reasons[f"{RUN}: deploy approval timeout"] == at + timedelta(minutes=600)


def test_an_approved_track_gets_back_the_time_its_run_had_left() -> None:
    s = gated({"by": ["alice"], "timeout_minutes": 600}, deadline_minutes=30)
    d, at = built(s)
    when = at + timedelta(minutes=120)
    ok = tick(s, d.state, when, requests=[request("approve", "alice", when)])
    assert [r.track for r in ok.dispatch] == ["deploy"]
    left = d.state.runs[RUN].deadline - at
    assert ok.state.runs[RUN].deadline == when + left
    key = ok.dispatch[0].key
    running = tick(s, ok.state, when + timedelta(minutes=1),
                   {key: Observation(key=key, phase=TrackPhase.RUNNING, started_at=when)})
    assert phases(running.state)["deploy"] == "running"


@pytest.mark.parametrize(("approval", "words"), [
    ({}, "give exactly one of 'by' and 'environment'"),
    ({"by": ["alice"], "environment": "production"}, "give exactly one of"),
    ({"by": []}, "at least 1 item"),
    ({"environment": "prod uction"}, "should match pattern"),
    ({"by": ["alice"], "timeout_minutes": 0}, "greater than 0"),
])
def test_a_bad_approval_names_the_field(approval: dict[str, Any], words: str) -> None:
    data = {"cron": "0 7 * * *", "tracks": [{"name": "a", "run": "true",
                                            "approval": approval}]}
    with pytest.raises(ValidationError) as err:
        ScheduleSpec.model_validate_json(json.dumps(data))
    where, problem = describe_error(err.value.errors()[0])
    assert where.startswith("tracks.0.approval") and words in problem


def test_the_wait_is_told_once_as_approval_waiting() -> None:
    s = gated()
    d = tick(s, State(), T0)
    [build] = d.dispatch
    done = {build.key: Observation(key=build.key, phase=TrackPhase.COMPLETE,
                                   started_at=T0, finished_at=T0)}
    at = T0 + timedelta(minutes=2)
    waits = tick(s, d.state, at, done)
    seen = Seen(now=at, links=Links(), specs={"g": s.spec}, failing={})
    [event] = derive(d.state, waits.state, seen)
    assert event.kind is EventKind.APPROVAL_WAITING and event.at == at
    assert event.id == f"approval_waiting:{RUN}:deploy:1"
    assert event.summary == (f"{RUN}/deploy waits for approval by alice, bob: `orchestrator "
                             f"approve {RUN} deploy --reason REASON` or `orchestrator reject "
                             f"{RUN} deploy --reason REASON`")
    assert event.details["by"] == "alice, bob" and event.details["since"] == "2026-12-01T07:02:00Z"
    again = tick(s, waits.state, at + timedelta(minutes=1))
    assert derive(waits.state, again.state, seen) == []


def test_status_the_dashboard_and_the_brief_list_what_waits() -> None:
    d, at = built(gated())
    report = status.from_state(d.state, at, [gated()], [], at, timedelta(minutes=90))
    [item] = [i for i in report["attention"] if i["kind"] == "approval"]
    assert item == {"kind": "approval", "subject": "g",
                    "text": f"{RUN}/deploy waits for approval by alice, bob since "
                            "2026-12-01T07:02:00Z",
                    "command": f"orchestrator approve {RUN} deploy --reason ..."}
    board = dashboard.build([gated()], [], d.state, at, lambda ids: {}, at)
    assert [i["text"] for i in board.attention if i["kind"] == "approval"] == [
        f"{RUN}/deploy waits for approval by alice, bob since 2026-12-01 07:02:00 UTC"]
    tracks = [d.state.tracks[RUN][n] for n in ("build", "deploy", "smoke")]
    view = build_view(BriefContext(run=d.state.runs[RUN], tracks=tracks, dead_letters=[],
                                   polls=[], generated_at=at, last_tick=at))
    assert view.headline.title == "Waiting for approval"
    assert view.headline.detail == "deploy by alice, bob since 2026-12-01 07:02:00 UTC."
    assert view.headline.command == f"orchestrator approve {RUN} deploy --reason ..."
    assert {r.track.name: r.phase_label for r in view.rows}["deploy"] == (
        "waiting for approval")


def test_an_environment_gate_is_github_s_there_and_held_for_anyone_elsewhere() -> None:
    s = gated({"environment": "production"})
    d, at = built(s)  # the local executor has no environments: the tick holds it
    assert d.dispatch == [] and d.state.tracks[RUN]["deploy"].awaits_approval
    yes = tick(s, d.state, at, requests=[request("approve", "mallory", at)])
    assert [r.track for r in yes.dispatch] == ["deploy"]
    on_github = tick(s, State(), T0, executor="github")
    [build] = on_github.dispatch
    done = {build.key: Observation(key=build.key, phase=TrackPhase.COMPLETE,
                                   started_at=T0, finished_at=T0)}
    sent = tick(s, on_github.state, at, done, executor="github",
                requests=[request("approve", "alice", at)])
    assert [r.track for r in sent.dispatch] == ["deploy"]  # its reviewers hold the leg
    assert sent.answers[f"approve {RUN}/deploy"] == (
        f"{RUN}/deploy: not approved: production's reviewers decide on GitHub")
