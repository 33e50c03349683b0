from datetime import UTC, datetime
from functools import partial

import pytest
from pydantic import ValidationError

from orchestrator.errors import IllegalTransition
from orchestrator.state import machine
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Cursor, Run, Transition
from tests.builders import track

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


# _track(phase): track t of run a--20261201T0700Z, pending by default.
_track = partial(track, "t", run_id="a--20261201T0700Z")


def _run(status: RunStatus = RunStatus.SCHEDULED) -> Run:
    return Run(run_id="a--20261201T0700Z", schedule_id="a", slot=T0, fire_at=T0,
               created_at=T0, deadline=T0, status=status, tracks=["t"])


@pytest.mark.parametrize("src", list(TrackPhase))
@pytest.mark.parametrize("dst", list(TrackPhase))
def test_every_track_pair_is_allowed_exactly_when_the_table_says(src: TrackPhase,
                                                                 dst: TrackPhase) -> None:
    allowed = dst in machine.TRACK_TRANSITIONS[src]
    if allowed:
        moved = machine.move_track(_track(src), dst, T0, "because")
        assert moved.phase is dst
        assert moved.state_history[-1].model_dump(by_alias=True) == {
            "from": src.value, "to": dst.value, "at": T0, "reason": "because"}
    else:
        with pytest.raises(IllegalTransition, match=f"{src.value} -> {dst.value}"):
            machine.move_track(_track(src), dst, T0)


@pytest.mark.parametrize("src", list(RunStatus))
@pytest.mark.parametrize("dst", list(RunStatus))
def test_every_run_pair_is_allowed_exactly_when_the_table_says(src: RunStatus,
                                                               dst: RunStatus) -> None:
    if dst in machine.RUN_TRANSITIONS[src]:
        assert machine.move_run(_run(src), dst, T0).status is dst
    else:
        with pytest.raises(IllegalTransition):
            machine.move_run(_run(src), dst, T0)


def test_terminal_states_have_no_automatic_exit() -> None:
    assert machine.TRACK_TRANSITIONS[TrackPhase.COMPLETE] == frozenset()
    assert machine.TRACK_TRANSITIONS[TrackPhase.CANCELLED] == frozenset()
    assert machine.TRACK_TRANSITIONS[TrackPhase.SKIPPED] == frozenset()
    assert machine.RUN_TRANSITIONS[RunStatus.COMPLETED] == frozenset()
    assert machine.TRACK_OPEN.isdisjoint(machine.TRACK_TERMINAL)
    assert set(TrackPhase) == machine.TRACK_OPEN | machine.TRACK_TERMINAL


def test_a_waiting_poll_leaves_only_for_another_poll_or_its_end() -> None:
    # no attempt is used up: waiting never goes back to pending (that is a retry)
    assert machine.TRACK_TRANSITIONS[TrackPhase.WAITING] == {
        TrackPhase.DISPATCHED, TrackPhase.TAPPED_OUT, TrackPhase.CANCELLED}
    assert TrackPhase.WAITING in machine.TRACK_OPEN


def test_a_move_validates_what_it_changes() -> None:
    with pytest.raises(ValidationError):
        machine.move_track(_track(), TrackPhase.DISPATCHED, T0, "go", attempt="2")
    with pytest.raises(ValidationError):
        machine.move_run(_run(), RunStatus.RUNNING, T0, "go", no_such_field=1)
    with pytest.raises(ValidationError):  # naive datetimes are refused, as on load
        machine.move_run(_run(), RunStatus.RUNNING, T0, "go", finished_at=datetime(2026, 1, 1))


def test_revise_refuses_what_model_copy_would_store() -> None:
    cursor = Cursor(schedule_id="a", since=T0)
    assert cursor.model_copy(update={"done": "yes"}).done == "yes"  # the hole revise closes
    with pytest.raises(ValidationError):
        machine.revise(cursor, done="yes")
    done = machine.revise(cursor, done=True, last_run_id="a--20261201T0700Z")
    assert (done.done, done.last_run_id, done.since) == (True, "a--20261201T0700Z", T0)
    assert cursor.done is False  # the original is untouched


def test_revise_keeps_aliased_fields() -> None:
    step = Transition(from_="pending", to="dispatched", at=T0)
    assert machine.revise(step, reason="why").model_dump(by_alias=True) == {
        "from": "pending", "to": "dispatched", "at": T0, "reason": "why"}
