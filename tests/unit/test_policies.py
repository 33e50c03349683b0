"""The failure and capacity policies in the planner, driven with plain datetimes:
stampede caps (max_parallel, max_concurrent_tracks, max_dispatches_per_tick) and the
pause after repeated failures with its resume."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from orchestrator.config.models import Schedule
from orchestrator.errors import NotFound, UserError
from orchestrator.executors.base import Observation
from orchestrator.planner import Caps, Decision, Observations, finish
from orchestrator.planner.pause import failure_streak, record_finish
from orchestrator.runs.pauses import pause, resume
from orchestrator.state import codec, layout
from orchestrator.state import health as runner_health
from orchestrator.state import model as state_model
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus, TrackPhase
from tests.builders import schedule_factory
from tests.planning import tick

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
NONE = Observations()

sched = schedule_factory("job", cron="*/5 * * * *", overlap="allow")


def keys(decision: Decision) -> list[str]:
    return [r.key for r in decision.dispatch]


def settle(decision: Decision, phase: TrackPhase = TrackPhase.COMPLETE, only: int | None = None
           ) -> Observations:
    """Every (or the first ``only``) dispatched attempt of ``decision`` reached ``phase``."""
    sent = decision.dispatch[:only] if only is not None else decision.dispatch
    return Observations(seen={r.key: Observation(key=r.key, phase=phase) for r in sent})


def in_flight(state: State) -> int:
    return sum(1 for ts in state.tracks.values() for t in ts.values()
               if t.phase in (TrackPhase.DISPATCHED, TrackPhase.RUNNING))


# ---------------------------------------------------------------- max_parallel


def test_max_parallel_holds_back_the_rest_of_the_run_until_slots_free_up() -> None:
    s = sched(tracks=5, max_parallel=2)
    d = tick([s], State(), T0)
    assert keys(d) == ["job--20261201T0700Z--t0--1", "job--20261201T0700Z--t1--1"]
    assert "job--20261201T0700Z: waiting: t2, t3, t4 (max_parallel 2 of the run in flight)" \
        in d.log
    # the run was touched (fired), so its poll log says what waits and why
    assert any("waiting: t2, t3, t4" in line for line in d.touched_runs["job--20261201T0700Z"])
    # one finishes: exactly one more goes
    d2 = tick([s], d.state, T0 + timedelta(minutes=1), settle(d, only=1))
    assert keys(d2) == ["job--20261201T0700Z--t2--1"]
    assert in_flight(d2.state) == 2


def test_a_run_that_only_waits_writes_no_poll_line_so_an_idle_tick_commits_nothing() -> None:
    s = sched(tracks=3, max_parallel=1)
    d = tick([s], State(), T0)
    again = tick([s], d.state, T0 + timedelta(seconds=30))
    assert again.state.dump() == d.state.dump()
    assert again.touched_runs == {}
    assert "job--20261201T0700Z: waiting: t1, t2 (max_parallel 1 of the run in flight)" \
        in again.log


def test_max_parallel_is_per_run_not_per_schedule() -> None:
    s = sched(tracks=2, max_parallel=1)
    d = tick([s], State(), T0)
    d2 = tick([s], d.state, T0 + timedelta(minutes=5))  # the next run: its own budget
    assert keys(d2) == ["job--20261201T0705Z--t0--1"]


def test_without_caps_everything_goes_at_once() -> None:
    d = tick([sched(tracks=4)], State(), T0)
    assert len(d.dispatch) == 4


# ---------------------------------------------------------------- repository caps


def test_max_concurrent_tracks_counts_every_run_and_shares_round_robin() -> None:
    a = sched("a", tracks=3)
    b = sched("b", tracks=3)
    d = tick([a, b], State(), T0, caps=Caps(max_concurrent_tracks=4))
    # same slot: round-robin over schedules, a first (ties by id)
    assert keys(d) == ["a--20261201T0700Z--t0--1", "b--20261201T0700Z--t0--1",
                       "a--20261201T0700Z--t1--1", "b--20261201T0700Z--t1--1"]
    assert "a--20261201T0700Z: waiting: t2 (max_concurrent_tracks 4 in flight)" in d.log
    d2 = tick([a, b], d.state, T0 + timedelta(minutes=1), NONE,
              caps=Caps(max_concurrent_tracks=4))
    assert keys(d2) == []  # nothing freed


def test_the_oldest_run_goes_first() -> None:
    a = sched("a", tracks=2, cron="0 7 * * *")
    b = sched("b", tracks=2, cron="30 6 * * *", catchup_window_minutes=60)
    caps = Caps(max_concurrent_tracks=2)
    # b's slot (06:30) is older than a's (07:00): b's tracks take the free capacity
    d = tick([a, b], State(), T0, caps=caps)
    assert keys(d) == ["b--20261201T0630Z--t0--1", "b--20261201T0630Z--t1--1"]


def test_max_dispatches_per_tick_spreads_a_burst_over_ticks() -> None:
    s = sched(tracks=5)
    caps = Caps(max_dispatches_per_tick=2)
    d = tick([s], State(), T0, caps=caps)
    assert len(d.dispatch) == 2
    assert "job--20261201T0700Z: waiting: t2, t3, t4 (max_dispatches_per_tick 2 reached)" \
        in d.log
    d2 = tick([s], d.state, T0 + timedelta(minutes=1), caps=caps)
    assert keys(d2) == ["job--20261201T0700Z--t2--1", "job--20261201T0700Z--t3--1"]


# ---------------------------------------------------------------- pause after failures


def fail_run(schedules: list[Schedule], state: State, now: datetime) -> State:
    """Fire the due slot, fail every track and finish the run as the tick's shell does."""
    d = tick(schedules, state, now)
    d2 = tick(schedules, d.state, now + timedelta(seconds=10), settle(d, TrackPhase.FAILED))
    for run_id in d2.render:
        d2.state.runs[run_id] = finish(d2.state.runs[run_id],
                                       d2.state.tracks[run_id].values(), now)
    return d2.state


