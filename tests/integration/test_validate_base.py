"""``validate --base REF`` in a real git repository with two commits, and the measured
cron lateness that ``validate --format markdown`` reads off the state branch."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cadence.lateness import Sample
from orchestrator.cli import main
from orchestrator.state import layout
from tests.gitrepo import bare_origin, clone, git

MERGED = "2026-12-07T11:45:00Z"
"""06:45 in New York, a Monday: the first tick after merging runs then."""
TRACKS = [{"name": "a", "run": "true"}]


def write(repo: Path, sid: str, **spec: Any) -> None:
    (repo / "schedules" / f"{sid}.json").write_text(
        json.dumps({"tracks": TRACKS, **spec}, indent=2) + "\n")


def commit(repo: Path, message: str) -> None:
    git("add", "-A", cwd=repo)
    git("commit", "--quiet", "--allow-empty", "-m", message, cwd=repo)


def two_commits(tmp_path: Path, base: dict[str, dict[str, Any]],
                head: dict[str, dict[str, Any] | None]) -> Path:
    """A repository whose HEAD^1 holds ``base`` and HEAD ``head`` (None: removed)."""
    repo = tmp_path / "repo"
    (repo / "schedules").mkdir(parents=True)
    git("init", "--quiet", str(repo), cwd=tmp_path)
    for sid, spec in base.items():
        write(repo, sid, **spec)
    commit(repo, "base")
    for sid, changed in head.items():
        if changed is None:
            (repo / "schedules" / f"{sid}.json").unlink()
        else:
            write(repo, sid, **changed)
    commit(repo, "head")
    return repo


def validate(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["--repo", str(repo), "validate", "--format", "markdown", "--from", MERGED,
               *args])
    out, err = capsys.readouterr()
    return rc, out + err


NEW_YORK = {"timezone": "America/New_York"}


def changes_of(out: str) -> str:
    """The section ``--base`` adds, up to the next section."""
    found = re.search(r"## What this pull request changes\n(.*?)(?=\n## |\Z)", out, re.S)
    assert found, out
    return found.group(1)


def test_a_change_of_cron_lists_slots_counts_cost_and_the_first_tick(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = two_commits(tmp_path, {"nightly": {"cron": "0 7 * * *", **NEW_YORK},
                                  "same": {"cron": "7 8 * * *", **NEW_YORK}},
                       {"nightly": {"cron": "30 6 * * 1-5", **NEW_YORK}})
    rc, out = validate(repo, capsys, "--base", "HEAD^1")
    assert rc == 0, out
    section = changes_of(out)
    base = git("rev-parse", "HEAD^1", cwd=repo)
    assert f"Compared with `HEAD^1` ({base[:12]}): 1 schedule differs." in section
    assert "### `nightly`" in section
    assert "`same`" not in section  # unchanged: no section
    assert ("Now at 06:30 on Monday through Friday (America/New\\_York); was at 07:00 every "
            "day (America/New\\_York).") in section
    assert "Slots in the next 30 days: 30 before, 22 after." in section
    assert ("**21 moved** (a removed and an added slot of one local day, paired in time "
            "order): Tue 2026-12-08 07:00 EST → 06:30 EST, ") in section
    assert ("**9 removed**: Mon 2026-12-07 07:00 EST, Sat 2026-12-12 07:00 EST, Sun "
            "2026-12-13 07:00 EST, Sat 2026-12-19 07:00 EST, Sun 2026-12-20 07:00 EST and 4 "
            "more") in section
    assert "**1 added**: Wed 2027-01-06 06:30 EST" in section
    assert ("The first tick after merging (2026-12-07T11:45:00Z) fires 1 slot at once: Mon "
            "2026-12-07 06:30 EST (15 min late); the next slot is Tue 2026-12-08 06:30 EST."
            ) in section
    assert "Cost: -16 runner-minutes a month for its own jobs (60 → 44" in section
    assert "Daylight saving" not in section

    rc = main(["--repo", str(repo), "validate", "--format", "json", "--from", MERGED,
               "--base", "HEAD^1"])
    [found] = json.loads(capsys.readouterr().out)["base"]["schedules"]
    assert (found["id"], len(found["moved"]), len(found["removed"]), len(found["added"])) == (
        "nightly", 21, 9, 1)
    assert found["runner_minutes"] == [60, 44]


def test_the_first_tick_fires_the_missed_slots_of_today_at_once_under_catchup_all(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = two_commits(tmp_path, {"early": {"cron": "0 5 * * *", **NEW_YORK}},
                       {"early": {"cron": "0,30 6 * * *", "catchup": "all",
                                  "catchup_window_minutes": 120, "overlap": "allow",
                                  **NEW_YORK}})
    rc, out = validate(repo, capsys, "--base", "HEAD^1", "--from", "2026-12-07T12:10:00Z")
    assert rc == 0, out
    section = changes_of(out)
    assert ("fires 2 slots at once: Mon 2026-12-07 06:00 EST (70 min late), Mon 2026-12-07 "
            "06:30 EST (40 min late)") in section
    assert "- Policy: catchup: latest -> all" in section
    assert "- Policy: overlap: skip -> allow" in section


def test_a_schedule_added_or_removed_says_so_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = two_commits(tmp_path, {"gone": {"cron": "0 7 * * *"}},
                       {"gone": None, "fresh": {"cron": "15 9 * * *"}})
    rc, out = validate(repo, capsys, "--base", "HEAD^1")
    assert rc == 0, out
    lines = [line for line in changes_of(out).splitlines() if line.startswith("`")]
    assert lines == [
        "`fresh` is new: at 09:15 every day (UTC), 30 slots in the next 30 days, +60 "
        "runner-minutes a month for its own jobs (0 → 60: its tracks and fan-in at every "
        "slot, each job taken as 1 minute); its first tick fires nothing; the next slot is "
        "Tue 2026-12-08 09:15 UTC.",
        "`gone` is removed: 30 slots of the next 30 days no longer fire, -60 runner-minutes "
        "a month for its own jobs (60 → 0: its tracks and fan-in at every slot, each job "
        "taken as 1 minute)."]
    assert "###" not in changes_of(out)


def test_daylight_saving_that_differs_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = two_commits(tmp_path, {"night": {"cron": "30 1 * * *", **NEW_YORK}},
                       {"night": {"cron": "30 2 * * *", **NEW_YORK}})
    rc, out = validate(repo, capsys, "--base", "HEAD^1")
    assert rc == 0, out
    section = changes_of(out)
    assert ("- Daylight saving, new: 2027-03-14 02:30 does not exist in America/New\\_York "
            "(clocks go forward): runs at 03:00 EDT (07:00 UTC) instead") in section
    assert ("- Daylight saving, no longer: 2027-11-07 01:30 occurs twice in "
            "America/New\\_York (clocks go back): runs only at the first occurrence") in section


def test_a_base_that_names_no_commit_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = two_commits(tmp_path, {"nightly": {"cron": "0 7 * * *"}}, {})
    for ref in ("no-such-branch", "--output=x", "HEAD~5"):
        rc, out = validate(repo, capsys, "--base", ref)
        assert rc == 1
        [line] = [x for x in out.splitlines() if x.startswith("orchestrator:")]
        assert line.startswith(f"orchestrator: --base {ref}: no such commit in ")
        assert not (repo / "x").exists()


def test_a_base_without_schedules_has_every_schedule_new(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    git("init", "--quiet", str(repo), cwd=tmp_path)
    (repo / "README.md").write_text("hello\n")
    commit(repo, "first")
    (repo / "schedules").mkdir()
    write(repo, "fresh", cron="15 9 * * *")
    commit(repo, "schedules")
    rc, out = validate(repo, capsys, "--base", "HEAD^1")
    assert rc == 0, out
    assert "`fresh` is new: " in changes_of(out)


def test_schedules_in_a_folder_of_a_larger_repository_are_compared_there(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    top = tmp_path / "mono"
    repo = top / "ops"
    (repo / "schedules").mkdir(parents=True)
    git("init", "--quiet", str(top), cwd=tmp_path)
    (top / "schedules").mkdir()  # the top level's own folder is not the one compared
    write(top, "other", cron="0 1 * * *")
    write(repo, "nightly", cron="0 7 * * *")
    commit(top, "base")
    write(repo, "nightly", cron="30 6 * * *")
    commit(top, "head")
    rc, out = validate(repo, capsys, "--base", "HEAD^1")
    assert rc == 0, out
    section = changes_of(out)
    assert "1 schedule differs." in section and "### `nightly`" in section


# --------------------------------------------------------------------------- lateness


NOW = datetime(2026, 12, 7, 18, 0, tzinfo=UTC)
DAILY = "0 6 * * *"


def with_ledger(tmp_path: Path, hours_late: list[float], **policies: Any) -> Path:
    """A clone whose origin's state branch holds a ledger of daily ticks, each
    ``hours_late`` after its slot, the last one yesterday."""
    origin = bare_origin(tmp_path)
    seed = clone(origin, tmp_path / "seed")
    (seed / "schedules").mkdir()
    write(seed, "nightly", cron="7 6 * * *", **policies)
    workflows = seed / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "tick.yml").write_text(
        f'name: tick\non:\n  schedule:\n    - cron: "{DAILY}"\n  workflow_dispatch:\n')
    commit(seed, "schedules")
    git("push", "--quiet", "origin", "HEAD:main", cwd=seed)
    git("checkout", "--quiet", "--orphan", "orchestrator-state", cwd=seed)
    git("rm", "--quiet", "-r", "-f", ".", cwd=seed)
    first = datetime(2026, 12, 6, 6, 0, tzinfo=UTC) - timedelta(days=len(hours_late) - 1)
    lines = b""
    for n, hours in enumerate(hours_late):
        slot = first + timedelta(days=n)
        created = slot + timedelta(hours=hours)
        lines += Sample(DAILY, slot, created, created + timedelta(minutes=1), n + 1).line()
    (seed / layout.LATENESS).parent.mkdir(parents=True)
    (seed / layout.LATENESS).write_bytes(lines)
    commit(seed, "state")
    git("push", "--quiet", "origin", "HEAD:orchestrator-state", cwd=seed)
    return clone(origin, tmp_path / "work")


def measured(out: str) -> str:
    found = re.search(r"### GitHub's cron, as measured\n(.*?)(?=\n##|\Z)", out, re.S)
    return found.group(1) if found else ""


def test_the_measured_lateness_is_stated_beside_the_preview_and_flags_schedules_at_risk(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = with_ledger(tmp_path, [1, 2, 3, 3, 3, 4], max_lateness_minutes=30)
    rc, out = validate(repo, capsys, "--from", NOW.isoformat())
    assert rc == 0, out
    text = measured(out)
    assert ("Over the last 7 days GitHub created the scheduled ticks 180 min (p50) and 240 "
            "min (p95) after their slots, 6 samples, 0 slots dropped") in text
    assert "> ⚠️ max_lateness_minutes below that p95: `nightly` (30 min). The fix: " in text
    assert "orchestrator cron-sync --external" in text
    # the preview comes first, the measurement beside it, before the cadence
    assert out.index("## Schedules") < out.index("GitHub's cron, as measured") < out.index(
        "## The tick's cadence")


def test_a_schedule_that_tolerates_the_lateness_is_not_flagged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = with_ledger(tmp_path, [1, 2, 3, 3, 3, 4], max_lateness_minutes=300)
    _, out = validate(repo, capsys, "--from", NOW.isoformat())
    assert "6 samples" in measured(out) and "⚠️ max_lateness" not in out


@pytest.mark.parametrize("where", ["no remote", "no ledger"])
def test_without_a_measurement_the_comment_says_nothing_of_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    repo = with_ledger(tmp_path, [] if where == "no ledger" else [3, 3, 3, 3, 3])
    if where == "no remote":  # a pull request from a fork cannot read the branch
        git("remote", "set-url", "origin", str(tmp_path / "gone.git"), cwd=repo)
    rc, out = validate(repo, capsys, "--from", NOW.isoformat())
    assert rc == 0, out
    assert "as measured" not in out and "Traceback" not in out
