"""Every state path is built and parsed by :mod:`orchestrator.state.layout`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from orchestrator.errors import InvalidId
from orchestrator.state import layout
from orchestrator.state.layout import Kind, Located

SLOT = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


def test_a_run_id_is_made_and_parsed_back() -> None:
    run_id = layout.run_id_for("a-b_c", SLOT)
    assert run_id == "a-b_c--20261201T0700Z"
    assert layout.parse_run_id(run_id) == ("a-b_c", SLOT)
    assert layout.slot_text(run_id) == layout.slot_stamp(SLOT) == "20261201T0700Z"


@pytest.mark.parametrize("bad", ["nightly", "nightly--2026", "../x--20261201T0700Z",
                                 "Nightly--20261201T0700Z", "a--b--20261201T0700Z", ""])
def test_a_malformed_run_id_is_one_clear_error(bad: str) -> None:
    with pytest.raises(InvalidId, match="expected <schedule-id>--<YYYYMMDDTHHMMZ>"):
        layout.parse_run_id(bad)
    assert layout.run_slot(bad) is None


def test_a_run_id_of_no_real_minute_is_refused_by_the_parser_alone() -> None:
    assert layout.is_run_id("a--20260229T0000Z")  # the form is right: a folder may be named so
    with pytest.raises(InvalidId, match="20260229T0000Z is no minute of the calendar"):
        layout.parse_run_id("a--20260229T0000Z")
    assert layout.run_slot("a--20260229T0000Z") is None


def test_the_slot_text_sorts_as_the_slot() -> None:
    ids = [layout.run_id_for(s, datetime(2026, m, d, h, tzinfo=UTC))
           for s, m, d, h in [("z", 1, 2, 0), ("a", 12, 1, 7), ("m", 1, 1, 23)]]
    assert sorted(ids, key=layout.slot_text) == [ids[2], ids[0], ids[1]]


@pytest.mark.parametrize(("path", "found"), [
    ("state/schedules/nightly.json", Located(Kind.CURSOR, "nightly")),
    ("state/runs/n--20261201T0700Z/run.json",
     Located(Kind.RUN, "n--20261201T0700Z", "n--20261201T0700Z")),
    ("state/runs/n--20261201T0700Z/tracks/a.json",
     Located(Kind.TRACK, "a", "n--20261201T0700Z")),
    ("state/runs/n--20261201T0700Z/undo/a.json", Located(Kind.UNDO, "a", "n--20261201T0700Z")),
    ("state/runs/n--20261201T0700Z/specs.json",
     Located(Kind.SPECS, "n--20261201T0700Z", "n--20261201T0700Z")),
    ("state/runs/n--20261201T0700Z/polls.jsonl",
     Located(Kind.POLLS, "n--20261201T0700Z", "n--20261201T0700Z")),
    ("state/dlq/n--20261201T0700Z--a.json", Located(Kind.DEAD_LETTER, "n--20261201T0700Z--a")),
    ("state/health.json", Located(Kind.HEALTH, "")),
    # names as found: the reader checks them against the records
    ("state/runs/../run.json", Located(Kind.RUN, "..", "..")),
    ("state/schedules/.json", Located(Kind.CURSOR, "")),
])
def test_a_path_is_located_by_its_place(path: str, found: Located) -> None:
    assert layout.locate(path) == found
    assert layout.kind_of(path) is found.kind


@pytest.mark.parametrize("path", [
    "state/open.json", "state/index.html", "state/ticks.jsonl", "state/schedules/a.txt",
    "state/schedules/x/a.json", "state/runs/r/brief.html", "state/runs/r/tracks/a.txt",
    "state/runs/r/tracks/x/a.json", "state/runs/r/other/a.json", "state/dlq/x/a.json",
    "schedules/nightly.json", "state", "state/runs", "state/runs/r", "state/x/run.json"])
def test_any_other_file_is_no_record(path: str) -> None:
    assert layout.locate(path) is None and layout.kind_of(path) is None


def test_runs_entry_and_run_of_tell_a_runs_folder_from_the_files_inside() -> None:
    assert layout.runs_entry("state/runs/r") == "r" and layout.run_of("state/runs/r") is None
    assert layout.runs_entry("state/runs/r/run.json") == layout.run_of("state/runs/r/run.json")
    assert layout.run_of("state/runs/r/tracks/a.json") == "r"
    assert layout.runs_entry("state/dlq/r--a.json") is layout.run_of("state/runs") is None
    assert layout.runs_entry_path("'; rm") == "state/runs/'; rm"


def test_a_dead_letter_key_splits_back_into_its_run_and_track() -> None:
    key = layout.dlq_key("n--20261201T0700Z", "a")
    assert layout.parse_dlq_key(key) == ("n--20261201T0700Z", "a")
    assert layout.dead_letter_run(key) == "n--20261201T0700Z"
    assert layout.dlq_path(key) == "state/dlq/n--20261201T0700Z--a.json"
    for bad in ["nokey", "n--20261201T0700Z--../x", "../x--a"]:
        with pytest.raises(InvalidId):
            layout.dlq_path(bad)


def test_a_cursor_path_to_compare_is_not_checked_but_one_to_use_is() -> None:
    assert layout.unchecked_cursor_path("Odd Name") == "state/schedules/Odd Name.json"
    assert layout.cursor_path("nightly") == "state/schedules/nightly.json"
    with pytest.raises(InvalidId):
        layout.cursor_path("../x")


def test_a_manual_run_id_parses_to_its_minute_and_sorts_after_the_cron_run_of_it() -> None:
    minute = datetime(2026, 12, 1, 14, 12, tzinfo=UTC)
    manual = layout.manual_run_id("nightly", minute, 1)
    assert manual == "nightly--20261201T1412Z-manual-1"
    assert layout.parse_run_id(manual) == ("nightly", minute)
    assert layout.is_run_id(manual) and layout.is_manual(manual)
    assert not layout.is_manual(layout.run_id_for("nightly", minute))
    assert layout.slot_text(manual) == "20261201T1412Z"
    assert layout.run_slot(manual) == minute
    cron = layout.run_id_for("nightly", minute)
    later = layout.run_id_for("nightly", datetime(2026, 12, 1, 14, 13, tzinfo=UTC))
    assert sorted([later, manual, cron]) == [cron, manual, later]
    assert layout.parse_dlq_key(layout.dlq_key(manual, "a")) == (manual, "a")
    assert layout.track_path(manual, "a") == f"state/runs/{manual}/tracks/a.json"


@pytest.mark.parametrize("bad", ["nightly--20261201T1412Z-manual-0",
                                 "nightly--20261201T1412Z-manual-",
                                 "nightly--20261201T1412Z-manual-1/../x",
                                 "nightly--20261201T1412Z-other-1"])
def test_a_malformed_manual_run_id_is_refused(bad: str) -> None:
    with pytest.raises(InvalidId):
        layout.parse_run_id(bad)
