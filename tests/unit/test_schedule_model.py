"""The schedule model, the loader's error messages, the schema and atomic writes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.errors import ScheduleError, UserError
from orchestrator.models import (
    CatchupPolicy,
    DstFold,
    DstGap,
    OverlapPolicy,
    Schedule,
    ScheduleSpec,
)
from orchestrator.schedules import (
    dumps,
    load_all,
    load_schedule,
    schedule_json_schema,
    schema_text,
    write_schedule,
)

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
TRACK = {"name": "a", "run": "true"}


def parse(**fields: Any) -> ScheduleSpec:
    return ScheduleSpec.model_validate_json(json.dumps({"tracks": [TRACK], **fields}))


def test_defaults_for_everything_but_timing_and_tracks() -> None:
    spec = parse(cron="7 2 * * *")
    assert spec.timezone == "UTC" and spec.enabled and spec.description == ""
    assert spec.workflow == "track.yml"
    assert spec.overlap is OverlapPolicy.SKIP
    assert spec.catchup is CatchupPolicy.LATEST and spec.catchup_window_minutes == 60
    assert spec.deadline_minutes == 240 and spec.max_runs_per_day is None
    assert spec.jitter_seconds == 0
    assert (spec.dst.gap, spec.dst.fold) == (DstGap.SHIFT, DstFold.FIRST)
    track = spec.tracks[0]
    assert (track.timeout_minutes, track.max_attempts, track.retry_backoff_seconds) == (30, 1, 60)


def test_strict_frozen_and_closed() -> None:
    spec = parse(cron="7 2 * * *")
    with pytest.raises(ValidationError):
        spec.enabled = False  # type: ignore[misc]
    with pytest.raises(ValidationError, match="Extra inputs"):
        parse(cron="7 2 * * *", retries=3)
    with pytest.raises(ValidationError, match="valid integer"):
        parse(cron="7 2 * * *", jitter_seconds="5")
    with pytest.raises(ValidationError, match="valid boolean"):
        parse(cron="7 2 * * *", enabled=1)


def test_schema_reference_is_allowed_and_policies_read_from_strings() -> None:
    spec = parse(**{"$schema": "./schedule.schema.json", "cron": "7 2 * * *",
                    "overlap": "cancel_previous", "dst": {"gap": "skip", "fold": "both"}})
    assert spec.schema_ref == "./schedule.schema.json"
    assert spec.overlap is OverlapPolicy.CANCEL_PREVIOUS
    assert spec.dst.fold is DstFold.BOTH


def test_fractional_timeouts_and_inputs_only_tracks() -> None:
    spec = ScheduleSpec.model_validate_json(json.dumps({
        "cron": "7 2 * * *",
        "tracks": [{"name": "t", "inputs": {"k": "v"}, "timeout_minutes": 0.5}]}))
    assert spec.tracks[0].run is None and spec.tracks[0].timeout_minutes == 0.5


def test_ids_are_validated_as_path_segments() -> None:
    assert Schedule(id="a" * 64, spec=parse(cron="7 2 * * *")).id == "a" * 64
    for bad in ["a" * 65, "../x", "a/b", "A", "", "-a", "a.b"]:
        with pytest.raises(ValidationError):
            Schedule(id=bad, spec=parse(cron="7 2 * * *"))


def test_zone_names_must_be_iana_keys_the_same_everywhere() -> None:
    assert parse(cron="7 2 * * *", timezone="Australia/Lord_Howe").timezone
    for bad in ["localtime", "America", "EST5EDT/x", "/etc/localtime", "utc "]:
        with pytest.raises(ValidationError, match="time zone"):
            parse(cron="7 2 * * *", timezone=bad)
    with pytest.raises(ValidationError, match="did you mean 'America/New_York'"):
        parse(cron="7 2 * * *", timezone="America/New_york")


# --------------------------------------------------------------------------- loading


def write(folder: Path, name: str, data: Any) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def test_load_schedule_names_the_file_relative_to_the_repo(tmp_path: Path) -> None:
    folder = tmp_path / "schedules"
    folder.mkdir()
    good = write(folder, "nightly.json", {"cron": "7 2 * * *", "tracks": [TRACK]})
    schedule = load_schedule(good)
    assert (schedule.id, schedule.path) == ("nightly", "schedules/nightly.json")
    bad = write(folder, "bad.json", {"cron": "7 2 * * *", "tracks": [
        TRACK, {"name": "b", "run": "x", "timeout_minutes": -1}]})
    with pytest.raises(ScheduleError) as info:
        load_schedule(bad, tmp_path)
    err = info.value
    assert isinstance(err, UserError) and err.exit_code == 1
    assert (err.file, err.field) == ("schedules/bad.json", "tracks.1.timeout_minutes")
    assert err.message.startswith("schedules/bad.json: tracks.1.timeout_minutes: ")


def test_json_syntax_errors_give_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "x.json", '{\n  "cron": "7 2 * * *"\n  "tracks": []\n}\n')
    with pytest.raises(ScheduleError) as info:
        load_schedule(path)
    assert info.value.field == "line 3 column 3"
    assert "Expecting ',' delimiter" in info.value.problem


def test_load_all_keeps_valid_ones_sorted_and_reports_every_problem(tmp_path: Path) -> None:
    for name in ["b", "a", "c"]:
        write(tmp_path, f"{name}.json", {"cron": "7 2 * * *", "tracks": [TRACK]})
    write(tmp_path, "bad.json", {"cron": "7 2 * * *", "timezone": "Nowhere", "enabled": "no",
                                 "tracks": [TRACK]})
    write(tmp_path, "schedule.schema.json", {"type": "object"})
    (tmp_path / "sub.json").mkdir()
    result = load_all(tmp_path)
    assert [s.id for s in result.schedules] == ["a", "b", "c"]
    assert [(e.field, e.file.rsplit("/", 1)[-1]) for e in result.errors] == [
        ("timezone", "bad.json"), ("enabled", "bad.json")]
    assert result.invalid_files == [f"{tmp_path.name}/bad.json"]


def test_load_all_of_a_missing_folder_is_empty(tmp_path: Path) -> None:
    result = load_all(tmp_path / "nope")
    assert result.schedules == [] and result.errors == []


def test_the_shipped_examples_are_valid() -> None:
    result = load_all(REPO_ROOT / "schedules")
    assert result.errors == []
    by_id = {s.id: s.spec for s in result.schedules}
    assert len(by_id) >= 3
    weekday = [s for s in by_id.values() if s.timezone == "America/New_York"]
    assert weekday and len(weekday[0].tracks) == 4 and weekday[0].cron
    assert any(s.cron and s.timezone == "UTC" for s in by_id.values())
    assert any(s.at is not None and not s.enabled for s in by_id.values())
    assert all(s.schema_ref == "./schedule.schema.json" for s in by_id.values())


# --------------------------------------------------------------------------- schema


def test_committed_schema_equals_the_generated_one() -> None:
    committed = (REPO_ROOT / "schedules" / "schedule.schema.json").read_text()
    assert committed == schema_text(), (
        "regenerate: orchestrator schema > schedules/schedule.schema.json")


def test_schema_documents_every_field() -> None:
    schema = schedule_json_schema()
    assert schema["additionalProperties"] is False
    assert "$schema" in schema["properties"]
    assert set(schema["required"]) == {"tracks"}
    for name, prop in schema["properties"].items():
        assert prop.get("description"), name
    track = schema["$defs"]["TrackSpec"]["properties"]
    for name, prop in track.items():
        assert prop.get("description"), name


@pytest.mark.parametrize("name", ["unknown-field.json", "tracks-empty.json",
                                  "timeout-zero.json", "overlap-unknown.json",
                                  "track-name-upper.json", "workflow-path.json"])
def test_editors_using_the_schema_flag_what_the_model_rejects(name: str) -> None:
    import jsonschema

    schema = json.loads((REPO_ROOT / "schedules" / "schedule.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for example in (REPO_ROOT / "schedules").glob("*.json"):
        if example.name != "schedule.schema.json":
            validator.validate(json.loads(example.read_text()))
    bad = json.loads((REPO_ROOT / "tests" / "data" / "bad_schedules" / name).read_text())
    assert not validator.is_valid(bad)


# --------------------------------------------------------------------------- writing


def test_write_is_stable_and_atomic(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    data = {"$schema": "./schedule.schema.json", "cron": "7 2 * * *", "enabled": True,
            "tracks": [{"name": "a", "run": "echo é"}]}
    write_schedule(path, data)
    text = path.read_text(encoding="utf-8")
    assert text == dumps(data)
    assert text.endswith("}\n") and '\n  "cron": "7 2 * * *",\n' in text and "é" in text
    assert list(json.loads(text)) == list(data)  # key order kept
    assert os.stat(path).st_mode & 0o777 == 0o644
    os.chmod(path, 0o600)
    write_schedule(path, {**data, "enabled": False})
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]  # no temp file left


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    write_schedule(path, {"cron": "7 2 * * *"})
    before = path.read_bytes()
    with pytest.raises(TypeError):
        write_schedule(path, {"cron": object()})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]
