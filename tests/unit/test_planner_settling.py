"""The planner's settling loop (:mod:`orchestrator.planner.settling`): its bound, its
fixed point, and the same decision whatever order its passes run in.

Each scenario is the tick where settling matters, reached by earlier ticks of the pure
planner: drain workers ending, skips down a graph, ``cancel_previous`` ending a drain's
workers, a drain whose queue is empty, a worker past its lease, a render that did not land.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.config.models import Schedule
from orchestrator.executors.base import DispatchResult, Observation
from orchestrator.planner import Decision, Observations, record_dispatch
from orchestrator.planner.context import Context
from orchestrator.planner.settling import PASSES, ROUNDS, Pass, Unsettled, settle
from orchestrator.state import queueops
from orchestrator.state.items import ItemReport, NewItem
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.builders import schedule
from tests.planning import tick

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
RUN = "crawl--20261201T0700Z"


def drain_track(workers: int = 2, **extra: Any) -> dict[str, Any]:
    """Track ``pages`` draining the queue ``pages``, two items a worker."""
    return {"name": "pages", "run": "true", "max_attempts": 1,
            "drain": {"queue": "pages", "task_cap": 2, "max_workers": workers,
                      "lease_minutes": 15}, **extra}


def crawl(*tracks: dict[str, Any], **spec: Any) -> Schedule:
    return schedule("crawl", cron="*/5 * * * *", tracks=list(tracks), **spec)


def with_items(count: int) -> State:
    state = State()
    queueops.enqueue(state.queue("pages"),
                     [NewItem(payload=n, key=f"k{n}") for n in range(count)], T0, "test")
    return state


def dispatched(schedules: list[Schedule], state: State, now: datetime,
               obs: Observations | None = None) -> State:
    """The state after a tick at ``now`` whose dispatches all started."""
    decision = tick(schedules, state, now, obs)
    record_dispatch(decision.state, [DispatchResult(key=r.key, handle={"pid": n})
                                     for n, r in enumerate(decision.dispatch)], now)
    return decision.state


def ended(keys: dict[str, TrackPhase], items: dict[str, tuple[ItemReport, ...]] | None = None,
          ) -> Observations:
    """Each attempt ``key`` ended in its phase; a worker's reports in ``items``."""
    items = items or {}
    return Observations(seen={k: Observation(key=k, phase=p, finished_at=None,
                                             items=items.get(k, ()))
                              for k, p in keys.items()})


def reports(state: State, key: str, outcome: str) -> tuple[ItemReport, ...]:
    """``outcome`` for every item the worker dispatched under ``key`` holds."""
    book = state.queues["pages"]
    return tuple(ItemReport(id=i, outcome=outcome, attempt=1)
                 for i in book.claims[key].items)


@dataclass
class Scenario:
    schedules: list[Schedule]
    state: State
    now: datetime
    obs: Observations = field(default_factory=Observations)
    check: Callable[[Decision], None] = lambda _: None
    """What the documented order decides, so the scenario is known to exercise settling."""

    def plan(self, settling: Sequence[Pass] = PASSES) -> Decision:
        return tick(self.schedules, self.state, self.now, self.obs, settling=settling)


def workers_fail_so_the_drain_fails_and_its_dependants_are_skipped() -> Scenario:
    s = crawl(drain_track(), {"name": "report", "run": "true", "needs": ["pages"]},
              {"name": "after", "run": "true", "needs": ["report"]}, overlap="allow")
    state = dispatched([s], with_items(4), T0)
    w1, w2 = f"{RUN}--pages-w1--1", f"{RUN}--pages-w2--1"
    obs = ended({w1: TrackPhase.FAILED, w2: TrackPhase.FAILED},
                {w1: reports(state, w1, "failed")})

    def check(d: Decision) -> None:
        tracks = d.state.tracks[RUN]
        assert [tracks[n].phase for n in ("pages", "report", "after")] == [
            TrackPhase.FAILED, TrackPhase.SKIPPED, TrackPhase.SKIPPED]
        assert d.render == [RUN]
    return Scenario([s], state, T0 + timedelta(minutes=1), obs, check)


def a_worker_completes_so_the_drain_completes_and_its_dependant_is_dispatched() -> Scenario:
    s = crawl(drain_track(workers=1),
              {"name": "report", "run": "true", "needs": ["pages"]}, overlap="allow")
    state = dispatched([s], with_items(2), T0)
    w1 = f"{RUN}--pages-w1--1"
    obs = ended({w1: TrackPhase.COMPLETE}, {w1: reports(state, w1, "done")})

    def check(d: Decision) -> None:
        assert d.state.tracks[RUN]["pages"].phase is TrackPhase.COMPLETE
        assert [r.key for r in d.dispatch] == [f"{RUN}--report--1"]
    return Scenario([s], state, T0 + timedelta(minutes=1), obs, check)


