"""The index of open runs: kept by every writer, checked and rebuilt by every tick."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orchestrator.config.models import Schedule, TrackSpec
from orchestrator.planner import Observations, plan
from orchestrator.runs.deadletters import requeue
from orchestrator.state import codec, layout
from orchestrator.state import index as si
from orchestrator.state import model as state_model
from orchestrator.state.history import page_runs
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Cursor, DeadLetter, Run, Track
from tests.builders import schedule
from tests.indexcheck import assert_index_agrees

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)


def run(run_id: str, status: RunStatus, slot: datetime = T0) -> Run:
    return Run(run_id=run_id, schedule_id=run_id.partition("--")[0], slot=slot, fire_at=slot,
               created_at=slot, deadline=slot + timedelta(hours=1), status=status,
               tracks=["a"])


def history(finished: int = 20) -> dict[str, bytes]:
    """A branch with ``finished`` completed runs of ``old``, one running run of
    ``nightly`` and its cursor, as writers that keep the index leave it."""
    state = state_model.State()
    for i in range(finished):
        slot = T0 - timedelta(days=1, minutes=i)
        r = run(f"old--{slot:%Y%m%dT%H%MZ}", RunStatus.COMPLETED, slot)
        state.runs[r.run_id] = r
        state.tracks[r.run_id] = {"a": Track(run_id=r.run_id, name="a",
                                             phase=TrackPhase.COMPLETE,
                                             spec=TrackSpec(name="a", run="true"))}
    open_run = run("nightly--20261201T0700Z", RunStatus.RUNNING)
    state.runs[open_run.run_id] = open_run
    state.tracks[open_run.run_id] = {"a": Track(run_id=open_run.run_id, name="a",
                                                phase=TrackPhase.RUNNING,
                                                spec=TrackSpec(name="a", run="true"))}
    state.cursors["nightly"] = Cursor(schedule_id="nightly", since=T0)
    files = state.dump()
    return {**files, **{k: v for k, v in si.refresh(files, {}, si.build(
        state.runs.values(), si.run_folders(files))).items() if v is not None}}


def test_a_kept_index_loads_only_the_open_runs_and_knows_every_run_id() -> None:
    files = history()
    # Finished records are never read: garbage in one of them changes nothing.
    files["state/runs/old--20261130T0659Z/run.json"] = b"{ not json"
    loaded = si.load(files)
    assert loaded.note is None
    assert list(loaded.state.runs) == ["nightly--20261201T0700Z"]
    assert list(loaded.state.tracks) == ["nightly--20261201T0700Z"]
    assert "old--20261130T0659Z" in loaded.state.known_runs
    assert len(loaded.state.known_runs) == 21
    assert loaded.index.by_schedule("nightly") == ["nightly--20261201T0700Z"]


def test_a_missing_index_is_rebuilt_from_the_records_and_said_so() -> None:
    files = history()
    del files[si.OPEN_INDEX]
    loaded = si.load(files)
    assert loaded.note == ("state/open.json is missing: rebuilt from 21 run record(s), "
                           "1 open")
    change = si.refresh(files, {}, loaded.index)
    assert_index_agrees({**files, **{k: v for k, v in change.items() if v is not None}})


def test_a_corrupted_index_is_rebuilt_and_said_so() -> None:
    files = history()
    files[si.OPEN_INDEX] = b'{"format": 1, "runs": 7}\n'
    loaded = si.load(files)
    assert loaded.note is not None
    assert loaded.note.startswith("state/open.json is unreadable (state/open.json: runs:")
    assert len(loaded.state.runs) == 21  # every record read for the rebuild
    assert si.OPEN_INDEX in si.refresh(files, {}, loaded.index)


def test_an_index_that_disagrees_with_a_record_is_rebuilt() -> None:
    files = history()
    finished = run("nightly--20261201T0700Z", RunStatus.COMPLETED)
    files[layout.run_path(finished.run_id)] = codec.to_json(finished)  # by hand, index not kept
    loaded = si.load(files)
    assert loaded.note is not None and "says nightly--20261201T0700Z is running, its " \
        "record says completed" in loaded.note
    assert loaded.index.runs == {}


def test_a_run_added_without_the_index_is_noticed_by_the_folder_digest() -> None:
    files = history()
    stray = run("nightly--20261202T0700Z", RunStatus.RUNNING)
    files[layout.run_path(stray.run_id)] = codec.to_json(stray)
    loaded = si.load(files)
    assert loaded.note is not None and "written for 21 run folder(s)" in loaded.note
    assert set(loaded.index.runs) == {"nightly--20261201T0700Z", stray.run_id}


def test_an_empty_branch_gets_no_index_and_no_note() -> None:
    loaded = si.load({})
    assert loaded.note is None and loaded.index == si.OpenIndex()
    assert si.refresh({}, {}, loaded.index) == {}


def apply(files: dict[str, bytes], change: dict[str, bytes | None]) -> dict[str, bytes]:
    out = dict(files)
    for path, data in change.items():
        if data is None:
            out.pop(path, None)
        else:
            out[path] = data
    return out


def tick(files: dict[str, bytes], schedules: list[Schedule], now: datetime) -> dict[str, bytes]:
    loaded = si.load(files)
    decision = plan(schedules, loaded.state, Observations(), now)
    change = si.refresh(files, decision.state.dump(base=loaded.state), loaded.index)
    return apply(files, change)


def test_ticks_keep_the_index_equal_to_the_records_and_never_refire_a_finished_slot() -> None:
    nightly = schedule("nightly", cron="0 7 * * *", tracks=[{"name": "a", "run": "true"}])
    files = history()
    for day in range(4):
        if day:
            files = tick(files, [nightly], T0 + timedelta(days=day, minutes=1))
            assert_index_agrees(files)
        # finish the run through the index-keeping writer, as a consolidating tick does
        rid = f"nightly--{T0 + timedelta(days=day):%Y%m%dT%H%MZ}"
        done = Run.model_validate_json(files[layout.run_path(rid)]).model_copy(
            update={"status": RunStatus.COMPLETED})
        files = apply(files, si.refresh(files, {layout.run_path(rid): codec.to_json(done)}))
        assert_index_agrees(files)
        assert si.load(files).state.runs == {}
    # The cursor is lost: the schedule is new again, and its latest slot has fired.
    del files[layout.cursor_path("nightly")]
    again = tick(files, [nightly], T0 + timedelta(days=3, minutes=2))
    assert si.load(again).state.runs == {}  # nothing fired: that run finished long ago


def test_a_requeue_reopens_the_run_in_the_index() -> None:
    files = history()
    failed = run("old--20261130T0659Z", RunStatus.FAILED,
                 T0 - timedelta(days=1, minutes=1))
    track = Track(run_id=failed.run_id, name="a", phase=TrackPhase.FAILED, attempt=1,
                  spec=TrackSpec(name="a", run="true"))
    letter = DeadLetter(run_id=failed.run_id, track="a", key=f"{failed.run_id}--a",
                        parked_at=T0, reason="failed", attempts=1,
                        payload=TrackSpec(name="a", run="true"))
    files = apply(files, si.refresh(files, {
        layout.run_path(failed.run_id): codec.to_json(failed),
        layout.track_path(failed.run_id, "a"): codec.to_json(track),
        layout.dlq_path(letter.key): codec.to_json(letter)}))
    assert_index_agrees(files)
    files = apply(files, requeue(files, letter.key, "ops", "", T0))
    assert_index_agrees(files)
    assert failed.run_id in si.load(files).index.runs


class Counting(dict[str, bytes]):
    """A branch's files that note which ones were read."""

    def __init__(self, files: dict[str, bytes]) -> None:
        super().__init__(files)
        self.read: set[str] = set()

    def __getitem__(self, path: str) -> bytes:
        self.read.add(path)
        return super().__getitem__(path)

    def get(self, path: str, default: bytes | None = None) -> bytes | None:  # type: ignore[override]
        if path in self:
            self.read.add(path)
        return super().get(path, default)


