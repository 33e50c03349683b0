"""Schedule files on disk: the loader's errors name file and field; writes are atomic."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config.files import dumps, load_all, load_schedule, write_schedule
from orchestrator.errors import ScheduleError, UserError

TRACK = {"name": "a", "run": "true"}


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
        ("timezone", "bad.json"), ("enabled", "bad.json"), ("(file)", "sub.json")]
    assert result.errors[-1].problem == "not a regular file (a directory)"
    assert result.invalid_files == [f"{tmp_path.name}/bad.json", f"{tmp_path.name}/sub.json"]


def test_load_all_of_a_missing_folder_is_empty(tmp_path: Path) -> None:
    result = load_all(tmp_path / "nope")
    assert result.schedules == [] and result.errors == []


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
