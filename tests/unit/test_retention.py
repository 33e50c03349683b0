"""Which runs the tick's retention looks at, and when (pure, plain datetimes)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from orchestrator.config.models import TrackSpec
from orchestrator.config.repository import RepoConfig
from orchestrator.runs import retention
from orchestrator.runs.compaction import plan
from orchestrator.runs.retention import Outcome, Record, candidates, due, ripe
from orchestrator.state import layout
from orchestrator.state import model as state_model
from orchestrator.state.phases import RunStatus
from orchestrator.state.records import DeadLetter, run_id_for
from tests.builders import run_files

NOW = datetime(2026, 12, 31, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def rid(days_ago: float, schedule: str = "s") -> str:
    return run_id_for(schedule, NOW - timedelta(days=days_ago))


def test_the_slot_is_read_from_the_run_id() -> None:
    assert layout.run_slot("nightly--20261201T0700Z") == datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
    assert layout.run_slot("a-b_c--20260229T0000Z") is None  # no such day
    assert layout.run_slot("nightly") is None
    assert layout.run_slot("..") is None


def test_candidates_are_runs_whose_slot_is_older_than_the_retention() -> None:
    ids = [rid(40), rid(30.01), rid(30), rid(29.9), rid(2), "not-a-run", rid(35, "kept")]
    assert candidates(ids, 30, NOW, keep={rid(35, "kept")}) == sorted([rid(40), rid(30.01)])


@pytest.mark.parametrize("seed", range(20))
def test_candidates_ruled_out_by_their_text_are_those_parsing_rules_out(seed: int) -> None:
    """The shortcut (comparing the slot's text with the cutoff's) against parsing every
    id, with cutoffs off the minute and names that are no run ids."""
    rng = random.Random(seed)
    now = NOW + timedelta(seconds=rng.choice([0, 1, 30, 59]))
    ids = [rid(rng.uniform(28, 33), rng.choice(["a", "b-c"])) for _ in range(200)]
    ids += [rid(30, "x"), rid(31, "y"), "nightly", "a--20261131T0000Z", "z--99999999T9999Z"]
    for keep_days in (29, 30):
        cutoff = now - timedelta(days=keep_days)
        parsed = sorted(r for r in ids
                        if (slot := layout.run_slot(r)) is not None and slot < cutoff)
        assert candidates(ids, keep_days, now) == parsed
        slots = [s for s in map(layout.run_slot, ids) if s is not None]
        assert ripe(ids, keep_days, now) == any(s < cutoff - DAY for s in slots)


def test_a_compaction_starts_only_once_a_slot_is_a_day_older_than_the_retention() -> None:
    assert not ripe([rid(30.5), rid(31)], 30, NOW)  # exclusive: 31 days is not more
    assert ripe([rid(30.5), rid(31.01)], 30, NOW)
    assert not ripe(["x"], 0, NOW)


def state_with(runs: list[str], letters: Mapping[str, bool] = {},
               quarantined: tuple[str, ...] = ()) -> state_model.State:
    state = state_model.State()
    state.known_runs = frozenset(runs)
    for run_id, discarded in letters.items():
        key = f"{run_id}--a"
        state.dlq[key] = DeadLetter(key=key, run_id=run_id, track="a", reason="failed",
                                    parked_at=NOW, attempts=1,
                                    payload=TrackSpec(name="a", run="true"),
                                    discarded=discarded)
    for path in quarantined:
        state.quarantined[path] = f"{path}: broken"
    return state


def test_due_takes_every_candidate_once_one_is_ripe_and_leaves_the_untouchable() -> None:
    runs = [rid(45), rid(44, "open"), rid(43, "parked"), rid(42, "gone"), rid(41, "bad"),
            rid(30.5), rid(10)]
    state = state_with(runs, {rid(43, "parked"): False, rid(42, "gone"): True},
                       (f"state/runs/{rid(41, 'bad')}/run.json",))
    assert due(state, [rid(44, "open")], None, 30, NOW) == sorted(
        [rid(45), rid(42, "gone"), rid(30.5)])
    # nothing ripe: not even the candidates past the retention are read
    assert due(state_with([rid(30.5), rid(10)]), [], None, 30, NOW) == []


def test_due_waits_a_day_after_the_last_compaction() -> None:
    state = state_with([rid(45)])
    last = Record(at=NOW - timedelta(hours=23), keep_days=30, archived=3)
    assert due(state, [], last, 30, NOW) == []
    assert due(state, [], last.model_copy(update={"at": NOW - DAY}), 30, NOW) == [rid(45)]
    # a record from the future (a clock that jumped back) holds nothing back
    assert due(state, [], last.model_copy(update={"at": NOW + DAY}), 30, NOW) == [rid(45)]


@pytest.mark.parametrize("data", [b"{not json", b"[" * 100_000 + b"]" * 100_000,
                                  b'{"at": "yesterday"}', b"\xff\xfe"])
def test_an_unreadable_record_is_no_record_and_the_next_compaction_writes_it_anew(
        data: bytes) -> None:
    assert retention.read_record({retention.RECORD: data}) is None
    assert due(state_with([rid(45)]), [], None, 30, NOW) == [rid(45)]


class Counting(Mapping[str, bytes]):
    """Files that remember which were read."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.read: set[str] = set()

    def __getitem__(self, path: str) -> bytes:
        data = self.files[path]
        self.read.add(path)
        return data

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