def test_pause_after_n_consecutive_failed_runs_then_nothing_fires() -> None:
    s = sched(overlap="skip", pause_after_failures=2)
    state = fail_run([s], State(), T0)
    assert failure_streak(state, "job") == ["job--20261201T0700Z"]
    state = fail_run([s], state, T0 + timedelta(minutes=5))
    assert failure_streak(state, "job") == ["job--20261201T0705Z", "job--20261201T0700Z"]
    d = tick([s], state, T0 + timedelta(minutes=10))
    assert keys(d) == [] and "job--20261201T1010Z" not in d.state.runs
    pause = d.state.cursors["job"].paused
    assert pause is not None and pause.by == "orchestrator"
    assert pause.at == T0 + timedelta(minutes=10)
    assert "2 consecutive runs failed (pause_after_failures=2)" in pause.reason
    # still paused later, and says so; the record is not rewritten
    later = tick([s], d.state, T0 + timedelta(minutes=15))
    assert later.state.cursors["job"] is d.state.cursors["job"]
    assert any("paused since" in line for line in later.log)
    assert sorted(later.state.runs) == sorted(state.runs)


def test_the_cursor_s_count_pauses_a_tick_that_reads_only_open_runs() -> None:
    """A tick reads only open runs (the index): the count kept as runs finish pauses."""
    s = sched(overlap="skip", pause_after_failures=2)
    state = fail_run([s], State(), T0)
    run = state.runs["job--20261201T0700Z"]
    assert run.status is RunStatus.FAILED
    counted = record_finish(state.cursors["job"], run)
    assert counted.failures_in_a_row == 1
    counted = record_finish(counted, run)
    assert record_finish(counted, run.model_copy(update={"status": RunStatus.COMPLETED})
                         ).failures_in_a_row == 0
    only_open = State(cursors={"job": counted})  # no finished run loaded
    d = tick([s], only_open, T0 + timedelta(minutes=10))
    pause = d.state.cursors["job"].paused
    assert pause is not None and "2 consecutive runs failed" in pause.reason
    assert d.state.runs == {}
    files = state_model.State(cursors=d.state.cursors).dump()
    change = resume(files, "job", "ops", "fixed", T0 + timedelta(minutes=20))
    assert json.loads(change[layout.cursor_path("job")])["failures_in_a_row"] == 0


