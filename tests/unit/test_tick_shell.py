"""The tick shell (orchestrator/tick/shell.py) on the in-memory store and executor.

The steps take their inputs as arguments, so these tests build ``TickInputs`` from the
store's tip and schedules in memory and drive ``observe``, ``mark``, ``act`` and
``record`` one by one, or run the whole pipeline (``shell.run``). What they assert is
what the tick returned and what it committed: the store's commits and the records on
its tip.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

from orchestrator.brief.context import BriefContext
from orchestrator.config.repository import RepoSettings
from orchestrator.state import codec, layout
from orchestrator.state import model as state_model
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.store import InMemoryStateStore, Snapshot
from orchestrator.support.times import iso
from orchestrator.tick.result import TickResult
from tests.builders import schedule
from tests.memory_executor import MemoryExecutor
from tests.memory_tick import MemoryShell

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "nightly--20261201T0700Z"
KEY = f"{RUN}--a--1"
NIGHTLY = schedule("nightly", cron="0 7 * * *", tracks=("a",))
MINUTE = timedelta(minutes=1)


def decide(now: datetime) -> str:
    return f"tick {iso(now)}: decide"


def record(now: datetime) -> str:
    return f"tick {iso(now)}: record dispatch"


def ticks(shell: MemoryShell) -> list[dict[str, object]]:
    """The heartbeat's lines (``state/ticks.jsonl``)."""
    return [json.loads(line) for line in shell.files[layout.TICKS].splitlines()]


def fired(shell: MemoryShell, now: datetime = T0 + MINUTE) -> TickResult:
    """``nightly`` fired its 07:00 slot and dispatched track ``a``, in a whole tick."""
    shell.schedules = [NIGHTLY]
    result = shell.run(now)
    assert result.dispatched == (KEY,) and shell.commits == [decide(now), record(now)]
    return result


# --------------------------------------------------------------------------- a due slot


def test_a_due_slot_is_marked_then_dispatched_then_recorded(shell: MemoryShell) -> None:
    now = T0 + MINUTE
    shell.schedules = [NIGHTLY]
    tick = shell.tick(now)
    inputs = shell.inputs()
    seen = tick.observe(inputs, shell.executor)

    planned, outcome, final = tick.mark(inputs, seen)
    assert outcome.landed and outcome.attempts == 1
    assert [r.key for r in planned.decision.dispatch] == [KEY]
    assert shell.commits == [decide(now)]
    assert {layout.run_path(RUN), layout.track_path(RUN, "a")} <= set(shell.changed())
    marked = shell.track(RUN, "a")
    assert marked.phase is TrackPhase.DISPATCHED and marked.dispatch_key == KEY
    assert marked.handle is None  # nothing sent yet: only the decision is committed
    assert shell.executor.starts == []

    acted = tick.act(planned.decision, shell.executor)
    assert [r.key for r in acted.results] == [KEY] and acted.errors == []
    assert shell.executor.starts == [KEY]
    assert shell.commits == [decide(now)]  # sent, not yet recorded

    recorded = tick.record(final, acted)
    assert recorded.landed and recorded.tip == shell.store.read().tip
    assert shell.commits == [decide(now), record(now)]
    recorded = shell.track(RUN, "a")
    assert recorded.phase is TrackPhase.DISPATCHED
    assert recorded.handle == {"executor": "memory", "key": KEY}
    assert recorded.url == f"memory:{KEY}"


def test_a_whole_tick_on_a_due_slot_commits_twice(shell: MemoryShell) -> None:
    result = fired(shell)
    assert result.mark_landed and result.record_landed
    assert result.tip == shell.store.read().tip
    assert shell.run_record(RUN).status is RunStatus.RUNNING  # its first track went out
    assert shell.track(RUN, "a").handle == {"executor": "memory", "key": KEY}
    assert [line["fired"] for line in ticks(shell)] == [1]


