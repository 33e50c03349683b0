"""``orchestrator validate`` over a corpus of malformed schedule files.

Each bad file sits beside a valid one: the run must exit 1, print exactly one line
naming the bad file and its field, never a traceback, and still preview the good one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.config.track_workflow import SHIPPED

CORPUS = Path(__file__).resolve().parent.parent / "data" / "bad_schedules"
FROM = ["--from", "2026-11-01T00:00:00Z"]

# file -> the field its one error line must name
EXPECTED = {
    "syntax-trailing-comma.json": "line 4 column 1",
    "syntax-truncated.json": "line 4 column 1",
    "empty.json": "line 1 column 1",
    "not-utf8.json": "(file)",
    "top-level-array.json": "(top level)",
    "unknown-field.json": "timezon",
    "unknown-track-field.json": "tracks.0.comand",
    "both-cron-and-at.json": "at",
    "neither-cron-nor-at.json": "cron",
    "cron-six-fields.json": "cron",
    "cron-out-of-range.json": "cron",
    "cron-words.json": "cron",
    "cron-extension.json": "cron",
    "cron-never-fires.json": "cron",
    "cron-not-a-string.json": "cron",
    "unknown-timezone.json": "timezone",
    "timezone-folder.json": "timezone",
    "timezone-traversal.json": "timezone",
    "tracks-empty.json": "tracks",
    "tracks-missing.json": "tracks",
    "tracks-duplicate.json": "tracks.1.name",
    "track-name-upper.json": "tracks.0.name",
    "track-name-double-dash.json": "tracks.0.name",
    "track-name-traversal.json": "tracks.0.name",
    "track-without-work.json": "tracks.0",
    "timeout-zero.json": "tracks.0.timeout_minutes",
    "timeout-negative.json": "tracks.1.timeout_minutes",
    "max-attempts-string.json": "tracks.0.max_attempts",
    "max-attempts-float.json": "tracks.0.max_attempts",
    "inputs-not-strings.json": "tracks.0.inputs.days",
    "enabled-string.json": "enabled",
    "overlap-unknown.json": "overlap",
    "catchup-unknown.json": "catchup",
    "catchup-window-negative.json": "catchup_window_minutes",
    "deadline-zero.json": "deadline_minutes",
    "max-runs-zero.json": "max_runs_per_day",
    "jitter-too-large.json": "jitter_seconds",
    "dst-gap-unknown.json": "dst.gap",
    "dst-unknown-key.json": "dst.fall",
    "at-not-a-date.json": "at",
    "workflow-path.json": "workflow",
    "description-number.json": "description",
    "schema-not-string.json": "$schema",
    "duplicate-key.json": "cron",
    "Nightly.json": "id",
    "a..b.json": "id",
    "double--dash.json": "id",
    "-leading-dash.json": "id",
    "x" * 65 + ".json": "id",
    "with space.json": "id",
}

GOOD = {
    "$schema": "./schedule.schema.json",
    "cron": "7 2 * * *",
    "timezone": "America/New_York",
    "tracks": [{"name": "a", "run": "true"}],
}


def make_repo(tmp_path: Path, *bad: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "schedules").mkdir(parents=True)
    (repo / "schedules" / "good.json").write_text(json.dumps(GOOD, indent=2) + "\n")
    for path in bad:
        shutil.copyfile(path, repo / "schedules" / path.name)
    return repo


def test_the_corpus_and_the_expectations_match() -> None:
    names = {p.name for p in CORPUS.iterdir()}
    assert names == set(EXPECTED)
    assert len(names) >= 25


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_bad_file_is_one_line_naming_file_and_field(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, CORPUS / name)
    rc = main(["--repo", str(repo), "validate", "--preview", "2", *FROM])
    out, err = capsys.readouterr()
    assert rc == 1
    lines = err.splitlines()
    assert lines == [line for line in lines if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"orchestrator: schedules/{name}: {EXPECTED[name]}: "), lines[0]
    assert "Traceback" not in out + err
    # The valid file beside it is still previewed.
    assert "good  (schedules/good.json)" in out
    assert "next: Sun 2026-11-01 02:07 EST   2026-11-01T07:07:00Z" in out
    assert "1 schedule valid, 1 invalid" in out


def test_the_whole_corpus_at_once_reports_every_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, *CORPUS.iterdir())
    rc = main(["--repo", str(repo), "validate", "--format", "json", *FROM])
    out, err = capsys.readouterr()
    assert rc == 1
    report = json.loads(out)
    assert report["ok"] is False
    assert [s["id"] for s in report["schedules"]] == ["good"]
    assert {e["file"] for e in report["errors"]} == {f"schedules/{n}" for n in EXPECTED}
    assert len(err.splitlines()) == len(EXPECTED)


def test_as_a_real_process(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, CORPUS / "timeout-negative.json", CORPUS / "syntax-truncated.json")
    proc = subprocess.run(
        [sys.executable, "-c", "from orchestrator.cli import run; run()",
         "--repo", str(repo), "validate", "--preview", "1", *FROM],
        capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "orchestrator: schedules/syntax-truncated.json: line 4 column 1: invalid JSON: "
        "Expecting value",
        "orchestrator: schedules/timeout-negative.json: tracks.1.timeout_minutes: "
        "Input should be greater than 0",
    ]
    assert "2026-11-01T07:07:00Z" in proc.stdout


def test_the_cli_validates_without_importing_pydantic_s_plugin_loader(tmp_path: Path) -> None:
    """pydantic's plugin loader is answered by the CLI's stand-in on a release it was
    checked against (``orchestrator/support/process.py``): validating schedules never
    imports it, nor with it ``importlib.metadata`` (about 3 % of a no-op tick; httpx
    may still import that module where pygments is installed)."""
    repo = make_repo(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "from orchestrator.cli import run; run()",
         "--repo", str(repo), "validate", "--preview", "1", *FROM],
        capture_output=True, text=True, timeout=60, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "orchestrator.config.models" in imported  # the models were built: it validated
    assert "pydantic.plugin._loader" not in imported


def test_a_twin_of_another_suffix_is_refused_and_the_json_file_is_the_schedule(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    shutil.copyfile(repo / "schedules" / "good.json", repo / "schedules" / "twin.json")
    shutil.copyfile(repo / "schedules" / "good.json", repo / "schedules" / "twin.JSON")
    assert main(["--repo", str(repo), "validate", *FROM]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "orchestrator: schedules/twin.JSON: id: not read: schedules/twin.json is schedule "
        "'twin'; a suffix other than lower-case .json names no schedule beside it: delete "
        "or rename this file",
    ]
    assert "good  (schedules/good.json)" in out
    assert "twin  (schedules/twin.json)" in out


def test_duplicate_ids_without_a_json_file_reject_both(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    shutil.copyfile(repo / "schedules" / "good.json", repo / "schedules" / "twin.Json")
    shutil.copyfile(repo / "schedules" / "good.json", repo / "schedules" / "twin.JSON")
    assert main(["--repo", str(repo), "validate", *FROM]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "orchestrator: schedules/twin.JSON: id: duplicate id 'twin' (also "
        "schedules/twin.Json); rename one file",
        "orchestrator: schedules/twin.Json: id: duplicate id 'twin' (also "
        "schedules/twin.JSON); rename one file",
    ]
    assert "good  (schedules/good.json)" in out and "twin  (" not in out


def test_valid_files_exit_zero_and_the_schema_is_not_a_schedule(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    (repo / "schedules" / "schedule.schema.json").write_text('{"type": "object"}\n')
    (repo / "schedules" / "README.md").write_text("not a schedule\n")
    assert main(["--repo", str(repo), "validate", *FROM]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines()[-1] == "1 schedule valid, 0 invalid"


def test_no_schedule_file_fails_the_check_unless_allowed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A pull-request check run with the wrong working-directory must not pass on nothing.
    assert main(["--repo", str(tmp_path), "validate"]) == 1
    out = capsys.readouterr()
    assert "0 schedules valid" in out.out
    assert out.err.startswith("orchestrator: no schedule files in ")
    assert out.err.count("\n") == 1
    assert main(["--repo", str(tmp_path), "validate", "--allow-empty"]) == 0


def test_validate_finds_the_repository_from_a_subfolder_as_git_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    monkeypatch.chdir(repo / "schedules")
    assert main(["validate", *FROM]) == 0
    assert "1 schedule valid, 0 invalid" in capsys.readouterr().out
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    assert main(["validate", *FROM]) == 1
    assert "no schedule files in" in capsys.readouterr().err


@pytest.mark.parametrize(("zone", "meant"), [
    ("EST", "America/New_York"), ("MST", "America/Denver"), ("HST", "Pacific/Honolulu"),
    ("EST5EDT", "America/New_York"), ("US/Eastern", "America/New_York"),
    ("Etc/GMT+5", "inverted")])
def test_a_fixed_or_legacy_zone_warns_naming_the_zone_meant_and_fails_strict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], zone: str, meant: str) -> None:
    repo = make_repo(tmp_path)
    write(repo, "ny", cron="7 9 * * *", timezone=zone)
    assert main(["--repo", str(repo), "validate", *FROM]) == 0
    warned = [line for line in capsys.readouterr().out.splitlines() if "warning:" in line
              and f"timezone {zone!r}" in line]
    assert len(warned) == 1 and meant in warned[0]
    assert main(["--repo", str(repo), "validate", "--strict", *FROM]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "schedules/ny.json" in err and "--strict" in err


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Europe/Berlin", "Asia/Tokyo"])
def test_a_place_or_utc_gets_no_zone_warning(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str],
                                             zone: str) -> None:
    repo = make_repo(tmp_path)
    write(repo, "here", cron="7 9 * * *", timezone=zone)
    assert main(["--repo", str(repo), "validate", "--strict", *FROM]) == 0
    assert "timezone" not in capsys.readouterr().out


def write(repo: Path, name: str, **fields: object) -> None:
    data = {"tracks": [{"name": "a", "run": "true"}], **fields}
    (repo / "schedules" / f"{name}.json").write_text(json.dumps(data) + "\n")


def test_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    write(repo, "often", cron="*/2 * * * *")
    write(repo, "top", cron="0 9 * * *")
    write(repo, "kolkata", cron="0 9 * * *", timezone="Asia/Kolkata")  # 03:30 UTC
    write(repo, "either", cron="7 9 1 * 1")
    write(repo, "fall", cron="30 1 * * *", timezone="America/New_York")
    write(repo, "spring", cron="*/30 2 * * *", timezone="America/New_York")
    write(repo, "busy", cron="* * * * *", timezone="America/New_York")
    rc = main(["--repo", str(repo), "validate", "--preview", "3", "--format", "json", *FROM])
    assert rc == 0
    warnings = {s["id"]: s["warnings"] for s in json.loads(capsys.readouterr().out)["schedules"]}
    assert any("2 minutes apart" in w for w in warnings["often"])
    assert any("minute 0" in w for w in warnings["top"])
    assert warnings["kolkata"] == []
    assert any("EITHER" in w for w in warnings["either"])
    assert warnings["fall"] == [
        "2026-11-01 01:30 occurs twice in America/New_York (clocks go back): runs only at the "
        "first occurrence"]
    assert warnings["good"] == []

    main(["--repo", str(repo), "validate", "--preview", "3", "--format", "json",
          "--from", "2026-03-08T06:00:00Z"])
    warnings = {s["id"]: s["warnings"] for s in json.loads(capsys.readouterr().out)["schedules"]}
    assert [w for w in warnings["spring"] if "skipped" in w] == [
        "2026-03-08 02:00 does not exist in America/New_York (clocks go forward): skipped",
        "2026-03-08 02:30 does not exist in America/New_York (clocks go forward): skipped"]
    main(["--repo", str(repo), "validate", "--preview", "200", "--format", "json",
          "--from", "2026-11-01T05:00:00Z"])
    busy = next(s for s in json.loads(capsys.readouterr().out)["schedules"] if s["id"] == "busy")
    assert len(busy["next"]) == 200
    assert busy["warnings"][3] == "... and 57 more runs changed by daylight saving in the preview"
    # three notes, their summary, the interval; not minute 0, one minute among all
    assert len(busy["warnings"]) == 5
    assert not any("minute 0" in w for w in busy["warnings"] + warnings["often"])

    main(["--repo", str(repo), "validate", "--preview", "3", "--format", "json",
          "--from", "2026-03-08T06:00:00Z"])
    warnings = {s["id"]: s["warnings"] for s in json.loads(capsys.readouterr().out)["schedules"]}
    assert [w for w in warnings["good"] if "forward" in w] == [
        "2026-03-08 02:07 does not exist in America/New_York (clocks go forward): runs at "
        "03:00 EDT (07:00 UTC) instead"]


def test_markdown_for_the_step_summary(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path, CORPUS / "unknown-field.json")
    write(repo, "pipes", cron="7 9 * * *", description="a | b")
    rc = main(["--repo", str(repo), "validate", "--preview", "2", "--format", "markdown",
               *FROM])
    out, err = capsys.readouterr()
    assert rc == 1
    assert out.startswith("## Schedules\n")
    assert ("| `schedules/unknown-field.json` | `timezon` | unknown field; did you mean "
            "'timezone'? |") in out
    assert "| Sun 2026-11-01 02:07 EST | 2026-11-01T07:07:00Z |" in out
    assert "a \\| b" in out
    assert err.count("\n") == 1


@pytest.mark.slow
def test_markdown_warns_instead_of_a_green_check_when_a_schedule_misses_most_slots(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    write(repo, "busy", cron="* * * * *")
    assert main(["--repo", str(repo), "cron-sync", *FROM]) == 0
    capsys.readouterr()
    rc = main(["--repo", str(repo), "validate", "--format", "markdown", *FROM])
    out = capsys.readouterr().out
    assert rc == 0
    assert "✅ tick.yml has the ticks" not in out
    missed = re.search(r"> ⚠️ busy misses ([\d,]+) of its ([\d,]+) slots", out)
    assert missed, out
    assert "," in missed.group(1)  # 498784 is written 498,784
    assert "not fired: skipped (" in out and ") or missed (" in out
    assert "minute 0" not in out  # every minute is not a choice of minute 0


def test_one_shots_in_the_past_warn_and_preview_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    write(repo, "once", at="2026-10-01T12:00:00", timezone="Europe/London")
    assert main(["--repo", str(repo), "validate", "--preview", "3", "--format", "json",
                 *FROM]) == 0
    once = json.loads(capsys.readouterr().out)["schedules"][1]
    assert once["next"] == []
    assert once["warnings"] == ["'at' 2026-10-01T11:00:00Z is in the past: a one-shot that "
                                "never fired fires at the next tick"]


def test_a_missing_workflow_or_a_run_less_track_on_the_default_workflow_warns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    write(repo, "typo", cron="7 9 * * *", workflow="trak.yml")
    write(repo, "inputs", cron="7 9 * * *",
          tracks=[{"name": "a", "inputs": {"k": "v"}}, {"name": "b", "run": "true"}])
    write(repo, "fine", cron="7 9 * * *")
    rc = main(["--repo", str(repo), "validate", "--format", "json", *FROM])
    assert rc == 0
    no_folder = {s["id"]: s["warnings"] for s in json.loads(capsys.readouterr().out)[
        "schedules"]}
    assert no_folder["typo"] == [] and no_folder["inputs"] == []  # local use: no check
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "track.yml").write_text("name: track\n")
    assert main(["--repo", str(repo), "validate", "--format", "json", *FROM]) == 0
    warnings = {s["id"]: s["warnings"] for s in json.loads(capsys.readouterr().out)[
        "schedules"]}
    assert any("'trak.yml' is not in .github/workflows" in w for w in warnings["typo"])
    assert any("track 'a' has no 'run'" in w for w in warnings["inputs"])
    assert warnings["fine"] == []


def test_fan_in_next_tick_on_a_workflow_without_the_input_warns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    write(repo, "cheap", cron="7 * * * *", fan_in="next_tick")
    workflows = repo / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "track.yml").write_text("name: track\n")  # from before the input
    assert main(["--repo", str(repo), "validate", "--format", "json", *FROM]) == 0
    [cheap] = [s for s in json.loads(capsys.readouterr().out)["schedules"]
               if s["id"] == "cheap"]
    assert any("has no 'fan_in' input" in w for w in cheap["warnings"])
    shutil.copy(SHIPPED, workflows / "track.yml")
    assert main(["--repo", str(repo), "validate", "--format", "json", *FROM]) == 0
    [cheap] = [s for s in json.loads(capsys.readouterr().out)["schedules"]
               if s["id"] == "cheap"]
    assert not any("fan_in" in w for w in cheap["warnings"])
    write(repo, "cheap", cron="7 * * * *", fan_in="next_tick",
          tracks=[{"name": f"t{i}", "run": "true"} for i in range(65)])
    assert main(["--repo", str(repo), "validate", "--format", "json", *FROM]) == 0
    [cheap] = [s for s in json.loads(capsys.readouterr().out)["schedules"]
               if s["id"] == "cheap"]
    assert any("with 65 tracks: a tick reads at most 64" in w for w in cheap["warnings"])


def test_a_preview_cut_short_by_the_search_horizon_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    write(repo, "leap", cron="7 12 29 2 *")
    assert main(["--repo", str(repo), "validate", "--preview", "5", *FROM]) == 0
    out = capsys.readouterr().out
    assert ("  warning: preview shows fewer runs than asked: the search stopped at "
            "2036-11-08T00:00:00Z, 10 years after 2026-11-01T00:00:00Z: 3 of 5 runs found "
            "before it (schedules this rare are not searched further)\n") in out
    assert main(["--repo", str(repo), "validate", "--preview", "3", *FROM]) == 0
    assert "search stopped" not in capsys.readouterr().out


@pytest.mark.parametrize(("expr", "warning"), [
    ("*/61 * * * *", "minute field: step 61 in '*/61' is larger than its range 0-59, so it "
                     "matches only 0"),
    ("7 */24 * * *", "hour field: step 24 in '*/24' is larger than its range 0-23, so it "
                     "matches only 0"),
])
def test_a_step_larger_than_its_range_is_valid_with_a_warning(
        expr: str, warning: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    write(repo, "big", cron=expr)
    assert main(["--repo", str(repo), "validate", "--format", "json", *FROM]) == 0
    big = json.loads(capsys.readouterr().out)["schedules"][0]
    assert big["id"] == "big" and warning in big["warnings"]


@pytest.mark.parametrize(("expr", "extension"), [
    ("0 2 L * *", "'L' uses L"), ("0 2 15W * *", "'15W' uses W"),
    ("0 2 * * 1#2", "'1#2' uses #"), ("H 2 * * *", "'H' uses H"),
])
def test_extensions_of_other_crons_are_named(
        expr: str, extension: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    write(repo, "ext", cron=expr)
    assert main(["--repo", str(repo), "validate", *FROM]) == 1
    err = capsys.readouterr().err
    assert err.startswith("orchestrator: schedules/ext.json: cron: ")
    assert extension in err and "an unsupported extension" in err
    assert "not a number" not in err


def test_a_one_shot_in_a_spring_forward_gap_is_noted_once_with_or_without_a_preview(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path)
    write(repo, "once", at="2027-03-14T02:30:00", timezone="America/New_York")
    note = ("2027-03-14 02:30 does not exist in America/New_York (clocks go forward): runs at "
            "03:00 EDT (07:00 UTC) instead")
    for preview in ("0", "3"):
        assert main(["--repo", str(repo), "validate", "--preview", preview, "--format", "json",
                     *FROM]) == 0
        once = json.loads(capsys.readouterr().out)["schedules"][1]
        assert once["warnings"] == [note]
        assert len(once["next"]) == (1 if preview == "3" else 0)