def test_a_success_breaks_the_streak() -> None:
    s = sched(overlap="skip", pause_after_failures=2)
    state = fail_run([s], State(), T0)
    d = tick([s], state, T0 + timedelta(minutes=5))
    d2 = tick([s], d.state, T0 + timedelta(minutes=6), settle(d))
    for run_id in d2.render:
        d2.state.runs[run_id] = finish(d2.state.runs[run_id],
                                       d2.state.tracks[run_id].values(), T0)
    assert failure_streak(d2.state, "job") == []
    state = fail_run([s], d2.state, T0 + timedelta(minutes=10))
    assert tick([s], state, T0 + timedelta(minutes=15)).state.cursors["job"].paused is None


def test_without_the_policy_failures_never_pause() -> None:
    s = sched(overlap="skip")
    state = fail_run([s], State(), T0)
    state = fail_run([s], state, T0 + timedelta(minutes=5))
    d = tick([s], state, T0 + timedelta(minutes=10))
    assert d.state.cursors["job"].paused is None and len(d.dispatch) == 1


def test_resume_records_who_and_why_and_earlier_failures_no_longer_count() -> None:
    s = sched(overlap="skip", pause_after_failures=1)
    state = fail_run([s], State(), T0)
    paused = tick([s], state, T0 + timedelta(minutes=5)).state
    files = paused.dump()
    at = T0 + timedelta(minutes=7)
    change = resume(files, "job", "alice", "fixed the credentials", at)
    state = state_model.load({**files, **{k: v for k, v in change.items() if v is not None}})
    cursor = state.cursors["job"]
    assert cursor.paused is None and cursor.resumed is not None
    assert (cursor.resumed.by, cursor.resumed.reason) == ("alice", "fixed the credentials")
    assert cursor.since == at  # the slots due while paused are not back-filled
    d = tick([s], state, T0 + timedelta(minutes=10))
    assert keys(d) == ["job--20261201T0710Z--a--1"]
    with pytest.raises(UserError, match="not paused"):
        resume(d.state.dump(), "job", "bob", "again", at)


def test_a_pause_before_the_first_tick_holds_every_slot_and_a_resume_owes_no_backlog(
        ) -> None:
    s = sched(overlap="allow", catchup="all", catchup_window_minutes=1440)
    files = pause({}, "job", "alice", "not yet", T0)  # no state at all: never ticked
    state = state_model.load(files)
    assert state.cursors["job"].paused is not None and state.cursors["job"].since == T0
    held = tick([s], state, T0 + timedelta(hours=2))
    assert keys(held) == [] and any("job: paused since" in line for line in held.log)
    at = T0 + timedelta(hours=3, minutes=2)
    change = resume(held.state.dump(), "job", "bob", "ready", at)
    state = state_model.load({**held.state.dump(), **{k: v for k, v in change.items()
                                                     if v is not None}})
    d = tick([s], state, at + timedelta(minutes=9))
    # catchup=all counts from the resume: 10:05 and 10:10, nothing from 07:00 on
    assert sorted({k.split("--")[1] for k in keys(d)}) == ["20261201T1005Z",
                                                          "20261201T1010Z"]


def test_pausing_an_id_without_a_file_or_state_is_refused() -> None:
    with pytest.raises(NotFound, match="no schedule 'jbo'"):
        pause({}, "jbo", "alice", "typo", T0, defined=False)
    with pytest.raises(UserError, match="not paused"):
        resume({}, "job", "alice", "never paused", T0)


def test_editing_the_schedule_does_not_resume_it() -> None:
    s = sched(overlap="skip", pause_after_failures=1)
    state = fail_run([s], State(), T0)
    paused = tick([s], state, T0 + timedelta(minutes=5)).state
    edited = sched(overlap="skip", tracks=["b"], run="echo fixed")  # policy removed, too
    d = tick([edited], paused, T0 + timedelta(minutes=10))
    assert d.state.cursors["job"].paused is not None and d.dispatch == []


def test_status_says_a_schedule_is_paused_by_whom_and_how_to_resume() -> None:
    from orchestrator.runs.status import build, text

    s = sched(overlap="skip", pause_after_failures=1)
    state = fail_run([s], State(), T0)
    paused = tick([s], state, T0 + timedelta(minutes=5)).state
    report = build(paused.dump(), [s], [], T0 + timedelta(minutes=6), timedelta(minutes=90))
    row = report["schedules"][0]
    assert row["paused"]["by"] == "orchestrator" and row["next"] is None
    line = next(x for x in text(report) if x.strip().startswith("job") and "PAUSED" in x)
    assert "PAUSED since 2026-12-01T07:05:00Z by orchestrator: 1 consecutive runs failed" \
        in line
    assert "orchestrator schedules resume job --reason" in line