def test_a_tick_with_nothing_to_do_commits_nothing(shell: MemoryShell) -> None:
    fired(shell)
    tip = shell.store.read().tip
    result = shell.run(T0 + 2 * MINUTE)  # the attempt still waits for a runner
    assert not result.mark_landed and not result.record_landed
    assert result.tip == tip and result.dispatched == ()
    assert len(shell.commits) == 2
    assert shell.executor.starts == [KEY]


def test_an_idle_tick_writes_the_heartbeat_once_heartbeat_every_passed(
        shell: MemoryShell) -> None:
    every = timedelta(minutes=5)
    fired(shell)
    assert not shell.run(T0 + 4 * MINUTE, heartbeat_every=every).mark_landed
    assert len(shell.commits) == 2

    beat = shell.run(T0 + 6 * MINUTE, heartbeat_every=every)
    assert beat.mark_landed and not beat.record_landed
    assert shell.commits[-1] == decide(T0 + 6 * MINUTE)
    assert shell.changed() == (layout.TICKS,)  # the heartbeat line, nothing else
    assert ticks(shell)[-1] == {"at": iso(T0 + 6 * MINUTE), "executor": "memory",
                                "fired": 0, "dispatched": 0, "rendered": 0, "invalid": 0}
    assert not shell.run(T0 + 7 * MINUTE, heartbeat_every=every).mark_landed


# --------------------------------------------------------------------------- races


def test_a_lost_race_re_plans_on_the_new_tip_and_fires_once(shell: MemoryShell) -> None:
    rival_line = codec.json_line({"at": iso(T0), "executor": "github", "fired": 0,
                                  "dispatched": 0, "rendered": 0, "invalid": 0})
    rivals: list[int] = []

    def another_writer(attempt: int) -> dict[str, bytes | None] | None:
        if rivals:
            return None
        rivals.append(attempt)  # another tick's heartbeat lands first, once
        return {layout.TICKS: rival_line}

    shell.store.contention = another_writer
    shell.schedules = [NIGHTLY]
    now = T0 + MINUTE
    tick = shell.tick(now)
    inputs = shell.inputs()
    planned, outcome, final = tick.mark(inputs, tick.observe(inputs, shell.executor))

    assert rivals == [1] and outcome.landed and outcome.attempts == 2
    assert final.snapshot.tip != inputs.snapshot.tip  # planned again, on the rival's tip
    assert shell.commits == ["rival", decide(now)]
    assert [line["executor"] for line in ticks(shell)] == ["github", "memory"]  # kept
    assert [r.key for r in planned.decision.dispatch] == [KEY]
    tick.act(planned.decision, shell.executor)
    assert shell.executor.starts == [KEY]


def test_a_rival_tick_that_fired_the_slot_first_leaves_this_one_nothing_to_fire(
        shell: MemoryShell) -> None:
    now = T0 + MINUTE
    rivals: list[TickResult] = []
    raced: list[int] = []

    def rival_tick(attempt: int) -> None:
        if not raced:  # a tick on another runner, at the same moment, wins the race
            raced.append(attempt)
            rivals.append(shell.run(now))

    shell.store.contention = rival_tick
    shell.schedules = [NIGHTLY]
    result = shell.run(now)

    [rival] = rivals
    assert raced == [1]
    assert rival.dispatched == (KEY,) and rival.mark_landed and rival.record_landed
    assert not result.mark_landed and result.dispatched == ()
    assert result.decision is not None and result.decision.dispatch == []
    assert shell.commits == [decide(now), record(now)]  # the rival's two only
    assert shell.executor.starts == [KEY]  # one run, one start
    assert [line["fired"] for line in ticks(shell)] == [1]


# --------------------------------------------------------------------------- dry run


