"""The state tree: parsing, stable serialisation, minimal diffs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from orchestrator import store
from orchestrator.config.models import TrackSpec
from orchestrator.errors import InvalidId
from orchestrator.planner import Observations, plan
from orchestrator.state import codec, layout
from orchestrator.state import model as state_model
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Cursor, DeadLetter, Run, Track
from tests.builders import schedule

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


def _state() -> state_model.State:
    state = state_model.State()
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
    again = state_model.load(files, all_tracks=True).dump()
    assert again == files
    assert all(data.endswith(b"}\n") for data in files.values())
    assert b'"schedule_id": "job"' in files["state/schedules/job.json"]


def test_load_skips_the_tracks_of_finished_runs_unless_asked() -> None:
    files = _state().dump()
    assert set(state_model.load(files).tracks) == {"job--20261201T0700Z"}
    assert set(state_model.load(files, all_tracks=True).tracks) == {"job--20261201T0700Z",
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
    assert store.changes(old, new) == {"state/b.json": b"3\n"}
    assert store.changes(old, {"state/a.json": None}) == {"state/a.json": None}


def test_a_corrupt_record_names_its_file_and_field() -> None:
    files = _state().dump()
    files["state/schedules/job.json"] = b'{"schedule_id": "job", "since": "yesterday"}\n'
    with pytest.raises(codec.CorruptState, match=r"state/schedules/job.json: since: "):
        codec.parse_record(Cursor, "state/schedules/job.json", files["state/schedules/job.json"])
    loaded = state_model.load(files)
    assert "job" not in loaded.cursors
    assert loaded.quarantine_lines()[0].startswith("quarantined state/schedules/job.json: since: ")


@pytest.mark.parametrize("bad", ["../x", "a/b", "UPPER", "", "x" * 65])
def test_paths_refuse_ids_that_could_escape_the_state_tree(bad: str) -> None:
    with pytest.raises(InvalidId):
        layout.run_path(bad)
    with pytest.raises(InvalidId):
        layout.track_path("job--20261201T0700Z", bad)


def test_run_ids_must_carry_a_slot() -> None:
    with pytest.raises(InvalidId, match="expected <schedule-id>--<YYYYMMDDTHHMMZ>"):
        layout.run_path("job--2026")


def test_a_long_command_is_stored_once_per_run_and_old_records_still_read() -> None:
    run_id = "job--20261201T0700Z"
    spec = TrackSpec(name="a", run="echo " + "x" * 60_000)
    state = state_model.State()
    state.runs[run_id] = Run(run_id=run_id, schedule_id="job", slot=T0, fire_at=T0,
                             created_at=T0, deadline=T0 + timedelta(hours=1),
                             tracks=["a", "b", "c"])
    state.tracks[run_id] = {n: Track(run_id=run_id, name=n, spec=spec.model_copy(
        update={"name": n})) for n in "abc"}
    key = f"{run_id}--a"
    state.dlq[key] = DeadLetter(key=key, run_id=run_id, track="a", reason="x", parked_at=T0,
                                attempts=1, payload=state.tracks[run_id]["a"].spec)
    files = state.dump()
    assert sum(len(data) for data in files.values()) < 3 * 60_000 + 20_000  # not 4 copies
    assert files[layout.specs_path(run_id)].count(b"x" * 60_000) == 3
    again = state_model.load(files, all_tracks=True)
    assert again.tracks == state.tracks and again.dlq == state.dlq
    assert again.dump() == files
    # Records written before specs.json carry their spec inline, and still read.
    old = {**files, layout.dlq_path(key): codec.to_json(state.dlq[key])}
    old.update({layout.track_path(run_id, n): codec.to_json(t)
                for n, t in state.tracks[run_id].items()})
    del old[layout.specs_path(run_id)]
    loaded = state_model.load(old, all_tracks=True)
    assert loaded.tracks == state.tracks and loaded.dlq == state.dlq
    # Without specs.json, a record that left its spec out is quarantined (with its run).
    del files[layout.specs_path(run_id)]
    broken = state_model.load(files, all_tracks=True)
    assert run_id not in broken.runs
    assert broken.quarantined[layout.track_path(run_id, "a")].endswith(
        "spec: not in the record nor in the run's specs.json")


def test_a_field_named_with_a_line_break_is_quoted_in_its_one_line() -> None:
    broken = state_model.load({
        "state/health.json": b'{"local": {"\\n": 1}}',
        "state/schedules/job.json": b'{"schedule_id": "job", "since": "2026-12-01T07:00:00Z", '
                                    b'"fires_per_day": {"\\n": "many"}}'})
    lines = broken.quarantine_lines()
    assert len(lines) == 2 and not any("\n" in line for line in lines)
    assert "state/health.json: '\\n': Extra inputs" in lines[0]
    assert "state/schedules/job.json: fires_per_day.'\\n': " in lines[1]


NO_ZONES = ["", "[]", "../../etc/localtime", "x" * 10_000, "UTC\x00", "America",
            "/etc/localtime", "localtime", "Europe/London "]
"""Not IANA zones: found by the fuzzer (the first two), a path out of the zone tree, a
name too long for the file system, a null byte, a folder, the host's own zone, a space."""