# ---------------------------------------------------------------- on_failure and sagas

UNDO = {"run": "echo undo", "max_attempts": 2}


def saga(policy: str = "compensate", **kw: Any) -> Schedule:
    """Tracks a, b, c (each undoable when ``policy`` is compensate) and d."""
    undo = {"compensate": UNDO} if policy == "compensate" else {}
    tracks = [{"name": n, "run": "true", **undo} for n in ("a", "b", "c")]
    return sched(tracks=[*tracks, {"name": "d", "run": "true"}], overlap="skip",
                 on_failure=policy, **kw)


def seen(*pairs: tuple[str, TrackPhase], result: dict[str, Any] | None = None
         ) -> Observations:
    return Observations(seen={k: Observation(key=k, phase=p, result=result)
                              for k, p in pairs})


K = "job--20261201T0700Z"


def test_continue_lets_the_other_tracks_go_on() -> None:
    s = saga("continue")
    d = tick([s], State(), T0)
    d2 = tick([s], d.state, T0 + timedelta(minutes=1), seen((f"{K}--a--1", TrackPhase.FAILED)))
    assert {n: t.phase for n, t in d2.state.tracks[K].items()} == {
        "a": TrackPhase.FAILED, "b": TrackPhase.DISPATCHED,
        "c": TrackPhase.DISPATCHED, "d": TrackPhase.DISPATCHED}
    assert d2.cancel == []


def test_cancel_run_cancels_the_open_tracks_at_the_first_final_failure() -> None:
    s = saga("cancel_run")
    d = tick([s], State(), T0)
    d1 = tick([s], d.state, T0 + timedelta(seconds=30), seen((f"{K}--b--1", TrackPhase.RUNNING)))
    b_running = d1.state.tracks[K]["b"].model_copy(update={"handle": {"pid": 1}})
    d1.state.tracks[K]["b"] = b_running
    d2 = tick([s], d1.state, T0 + timedelta(minutes=1),
              seen((f"{K}--a--1", TrackPhase.FAILED), (f"{K}--c--1", TrackPhase.COMPLETE)))
    phases = {n: t.phase for n, t in d2.state.tracks[K].items()}
    assert phases == {"a": TrackPhase.FAILED, "b": TrackPhase.CANCELLED,
                      "c": TrackPhase.COMPLETE, "d": TrackPhase.CANCELLED}
    assert [h.key for h in d2.cancel] == [f"{K}--b--1"]
    assert d2.state.tracks[K]["b"].state_history[-1].reason == \
        "on_failure=cancel_run: a failed"
    assert K not in d2.state.undos and d2.render == [K]


def test_a_retry_left_is_not_a_final_failure() -> None:
    s = sched(tracks=[{"name": "a", "run": "true", "max_attempts": 2},
                      {"name": "b", "run": "true"}], on_failure="cancel_run")
    d = tick([s], State(), T0)
    d2 = tick([s], d.state, T0 + timedelta(minutes=1), seen((f"{K}--a--1", TrackPhase.FAILED)))
    assert d2.state.tracks[K]["b"].phase is TrackPhase.DISPATCHED
    assert d2.state.tracks[K]["a"].phase is TrackPhase.PENDING


def complete_then_fail(s: Schedule) -> Decision:
    """b completes, then c, then a fails for good (d still running)."""
    d = tick([s], State(), T0)
    d = tick([s], d.state, T0 + timedelta(minutes=1), seen((f"{K}--b--1", TrackPhase.COMPLETE),
                                                           result={"summary": "made b"}))
    d = tick([s], d.state, T0 + timedelta(minutes=2), seen((f"{K}--c--1", TrackPhase.COMPLETE)))
    return tick([s], d.state, T0 + timedelta(minutes=3), seen((f"{K}--a--1", TrackPhase.FAILED)))