def a_failure_skips_down_the_graph_and_when_always_still_runs() -> Scenario:
    s = crawl({"name": "a", "run": "true", "max_attempts": 1},
              {"name": "b", "run": "true", "needs": ["a"]},
              {"name": "c", "run": "true", "needs": ["b"]}, overlap="allow")
    other = schedule("tidy", cron="*/5 * * * *", overlap="allow", tracks=[
        {"name": "a", "run": "true", "max_attempts": 1},
        {"name": "b", "run": "true", "needs": ["a"]},
        {"name": "cleanup", "run": "true", "needs": ["b"], "when": "always"}])
    state = dispatched([s, other], State(), T0)
    obs = ended({f"{RUN}--a--1": TrackPhase.FAILED,
                 "tidy--20261201T0700Z--a--1": TrackPhase.FAILED})

    def check(d: Decision) -> None:
        assert d.state.tracks[RUN]["c"].phase is TrackPhase.SKIPPED
        assert d.render == [RUN]
        assert [r.key for r in d.dispatch] == ["tidy--20261201T0700Z--cleanup--1"]
    return Scenario([s, other], state, T0 + timedelta(minutes=1), obs, check)


def cancel_previous_ends_a_drain_whose_accounts_are_not_in_yet() -> Scenario:
    s = crawl(drain_track(), overlap="cancel_previous")
    state = dispatched([s], with_items(3), T0)

    def check(d: Decision) -> None:
        # the cancelled workers keep their claims until their accounts are read: the
        # first run waits, the new run's drain finds nothing to claim and fans in
        assert d.state.runs[RUN].status is RunStatus.RUNNING
        assert d.state.queues["pages"].counts == {"claimed": 3}
        assert d.render == ["crawl--20261201T0705Z"] and d.dispatch == []
        assert sorted(h.key for h in d.cancel) == [f"{RUN}--pages-w1--1",
                                                   f"{RUN}--pages-w2--1"]
    return Scenario([s], state, T0 + timedelta(minutes=5), check=check)


def cancelled_workers_accounts_keep_what_they_finished() -> Scenario:
    s = crawl(drain_track(), overlap="cancel_previous")
    state = tick([s], dispatched([s], with_items(3), T0), T0 + timedelta(minutes=5)).state
    w1, w2 = f"{RUN}--pages-w1--1", f"{RUN}--pages-w2--1"
    obs = ended({w1: TrackPhase.CANCELLED, w2: TrackPhase.CANCELLED},
                {w1: reports(state, w1, "done")})

    def check(d: Decision) -> None:
        # what w1 finished stays done; only w2's unfinished item goes back
        assert d.state.queues["pages"].counts == {"done": 2, "ready": 1}
        assert d.state.runs[RUN].status is RunStatus.CONSOLIDATING
        assert RUN in d.render
    return Scenario([s], state, T0 + timedelta(minutes=6), obs, check)


def a_drain_whose_queue_is_empty_completes_and_its_run_fans_in() -> Scenario:
    s = crawl({"name": "a", "run": "true", "max_attempts": 1},
              {"name": "x", "run": "true"}, drain_track(needs=["x"]),
              {"name": "z", "run": "true", "needs": ["a", "pages"]}, overlap="allow")
    state = dispatched([s], with_items(0), T0)
    obs = ended({f"{RUN}--a--1": TrackPhase.FAILED, f"{RUN}--x--1": TrackPhase.COMPLETE})

    def check(d: Decision) -> None:
        tracks = d.state.tracks[RUN]
        assert tracks["pages"].phase is TrackPhase.COMPLETE and d.dispatch == []
        assert tracks["z"].phase is TrackPhase.SKIPPED
        assert d.render == [RUN]
    return Scenario([s], state, T0 + timedelta(minutes=1), obs, check)


def a_worker_past_its_lease_is_settled_from_its_report() -> Scenario:
    s = crawl(drain_track(workers=1), overlap="allow")
    state = dispatched([s], with_items(2), T0)
    w1 = f"{RUN}--pages-w1--1"
    obs = ended({w1: TrackPhase.COMPLETE}, {w1: reports(state, w1, "done")})

    def check(d: Decision) -> None:
        assert d.state.queues["pages"].counts == {"done": 2}  # not released by the lease
        assert d.state.tracks[RUN]["pages"].phase is TrackPhase.COMPLETE
        assert RUN in d.render
    # the lease of 15 minutes has passed; a new run fires and finds the queue empty
    return Scenario([s], state, T0 + timedelta(minutes=20), obs, check)