def test_a_dry_run_decides_and_commits_and_dispatches_nothing(shell: MemoryShell) -> None:
    shell.schedules = [NIGHTLY]
    result = shell.run(T0 + MINUTE, dry_run=True)
    assert result.dry_run and result.decision is not None
    assert [r.key for r in result.decision.dispatch] == [KEY]  # what it would do
    assert not result.mark_landed and result.dispatched == () and result.tip is None
    assert shell.commits == [] and shell.executor.starts == []


# --------------------------------------------------------------------------- failures


def test_a_failed_dispatch_records_nothing_and_leaves_the_track_dispatched(
        shell: MemoryShell) -> None:
    shell.schedules = [NIGHTLY]
    shell.executor.dispatch_fails = "connection reset after the request was sent"
    now = T0 + MINUTE
    result = shell.run(now)
    assert result.mark_landed and not result.record_landed
    assert result.dispatched == ()
    assert result.dispatch_errors == (
        "dispatch failed: connection reset after the request was sent",)
    assert shell.commits == [decide(now)]
    track = shell.track(RUN, "a")
    assert track.phase is TrackPhase.DISPATCHED and track.handle is None
    assert track.dispatch_key == KEY
    assert shell.executor.starts == []

    # Past the grace, the next tick looks the key up, finds no trace, and sends it again
    # under the same key (had it been started, the look-up would have adopted it).
    shell.executor.dispatch_fails = None
    later = T0 + 12 * MINUTE
    again = shell.run(later)
    assert again.dispatched == (KEY,)
    assert shell.executor.starts == [KEY]
    assert shell.track(RUN, "a").handle == {"executor": "memory", "key": KEY}


def _forget_handle(shell: MemoryShell, run_id: str, name: str) -> None:
    """``name``'s dispatch as a tick that died before recording it leaves it."""
    def change(snap: Snapshot) -> dict[str, bytes | None]:
        state = state_model.load(snap.files, all_tracks=True)
        track = state.tracks[run_id][name]
        state.tracks[run_id][name] = track.model_copy(update={"handle": None, "url": None})
        return dict(state.dump())

    shell.store.transact(change, "the record of a dispatch lost")


def test_a_failing_look_up_keeps_what_observing_learned(shell: MemoryShell) -> None:
    shell.schedules = [schedule("nightly", cron="0 7 * * *", tracks=("a", "b"))]
    shell.run(T0 + MINUTE)
    _forget_handle(shell, RUN, "b")
    shell.executor.finish(KEY, T0 + 2 * MINUTE)
    shell.executor.lookup_fails = "the work folder cannot be read"
    result = shell.run(T0 + 3 * MINUTE)
    assert shell.track(RUN, "a").phase is TrackPhase.COMPLETE  # observed all the same
    b = shell.track(RUN, "b")
    assert b.phase is TrackPhase.DISPATCHED and b.handle is None  # not asked: left alone
    assert result.dispatched == ()


def test_a_dispatch_the_backend_refused_is_recorded_as_failed(shell: MemoryShell) -> None:
    shell.schedules = [NIGHTLY]
    shell.executor.refused["a"] = "422 inputs are too large"
    now = T0 + MINUTE
    result = shell.run(now)
    assert result.dispatch_errors == (f"{KEY}: 422 inputs are too large",)
    assert result.record_landed and shell.commits == [decide(now), record(now)]
    track = shell.track(RUN, "a")
    assert track.phase is TrackPhase.FAILED
    assert "dispatch failed: 422 inputs are too large" in track.error_log[-1]


# --------------------------------------------------------------------------- the brief


def test_a_consolidated_run_gets_its_brief_in_the_mark_commit(shell: MemoryShell) -> None:
    fired(shell)
    shell.executor.finish(KEY, T0 + 2 * MINUTE, result={"summary": "built the docs"})
    now = T0 + 3 * MINUTE
    result = shell.run(now)

    assert result.rendered == (RUN,) and result.finished == (RUN,)
    assert result.mark_landed and not result.record_landed  # nothing to dispatch
    assert shell.commits[-1] == decide(now)
    assert {layout.brief_path(RUN), layout.run_path(RUN)} <= set(shell.changed())
    assert shell.run_record(RUN).status is RunStatus.COMPLETED
    assert shell.track(RUN, "a").result == {"summary": "built the docs"}
    assert b"built the docs" in shell.files[layout.brief_path(RUN)]