def test_compensate_undoes_completed_tracks_one_at_a_time_newest_first() -> None:
    s = saga()
    d = complete_then_fail(s)
    assert d.state.tracks[K]["d"].phase is TrackPhase.CANCELLED
    assert sorted(d.state.undos[K]) == ["b", "c"]  # a failed, d has no compensate
    assert [r.key for r in d.dispatch] == [f"{K}--c--undo--1"]  # c completed last
    request = d.dispatch[0]
    assert request.compensating and request.spec.run == "echo undo"
    assert {k: v for k, v in request.env.items() if "SLOT" not in k
            and k != "ORCHESTRATOR_SCHEDULE"} == {"ORCHESTRATOR_COMPENSATING": "1",
                                                  "ORCHESTRATOR_ORIGINAL_RESULT": "null"}
    assert request.env["ORCHESTRATOR_SLOT"] == "2026-12-01T07:00:00Z"  # its run's, too
    assert any("compensating 2 completed track(s), newest first: c, b" in line
               for line in d.touched_runs[K])
    # nothing consolidates while a compensation is open
    d2 = tick([s], d.state, T0 + timedelta(minutes=4))
    assert d2.render == [] and d2.dispatch == []
    d3 = tick([s], d2.state, T0 + timedelta(minutes=5),
              seen((f"{K}--c--undo--1", TrackPhase.COMPLETE)))
    assert [r.key for r in d3.dispatch] == [f"{K}--b--undo--1"]
    assert d3.dispatch[0].env["ORCHESTRATOR_ORIGINAL_RESULT"] == '{"summary": "made b"}'
    d4 = tick([s], d3.state, T0 + timedelta(minutes=6),
              seen((f"{K}--b--undo--1", TrackPhase.COMPLETE)))
    assert d4.render == [K] and d4.dispatch == []
    run = finish(d4.state.runs[K], d4.state.tracks[K].values(), T0)
    assert run.status is RunStatus.FAILED
    # the records say when each action and each compensation ran
    undo_c = d4.state.undos[K]["c"]
    assert [(h.from_, h.to) for h in undo_c.state_history] == [
        ("pending", "dispatched"), ("dispatched", "complete")]
    files = d4.state.dump()
    assert f"state/runs/{K}/undo/c.json" in files
    assert state_model.load(files).undos[K]["c"] == undo_c
    # the brief has a compensation section, in the order they ran
    from orchestrator.brief import context_from_files, render_html, render_markdown

    files[layout.run_path(K)] = codec.to_json(run)
    ctx = context_from_files(files, K, now=T0 + timedelta(minutes=7), schedule=s.spec)
    assert [u.name for u in ctx.compensations] == ["c", "b"]
    html = render_html(ctx)
    section = html[html.index('id="compensation"'):html.index('id="errors"')]
    assert section.index("<code>c</code>") < section.index("<code>b</code>")
    assert "complete" in section
    assert "<dt>Policies</dt><dd>on failure: compensate" in html
    assert "**Compensation** (newest first): c complete (1/2), b complete (1/2)" in \
        render_markdown(ctx)


def test_a_compensation_that_keeps_failing_is_dead_lettered_and_the_rest_cancelled() -> None:
    s = saga()
    d = complete_then_fail(s)
    d = tick([s], d.state, T0 + timedelta(minutes=4), seen((f"{K}--c--undo--1", TrackPhase.FAILED)))
    assert d.state.undos[K]["c"].phase is TrackPhase.PENDING and d.dispatch == []  # backoff
    d = tick([s], d.state, T0 + timedelta(minutes=5))
    assert [r.key for r in d.dispatch] == [f"{K}--c--undo--2"]
    d = tick([s], d.state, T0 + timedelta(minutes=6), seen((f"{K}--c--undo--2", TrackPhase.FAILED)))
    letter = d.state.dlq[f"{K}--c"]
    assert letter.reason == "compensation_failed" and letter.attempts == 2
    assert d.state.undos[K]["b"].phase is TrackPhase.CANCELLED
    assert d.render == [K] and d.dispatch == []


def test_a_lost_compensation_dispatch_is_looked_up_and_resent_under_the_same_key() -> None:
    s = saga()
    d = complete_then_fail(s)
    key = f"{K}--c--undo--1"
    later = tick([s], d.state, T0 + timedelta(minutes=20), Observations(found={key: None}))
    assert [r.key for r in later.dispatch] == [key]


