"""Events from outside, pure: a schedule's ``on_event`` checks the inputs an event
carries, a payload is read as hostile input, and the planner fires once per event id
(:mod:`orchestrator.config.events`, :mod:`orchestrator.planner.events`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from orchestrator.config.events import (
    MAX_PAYLOAD_CHARS,
    Event,
    EventRefused,
    OnEvent,
    check_inputs,
    pattern_warnings,
    read_payload,
)
from orchestrator.config.models import Schedule
from orchestrator.config.policies import Pause
from orchestrator.config.preview import preview
from orchestrator.planner import EventRequest
from orchestrator.planner.events import EVENTS_KEEP, refused
from orchestrator.state.layout import event_run_id, parse_run_id, slot_text
from orchestrator.state.model import State
from orchestrator.state.records import Act
from tests.builders import schedule, schedule_spec
from tests.planning import tick

NOW = datetime(2026, 12, 1, 14, 12, 30, tzinfo=UTC)
ACT = Act(by="deploy-bot", at=NOW)
INPUTS = {"version": {"type": "string", "required": True, "pattern": r"v\d+(\.\d+)*",
                      "max_length": 20},
          "replicas": {"type": "integer", "enum": ["1", "2", "3"]},
          "ratio": {"type": "number"},
          "canary": {"type": "boolean"}}
ON_EVENT = OnEvent.model_validate({"inputs": INPUTS})


def deploy(**spec: Any) -> Schedule:
    return schedule("deploy", cron=None, on_event={"inputs": INPUTS}, **spec)


def event(event_id: str = "build-41", **inputs: Any) -> EventRequest:
    return EventRequest(Event("deploy", event_id, inputs or {"version": "v1.2"}), ACT)


def fired(decision: Any) -> list[str]:
    return sorted(r for r in decision.state.runs if "-event-" in r)


# --------------------------------------------------------------------- the schema


def test_inputs_are_checked_and_become_text() -> None:
    given = {"version": "v1.2", "replicas": 2, "ratio": 0.5, "canary": True}
    assert check_inputs(ON_EVENT, given) == {"version": "v1.2", "replicas": "2",
                                             "ratio": "0.5", "canary": "true"}
    # a value typed on a command line is text: it must read as the declared type
    assert check_inputs(ON_EVENT, {"version": "v2", "replicas": "3", "ratio": "-1e3",
                                   "canary": "false"})["ratio"] == "-1e3"


@pytest.mark.parametrize(("given", "line"), [
    ({}, "inputs.version: required"),
    ({"version": "1.2"}, r"inputs.version: does not match v\d+(\.\d+)*"),
    ({"version": "v" + "1" * 20}, "inputs.version: longer than 20 characters"),
    ({"version": 12}, "inputs.version: expected a string"),
    ({"version": "v1", "replicas": 4}, "inputs.replicas: not one of 1, 2, 3"),
    ({"version": "v1", "replicas": "two"}, "inputs.replicas: expected an integer"),
    ({"version": "v1", "replicas": 2.5}, "inputs.replicas: expected an integer"),
    ({"version": "v1", "canary": 1}, "inputs.canary: expected a boolean (true or false)"),
    ({"version": "v1", "ratio": True}, "inputs.ratio: expected a number"),
    ({"version": "v1", "ratio": [1]}, "inputs.ratio: expected a number"),
    ({"version": "v1", "a\nb" + "c" * 99: "eu"},
     "inputs." + repr("a\nb" + "c" * 61) + ": not an input of the schedule (it takes: "
     "canary, ratio, replicas, version)"),
    ({"version": "v1", "region": "eu"},
     "inputs.region: not an input of the schedule (it takes: canary, ratio, replicas, "
     "version)"),
])
def test_a_bad_input_is_one_line_naming_the_field(given: dict[str, Any], line: str) -> None:
    with pytest.raises(EventRefused) as caught:
        check_inputs(ON_EVENT, given)
    assert str(caught.value) == line


@pytest.mark.parametrize("inputs", [
    {"1st": {}}, {"a-b": {}}, {"x": {"type": "date"}}, {"x": {"pattern": "("}},
    {"x": {"max_length": 0}}, {"x": {"unknown": 1}}, {f"i{n}": {} for n in range(33)}])
def test_an_on_event_that_cannot_be_checked_is_refused(inputs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        schedule_spec(None, on_event={"inputs": inputs})


def test_a_schedule_may_fire_on_events_alone_and_says_so() -> None:
    from orchestrator.config.triggers import for_spec

    spec = schedule_spec(None, on_event={})
    assert for_spec(spec).describe() == "on an event"
    assert for_spec(schedule_spec("0 7 * * *", on_event={})).describe().endswith(
        ", on an event")
    with pytest.raises(ValidationError, match="or 'on_event' alone"):
        schedule_spec(None)


# --------------------------------------------------------------------- the payload


def test_a_payload_is_read_as_github_sends_it() -> None:
    text = json.dumps({"schedule": "deploy", "event_id": "build-41",
                       "inputs": {"version": "v1"}}, indent=2)  # toJSON indents
    assert read_payload(text) == Event("deploy", "build-41", {"version": "v1"})
    assert read_payload('{"schedule": "deploy", "event_id": "e"}').inputs == {}


@pytest.mark.parametrize(("text", "line"), [
    ("null", "event payload: expected a JSON object"),
    ("{", "event payload: line 1 column 2: invalid JSON: Expecting property name "
          "enclosed in double quotes"),
    ('{"schedule": "deploy", "event_id": "e", "input": {}}',
     "event payload: unknown field 'input' (give schedule, event_id and inputs)"),
    ('{"event_id": "e"}', "schedule: give the id of a schedule"),
    ('{"schedule": "../x", "event_id": "e"}', "schedule: give the id of a schedule"),
    ('{"schedule": "deploy"}', "event_id: give 1-200 printable characters"),
    ('{"schedule": "deploy", "event_id": ""}', "event_id: give 1-200 printable characters"),
    ('{"schedule": "deploy", "event_id": "a\\nb"}',
     "event_id: give 1-200 printable characters"),
    ('{"schedule": "deploy", "event_id": 7}', "event_id: give 1-200 printable characters"),
    ('{"schedule": "deploy", "event_id": "e", "inputs": []}', "inputs: expected a JSON object"),
    ('{"schedule": "deploy", "event_id": "e", "inputs": {"v": "\\ud800"}}',
     "event payload: a lone surrogate ('\\ud800') in a string"),
    ('{"schedule": "deploy", "event_id": "e", "inputs": {"v": ' + "[" * 20 + "]" * 20 + "}}",
     "event payload: nested deeper than 8 levels"),
    (json.dumps({"schedule": "deploy", "event_id": "e",
                 "inputs": {"v": "x" * MAX_PAYLOAD_CHARS}}),
     f"event payload: larger than {MAX_PAYLOAD_CHARS} characters"),
    (" " * (4 * MAX_PAYLOAD_CHARS + 1) + "{}",
     f"event payload: larger than {MAX_PAYLOAD_CHARS} characters"),
])
def test_a_hostile_payload_is_one_line_saying_what_is_wrong(text: str, line: str) -> None:
    with pytest.raises(EventRefused) as caught:
        read_payload(text)
    assert str(caught.value) == line


# --------------------------------------------------------------------- the planner


def test_an_event_fires_one_run_whose_id_names_it_and_whose_tracks_get_it() -> None:
    first = tick(deploy(tracks=[{"name": "a", "run": "true", "inputs": {"env": "prod"}}]),
                 State(), NOW, requests=[event(version="v1.2", replicas=2)])
    [run_id] = fired(first)
    assert run_id == event_run_id("deploy", NOW.replace(second=0), run_id[-10:])
    assert parse_run_id(run_id) == ("deploy", datetime(2026, 12, 1, 14, 12, tzinfo=UTC))
    assert slot_text(run_id) == "20261201T1412Z"
    run = first.state.runs[run_id]
    assert (run.origin, run.event_id, run.requested) == ("event", "build-41", ACT)
    [request] = first.dispatch
    assert request.env["ORCHESTRATOR_EVENT_ID"] == "build-41"
    assert dict(request.spec.inputs) == {"env": "prod", "version": "v1.2", "replicas": "2"}
    answer = first.answers[f"event deploy {run_id[-10:]}"]
    assert answer == f"{run_id}: fired by event 'build-41'"
    assert not refused(event().event, answer)


def test_the_same_event_id_fires_nothing_again_and_says_it_was_seen() -> None:
    app = deploy(overlap="allow")
    first = tick(app, State(), NOW, requests=[event()])
    [run_id] = fired(first)
    later = NOW + timedelta(minutes=5)  # another minute: another run id, were it not seen
    again = tick(app, first.state, later, requests=[event(version="v9")])
    assert fired(again) == [run_id]
    [answer] = again.answers.values()
    assert answer == f"deploy: event 'build-41': already seen, it fired {run_id}; nothing fired"
    assert not refused(event().event, answer)
    other = tick(app, again.state, later, requests=[event("build-42")])
    assert len(fired(other)) == 2


def test_an_event_is_seen_from_a_finished_run_s_folder_or_the_cursor_s_window() -> None:
    app = deploy(overlap="allow")
    first = tick(app, State(), NOW, requests=[event()])
    [run_id] = fired(first)
    # the run finished: the tick reads only open runs, and lists the folders of the rest
    gone = first.state.copy()
    del gone.runs[run_id]
    gone.tracks.pop(run_id)
    folders = gone.copy()
    folders.known_runs = frozenset({run_id})
    assert fired(tick(app, folders, NOW + timedelta(days=1), requests=[event()])) == []
    # its folder archived too: the cursor still remembers it
    assert fired(tick(app, gone, NOW + timedelta(days=9), requests=[event()])) == []
    # past the window, and with no run left, the id is no longer known
    cursor = gone.cursors["deploy"]
    flooded = {f"{n:010x}": f"deploy--20261201T1412Z-event-{n:010x}"
               for n in range(EVENTS_KEEP)}
    gone.cursors["deploy"] = cursor.model_copy(update={"events": flooded})
    late = tick(app, gone, NOW + timedelta(days=9), requests=[event()])
    assert len(fired(late)) == 1
    assert len(late.state.cursors["deploy"].events) == EVENTS_KEEP


def ready(app: Schedule, how: str) -> State:
    """The state in which ``app`` may not fire now: ``paused`` or ``capped`` (it fired
    once today), else a fresh one."""
    if how == "capped":
        return tick(app, State(), NOW - timedelta(hours=1), requests=[event("before")]).state
    state = tick(app, State(), NOW - timedelta(hours=1)).state
    if how == "paused":
        state.cursors["deploy"] = state.cursors["deploy"].model_copy(update={
            "paused": Pause(by="alice", at=NOW - timedelta(hours=1),
                            reason="3 failures in a row")})
    return state


@pytest.mark.parametrize(("app", "how", "why"), [
    (deploy(enabled=False), "", "the schedule is disabled"),
    (deploy(), "paused", "the schedule is paused (3 failures in a row)"),
    (deploy(max_runs_per_day=1, overlap="allow"), "capped", "daily cap of 1 reached"),
    (schedule("deploy", cron="0 7 * * *"), "",
     "the schedule takes no events (give it 'on_event')"),
])
def test_a_schedule_that_may_not_fire_consumes_nothing_and_says_why(
        app: Schedule, how: str, why: str) -> None:
    state = ready(app, how)
    before = set(state.runs)
    decision = tick(app, state, NOW, requests=[event()])
    assert set(decision.state.runs) == before
    [answer] = decision.answers.values()
    assert answer == f"deploy: event 'build-41': not fired: {why}"
    assert refused(event().event, answer)
    assert event().event.digest not in decision.state.cursors["deploy"].events


def test_a_bad_payload_fires_nothing_and_names_the_field() -> None:
    decision = tick(deploy(), State(), NOW, requests=[event(version="1.2")])
    assert fired(decision) == [] and not decision.dispatch
    [answer] = decision.answers.values()
    assert answer == r"deploy: event 'build-41': not fired: inputs.version: does not match " \
                     r"v\d+(\.\d+)*"
    # the same id with a good payload fires: the refused event was not consumed
    assert len(fired(tick(deploy(), decision.state, NOW, requests=[event()]))) == 1


def test_an_event_honours_overlap_skip_and_an_unknown_schedule() -> None:
    app = deploy()  # overlap skip
    first = tick(app, State(), NOW, requests=[event()])
    second = tick(app, first.state, NOW, requests=[event("build-42")])
    assert len(fired(second)) == 1
    assert second.answers[f"event deploy {event('build-42').event.digest}"] == (
        "deploy: event 'build-42': not fired: a run is still open (overlap=skip); send it "
        "again later")
    none = tick([], State(), NOW, requests=[event()])
    assert list(none.answers.values()) == [
        "deploy: event 'build-41': not fired: no such valid schedule"]


NESTED = [r"(a+)+$", r"(a*)*b", r"(\w+\s?)*$", r"((a+))+", r"(a{1,5}){2,}", r"(?=(a+)+)",
          r"(x|(a+))+", r"((a+)a)+", r"(\d+\d)+", r"(\s*\w+)+", r"(.+,)+", r"([\w.]+\.)+"]
SAFE = [r"^[a-z0-9-]{1,40}$", r"(ab{2})+", r"v\d+(\.\d+)*", r"(?>a+)+", r"(a++)+", r"(x|y)+",
        r"([a-z]+-)+[a-z]+$", r"(a+b)+", r"([^-]+-)+", r"([a-z]+[.])+", r"(\D+\d)+",
        r"(\w+\.)+"]


@pytest.mark.parametrize("pattern", NESTED)
def test_a_pattern_that_repeats_a_repeat_is_a_warning_naming_the_input(pattern: str) -> None:
    spec = schedule_spec(cron=None, on_event={"inputs": {"tag": {"pattern": pattern}}})
    assert spec.on_event is not None
    [warning] = pattern_warnings(spec.on_event.inputs)
    assert warning.startswith(f"on_event input 'tag': its pattern repeats a repeat ({pattern})")
    assert "(?>...)" in warning and "a++" in warning


@pytest.mark.parametrize("pattern", SAFE)
def test_a_repeat_pinned_by_a_character_its_inner_repeat_cannot_match_is_not(
        pattern: str) -> None:
    """A separator (``.`` in ``(\\.\\d+)*``) splits a value one way only; an atomic group
    or a possessive repeat never backtracks."""
    assert pattern_warnings(OnEvent.model_validate(
        {"inputs": {"tag": {"pattern": pattern}}}).inputs) == []


def test_validate_shows_the_warning_beside_the_schedule() -> None:
    deploy = schedule("deploy", cron=None,
                      on_event={"inputs": {"tag": {"pattern": r"(\w+\s?)*$"}}})
    found = preview(deploy, NOW, 3)
    assert any("its pattern repeats a repeat" in w for w in found.warnings)