def test_the_tails_reader_goes_to_mark_as_an_argument_and_the_tick_keeps_nothing(
        shell: MemoryShell) -> None:
    fired(shell)
    shell.executor.finish(KEY, T0 + 2 * MINUTE, result={"summary": "built the docs"})
    now = T0 + 3 * MINUTE
    tick = shell.tick(now)
    inputs = shell.inputs()
    seen = tick.observe(inputs, shell.executor)

    def tails(ctx: BriefContext) -> BriefContext:
        return dataclasses.replace(ctx, tails={"a": "the last line it printed"})

    planned, outcome, _ = tick.mark(inputs, seen, tails)
    assert outcome.landed and planned.consolidated.rendered == [RUN]
    assert b"the last line it printed" in shell.files[layout.brief_path(RUN)]

    again = shell.tick(now + MINUTE)
    before = dict(vars(again))
    again.run()
    assert vars(again) == before  # a whole tick parks nothing on the object


# --------------------------------------------------------------------------- the inputs


def test_inputs_from_memory_hold_a_quarantined_schedule_and_name_a_bad_settings_file(
        memory_executor: MemoryExecutor) -> None:
    broken = InMemoryStateStore({layout.cursor_path("nightly"): b"{not json"})
    bad = RepoSettings(None, "orchestrator.json: max_concurrent_tracks: not a number", b"x")
    shell = MemoryShell(broken, memory_executor, [NIGHTLY], bad)

    inputs = shell.inputs()
    assert inputs.held == {"nightly"} and inputs.schedules == ()
    assert inputs.invalid == ("orchestrator.json: max_concurrent_tracks: not a number; "
                              "none of its settings is applied (its caps neither)",)
    assert inputs.memo is None
    result = shell.run(T0 + MINUTE)
    assert result.dispatched == () and memory_executor.starts == []
    assert any(layout.cursor_path("nightly") in line for line in result.quarantined)
    assert result.schedule_errors == inputs.invalid
    assert "invalid settings: orchestrator.json: max_concurrent_tracks: not a number; none " \
        "of its settings is applied (its caps neither)" in result.log



def test_the_tick_s_dashboard_is_typed_and_its_module_still_loads_lazily() -> None:
    """``contributors.board`` and the ``Board`` callback name the dashboard's type,
    imported only for the type checker: a tick that renders no index never loads the
    module."""
    import ast
    import inspect
    import typing

    from orchestrator.brief.dashboard import Dashboard
    from orchestrator.config.models import ScheduleSpec
    from orchestrator.planner import Decision
    from orchestrator.state.model import State
    from orchestrator.state.records import Run
    from orchestrator.tick import consolidate, contributors, shell

    # the names the shell imports only for the type checker (an idle tick loads none)
    names = {"Dashboard": Dashboard, "BriefContext": BriefContext, "State": State,
             "Run": Run, "Decision": Decision, "ScheduleSpec": ScheduleSpec}
    assert typing.get_type_hints(contributors.board, localns=names)["return"] is Dashboard
    board = typing.get_type_hints(consolidate.finish_runs, localns=names)["board"]
    assert typing.get_args(typing.get_args(board)[0])[1] is Dashboard
    # no module-level import outside TYPE_CHECKING
    for module in (shell, consolidate, contributors):
        tree = ast.parse(inspect.getsource(module))
        eager = [node.module for node in tree.body
                 if isinstance(node, ast.ImportFrom) and node.module]
        assert not any(m.startswith("brief") or ".brief" in m for m in eager), eager