def test_on_failure_and_compensate_must_agree() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="needs a track with a 'compensate' step"):
        sched(on_failure="compensate")
    with pytest.raises(ValidationError, match="runs only with on_failure 'compensate'"):
        sched(tracks=[{"name": "a", "run": "true", "compensate": UNDO}])
    with pytest.raises(ValidationError, match="max_attempts"):
        sched(tracks=[{"name": "a", "run": "true",
                       "compensate": {"run": "x", "max_attempts": 0}}],
              on_failure="compensate")


# ---------------------------------------------------------------- runner health and routing

def route(**kw: Any) -> Schedule:
    return sched(**{"tracks": 2, "overlap": "skip", "runs_on": ["gpu", "ubuntu-latest"],
                    "queue_timeout_minutes": 10, "runner_cooldown_minutes": 30, **kw})


def with_handles(decision: Decision, ci_run: int = 7) -> State:
    """``decision``'s state with every dispatched track's handle recorded (one run)."""
    state = decision.state
    for name, track in state.tracks[K].items():
        if track.dispatch_key is not None:
            state.tracks[K][name] = track.model_copy(update={"handle": {"ci_run_id": ci_run}})
    return state


def test_legs_go_to_the_first_label_and_a_leg_queued_on_a_busy_label_waits() -> None:
    s = route()
    d = tick([s], State(), T0)
    assert [(r.key, r.runs_on) for r in d.dispatch] == [
        (f"{K}--t0--1", "gpu"), (f"{K}--t1--1", "gpu")]
    # one runner: t1 took it, t0 is queued behind it (GitHub lists it with no news)
    d1 = tick([s], with_handles(d), T0 + timedelta(minutes=1), Observations(seen={
        f"{K}--t1--1": Observation(key=f"{K}--t1--1", phase=TrackPhase.RUNNING,
                                   started_at=T0 + timedelta(seconds=50))}))
    # past the queue timeout the label is busy, not sick: nothing degraded or cancelled
    d2 = tick([s], d1.state, T0 + timedelta(minutes=10))
    assert (d2.dispatch, d2.cancel, d2.state.runners) == ([], [], {})
    assert f"{K}: t0: queued on gpu for over 10 min; 1 leg(s) started there since: " \
        "busy, not sick; it waits" in d2.log
    assert d2.state.tracks == d1.state.tracks  # waiting changes no track
    # t1 ended a minute ago and its runner is about to take t0: still busy
    d3 = tick([s], d1.state, T0 + timedelta(minutes=31), Observations(seen={
        f"{K}--t1--1": Observation(key=f"{K}--t1--1", phase=TrackPhase.COMPLETE,
                                   finished_at=T0 + timedelta(minutes=30))}))
    assert (d3.dispatch, d3.cancel, d3.state.runners) == ([], [], {})
    d4 = tick([s], d3.state, T0 + timedelta(minutes=32), Observations(seen={
        f"{K}--t0--1": Observation(key=f"{K}--t0--1", phase=TrackPhase.RUNNING,
                                   started_at=T0 + timedelta(minutes=31))}))
    t0 = d4.state.tracks[K]["t0"]
    assert (t0.phase, t0.attempt, t0.runner) == (TrackPhase.RUNNING, 1, "gpu")


