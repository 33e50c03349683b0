"""The schedule model, the loader's error messages, the schema and atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.config.files import load_all, schedule_json_schema, schema_text
from orchestrator.config.models import CatchupPolicy, OverlapPolicy, Schedule, ScheduleSpec
from orchestrator.cron import DstFold, DstGap
from tests.builders import schedule_spec

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
# parse(**fields): a spec with one track, read as a schedule file is read.
parse = schedule_spec


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