def test_the_page_of_runs_reads_the_newest_records_only() -> None:
    files = history(finished=30)
    files["state/runs/old--20261130T0659Z/run.json"] = b"{ not json"  # among the newest
    counting = Counting(files)
    shown, older = page_runs(counting, {}, limit=5)
    records = {p for p in counting.read if p.endswith("/run.json")}
    assert len(records) == 5  # never the other 26
    # the open run and the newest finished ones (an unreadable one left out, not fatal)
    assert sorted(shown) == ["nightly--20261201T0700Z", "old--20261130T0657Z",
                             "old--20261130T0658Z", "old--20261130T0700Z"]
    assert older == 27
    # what the writer adds (a run it fires now) is listed on top and counted
    fired = run("nightly--20261202T0700Z", RunStatus.SCHEDULED, T0 + timedelta(days=1))
    shown, older = page_runs(files, {fired.run_id: fired}, limit=5)
    assert fired.run_id in shown and len(shown) == 5 and older == 27


def test_the_page_of_runs_says_how_many_older_runs_it_leaves_out() -> None:
    from orchestrator.brief import render_index

    runs = [run(f"old--{T0 - timedelta(minutes=i):%Y%m%dT%H%MZ}", RunStatus.COMPLETED,
                T0 - timedelta(minutes=i)) for i in range(3)]
    page = render_index(runs, generated_at=T0, older=1234)
    assert "1234 older not listed here" in page and "orchestrator runs list" in page
    assert "older not listed" not in render_index(runs, generated_at=T0)


def test_the_in_memory_store_takes_and_declines_the_tree_shortcut_as_git_does() -> None:
    from orchestrator.store import InMemoryStateStore

    store = InMemoryStateStore(history())
    rid = "nightly--20261201T0700Z"
    change = {layout.run_path(rid): codec.to_json(run(rid, RunStatus.COMPLETED))}
    # a writer that loaded the index stamps it with the tree its commit gives state/runs
    store.transact(lambda s: si.refresh(s.files, change, si.load(s.files).index), "finish")
    files = store.read().files
    assert si.read(files)[0].runs_tree == files.object_id(si.RUNS)  # type: ignore[union-attr]
    loaded = si.load(files)
    assert loaded.vouched and loaded.note is None and loaded.state.runs == {}
    assert isinstance(loaded.state.known_runs, si.RunFolders)
    assert not loaded.state.known_runs.listed
    # a run written without the index moves the tree: the runs are listed and checked
    stray = run("nightly--20261202T0700Z", RunStatus.RUNNING)
    store.transact(lambda _: {layout.run_path(stray.run_id): codec.to_json(stray)}, "by hand")
    loaded = si.load(store.read().files)
    assert not loaded.vouched
    assert loaded.note is not None and "written for 21 run folder(s)" in loaded.note
