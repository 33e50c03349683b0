"""The state tree: parsing, stable serialisation, minimal diffs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orchestrator import state as st
from orchestrator.errors import InvalidId
from orchestrator.models import Cursor, Run, RunStatus, Track, TrackPhase, TrackSpec

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


def _state() -> st.State:
    state = st.State()
    for i, status in enumerate([RunStatus.RUNNING, RunStatus.COMPLETED]):
        run_id = f"job--2026120{i + 1}T0700Z"
        state.runs[run_id] = Run(run_id=run_id, schedule_id="job", slot=T0, fire_at=T0,
                                 created_at=T0, deadline=T0 + timedelta(hours=1),
                                 status=status, tracks=["a"])
        state.tracks[run_id] = {"a": Track(run_id=run_id, name="a",
                                           phase=TrackPhase.RUNNING if i == 0
                                           else TrackPhase.COMPLETE,
                                           spec=TrackSpec(name="a", run="true"))}
    state.cursors["job"] = Cursor(schedule_id="job", since=T0)
    return state


def test_dump_then_load_round_trips_byte_for_byte() -> None:
    files = _state().dump()
    again = st.load(files, all_tracks=True).dump()
    assert again == files
    assert all(data.endswith(b"}\n") for data in files.values())
    assert b'"schedule_id": "job"' in files["state/schedules/job.json"]


def test_load_skips_the_tracks_of_finished_runs_unless_asked() -> None:
    files = _state().dump()
    assert set(st.load(files).tracks) == {"job--20261201T0700Z"}
    assert set(st.load(files, all_tracks=True).tracks) == {"job--20261201T0700Z",
                                                          "job--20261202T0700Z"}


def test_dump_with_a_base_leaves_out_untouched_records() -> None:
    base = _state()
    new = base.copy()
    assert new.dump(base=base) == {}
    run = new.runs["job--20261201T0700Z"]
    new.runs[run.run_id] = run.model_copy(update={"description": "changed"})
    assert list(new.dump(base=base)) == ["state/runs/job--20261201T0700Z/run.json"]


def test_changes_keeps_only_real_differences_and_deletions_of_existing_files() -> None:
    old = {"state/a.json": b"1\n", "state/b.json": b"2\n"}
    new: dict[str, bytes | None] = {"state/a.json": b"1\n", "state/b.json": b"3\n",
                                    "state/c.json": None, "state/a2.json": None}
    assert st.changes(old, new) == {"state/b.json": b"3\n"}
    assert st.changes(old, {"state/a.json": None}) == {"state/a.json": None}


def test_a_corrupt_record_names_its_file_and_field() -> None:
    files = _state().dump()
    files["state/schedules/job.json"] = b'{"schedule_id": "job", "since": "yesterday"}\n'
    with pytest.raises(st.CorruptState, match=r"state/schedules/job.json: since: "):
        st.load(files)


@pytest.mark.parametrize("bad", ["../x", "a/b", "UPPER", "", "x" * 65])
def test_paths_refuse_ids_that_could_escape_the_state_tree(bad: str) -> None:
    with pytest.raises(InvalidId):
        st.run_path(bad)
    with pytest.raises(InvalidId):
        st.track_path("job--20261201T0700Z", bad)


def test_run_ids_must_carry_a_slot() -> None:
    with pytest.raises(InvalidId, match="expected <schedule-id>--<YYYYMMDDTHHMMZ>"):
        st.run_path("job--2026")
