"""Shared calendars (``calendars/<name>.json``, named in ``exclude_calendars``): read
from real files through the schedule loader, in each schedule's own zone, honoured by
every reader of slots; a hostile calendar costs only the schedules that name it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.cadence.clock import CLOCK_FILE, calls, check, file_text, read_clock_file
from orchestrator.cadence.derive import derive, schedule_slots
from orchestrator.cadence.estimate import _all_slots
from orchestrator.config.calendar_file import calendar_json_schema, schema_text
from orchestrator.config.calendars import Calendars
from orchestrator.config.files import LoadResult, load_all, load_schedule
from orchestrator.config.models import Schedule, ScheduleSpec
from orchestrator.config.preview import upcoming
from orchestrator.config.repository import RepoConfig
from orchestrator.config.triggers import for_spec
from orchestrator.errors import ScheduleError
from orchestrator.state.model import State
from orchestrator.support.times import iso
from tests.builders import spec_data
from tests.drive import cli, state_of, tick
from tests.planning import tick as plan_tick

REPO_ROOT = Path(__file__).resolve().parents[2]
START = datetime(2026, 12, 23, tzinfo=UTC)
# 07:00 in Tokyo is 22:00 UTC the day before: the 25th there is the 24th in UTC
TOKYO_25TH = datetime(2026, 12, 24, 22, tzinfo=UTC)


def write_repo(root: Path, calendar: object | None = None, *,
               names: list[str] | None = None) -> Path:
    """A repository with schedules ``office`` (Tokyo, naming ``names``, default the
    ``office`` calendar) and ``plain`` (no calendar), and ``calendar`` as
    ``calendars/office.json`` (a dict is written as JSON, text as is)."""
    (root / "schedules").mkdir(parents=True)
    office = spec_data(cron="0 7 * * *", timezone="Asia/Tokyo",
                       exclude_calendars=names if names is not None else ["office"])
    (root / "schedules" / "office.json").write_text(json.dumps(office))
    plain = spec_data(cron="0 7 * * *", timezone="Asia/Tokyo")
    (root / "schedules" / "plain.json").write_text(json.dumps(plain))
    if calendar is not None:
        (root / "calendars").mkdir()
        text = calendar if isinstance(calendar, str) else json.dumps(calendar)
        (root / "calendars" / "office.json").write_text(text)
    return root


def loaded(root: Path) -> LoadResult:
    return load_all(root / "schedules")


def by_id(result: LoadResult) -> dict[str, ScheduleSpec]:
    return {s.id: s.spec for s in result.schedules}


def test_a_calendar_s_dates_are_local_dates_in_the_zone_of_the_schedule_naming_it(
        tmp_path: Path) -> None:
    root = write_repo(tmp_path, {"description": "Office", "dates": ["2026-12-25"]})
    result = loaded(root)
    assert result.errors == []
    specs = by_id(result)
    office = [s.at for s in for_spec(specs["office"]).next(START, 3).found]
    plain = [s.at for s in for_spec(specs["plain"]).next(START, 3).found]
    assert TOKYO_25TH in plain and TOKYO_25TH not in office
    assert office == [TOKYO_25TH - timedelta(days=1), TOKYO_25TH + timedelta(days=1),
                      TOKYO_25TH + timedelta(days=2)]
    assert "except 1 date (calendar office)" in for_spec(specs["office"]).describe()


def test_calendar_dates_add_to_the_schedule_s_own_exclude(tmp_path: Path) -> None:
    root = write_repo(tmp_path, {"dates": ["2026-12-25"]})
    path = root / "schedules" / "office.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "exclude": ["2026-12-26"]}))
    spec = load_schedule(path, root).spec  # one file, as `schedules show` loads it
    found = [s.at for s in for_spec(spec).next(START, 2).found]
    assert found == [TOKYO_25TH - timedelta(days=1), TOKYO_25TH + timedelta(days=2)]


def test_every_reader_of_slots_leaves_a_calendar_date_out(tmp_path: Path) -> None:
    root = write_repo(tmp_path, {"dates": ["2026-12-25"]})
    schedules = loaded(root).schedules
    office = next(s for s in schedules if s.id == "office")
    end = START + timedelta(days=3)
    assert TOKYO_25TH not in [s.at for s in upcoming(office, START, 5).slots]  # previews
    assert TOKYO_25TH not in schedule_slots(office, START, end)  # cron-sync, estimate
    assert TOKYO_25TH not in [at for at, sid in _all_slots(schedules, START, end)
                              if sid == "office"]  # estimate
    # cron-sync --external: the clock calls at the plain schedule's slot only
    assert calls([office], START, end) == [TOKYO_25TH - timedelta(days=1),
                                           TOKYO_25TH + timedelta(days=1)]


def test_the_clock_file_lists_no_excluded_instant(tmp_path: Path) -> None:
    root = write_repo(tmp_path, {"dates": ["2026-12-25"]})
    path = root / "schedules" / "office.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "exclude": ["2026-12-27"],
                                "end_at": "2027-06-30T00:00:00"}))
    (root / "schedules" / "plain.json").unlink()
    schedules = loaded(root).schedules
    (root / CLOCK_FILE).parent.mkdir(parents=True)
    (root / CLOCK_FILE).write_text(file_text(schedules))

    found = read_clock_file(root)
    assert found is not None and found.problems == []
    end = START + timedelta(days=366)
    listed = sorted(at for trigger in found.triggers for at in trigger.slots(START, end))
    assert listed == calls(schedules, START, end)  # the same instants as the schedule's
    assert TOKYO_25TH not in listed and TOKYO_25TH + timedelta(days=2) not in listed
    assert TOKYO_25TH - timedelta(days=1) in listed
    assert max(listed) < datetime(2027, 6, 30, tzinfo=UTC)
    assert check(root, schedules, START, end) == []


def test_the_planner_fires_nothing_on_a_calendar_date_and_the_others_fire(
        tmp_path: Path) -> None:
    root = write_repo(tmp_path, {"dates": ["2026-12-25"]})
    decision = plan_tick(loaded(root).schedules, State(), TOKYO_25TH + timedelta(minutes=1))
    assert sorted(r.schedule_id for r in decision.state.runs.values()) == ["plain"]


def test_a_spec_whose_calendars_were_never_read_refuses_to_make_slots() -> None:
    spec = ScheduleSpec.model_validate(spec_data(cron="0 7 * * *",
                                                 exclude_calendars=["office"]))
    with pytest.raises(ValueError, match="calendars"):
        for_spec(spec)
    # the planner names it invalid rather than fire on a date it was never told of
    decision = plan_tick([Schedule(id="office", spec=spec)], State(), TOKYO_25TH)
    assert decision.state.runs == {}
    assert decision.invalid == ["office: its calendars (exclude_calendars) were not read"]


def _hostile(root: Path, kind: str) -> None:
    folder = root / "calendars"
    folder.mkdir(exist_ok=True)
    target = folder / "office.json"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink out":
        outside = root.parent / "outside.json"
        outside.write_text(json.dumps({"dates": []}))
        target.symlink_to(outside)
    elif kind == "directory":
        target.mkdir()
    elif kind == "huge":
        target.write_text(json.dumps({"dates": ["2026-12-25"] * 100_000}))
    elif kind == "deep":
        target.write_text('{"dates": ' + "[" * 500 + "]" * 500 + "}")
    elif kind == "invalid JSON":
        target.write_text('{"dates": ["2026-12-25",')
    elif kind == "bad date":
        target.write_text(json.dumps({"dates": ["2026-12-25", "2026-02-30"]}))
    elif kind == "a list":
        target.write_text(json.dumps(["2026-12-25"]))
    elif kind == "unknown field":
        target.write_text(json.dumps({"dates": [], "holidays": []}))


@pytest.mark.parametrize(("kind", "problem"), [
    ("missing", "does not exist"),
    ("fifo", "not a regular file (a FIFO)"),
    ("symlink out", "a symlink out of the repository"),
    ("directory", "not a regular file (a directory)"),
    ("huge", "larger than 1048576 bytes"),
    ("deep", "nested deeper than"),
    ("invalid JSON", "line 1 column"),
    ("bad date", "dates.1: Input should be a valid date"),
    ("a list", "expected a JSON object"),
    ("unknown field", "holidays: unknown field"),
])
def test_a_hostile_calendar_makes_only_the_schedules_naming_it_invalid_in_one_line(
        tmp_path: Path, kind: str, problem: str) -> None:
    root = write_repo(tmp_path / "repo")
    _hostile(root, kind)
    result = loaded(root)
    assert [s.id for s in result.schedules] == ["plain"]
    [error] = result.errors
    assert error.file == "schedules/office.json" and error.field == "exclude_calendars"
    assert error.message.startswith("schedules/office.json: exclude_calendars: "
                                    "calendars/office.json: ")
    assert problem in error.message and "\n" not in error.message, error.message
    if kind != "missing":  # validate names the file itself too
        [found] = Calendars(root).problems()
        assert found.file == "calendars/office.json" and problem in str(found)


@pytest.mark.parametrize("name", ["../office", "office/../../etc", "Office", ".hidden", ""])
def test_a_calendar_name_is_an_id_so_no_path_reaches_the_disk(tmp_path: Path,
                                                              name: str) -> None:
    root = write_repo(tmp_path / "repo", {"dates": []}, names=[name])
    result = loaded(root)
    assert [s.id for s in result.schedules] == ["plain"]
    [error] = result.errors
    assert error.field == "exclude_calendars.0", error.message
    # and a file whose stem is not a name is reported, never read as one
    (root / "calendars" / "Bad Name.json").write_text(json.dumps({"dates": []}))
    assert [e.file for e in Calendars(root).problems()] == ["calendars/Bad Name.json"]


def test_exclude_calendars_goes_with_cron_only(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'exclude_calendars' applies to 'cron' only"):
        ScheduleSpec.model_validate_json(json.dumps(spec_data(
            at="2027-01-04T07:00", exclude_calendars=["office"])))


def test_the_calendar_key_changes_with_any_calendar_s_bytes(tmp_path: Path) -> None:
    root = write_repo(tmp_path, {"dates": ["2026-12-25"]})
    before = Calendars(root).key()
    assert Calendars(root).key() == before
    (root / "calendars" / "office.json").write_text(json.dumps({"dates": ["2026-12-26"]}))
    assert Calendars(root).key() != before
    os.mkfifo(root / "calendars" / "other.json")  # read without blocking
    assert Calendars(root).key() not in (before, b"")
    # a file name that is not UTF-8 is keyed and named, never a crash of the tick
    (root / "calendars" / os.fsdecode(b"caf\xe9.json")).write_text(json.dumps({"dates": []}))
    assert Calendars(root).key()
    errors = ScheduleError("x", "y", str(Calendars(root).problems()[0]))
    assert "calendars/caf\\udce9.json: the file name gives the invalid calendar name" \
        in errors.message


def test_the_committed_calendar_schema_is_the_generated_one() -> None:
    committed = (REPO_ROOT / "calendars" / "calendar.schema.json").read_text()
    assert committed == schema_text()
    assert calendar_json_schema()["required"] == ["dates"]


# ---------------------------------------------------------------- the tick, on real git


def checkout(repo_with_origin: Callable[..., Path]) -> Path:
    """A checkout whose main holds ``office`` (naming the calendar) and ``plain``."""
    office = spec_data(cron="0 7 * * *", timezone="Asia/Tokyo", overlap="allow",
                       exclude_calendars=["office"])
    plain = spec_data(cron="0 7 * * *", timezone="Asia/Tokyo", overlap="allow")
    repo = repo_with_origin({"office": office, "plain": plain})
    (repo / "calendars").mkdir()
    return repo


def set_calendar(repo: Path, dates: list[str]) -> None:
    (repo / "calendars" / "office.json").write_text(json.dumps({"dates": dates}))


def fired(repo: Path) -> list[str]:
    state, _ = state_of(repo)
    return sorted(state.runs)


def test_a_tick_fires_nothing_on_a_calendar_date_and_an_edit_counts_at_once(
        repo_with_origin: Callable[..., Path], tmp_path: Path) -> None:
    repo = checkout(repo_with_origin)
    set_calendar(repo, ["2026-12-25", "2026-12-26"])
    work = tmp_path / "work"
    tick(repo, TOKYO_25TH - timedelta(hours=1), work)  # first sight: both quiet
    _, snap = state_of(repo)
    memo = json.loads(snap.files["state/quiet.json"])["schedules"]
    assert memo["office"]["until"] == "2026-12-26T22:00:00Z"  # the 26th excluded too
    tick(repo, TOKYO_25TH + timedelta(minutes=1), work)
    assert fired(repo) == ["plain--20261224T2200Z"]
    # the 26th is taken out of the calendar: the memo vouched for office until the
    # 27th, but its key holds the calendar's bytes, so the next tick reads it again
    set_calendar(repo, ["2026-12-25"])
    tick(repo, TOKYO_25TH + timedelta(days=1, minutes=1), work)
    assert fired(repo) == ["office--20261225T2200Z", "plain--20261224T2200Z",
                           "plain--20261225T2200Z"]


def test_a_calendar_that_is_a_fifo_costs_only_its_schedule_and_status_says_so(
        repo_with_origin: Callable[..., Path], tmp_path: Path) -> None:
    repo = checkout(repo_with_origin)
    os.mkfifo(repo / "calendars" / "office.json")
    line = ("schedules/office.json: exclude_calendars: calendars/office.json: not a "
            "regular file (a FIFO)")
    result = tick(repo, TOKYO_25TH + timedelta(minutes=1), tmp_path / "work")
    assert result.schedule_errors == (line,)
    assert fired(repo) == ["plain--20261224T2200Z"]
    status = cli(repo, "status", "--now", iso(TOKYO_25TH + timedelta(minutes=2)))
    assert status.returncode == 7, status
    assert f"invalid: {line}" in status.stdout
    checked = cli(repo, "validate")
    assert checked.returncode == 1
    assert "orchestrator: calendars/office.json: not a regular file (a FIFO)" \
        in checked.stderr.splitlines()
    assert f"orchestrator: {line}" in checked.stderr.splitlines()


def test_previews_and_show_leave_a_calendar_date_out(
        repo_with_origin: Callable[..., Path]) -> None:
    repo = checkout(repo_with_origin)
    set_calendar(repo, ["2026-12-25"])
    since = iso(START)
    report = json.loads(cli(repo, "validate", "--preview", "3", "--from", since,
                            "--format", "json", check=True).stdout)
    previews = {p["id"]: [s["utc"] for s in p["next"]] for p in report["schedules"]}
    assert "2026-12-24T22:00:00Z" in previews["plain"]
    assert "2026-12-24T22:00:00Z" not in previews["office"]
    shown = json.loads(cli(repo, "schedules", "show", "office", "-n", "2", "--from", since,
                           "--json", check=True).stdout)
    assert [s["utc"] for s in shown["next"]] == ["2026-12-23T22:00:00Z",
                                                "2026-12-25T22:00:00Z"]
    assert shown["spec"]["exclude_calendars"] == ["office"]


def test_cron_sync_drops_the_lead_ticks_of_a_month_a_calendar_takes_out(
        tmp_path: Path) -> None:
    root = write_repo(tmp_path, {"dates": [f"2027-07-{day:02}" for day in range(1, 32)]})
    utc = spec_data(cron="0 7 * * *", exclude_calendars=["office"])  # July, all of it
    (root / "schedules" / "office.json").write_text(json.dumps(utc))

    def lead_ticks() -> list[str]:
        office = [s for s in loaded(root).schedules if s.id == "office"]
        ticks = derive(office, RepoConfig(), datetime(2027, 1, 1, tzinfo=UTC)).tick_cron
        return [line for line in ticks if line.startswith("44,49,54 6 ")]

    assert lead_ticks() == ["44,49,54 6 * 1-6,8-12 *"]  # none before July's slots
    (root / "calendars" / "office.json").write_text(json.dumps({"dates": []}))
    assert lead_ticks() == ["44,49,54 6 * * *"]
