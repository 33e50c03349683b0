"""orchestrator.json: strict like a schedule file, with its own schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config.repository import (
    CONFIG_FILE,
    RepoConfig,
    defaults,
    load_repo_config,
    repo_config_json_schema,
)
from orchestrator.errors import UserError


def write(root: Path, data: object) -> None:
    (root / CONFIG_FILE).write_text(json.dumps(data))


def test_no_file_means_the_defaults(tmp_path: Path) -> None:
    config = load_repo_config(tmp_path)
    assert config == RepoConfig()
    # built without validation: the same values, and the same types, as a validated one
    assert defaults() == RepoConfig() and repr(defaults()) == repr(RepoConfig())
    assert RepoConfig.model_validate(defaults().model_dump(by_alias=True)) == config
    assert config.cadence.mode == "derived"
    assert config.cadence.lead_minutes == [15, 10, 5]


def test_a_fixed_cadence_with_its_cron(tmp_path: Path) -> None:
    write(tmp_path, {"$schema": "./orchestrator.schema.json",
                     "cadence": {"mode": "fixed", "fixed_cron": ["*/20 * * * *"]}})
    config = load_repo_config(tmp_path)
    assert config.cadence.fixed_cron == ["*/20 * * * *"]
    with pytest.raises(Exception, match="frozen"):
        config.cadence.mode = "derived"  # type: ignore[misc]


def test_which_slots_a_tick_lingers_for(tmp_path: Path) -> None:
    write(tmp_path, {"cadence": {"linger_min_interval_hours": 2,
                                 "linger_schedules": {"health": True}}})
    cadence = load_repo_config(tmp_path).cadence
    assert cadence.linger_min_interval_hours == 2.0
    assert cadence.linger_schedules == {"health": True}
    assert RepoConfig().cadence.linger_min_interval_hours == 12


@pytest.mark.parametrize(("data", "message"), [
    ({"cadense": {}}, "orchestrator.json: cadense: unknown field"),
    ({"cadence": {"mode": "hourly"}}, "orchestrator.json: cadence.mode: Input should be "
                                      "'derived', 'fixed' or 'external'"),
    ({"cadence": {"lead_minutes": [10, 10]}}, "cadence.lead_minutes: leads must differ"),
    ({"cadence": {"lead_minutes": [90]}}, "cadence.lead_minutes: each lead is 1 to 55"),
    ({"cadence": {"safety_every_hours": 5}}, "cadence.safety_every_hours: must divide 24"),
    ({"cadence": {"fixed_cron": ["61 * * * *"]}}, "cadence.fixed_cron.0:"),
    ({"cadence": {"lead_minutes": "15"}}, "cadence.lead_minutes: Input should be a valid "
                                          "array"),
    ({"cadence": {"linger_min_interval_hours": -1}},
     "cadence.linger_min_interval_hours: Input should be greater than or equal to 0"),
    ({"cadence": {"linger_schedules": {"nightly": "yes"}}},
     "cadence.linger_schedules.nightly: Input should be a valid boolean"),
])
def test_each_problem_is_one_line_naming_the_field(tmp_path: Path, data: object,
                                                    message: str) -> None:
    write(tmp_path, data)
    with pytest.raises(UserError) as err:
        load_repo_config(tmp_path)
    assert message in err.value.message
    assert "\n" not in err.value.message


def test_not_json_is_named(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE).write_text("{cadence")
    with pytest.raises(UserError, match=r"orchestrator\.json: not a JSON file"):
        load_repo_config(tmp_path)


def test_the_schema_accepts_the_defaults_and_rejects_unknown_fields() -> None:
    import jsonschema

    schema = repo_config_json_schema()
    jsonschema.validate(RepoConfig().model_dump(mode="json", by_alias=True,
                                                exclude_none=True), schema)
    jsonschema.validate({"cadence": {"mode": "fixed"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"cadence": {"mode": "fixed", "typo": 1}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"max_concurrent": 3}, schema)


def test_the_stampede_caps(tmp_path: Path) -> None:
    assert (RepoConfig().max_concurrent_tracks, RepoConfig().max_dispatches_per_tick) == (
        None, None)
    write(tmp_path, {"max_concurrent_tracks": 20, "max_dispatches_per_tick": 50})
    config = load_repo_config(tmp_path)
    assert (config.max_concurrent_tracks, config.max_dispatches_per_tick) == (20, 50)
    for bad, message in (({"max_concurrent_tracks": 0}, "max_concurrent_tracks: Input "
                          "should be greater than or equal to 1"),
                         ({"max_dispatches_per_tick": "5"}, "max_dispatches_per_tick: "
                          "Input should be a valid integer"),
                         ({"max_parallel": 2}, "max_parallel: unknown field")):
        write(tmp_path, bad)
        with pytest.raises(UserError) as info:
            load_repo_config(tmp_path)
        assert info.value.message == f"orchestrator.json: {message}"
    props = repo_config_json_schema()["properties"]
    assert {"max_concurrent_tracks", "max_dispatches_per_tick"} <= set(props)


def test_the_retention_setting_defaults_to_30_days_and_refuses_zero(tmp_path: Path) -> None:
    write(tmp_path, {"keep_finished_runs_days": 0})
    with pytest.raises(UserError) as info:
        load_repo_config(tmp_path)
    assert info.value.message == ("orchestrator.json: keep_finished_runs_days: Input should "
                                  "be greater than or equal to 1")
    write(tmp_path, {"keep_finished_runs_days": None})
    assert load_repo_config(tmp_path).keep_finished_runs_days is None
    prop = repo_config_json_schema()["properties"]["keep_finished_runs_days"]
    assert prop["default"] == 30
    assert "null: keep every run" in prop["description"]


def test_one_bad_webhook_leaves_notify_at_its_default_and_every_other_setting_applies(
        tmp_path: Path) -> None:
    from orchestrator.config.repository import RepoSettings

    write(tmp_path, {"max_concurrent_tracks": 3, "keep_finished_runs_days": 9,
                     "notify": {"github_issues": True,
                                "webhooks": [{"url_secret": "bad name"}]}})
    settings = RepoSettings.read(tmp_path)
    assert settings.max_concurrent_tracks == 3 and settings.keep_finished_runs_days == 9
    assert settings.notify.github_issues is False and settings.dropped == "notify"
    line = settings.caps_problem
    assert line is not None and line.startswith("orchestrator.json: notify.webhooks.0")
    assert line.endswith("'notify' is not applied, the other settings are")


def test_a_file_that_is_not_json_applies_nothing_and_says_so(tmp_path: Path) -> None:
    from orchestrator.config.repository import RepoSettings

    (tmp_path / CONFIG_FILE).write_text('{"max_concurrent_tracks": 3,')
    settings = RepoSettings.read(tmp_path)
    assert settings.config is None and settings.max_concurrent_tracks is None
    assert settings.caps_problem is not None and settings.caps_problem.endswith(
        "none of its settings is applied (its caps neither)")