def a_consolidating_run_whose_render_did_not_land_renders_again() -> Scenario:
    earlier = a_worker_past_its_lease_is_settled_from_its_report()
    first = earlier.plan()
    assert first.state.runs[RUN].status is RunStatus.CONSOLIDATING

    def check(d: Decision) -> None:
        assert RUN in d.render
    return Scenario(earlier.schedules, first.state, earlier.now + timedelta(minutes=1),
                    check=check)


SCENARIOS = [
    workers_fail_so_the_drain_fails_and_its_dependants_are_skipped,
    a_worker_completes_so_the_drain_completes_and_its_dependant_is_dispatched,
    a_failure_skips_down_the_graph_and_when_always_still_runs,
    cancel_previous_ends_a_drain_whose_accounts_are_not_in_yet,
    cancelled_workers_accounts_keep_what_they_finished,
    a_drain_whose_queue_is_empty_completes_and_its_run_fans_in,
    a_worker_past_its_lease_is_settled_from_its_report,
    a_consolidating_run_whose_render_did_not_land_renders_again,
]


def fingerprint(d: Decision) -> dict[str, Any]:
    """Everything a decision says. Lines and renders are compared as sets of lines:
    passes run in another order append them in another order."""
    return {"state": d.state.dump(), "dispatch": [r.key for r in d.dispatch],
            "cancel": sorted(h.key for h in d.cancel), "render": sorted(d.render),
            "log": sorted(d.log), "touched": {k: sorted(v) for k, v in d.touched_runs.items()},
            "dead": d.dead_items, "answers": d.answers, "polls": d.polls}


def counted(passes: Sequence[Pass], rounds: list[bool]) -> tuple[Pass, ...]:
    """``passes``, each round recorded in ``rounds``: whether any pass changed something."""
    def watched(index: int, step: Pass) -> Pass:
        def run(ctx: Context) -> bool:
            if index == 0:
                rounds.append(False)
            changed = step(ctx)
            rounds[-1] = rounds[-1] or changed
            return changed
        return run
    return tuple(watched(n, step) for n, step in enumerate(passes))


def changing_rounds(rounds: list[bool]) -> list[int]:
    """For each settling point (it ends at its quiet round): its rounds that changed."""
    points, run = [], 0
    for changed in rounds:
        if changed:
            run += 1
        else:
            points.append(run)
            run = 0
    return points


@pytest.mark.parametrize("build", SCENARIOS, ids=lambda b: b.__name__)
def test_every_order_of_the_settling_passes_reaches_the_same_decision(
        build: Callable[[], Scenario]) -> None:
    scenario = build()
    rounds: list[bool] = []
    documented = scenario.plan(counted(PASSES, rounds))
    scenario.check(documented)
    # three settling points; in the documented order each changes in one round at most
    assert len(changing_rounds(rounds)) == 3 and max(changing_rounds(rounds)) <= 1
    expected = fingerprint(documented)
    for order in itertools.permutations(PASSES):
        rounds.clear()
        assert fingerprint(scenario.plan(counted(order, rounds))) == expected, order
        # any order: at most one round per link of the chain of four passes
        assert max(changing_rounds(rounds)) <= len(PASSES)


def test_the_planner_s_input_is_left_as_it_was() -> None:
    scenario = cancel_previous_ends_a_drain_whose_accounts_are_not_in_yet()
    before = scenario.state.dump()
    scenario.plan()
    assert scenario.state.dump() == before  # so each order above starts from the same state


def context() -> Context:
    return Context(Decision(state=State()), {}, Observations(), T0, "local",
                   timedelta(minutes=10))


def test_a_quiet_loop_stops_after_one_round() -> None:
    assert settle(context()) == 1


def test_the_loop_runs_until_a_round_changes_nothing() -> None:
    left = [True, True]

    def twice(_: Context) -> bool:
        return bool(left) and left.pop()
    assert settle(context(), (*PASSES, twice)) == 3


def test_a_pass_that_always_changes_something_stops_the_loop_at_its_bound_with_an_error(
        ) -> None:
    calls: list[int] = []

    def restless(_: Context) -> bool:
        calls.append(1)
        return True
    with pytest.raises(Unsettled, match=rf"did not settle in {ROUNDS} rounds; "
                       r"still changing in the last: restless$"):
        tick([crawl({"name": "a", "run": "true"})], State(), T0,
             settling=(*PASSES, restless))
    assert len(calls) == ROUNDS  # the first settling point, then the error