@pytest.mark.parametrize("zone", NO_ZONES, ids=[repr(z[:20]) for z in NO_ZONES])
def test_a_run_naming_no_time_zone_is_quarantined_and_the_planner_never_sees_it(
        zone: str) -> None:
    files = _state().dump()
    path = layout.run_path("job--20261201T0700Z")
    record = json.loads(files[path])
    files[path] = json.dumps({**record, "timezone": zone}).encode()
    state = state_model.load(files)
    assert "job--20261201T0700Z" not in state.runs
    why = state.quarantined[path]
    assert why.startswith(f"{path}: timezone: ") and "\n" not in why and len(why) < 300
    decision = plan([schedule("other", cron="* * * * *")], state, Observations(),
                    T0 + timedelta(minutes=2))
    assert any(r.startswith("other--") for r in decision.state.runs)


def test_runs_written_with_a_zone_still_load() -> None:
    files = _state().dump()
    path = layout.run_path("job--20261201T0700Z")
    for zone in ["UTC", "America/New_York", "Asia/Kolkata", "Etc/GMT+5"]:
        record = json.loads(files[path])
        files[path] = json.dumps({**record, "timezone": zone}).encode()
        assert state_model.load(files).runs["job--20261201T0700Z"].timezone == zone


@pytest.mark.parametrize("workflow", ["../../../user.yml", "a/b.yml", "track.yml?x=1", ""])
def test_a_run_naming_no_workflow_file_is_quarantined(workflow: str) -> None:
    files = _state().dump()
    path = layout.run_path("job--20261201T0700Z")
    files[path] = json.dumps({**json.loads(files[path]), "workflow": workflow}).encode()
    state = state_model.load(files)
    assert "job--20261201T0700Z" not in state.runs
    assert state.quarantined[path].startswith(f"{path}: workflow: ")
    files[path] = json.dumps({**json.loads(files[path]), "workflow": "nightly.yaml"}).encode()
    assert state_model.load(files).runs["job--20261201T0700Z"].workflow == "nightly.yaml"


def test_every_record_kind_names_its_model_in_the_records() -> None:
    """The loader's table names each model by its name (imported with the first record
    read): each name is the model the kind's path holds."""
    kinds = {kind: entry.model_class for kind, entry in state_model.RECORD_KINDS.items()}
    assert kinds == {layout.Kind.RUN: Run, layout.Kind.CURSOR: Cursor,
                     layout.Kind.TRACK: Track, layout.Kind.UNDO: Track,
                     layout.Kind.DEAD_LETTER: DeadLetter}
