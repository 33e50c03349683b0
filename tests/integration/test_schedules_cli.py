"""``orchestrator schedules``: edits in the working tree round-trip through ``validate``."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import pytest

from orchestrator.cli import main

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
FROM = ["--from", "2026-11-01T00:00:00Z"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO_ROOT / "schedules", root / "schedules")
    return root


def run(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["--repo", str(repo), *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_add_then_validate(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "schedules" / "schedule.schema.json").unlink()
    rc, out, err = run(repo, capsys, "schedules", "add", "research", "--every", "weekday",
                       "--time", "02:15", "--timezone", "America/New_York",
                       "--track", "fetch=echo fetch", "--track", "train=python3 -c 'print(1)'",
                       "--overlap", "buffer_one", "--catchup", "all", "--dst-fold", "both",
                       "--timeout-minutes", "12.5", "--max-attempts", "3",
                       "--description", "nightly research")
    assert (rc, err) == (0, "")
    assert out.startswith("wrote schedules/research.json: at 02:15 on Monday through Friday "
                          "(America/New_York)\n")
    text = (repo / "schedules" / "research.json").read_text()
    data = json.loads(text)
    assert list(data) == ["$schema", "description", "cron", "timezone", "enabled", "tracks",
                          "overlap", "catchup", "dst"]
    assert data["cron"] == "15 2 * * 1-5" and data["enabled"] is True
    assert data["tracks"][1] == {"name": "train", "run": "python3 -c 'print(1)'",
                                 "timeout_minutes": 12.5, "max_attempts": 3}
    assert text.endswith("\n") and text.startswith('{\n  "$schema": "./schedule.schema.json",')
    assert (repo / "schedules" / "schedule.schema.json").exists()

    rc, out, err = run(repo, capsys, "validate", "--preview", "2", *FROM)
    assert (rc, err) == (0, "")
    assert "research  (schedules/research.json)" in out
    assert "Mon 2026-11-02 02:15 EST   2026-11-02T07:15:00Z" in out


@pytest.mark.parametrize(("args", "cron"), [
    (["--cron", "*/10 * * * *"], "*/10 * * * *"),
    (["--every", "minute"], "* * * * *"),
    (["--every", "hour", "--minute", "23"], "23 * * * *"),
    (["--every", "day", "--time", "7:05"], "5 7 * * *"),
    (["--weekly", "--on-day", "5", "--on-day", "1", "--time", "18:30"], "30 18 * * 1,5"),
])
def test_add_timing_shortcuts(args: list[str], cron: str, repo: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(repo, capsys, "schedules", "add", "s", *args, "--track", "a=true")
    assert (rc, err) == (0, "")
    assert json.loads((repo / "schedules" / "s.json").read_text())["cron"] == cron
    assert run(repo, capsys, "validate")[0] == 0


def test_add_a_disabled_one_shot(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(repo, capsys, "schedules", "add", "once", "--at", "2026-12-24T18:00",
                     "--timezone", "Europe/Paris", "--track", "a=true", "--disabled")
    assert rc == 0 and "(disabled)" in out
    data = json.loads((repo / "schedules" / "once.json").read_text())
    assert (data["at"], data["enabled"]) == ("2026-12-24T18:00", False)
    rc, out, _ = run(repo, capsys, "schedules", "next", "once", "--json", *FROM)
    assert json.loads(out) == [{"utc": "2026-12-24T17:00:00Z",
                                "local": "2026-12-24T18:00:00+01:00", "kind": "normal"}]


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--cron", "0 0 2 * * *", "--track", "a=true"], 1, "schedules/n.json: cron: cron must have 5"),
    (["--cron", "7 2 * * *", "--timezone", "Mars/Base", "--track", "a=true"], 1, "timezone"),
    (["--cron", "7 2 * * *", "--track", "Bad=true"], 1, "invalid track name 'Bad'"),
    (["--cron", "7 2 * * *", "--track", "a=true", "--track", "a=false"], 1, "tracks.1.name"),
    (["--cron", "7 2 * * *", "--track", "a=true", "--jitter-seconds", "-1"], 1, "jitter_seconds"),
    (["--cron", "7 2 * * *"], 2, "at least one --track"),
    (["--cron", "7 2 * * *", "--every", "day", "--track", "a=true"], 2, "exactly one of"),
    (["--every", "day", "--track", "a=true"], 2, "--time HH:MM"),
    (["--every", "day", "--time", "25:00", "--track", "a=true"], 2, "expected HH:MM"),
    (["--weekly", "--time", "09:00", "--track", "a=true"], 2, "--on-day"),
    (["--cron", "7 2 * * *", "--track", "no-equals"], 2, "NAME=COMMAND"),
])
def test_add_refuses_bad_input_and_writes_nothing(
        args: list[str], code: int, message: str, repo: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(p.name for p in (repo / "schedules").iterdir())
    rc, _, err = run(repo, capsys, "schedules", "add", "n", *args)
    assert rc == code
    assert message in err
    assert "Traceback" not in err
    assert sorted(p.name for p in (repo / "schedules").iterdir()) == before


@pytest.mark.parametrize("bad_id", ["../escape", "a/b", "Upper", "a..b", "x" * 65, ""])
def test_ids_cannot_leave_the_schedules_folder(bad_id: str, repo: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(repo, capsys, "schedules", "add", bad_id, "--cron", "7 2 * * *",
                     "--track", "a=true")
    assert rc == 1 and "invalid schedule id" in err
    for verb in ["show", "next", "enable", "disable", "remove"]:
        rc, _, err = run(repo, capsys, "schedules", verb, bad_id)
        assert rc == 1 and "invalid schedule id" in err, verb
    assert not (repo / "escape.json").exists()
    assert sorted(p.name for p in repo.iterdir()) == ["schedules"]


def test_add_refuses_to_overwrite(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (repo / "schedules" / "health.json").read_bytes()
    rc, _, err = run(repo, capsys, "schedules", "add", "health", "--cron", "7 2 * * *",
                     "--track", "a=true")
    assert rc == 1 and "already exists" in err
    assert (repo / "schedules" / "health.json").read_bytes() == before


def one_line_changed(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(),
                                                  lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_disable_then_enable_is_byte_identical(repo: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / "schedules" / "nightly.json"
    original = path.read_bytes()
    rc, out, _ = run(repo, capsys, "schedules", "disable", "nightly")
    assert rc == 0 and out.startswith("disabled schedules/nightly.json")
    assert one_line_changed(original.decode(), path.read_text()) == [
        '-  "enabled": true,', '+  "enabled": false,']
    rc, out, _ = run(repo, capsys, "validate", "--format", "json")
    nightly = [s for s in json.loads(out)["schedules"] if s["id"] == "nightly"]
    assert nightly[0]["enabled"] is False
    assert run(repo, capsys, "schedules", "enable", "nightly")[0] == 0
    assert path.read_bytes() == original


def test_toggling_a_hand_formatted_file_keeps_its_layout(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / "schedules" / "compact.json"
    original = ('{"cron": "7 2 * * *", "enabled":true,\n'
                ' "tracks": [{"name": "a", "run": "echo \\"enabled\\": true"}]}\n')
    path.write_text(original)
    assert run(repo, capsys, "schedules", "disable", "compact")[0] == 0
    assert path.read_text() == original.replace('"enabled":true', '"enabled":false')
    assert run(repo, capsys, "schedules", "enable", "compact")[0] == 0
    assert path.read_text() == original


def test_enable_when_already_enabled_writes_nothing(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / "schedules" / "health.json"
    stamp = path.stat().st_mtime_ns
    rc, out, _ = run(repo, capsys, "schedules", "enable", "health")
    assert rc == 0 and "already enabled" in out
    assert path.stat().st_mtime_ns == stamp


def test_disable_inserts_the_key_after_the_timing(repo: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / "schedules" / "plain.json"
    path.write_text(json.dumps({"cron": "7 2 * * *", "timezone": "UTC",
                                "tracks": [{"name": "a", "run": "true"}]}))
    assert run(repo, capsys, "schedules", "disable", "plain")[0] == 0
    assert list(json.loads(path.read_text())) == ["cron", "timezone", "enabled", "tracks"]
    assert run(repo, capsys, "validate")[0] == 0


def test_toggling_an_invalid_file_is_refused(repo: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / "schedules" / "broken.json"
    path.write_text('{"cron": "7 2 * * *", "enabled": true, "tracks": []}\n')
    rc, _, err = run(repo, capsys, "schedules", "disable", "broken")
    assert rc == 1 and err.startswith("orchestrator: schedules/broken.json: tracks: ")
    assert '"enabled": true' in path.read_text()


def test_next_json_from_a_fall_back_day(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(repo, capsys, "schedules", "add", "early", "--cron", "30 1 * * *", "--timezone",
               "America/New_York", "--track", "a=true")[0] == 0
    rc, out, err = run(repo, capsys, "schedules", "next", "early", "-n", "5",
                       "--from", "2026-11-01T00:00:00Z", "--json")
    assert (rc, err) == (0, "")
    assert json.loads(out) == [
        {"utc": "2026-11-01T05:30:00Z", "local": "2026-11-01T01:30:00-04:00", "kind": "normal"},
        {"utc": "2026-11-02T06:30:00Z", "local": "2026-11-02T01:30:00-05:00", "kind": "normal"},
        {"utc": "2026-11-03T06:30:00Z", "local": "2026-11-03T01:30:00-05:00", "kind": "normal"},
        {"utc": "2026-11-04T06:30:00Z", "local": "2026-11-04T01:30:00-05:00", "kind": "normal"},
        {"utc": "2026-11-05T06:30:00Z", "local": "2026-11-05T01:30:00-05:00", "kind": "normal"},
    ]
    rc, out, _ = run(repo, capsys, "schedules", "next", "early", "-n", "2",
                     "--from", "2026-11-01T00:00:00Z")
    assert out.splitlines() == ["2026-11-01T05:30:00Z  Sun 2026-11-01 01:30 EDT",
                                "2026-11-02T06:30:00Z  Mon 2026-11-02 01:30 EST"]


def test_next_notes_a_dst_shift_and_a_disabled_schedule(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(repo, capsys, "schedules", "add", "gap", "--cron", "30 2 * * *", "--timezone",
               "America/New_York", "--track", "a=true", "--disabled")[0] == 0
    rc, out, err = run(repo, capsys, "schedules", "next", "gap", "-n", "1",
                       "--from", "2026-03-08T05:00:00Z")
    assert rc == 0
    assert out == ("2026-03-08T07:00:00Z  Sun 2026-03-08 03:00 EDT  (2026-03-08 02:30 does not "
                   "exist in America/New_York (clocks go forward): runs at 03:00 EDT (07:00 UTC) "
                   "instead)\n")
    assert "disabled" in err


def test_next_wants_an_offset(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(repo, capsys, "schedules", "next", "health", "--from", "2026-11-01T00:00")
    assert rc == 2 and "give a UTC offset" in err


def test_list_and_show(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(repo, capsys, "schedules", "list", "--json", *FROM)
    assert rc == 0
    listed = json.loads(out)
    ids = [s["id"] for s in listed["schedules"]]
    assert ids == sorted(ids) and {"health", "nightly"} <= set(ids)
    health = next(s for s in listed["schedules"] if s["id"] == "health")
    assert health["next"] == {"utc": "2026-11-01T00:07:00Z", "local": "2026-11-01T00:07:00+00:00",
                              "kind": "normal"}
    assert listed["errors"] == []

    rc, out, _ = run(repo, capsys, "schedules", "list", *FROM)
    line = next(x for x in out.splitlines() if x.startswith("health"))
    assert "enabled" in line and "at 00:07, 06:07, 12:07 and 18:07 every day (UTC)" in line

    rc, out, _ = run(repo, capsys, "schedules", "show", "nightly", "--json", *FROM)
    shown = json.loads(out)
    assert shown["spec"]["timezone"] == "America/New_York"
    assert shown["spec"]["$schema"] == "./schedule.schema.json"
    assert shown["next"][0]["utc"] == "2026-11-02T07:15:00Z"
    assert len(shown["next"]) == 5
    rc, out, _ = run(repo, capsys, "schedules", "show", "nightly", *FROM)
    assert rc == 0 and "tracks:    4" in out and "next:      Mon 2026-11-02 02:15 EST" in out


def test_list_shows_no_next_run_for_a_disabled_schedule(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(repo, capsys, "schedules", "disable", "nightly")[0] == 0
    rc, out, _ = run(repo, capsys, "schedules", "list", *FROM)
    line = next(x for x in out.splitlines() if x.startswith("nightly"))
    assert rc == 0 and "disabled  next none (disabled)" in line and "2026" not in line
    listed = json.loads(run(repo, capsys, "schedules", "list", "--json", *FROM)[1])
    nightly = next(s for s in listed["schedules"] if s["id"] == "nightly")
    assert (nightly["enabled"], nightly["next"]) == (False, None)
    assert run(repo, capsys, "schedules", "enable", "nightly")[0] == 0
    listed = json.loads(run(repo, capsys, "schedules", "list", "--json", *FROM)[1])
    nightly = next(s for s in listed["schedules"] if s["id"] == "nightly")
    assert nightly["next"]["utc"] == "2026-11-02T07:15:00Z"


def test_list_reports_invalid_files_without_failing(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "schedules" / "bad.json").write_text("{")
    rc, out, err = run(repo, capsys, "schedules", "list", "--json", *FROM)
    assert rc == 0
    assert json.loads(out)["errors"][0]["file"] == "schedules/bad.json"
    assert err.startswith("orchestrator: schedules/bad.json: line 1 column 2: invalid JSON")


def test_show_and_remove(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(repo, capsys, "schedules", "show", "ghost")
    assert rc == 1 and "no schedule 'ghost'" in err
    rc, out, _ = run(repo, capsys, "schedules", "remove", "health")
    assert rc == 0 and "removed schedules/health.json" in out
    assert not (repo / "schedules" / "health.json").exists()
    assert run(repo, capsys, "schedules", "remove", "health")[0] == 1


def test_a_file_with_a_byte_order_mark_toggles_and_keeps_it(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo / "schedules" / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{\n  "cron": "7 2 * * *",\n  "enabled": true,\n'
                     b'  "tracks": [{"name": "a", "run": "true"}]\n}\n')
    original = path.read_bytes()
    assert run(repo, capsys, "schedules", "disable", "bom")[0] == 0
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert b'"enabled": false' in path.read_bytes()
    assert run(repo, capsys, "schedules", "enable", "bom")[0] == 0
    assert path.read_bytes() == original


def test_next_says_when_the_search_stopped_at_its_horizon(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(repo, capsys, "schedules", "add", "leap", "--cron", "0 12 29 2 *",
               "--track", "a=true")[0] == 0
    rc, out, err = run(repo, capsys, "schedules", "next", "leap", "-n", "8", *FROM)
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        "2028-02-29T12:00:00Z  Tue 2028-02-29 12:00 UTC",
        "2032-02-29T12:00:00Z  Sun 2032-02-29 12:00 UTC",
        "2036-02-29T12:00:00Z  Fri 2036-02-29 12:00 UTC",
        "fewer runs than asked: the search stopped at 2036-11-08T00:00:00Z, 10 years after "
        "2026-11-01T00:00:00Z: 3 of 8 runs found before it (schedules this rare are not "
        "searched further)"]
    rc, out, err = run(repo, capsys, "schedules", "next", "leap", "-n", "8", "--json", *FROM)
    assert rc == 0 and len(json.loads(out)) == 3  # the JSON stays a list of runs
    assert err.startswith("orchestrator: note: the search stopped at 2036-11-08T00:00:00Z")
    rc, out, err = run(repo, capsys, "schedules", "next", "leap", "-n", "3", *FROM)
    assert rc == 0 and len(out.splitlines()) == 3 and "stopped" not in out + err
