"""orchestrator.json: strict like a schedule file, with its own schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.errors import UserError
from orchestrator.repo_config import (
    CONFIG_FILE,
    RepoConfig,
    load_repo_config,
    repo_config_json_schema,
)


def write(root: Path, data: object) -> None:
    (root / CONFIG_FILE).write_text(json.dumps(data))


def test_no_file_means_the_defaults(tmp_path: Path) -> None:
    config = load_repo_config(tmp_path)
    assert config == RepoConfig()
    assert config.cadence.mode == "derived"
    assert config.cadence.lead_minutes == [15, 10, 5]


def test_a_fixed_cadence_with_its_cron(tmp_path: Path) -> None:
    write(tmp_path, {"$schema": "./orchestrator.schema.json",
                     "cadence": {"mode": "fixed", "fixed_cron": ["*/20 * * * *"]}})
    config = load_repo_config(tmp_path)
    assert config.cadence.fixed_cron == ["*/20 * * * *"]
    with pytest.raises(Exception, match="frozen"):
        config.cadence.mode = "derived"  # type: ignore[misc]


@pytest.mark.parametrize(("data", "message"), [
    ({"cadense": {}}, "orchestrator.json: cadense: unknown field"),
    ({"cadence": {"mode": "hourly"}}, "orchestrator.json: cadence.mode: Input should be "
                                      "'derived' or 'fixed'"),
    ({"cadence": {"lead_minutes": [10, 10]}}, "cadence.lead_minutes: leads must differ"),
    ({"cadence": {"lead_minutes": [90]}}, "cadence.lead_minutes: each lead is 1 to 55"),
    ({"cadence": {"safety_every_hours": 5}}, "cadence.safety_every_hours: must divide 24"),
    ({"cadence": {"fixed_cron": ["61 * * * *"]}}, "cadence.fixed_cron.0:"),
    ({"cadence": {"lead_minutes": "15"}}, "cadence.lead_minutes: Input should be a valid "
                                          "array"),
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
