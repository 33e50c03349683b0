"""The status report as a pure function of state files, schedules and ``now``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orchestrator.config.models import TrackSpec
from orchestrator.runs.status import build, text
from orchestrator.state import codec, layout
from orchestrator.state import model as state_model
from orchestrator.state.breaker import Breaker
from orchestrator.state.codec import last_tick_at as last_tick
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Cursor, DeadLetter, Run, Track
from tests.builders import schedule

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
LIMIT = timedelta(minutes=90)


def ticks(*moments: datetime) -> bytes:
    return b"".join(codec.json_line({"at": m.isoformat().replace("+00:00", "Z"),
                                  "executor": "local"}) for m in moments)


def test_last_tick_is_the_newest_readable_line() -> None:
    assert last_tick({}) is None
    assert last_tick({layout.TICKS: b""}) is None
    data = ticks(T0, T0 + timedelta(minutes=15)) + b"not json\n" + b'{"no": "at"}\n'
    assert last_tick({layout.TICKS: data}) == T0 + timedelta(minutes=15)
    assert last_tick({layout.TICKS: b'{"at": "2026-12-01T07:00:00"}\n'}) is None  # no offset


def test_fresh_until_the_limit_then_stale() -> None:
    files = {layout.TICKS: ticks(T0)}
    assert build(files, [], [], T0 + LIMIT, LIMIT)["stale"] is False
    late = build(files, [], [], T0 + LIMIT + timedelta(seconds=1), LIMIT)
    assert late["stale"] is True
    assert late["age_minutes"] == 90.0
    assert late["last_tick"] == "2026-12-01T07:00:00Z"


def test_no_tick_at_all_is_stale() -> None:
    report = build({}, [schedule("nightly")], [], T0, LIMIT)
    assert report["stale"] is True and report["last_tick"] is None
    # strictly after now: the 07:00 slot at 07:00 is the tick's business, not "next"
    assert report["schedules"] == [{"id": "nightly", "enabled": True,
                                    "next": "2026-12-02T07:00:00Z", "held": None,
                                    "last_run_id": None,
                                    "last_error": None, "paused": None, "ended": None,
                                    "failures_in_a_row": 0}]
    assert text(report)[0].startswith("last tick     none recorded")


def test_next_slots_open_runs_dead_letters_and_breakers() -> None:
    run_id = "nightly--20261201T0700Z"
    run = Run(run_id=run_id, schedule_id="nightly", slot=T0, fire_at=T0, created_at=T0,
              deadline=T0 + timedelta(hours=4), status=RunStatus.RUNNING, tracks=["a", "b"])
    done = run.model_copy(update={"run_id": "nightly--20261130T0700Z",
                                  "slot": T0 - timedelta(days=1),
                                  "status": RunStatus.COMPLETED})
    spec = TrackSpec(name="a", run="true")
    a = Track(run_id=run_id, name="a", phase=TrackPhase.RUNNING, spec=spec)
    b = Track(run_id=run_id, name="b", phase=TrackPhase.FAILED,
              spec=spec.model_copy(update={"name": "b"}))
    letter = DeadLetter(key=f"{run_id}--b", run_id=run_id, track="b", reason="failed",
                        parked_at=T0, attempts=1, payload=spec)
    gone = letter.model_copy(update={"key": f"{run_id}--c", "track": "c", "discarded": True})
    state = state_model.State(
        cursors={"nightly": Cursor(schedule_id="nightly", since=T0, last_run_id=run_id),
                 "once": Cursor(schedule_id="once", since=T0, done=True)},
        runs={run.run_id: run, done.run_id: done},
        tracks={run_id: {"a": a, "b": b}},
        dlq={letter.key: letter, gone.key: gone},
        health={"github": Breaker(state="open", failures=5, opened_at=T0)},
    )
    files = {**state.dump(), layout.TICKS: ticks(T0)}
    schedules = [schedule("nightly"), schedule("off", enabled=False),
                 schedule("once", cron=None, at="2026-12-01T06:00:00Z")]
    report = build(files, schedules, ["schedules/bad.json: cron: nope"],
                   T0 + timedelta(minutes=5), LIMIT)
    assert report["stale"] is False and report["age_minutes"] == 5.0
    assert {s["id"]: s["next"] for s in report["schedules"]} == {
        "nightly": "2026-12-02T07:00:00Z", "off": None, "once": None}
    assert report["schedules"][0]["last_run_id"] == run_id
    assert report["open_runs"] == [{"run_id": run_id, "schedule": "nightly",
                                    "status": "running", "slot": "2026-12-01T07:00:00Z",
                                    "tracks": {"a": "running", "b": "failed"},
                                    "origin": "cron", "acts": []}]
    assert report["dead_letters"] == 1
    assert report["breakers"]["github"]["state"] == "open"
    out = "\n".join(text(report))
    assert "nightly--20261201T0700Z  running: a running, b failed" in out
    assert "off      disabled" in out
    assert "invalid: schedules/bad.json: cron: nope" in out
    assert "breakers      github open (5 failures)" in out
    assert "(5m ago; fresh, limit 90m)" in out


def test_the_report_says_when_the_tick_wakes_next_and_why() -> None:
    files = {layout.TICKS: ticks(T0)}
    report = build(files, [schedule("daily"), schedule("hourly", cron="30 * * * *")], [],
                   T0 + timedelta(minutes=5), LIMIT)
    assert report["next_wake"] == {"at": "2026-12-01T07:30:00Z",
                                   "reason": "hourly: slot 2026-12-01T07:30Z"}
    assert "next wake     2026-12-01T07:30:00Z  (hourly: slot 2026-12-01T07:30Z)" in text(report)
    idle = build(files, [schedule("off", enabled=False)], [], T0, LIMIT)
    assert idle["next_wake"] is None
    assert "next wake     nothing will fall due" in text(idle)


def test_the_repository_caps_and_the_tracks_in_flight() -> None:
    from orchestrator.planner.context import Caps

    run_id = "nightly--20261201T0700Z"
    run = Run(run_id=run_id, schedule_id="nightly", slot=T0, fire_at=T0, created_at=T0,
              deadline=T0 + timedelta(hours=4), status=RunStatus.RUNNING,
              tracks=["a", "b", "c"])
    spec = TrackSpec(name="a", run="true")
    tracks = {name: Track(run_id=run_id, name=name, phase=phase,
                          spec=spec.model_copy(update={"name": name}))
              for name, phase in (("a", TrackPhase.RUNNING), ("b", TrackPhase.DISPATCHED),
                                  ("c", TrackPhase.PENDING))}
    files = {**state_model.State(runs={run_id: run}, tracks={run_id: tracks}).dump(),
             layout.TICKS: ticks(T0)}
    report = build(files, [], [], T0, LIMIT, Caps(max_concurrent_tracks=4,
                                                  max_dispatches_per_tick=2))
    assert report["caps"] == {"max_concurrent_tracks": 4, "max_dispatches_per_tick": 2,
                              "tracks_in_flight": 2}
    assert ("caps          2 of at most 4 tracks in flight; at most 2 dispatches a tick "
            "(orchestrator.json)") in text(report)
    assert not any(line.startswith("caps") for line in text(build(files, [], [], T0, LIMIT)))


def test_a_last_tick_ahead_of_the_clock_is_stale_and_said_so() -> None:
    files = {layout.TICKS: ticks(T0 + timedelta(minutes=76))}
    report = build(files, [], [], T0, LIMIT)
    assert report["ahead"] and report["stale"]
    assert "1h 16m AHEAD of this clock" in text(report)[0]
    near = build({layout.TICKS: ticks(T0 + timedelta(minutes=4))}, [], [], T0, LIMIT)
    assert not near["ahead"] and not near["stale"]  # clocks differ by a few minutes


def test_the_next_slot_follows_what_the_cursor_settled() -> None:
    cursor = Cursor(schedule_id="nightly", since=T0 + timedelta(days=2, minutes=5))
    files = {layout.TICKS: ticks(T0), layout.cursor_path("nightly"): codec.to_json(cursor)}
    report = build(files, [schedule("nightly")], [], T0 + timedelta(minutes=1), LIMIT)
    assert report["schedules"][0]["next"] == "2026-12-04T07:00:00Z"


def test_a_pause_is_shown_to_the_second_as_every_other_instant() -> None:
    from orchestrator.config.policies import Pause
    from orchestrator.runs.status import from_state

    at = T0.replace(microsecond=123456)
    state = state_model.State()
    state.cursors["nightly"] = Cursor(schedule_id="nightly", since=T0, paused=Pause(
        by="alice", at=at, reason="maintenance"))
    report = from_state(state, T0, [schedule("nightly")], [], T0, LIMIT)
    assert report["schedules"][0]["paused"]["at"] == "2026-12-01T07:00:00Z"
    assert not [line for line in text(report) if "123456" in line or ".123" in line]