def test_a_leg_no_runner_took_moves_on_only_once_its_run_is_seen_cancelled() -> None:
    s = route()
    d = tick([s], State(), T0)
    state = with_handles(d)
    assert tick([s], state, T0 + timedelta(minutes=9)).cancel == []
    d1 = tick([s], state, T0 + timedelta(minutes=10))
    health = d1.state.runners["gpu"]
    assert (health.status, health.consecutive_failures) == ("degraded", 1)
    assert health.last_checked_at == T0 + timedelta(minutes=10)
    assert "waited 10 min for a runner" in health.notes
    # both legs of the run are cancelled, and nothing goes to the next label yet
    assert [h.key for h in d1.cancel] == [f"{K}--t0--1", f"{K}--t1--1"]
    assert d1.dispatch == []
    t0 = d1.state.tracks[K]["t0"]
    assert (t0.phase, t0.attempt, t0.leaving_since) == (TrackPhase.DISPATCHED, 1,
                                                        T0 + timedelta(minutes=10))
    assert "leaving_since" in json.loads(d1.state.dump()[f"state/runs/{K}/tracks/t0.json"])
    # a poll later the jobs still read queued: the cancel is asked again, nothing moves
    d2 = tick([s], d1.state, T0 + timedelta(minutes=11))
    assert [h.key for h in d2.cancel] == [f"{K}--t0--1", f"{K}--t1--1"]
    assert d2.dispatch == [] and d2.state.tracks == d1.state.tracks
    assert d2.state.runners["gpu"].consecutive_failures == 1
    # t0 is seen cancelled: it goes on, under a fresh attempt number, its budget untouched
    d3 = tick([s], d1.state, T0 + timedelta(minutes=12), Observations(seen={
        f"{K}--t0--1": Observation(key=f"{K}--t0--1", phase=TrackPhase.CANCELLED,
                                   error="job concluded cancelled")}))
    assert [(r.key, r.runs_on) for r in d3.dispatch] == [(f"{K}--t0--2", "ubuntu-latest")]
    t0 = d3.state.tracks[K]["t0"]
    assert (t0.attempt, t0.max_attempts, t0.runner, t0.leaving_since) == (
        2, 2, "ubuntu-latest", None)
    assert "no runner took it on gpu; its run was cancelled" in t0.error_log[-1]
    assert "leaving_since" not in json.loads(d3.state.dump()[f"state/runs/{K}/tracks/t0.json"])
    assert d3.state.runners["gpu"].consecutive_failures == 1  # counted once, when asked
    assert d3.state.tracks[K]["t1"].leaving_since is not None  # not seen cancelled yet
    assert "runners" in json.loads(d3.state.dump()["state/health.json"])


def test_a_leaving_leg_s_cancel_is_asked_again_in_a_commit_and_a_start_keeps_it() -> None:
    s = route(tracks=1)
    d = tick([s], State(), T0)
    d1 = tick([s], with_handles(d), T0 + timedelta(minutes=10))
    # its run could not be cancelled yet: ten minutes on, the record is touched so that
    # the tick lands and carries the cancel out
    d2 = tick([s], d1.state, T0 + timedelta(minutes=20))
    assert [h.key for h in d2.cancel] == [f"{K}--t0--1"]
    assert d2.state.tracks[K]["t0"].leaving_since == T0 + timedelta(minutes=20)
    # a runner took it before the cancel did: it runs there, nothing is asked any more
    d3 = tick([s], d2.state, T0 + timedelta(minutes=21), Observations(seen={
        f"{K}--t0--1": Observation(key=f"{K}--t0--1", phase=TrackPhase.RUNNING,
                                   started_at=T0 + timedelta(minutes=20, seconds=30))}))
    assert (d3.cancel, d3.dispatch) == ([], [])
    assert d3.state.runners["gpu"].status == "healthy"


def test_a_degraded_label_is_skipped_then_probed_after_the_cooldown() -> None:
    s = route()
    state = State(runners={"gpu": runner_health.degrade(None, T0, "queued")})
    d = tick([s], state, T0 + timedelta(minutes=1))
    assert [r.runs_on for r in d.dispatch] == ["ubuntu-latest", "ubuntu-latest"]
    nxt = sched("job", cron="*/5 * * * *", tracks=2, overlap="allow",
                runs_on=["gpu", "ubuntu-latest"], runner_cooldown_minutes=30)
    done = Observations(seen={r.key: Observation(key=r.key, phase=TrackPhase.COMPLETE,
                                                 started_at=T0 + timedelta(minutes=2))
                              for r in d.dispatch})
    d1 = tick([s], d.state, T0 + timedelta(minutes=3), done)
    d2 = tick([nxt], d1.state, T0 + timedelta(minutes=30))
    run2 = "job--20261201T0730Z"
    # one leg probes gpu (half-open), the other goes on to the healthy label
    assert [(r.key, r.runs_on) for r in d2.dispatch] == [
        (f"{run2}--t0--1", "gpu"), (f"{run2}--t1--1", "ubuntu-latest")]
    assert d2.state.runners["gpu"].probe == f"{run2}--t0--1"
    # the probe starts: healthy again
    d3 = tick([nxt], d2.state, T0 + timedelta(minutes=31), Observations(seen={
        f"{run2}--t0--1": Observation(key=f"{run2}--t0--1", phase=TrackPhase.RUNNING,
                                      started_at=T0 + timedelta(minutes=30, seconds=20))}))
    gpu = d3.state.runners["gpu"]
    assert (gpu.status, gpu.consecutive_failures, gpu.probe) == ("healthy", 0, None)