def test_a_plan_on_candidates_reads_only_their_records() -> None:
    old, other, late = rid(45), rid(44, "t"), rid(40, "late")
    files = Counting({**run_files(old, RunStatus.COMPLETED, NOW - 40 * DAY, also=("undo",)),
                      **run_files(other, RunStatus.COMPLETED, NOW - 40 * DAY, also=("undo",)),
                      # ended yesterday
                      **run_files(late, RunStatus.COMPLETED, NOW - DAY, also=("undo",)),
                      layout.run_path(rid(41, "bad")): b"{not json"})
    p = plan(files, 30, NOW, candidates=[old, late, rid(41, "bad"), rid(39, "missing")])
    assert p.runs == (old,)
    assert set(p.change) == {layout.run_path(old), layout.track_path(old, "a"),
                             f"{layout.run_dir(old)}/undo/a.json"}
    assert files.read == {layout.run_path(r) for r in (old, late, rid(41, "bad"))}
    assert [line.split(":")[0] for line in p.skipped] == [rid(41, "bad")]


def test_the_outcome_says_what_was_archived_in_one_line_each() -> None:
    done = Outcome(30, ("a--20261101T0700Z",), tag="orchestrator-archive/x")
    assert done.lines() == ["retention: archived 1 run(s) finished more than 30 days ago; "
                            "previous history kept as tag orchestrator-archive/x"]
    refused = Outcome(30, ("a--20261101T0700Z",), refused="hook declined")
    assert refused.lines()[0].startswith("retention: the force push of the compaction was "
                                         "refused (hook declined); archived with an ordinary")
    assert refused.lines()[1].endswith("the branch's history keeps them")
    failed = Outcome(30, problem="gave up")
    assert failed.lines() == ["retention: compaction failed, tried again by a later tick: "
                              "gave up"]
    assert Outcome(30).lines() == []


def test_status_lines_name_the_setting_and_the_last_compaction() -> None:
    assert retention.describe_lines(retention.describe(None, None)) == [
        "retention     keep every run (keep_finished_runs_days is null); no compaction yet"]
    last = Record(at=NOW, keep_days=30, archived=4, tag="orchestrator-archive/t")
    assert retention.describe_lines(retention.describe(last, 30)) == [
        "retention     archive runs finished more than 30 days ago; last compaction "
        "2026-12-31T12:00:00Z: 4 run(s), tag orchestrator-archive/t"]


def test_the_setting_defaults_to_30_days_and_null_keeps_every_run() -> None:
    assert RepoConfig().keep_finished_runs_days == 30
    assert RepoConfig.model_validate_json(
        '{"keep_finished_runs_days": null}').keep_finished_runs_days is None
    with pytest.raises(ValidationError):
        RepoConfig.model_validate_json('{"keep_finished_runs_days": 0}')