def test_once_the_probe_is_out_a_leg_with_no_other_label_waits() -> None:
    s = sched(tracks=2, runs_on=["gpu"], runner_cooldown_minutes=30)
    state = State(runners={"gpu": runner_health.degrade(None, T0 - timedelta(hours=1), "queued")})
    d = tick([s], state, T0)
    assert [(r.key, r.runs_on) for r in d.dispatch] == [(f"{K}--t0--1", "gpu")]
    assert any("being probed; it waits" in line for line in d.log)


def test_a_failed_probe_counts_and_three_failures_are_offline() -> None:
    gpu = runner_health.degrade(runner_health.degrade(None, T0, "x"), T0, "y")
    assert gpu.status == "degraded" and gpu.consecutive_failures == 2
    assert runner_health.degrade(gpu, T0, "z").status == "offline"
    assert runner_health.choice(gpu, T0 + timedelta(minutes=29), timedelta(minutes=30)) == "skip"
    assert runner_health.choice(gpu, T0 + timedelta(minutes=30), timedelta(minutes=30)) == "probe"
    probing = gpu.model_copy(update={"probe": "k"})
    assert runner_health.choice(probing, T0 + timedelta(hours=5), timedelta(minutes=30)) == "skip"
    assert runner_health.choice(None, T0, timedelta(0)) == "use"


def test_with_no_healthy_label_the_track_stays_pending_and_the_tick_says_so() -> None:
    s = sched(tracks=1, runs_on=["gpu"], runner_cooldown_minutes=30)
    state = State(runners={"gpu": runner_health.degrade(None, T0, "queued")})
    d = tick([s], state, T0 + timedelta(minutes=1))
    assert d.dispatch == []
    assert d.state.tracks["job--20261201T0700Z"]["t0"].phase is TrackPhase.PENDING
    line = next(x for x in d.log if "no healthy runner label" in x)
    assert "gpu degraded since 2026-12-01T07:00Z" in line
    assert "stays pending until the run's deadline" in line
    again = tick([s], d.state, T0 + timedelta(minutes=2))
    assert again.state.dump() == d.state.dump()  # waiting commits nothing


def test_without_runs_on_nothing_is_routed() -> None:
    d = tick([sched(tracks=1)], State(), T0)
    assert d.dispatch[0].runs_on is None and d.state.runners == {}
    later = tick([sched(tracks=1)], d.state, T0 + timedelta(hours=1))
    assert later.state.runners == {}


@pytest.mark.parametrize(("fields", "message"), [
    ({"max_parallel": 0}, "max_parallel"),
    ({"pause_after_failures": 0}, "pause_after_failures"),
    ({"on_failure": "rollback"}, "on_failure"),
    ({"runs_on": []}, "runs_on"),
    ({"runs_on": ["gpu", "gpu"]}, "runner labels must differ"),
    ({"runs_on": ["has space"]}, "runs_on.0"),
    ({"queue_timeout_minutes": 0}, "queue_timeout_minutes"),
    ({"max_paralel": 2}, "max_paralel"),
])
def test_every_policy_is_strictly_validated(fields: dict[str, Any], message: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        sched(**fields)


def test_the_next_wake_knows_a_compensation_retry_and_a_queue_timeout() -> None:
    from orchestrator.cadence.wake import due_moments

    s = saga()
    d = complete_then_fail(s)
    d = tick([s], d.state, T0 + timedelta(minutes=4), seen((f"{K}--c--undo--1", TrackPhase.FAILED)))
    reasons = {w.reason: w.at for w in due_moments([s], d.state, T0 + timedelta(minutes=4))}
    assert reasons[f"{K}: c compensation retry"] == T0 + timedelta(minutes=4, seconds=30)

    r = route()
    routed = tick([r], State(), T0)
    reasons = {w.reason: w.at for w in due_moments([r], routed.state, T0)}
    assert reasons[f"{K}: t0 queue timeout on gpu"] == T0 + timedelta(minutes=10)
