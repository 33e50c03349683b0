"""Notifications, the pure parts: events derived from two states, the outbox's moves,
routing, what each channel's text looks like within its limits, the record read as
hostile input, and the settings' validation."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import jsonschema
import pytest

from orchestrator.config.channels import EventKind, NotifySpec
from orchestrator.config.repository import parse_repo_config
from orchestrator.errors import UserError
from orchestrator.notify import record as notify_record
from orchestrator.notify.channel import ISSUES, Delivery
from orchestrator.notify.events import (
    GROUP_ABOVE,
    GROUP_NAMES,
    SUMMARY_LIMIT,
    Event,
    Links,
    Seen,
    derive,
    event_json_schema,
    stamp,
)
from orchestrator.notify.outbox import CLAIM_GRACE, MAX_ATTEMPTS, Routes, prepare, settle
from orchestrator.notify.record import MAX_OUTBOX, NotifyRecord, Pending, Streak
from orchestrator.notify.text import (
    GITHUB_BODY_LIMIT,
    SLACK_HEADER_LIMIT,
    SLACK_TEXT_LIMIT,
    cut,
    json_payload,
    md,
    quiet,
    slack_payload,
    title,
)
from orchestrator.state import layout
from orchestrator.state.health import RunnerHealth
from orchestrator.state.model import State
from orchestrator.state.phases import RunStatus
from orchestrator.state.records import Cursor, DeadLetter, Run, Transition
from orchestrator.support.credentials import (
    Redactor,
    is_credential,
    redactor,
    track_environment,
)
from tests.builders import schedule_spec

T0 = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=30)
RUN = "nightly--20261201T0700Z"
TOKEN = "ghp_" + "Abc123" * 6


def run(run_id: str = RUN, status: RunStatus = RunStatus.RUNNING, *,
        finished: datetime | None = None, history: tuple[str, ...] = ()) -> Run:
    sid, _, stamp = run_id.partition("--")
    slot = datetime.strptime(stamp, "%Y%m%dT%H%MZ").replace(tzinfo=UTC)
    moves = [Transition.model_validate({"from": "running", "to": to, "at": NOW,
                                        "reason": "not complete: a"}) for to in history]
    return Run(run_id=run_id, schedule_id=sid, slot=slot, fire_at=slot, created_at=slot,
               deadline=slot + timedelta(hours=4), status=status, tracks=["a"],
               finished_at=finished, state_history=moves)


def seen(**changes: Any) -> Seen:
    base: dict[str, Any] = {"now": NOW, "links": Links(), "specs": {}, "failing": {}}
    return Seen(**{**base, **changes})


def kinds(events: list[Event]) -> list[str]:
    return [e.kind.value for e in events]


def hooks(*specs: dict[str, Any], **repo: Any) -> NotifySpec:
    return NotifySpec.model_validate_json(json.dumps({"webhooks": list(specs), **repo}))


# --------------------------------------------------------------------------- events


def test_a_run_that_fails_is_an_event_once_and_its_id_is_stable() -> None:
    before = State(runs={RUN: run()})
    after = State(runs={RUN: run(status=RunStatus.FAILED, finished=NOW, history=("failed",))})
    [event] = derive(before, after, seen())
    assert (event.kind, event.id, event.schedule, event.run_id) == (
        EventKind.RUN_FAILED, f"run_failed:{RUN}:1", "nightly", RUN)
    assert event.summary == f"{RUN} failed (not complete: a)"
    assert derive(before, after, seen()) == [event]  # the same decision, the same event
    assert derive(after, after, seen()) == []  # a state that did not move says nothing
    # a requeued run that fails again is a new failure, with an id of its own
    again = run(status=RunStatus.FAILED, finished=NOW, history=("failed", "running", "failed"))
    [second] = derive(State(runs={RUN: run()}), State(runs={RUN: again}), seen())
    assert second.id == f"run_failed:{RUN}:2"


def test_a_completed_run_is_a_recovery_only_after_failures() -> None:
    before = State(runs={RUN: run()})
    after = State(runs={RUN: run(status=RunStatus.COMPLETED, finished=NOW)})
    assert derive(before, after, seen()) == []
    [event] = derive(before, after, seen(failing={"nightly": 2}))
    assert event.kind is EventKind.RUN_RECOVERED
    assert "recovered after 2 failed run(s)" in event.summary


def test_runs_of_one_decision_are_taken_by_slot() -> None:
    later = "nightly--20261202T0700Z"
    before = State(runs={RUN: run(), later: run(later)})
    after = State(runs={RUN: run(status=RunStatus.FAILED, finished=NOW, history=("failed",)),
                        later: run(later, RunStatus.COMPLETED, finished=NOW)})
    assert kinds(derive(before, after, seen())) == ["run_failed", "run_recovered"]


def test_a_parked_track_a_pause_and_a_runner_label_are_events() -> None:
    spec = schedule_spec().tracks[0]
    letter = DeadLetter(key=f"{RUN}--a", run_id=RUN, track="a", reason="failed after 2 "
                        "attempt(s)", parked_at=NOW, attempts=2, payload=spec)
    paused = Cursor.model_validate({"schedule_id": "nightly", "since": T0.isoformat(),
                                    "paused": {"by": "orchestrator", "at": NOW.isoformat(),
                                               "reason": "3 consecutive runs failed"}},
                                   strict=False)
    before = State(cursors={"nightly": paused.model_copy(update={"paused": None})},
                   runners={"gpu": RunnerHealth(), "big": RunnerHealth(status="degraded")})
    after = State(dlq={letter.key: letter}, cursors={"nightly": paused},
                  runners={"gpu": RunnerHealth(status="degraded", last_checked_at=NOW),
                           "big": RunnerHealth(status="healthy", last_checked_at=NOW)})
    events = derive(before, after, seen())
    assert kinds(events) == ["dead_letter", "schedule_paused", "runner_recovered",
                             "runner_degraded"]
    letter_event = events[0]
    assert letter_event.details["requeue"] == \
        f"orchestrator dlq requeue {RUN}--a --reason REASON"
    assert events[1].details["resume"] == \
        "orchestrator schedules resume nightly --reason REASON"
    assert [e.details["label"] for e in events[2:]] == ["big", "gpu"]
    # a discarded letter is no news, nor one parked before
    assert derive(after, after, seen()) == []
    gone = after.dlq[letter.key].model_copy(update={"discarded": True})
    assert derive(before, State(dlq={letter.key: gone}), seen()) == []


@pytest.mark.parametrize(("status", "finished", "told", "expected"), [
    (RunStatus.RUNNING, None, False, True),  # open past its SLA
    (RunStatus.RUNNING, None, True, False),  # told already
    (RunStatus.FAILED, NOW, False, True),  # finished now, late
    (RunStatus.COMPLETED, T0 + timedelta(minutes=10), False, False),  # finished in time
])
def test_a_run_not_finished_sla_minutes_after_its_slot_is_an_sla_miss(
        status: RunStatus, finished: datetime | None, told: bool, expected: bool) -> None:
    specs = {"nightly": schedule_spec(sla_minutes=20)}
    state = State(runs={RUN: run(status=status, finished=finished)})
    events = [e for e in derive(State(), state, seen(specs=specs, told_sla=frozenset(
        {RUN} if told else ()))) if e.kind is EventKind.SLA_MISSED]
    assert bool(events) is expected
    if events:
        assert events[0].id == f"sla_missed:{RUN}"
        assert events[0].at == T0 + timedelta(minutes=20)
    in_time = seen(specs=specs, now=T0 + timedelta(minutes=19))
    assert not [e for e in derive(State(), State(runs={RUN: run()}), in_time)
                if e.kind is EventKind.SLA_MISSED]


def test_a_quarantined_record_is_told_once_by_a_header_safe_id() -> None:
    odd = "state/runs/../x\n.json"
    state = State(quarantined={odd: f"{odd!r}: not a run id"})
    [event] = derive(State(), state, seen())
    assert event.kind is EventKind.RECORD_QUARANTINED
    assert event.id.startswith("record_quarantined:") and "\n" not in event.id
    assert "\n" not in event.details["path"]
    assert derive(State(), state, seen(told_quarantine=frozenset({odd}))) == []


def test_every_event_matches_the_printed_schema() -> None:
    schema = event_json_schema()
    event = Event(id="run_failed:x:1", kind=EventKind.RUN_FAILED, at=NOW, summary="s",
                  brief_url="https://example.org/b")
    jsonschema.validate(event.to_json(), schema)
    assert set(schema["required"]) == set(event.to_json())  # every field, always present
    assert "additionalProperties" not in schema  # later fields do not break a receiver


def test_links_name_the_brief_or_the_ci_run() -> None:
    env = {"GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "42"}
    assert Links.from_env(None, env).brief_url(RUN, "nightly") == \
        "https://github.com/o/r/actions/runs/42"
    pages = Links.from_env("https://o.github.io/r/runs/{run_id}/brief.html", env)
    assert pages.brief_url(RUN, "nightly") == f"https://o.github.io/r/runs/{RUN}/brief.html"
    assert Links.from_env(None, {}).brief_url(RUN, "nightly") is None


# --------------------------------------------------------------------------- the outbox


def failed_event(run_id: str = RUN) -> Event:
    return Event(id=f"run_failed:{run_id}:1", kind=EventKind.RUN_FAILED, at=NOW,
                 schedule="nightly", run_id=run_id, summary="x")


def test_a_failure_starts_a_streak_and_its_event_is_claimed_by_the_tick() -> None:
    routes = Routes(hooks({"url_secret": "SLACK_WEBHOOK"}, github_issues=True))
    out = prepare(NotifyRecord(), [failed_event()], routes, NOW, State())
    assert out.record.streaks["nightly"] == Streak(since=RUN)
    [claim] = out.claims
    assert claim.channels == [ISSUES, "webhook:json:SLACK_WEBHOOK"]
    assert (claim.claimed_at, claim.attempt, claim.streak) == (NOW, 1, RUN)
    later = "nightly--20261202T0700Z"
    second = prepare(out.record.model_copy(update={"outbox": []}), [failed_event(later)],
                     routes, NOW, State())
    assert second.record.streaks["nightly"].failed == 2
    assert second.claims[0].streak == RUN  # the streak's issue is the one to comment on


def test_a_recovery_ends_the_streak_and_carries_its_issue() -> None:
    routes = Routes(NotifySpec(github_issues=True))
    record = NotifyRecord(streaks={"nightly": Streak(since=RUN, failed=2, issue=7)})
    event = Event(id="run_recovered:x", kind=EventKind.RUN_RECOVERED, at=NOW,
                  schedule="nightly", run_id="nightly--20261203T0700Z", summary="ok")
    out = prepare(record, [event], routes, NOW, State())
    assert out.record.streaks == {}
    assert (out.claims[0].streak, out.claims[0].issue) == (RUN, 7)


def test_an_entry_left_by_a_tick_that_died_is_claimed_again_after_its_grace() -> None:
    routes = Routes(NotifySpec(github_issues=True))
    left = Pending(event=failed_event(), channels=[ISSUES], claimed_at=NOW)
    record = NotifyRecord(outbox=[left])
    soon = prepare(record, [], routes, NOW + CLAIM_GRACE - timedelta(seconds=1), State())
    assert soon.claims == () and soon.record.outbox == [left]
    later = NOW + CLAIM_GRACE
    out = prepare(record, [], routes, later, State())
    [claim] = out.claims
    assert (claim.claimed_at, claim.attempt) == (later, 2)
    tired = record.model_copy(update={"outbox": [left.model_copy(
        update={"attempt": MAX_ATTEMPTS})]})
    dropped = prepare(tired, [], routes, later, State())
    assert dropped.record.outbox == [] and dropped.claims == ()
    assert "dropped after 3 attempts" in dropped.lines[0]
    # a tick scoped to one run leaves the others' entries to the cron tick
    assert prepare(record, [], routes, later, State(), scoped=RUN).claims == ()
    # a long delivery budget lengthens the grace: the claimant may still be delivering
    slow = Routes(NotifySpec(github_issues=True, budget_seconds=300))
    assert prepare(record, [], slow, later, State()).claims == ()
    assert prepare(record, [], slow, NOW + timedelta(minutes=8), State()).claims


def test_the_outbox_is_bounded() -> None:
    routes = Routes(hooks({"url_secret": "SLACK_WEBHOOK"}))
    events = [failed_event(f"nightly--2026120{d}T0{h}00Z") for d in range(1, 10)
              for h in range(10)] * 3
    events = [e.model_copy(update={"id": f"{e.id}:{i}"}) for i, e in enumerate(events)]
    out = prepare(NotifyRecord(), events[:MAX_OUTBOX + 5], routes, NOW, State())
    assert len(out.record.outbox) == MAX_OUTBOX and len(out.claims) == MAX_OUTBOX
    assert "5 undelivered event(s) dropped" in out.lines[0]


def test_settling_takes_served_channels_off_and_keeps_issue_numbers() -> None:
    routes = Routes(hooks({"url_secret": "SLACK_WEBHOOK"}, github_issues=True))
    out = prepare(NotifyRecord(), [failed_event()], routes, NOW, State())
    [claim] = out.claims
    hook = "webhook:json:SLACK_WEBHOOK"
    deferred = settle(out.record, out.claims, [
        Delivery(hook, claim.event.id, "delivered", "ok"),
        Delivery(ISSUES, claim.event.id, "deferred", "waits")])
    assert [p.channels for p in deferred.outbox] == [[ISSUES]]
    done = settle(out.record, out.claims, [
        Delivery(hook, claim.event.id, "dropped", "500"),
        Delivery(ISSUES, claim.event.id, "delivered", "opened", "nightly", RUN, 5, "u")])
    assert done.outbox == [] and done.streaks["nightly"].issue == 5
    # a number learned for another streak does not land on this one
    other = settle(out.record, out.claims, [
        Delivery(ISSUES, claim.event.id, "delivered", "x", "nightly", "other", 9)])
    assert other.streaks["nightly"].issue is None


def test_what_was_told_is_forgotten_once_it_is_over() -> None:
    record = NotifyRecord(sla={RUN: NOW, "nightly--20261130T0700Z": NOW},
                          quarantined={"state/x.json": NOW})
    after = State(runs={RUN: run()})
    out = prepare(record, [], Routes(NotifySpec(github_issues=True)), NOW, after)
    assert set(out.record.sla) == {RUN} and out.record.quarantined == {}


# --------------------------------------------------------------------------- routes


def test_a_schedule_turns_issues_on_or_off_and_adds_webhooks() -> None:
    specs = {"off": schedule_spec(notify={"github_issues": False}),
             "own": schedule_spec(notify={"webhooks": [
                 {"url_secret": "TEAM_WEBHOOK", "events": ["dead_letter"], "format": "slack"}]}),
             "on": schedule_spec(notify={"github_issues": True})}
    repo = hooks({"url_secret": "SLACK_WEBHOOK", "events": ["run_failed"]}, github_issues=True)
    routes = Routes(repo, specs)

    def names(kind: EventKind, schedule: str | None) -> list[str]:
        return routes.channels(Event(id="x", kind=kind, at=NOW, schedule=schedule,
                                     summary="s"))

    assert names(EventKind.RUN_FAILED, "off") == ["webhook:json:SLACK_WEBHOOK"]
    assert names(EventKind.DEAD_LETTER, "own") == [ISSUES, "webhook:slack:TEAM_WEBHOOK"]
    assert names(EventKind.RUNNER_DEGRADED, None) == []  # no issue, no webhook wants it
    assert Routes(NotifySpec(), {"on": specs["on"]}).channels(
        Event(id="x", kind=EventKind.RUN_FAILED, at=NOW, schedule="on", summary="s")) == [ISSUES]
    assert not Routes(NotifySpec()).enabled and Routes(NotifySpec(), specs).enabled


# --------------------------------------------------------------------------- text


def hostile_event(summary: str) -> Event:
    return Event(id="run_failed:x:1", kind=EventKind.RUN_FAILED, at=NOW, schedule="nightly",
                 summary=summary[:2000], brief_url="https://example.org/brief",
                 link="javascript:alert(1)", details={"token": TOKEN})


def test_a_slack_message_keeps_slack_s_limits_and_mentions_no_one() -> None:
    payload = slack_payload(hostile_event("<!channel> " + "x" * 1990), Redactor())
    header, section, context = payload["blocks"]
    assert len(header["text"]["text"]) <= SLACK_HEADER_LIMIT
    assert len(section["text"]["text"]) <= SLACK_TEXT_LIMIT
    assert len(payload["text"]) <= SLACK_TEXT_LIMIT and len(payload["blocks"]) <= 50
    assert "<!channel>" not in json.dumps(payload) and "&lt;!channel&gt;" in payload["text"]
    assert "<https://example.org/brief|Brief>" in section["text"]["text"]
    assert "javascript" not in json.dumps(payload)  # only http(s) links
    assert "run_failed:x:1" in context["elements"][0]["text"]  # the id in the body


def test_what_leaves_is_redacted() -> None:
    event = hostile_event(f"leaked {TOKEN} and hunter22secret")
    redact = Redactor(["hunter22secret"])
    for payload in (json_payload(event, redact), slack_payload(event, redact)):
        text = json.dumps(payload)
        assert TOKEN not in text and "hunter22secret" not in text and "***" in text


def test_a_cut_text_fits_and_says_where_the_rest_is() -> None:
    text = cut("y" * (GITHUB_BODY_LIMIT * 2), GITHUB_BODY_LIMIT, "https://example.org/b")
    assert len(text) <= GITHUB_BODY_LIMIT and text.endswith("the rest: https://example.org/b")
    assert cut("short", 10) == "short"


def test_markdown_from_tracks_is_inert() -> None:
    assert md("*x* [a](javascript:b) <img> | `c`") == \
        r"\*x\* \[a\](javascript:b) &lt;img&gt; \| \`c\`"
    assert quiet("ping @octocat, mail a@b.c") == "ping @\u2060octocat, mail a@\u2060b.c"


# --------------------------------------------------------------------------- the record


@pytest.mark.parametrize("data", [b"{", b"[" * 100 + b"]" * 100, b'{"outbox": 3}',
                                  b'{"streaks": {"../x": {"since": "a"}}}',
                                  b"x" * (5 * 1024 * 1024)])
def test_an_unreadable_record_holds_notifications_with_one_line(data: bytes) -> None:
    found, problem = notify_record.read({layout.NOTIFY: data})
    assert found is None and problem is not None
    assert problem.startswith("quarantined state/notify.json") and "\n" not in problem
    assert "notifications wait until it is fixed or deleted" in problem


def test_the_record_reads_back_what_it_wrote() -> None:
    record = NotifyRecord(streaks={"nightly": Streak(since=RUN, issue=3)},
                          outbox=[Pending(event=failed_event(), channels=[ISSUES],
                                          claimed_at=NOW)])
    assert notify_record.read({layout.NOTIFY: notify_record.dump(record)}) == (record, None)
    assert notify_record.read({}) == (NotifyRecord(), None)


# --------------------------------------------------------------------------- settings


def test_a_webhook_names_a_variable_kept_from_tracks() -> None:
    ok = parse_repo_config(json.dumps({"notify": {"webhooks": [
        {"url_secret": "SLACK_WEBHOOK", "format": "slack", "events": ["run_failed"]}]}}).encode())
    assert ok.notify.webhooks[0].channel == "webhook:slack:SLACK_WEBHOOK"
    for bad, said in [({"url_secret": "SLACK_URL"}, "is not a name kept from track commands"),
                      ({"url_secret": "https://hooks.slack.com/x"}, "notify.webhooks.0"),
                      ({"url_secret": "SLACK_WEBHOOK", "events": ["nope"]}, "events.0"),
                      ({"url_secret": "SLACK_WEBHOOK", "format": "xml"}, "format")]:
        with pytest.raises(UserError, match=said):
            parse_repo_config(json.dumps({"notify": {"webhooks": [bad]}}).encode())
    with pytest.raises(UserError, match="same url_secret and format"):
        parse_repo_config(json.dumps({"notify": {"webhooks": [
            {"url_secret": "SLACK_WEBHOOK"}, {"url_secret": "SLACK_WEBHOOK"}]}}).encode())


def test_webhook_variables_are_credentials_and_token_shapes_are_redacted() -> None:
    assert is_credential("SLACK_WEBHOOK") and is_credential("ORCHESTRATOR_WEBHOOK_URL")
    assert not is_credential("SLACK_CHANNEL") and not is_credential("HOME")
    env = {"SLACK_WEBHOOK": "https://hooks.slack.com/services/T/B/x", "HOME": "/home/u"}
    assert track_environment(env) == {"HOME": "/home/u"}  # a track never sees the URL
    assert "hooks.slack.com" not in redactor(env)("posting to " + env["SLACK_WEBHOOK"])
    redact = Redactor()
    for shaped in (TOKEN, "github_pat_" + "A1_" * 10, "xoxb-1234567890-abcdef",
                   "https://hooks.slack.com/services/T00/B00/XXXX",
                   md(TOKEN), md("github_pat_" + "A1_" * 10)):  # escaped in Markdown too
        assert redact(f"saw {shaped}.") == "saw ***."
    assert redact("ghs_fake-token-0123456789 ghp_short") == "ghs_fake-token-0123456789 ghp_short"


def test_the_documented_example_is_a_valid_orchestrator_json() -> None:
    from tests.docs import pages

    page = pages()["docs/how-to/notifications.md"]
    section = page.split("\n## Notifications\n", 1)[1].split("\n## ", 1)[0]
    example = section.split("```json\n", 1)[1].split("```", 1)[0]
    config = parse_repo_config(example.encode())
    assert config.notify.github_issues and len(config.notify.webhooks) == 2
    table = section.split("| event | when | who tells |", 1)[1].split("\n\n", 1)[0]
    assert [k.value for k in EventKind if f"`{k.value}`" not in table] == []


# --------------------------------------------------------------------------- queue items

QUEUE_KEY = f"{RUN}--pages-w1--1"


def _queue_state(count: int, *, fail: int, now: datetime = NOW) -> tuple[State, State]:
    """A queue of ``count`` items on in-memory files, claimed by one worker of ``RUN``
    (``max_attempts`` 1), and the state after its report: the first ``fail`` failed."""
    from orchestrator.state import queueload, queueops
    from orchestrator.state.items import ItemReport, NewItem
    from orchestrator.state.queue import QueueBook
    from orchestrator.state.records import Track, Work
    from tests.unit.test_queue_state import commit

    book = QueueBook.empty("pages", {})
    queueops.enqueue(book, [NewItem(payload=n, key=f"k{n}") for n in range(count)], T0, "me")
    book = queueload.load(commit({}, book.dump()))[0]["pages"]
    items = queueops.claim(book, book.claimable(T0, count), QUEUE_KEY, NOW, 1, T0, "tick")
    book = queueload.load(commit(dict(book.files.items()), book.dump()))[0]["pages"]
    spec = schedule_spec().tracks[0].model_copy(update={"name": "pages-w1"})
    worker = Track(run_id=RUN, name="pages-w1", spec=spec, work=Work(
        drain="pages", queue="pages", items=[i.id for i in items], wall_minutes=5,
        lease_until=NOW))
    before = State(tracks={RUN: {worker.name: worker}}, queues={"pages": book})
    after = before.copy()
    moved = after.queues["pages"]
    for item in items[:fail]:
        error = ("exit code 3; stderr ends with: " + "x" * 500
                 + "\nTraceback (most recent call last):\nKeyError: 'url'")
        report = ItemReport(id=item.id, outcome="failed", attempt=1, error=error)
        queueops.settle(moved, moved.item(item.id), report, QUEUE_KEY, now, timedelta(0))
    return before, after


def test_a_queue_item_gone_dead_is_one_event_with_its_commands() -> None:
    before, after = _queue_state(3, fail=1)
    [event] = derive(before, after, seen())
    item = next(iter(after.queues["pages"].dead))
    assert event.kind is EventKind.QUEUE_DEAD_LETTER
    assert event.id == f"queue_dead_letter:pages:{item}:{stamp(NOW)}"
    assert (event.schedule, event.run_id) == ("nightly", RUN)  # its worker's run
    details = event.details
    assert (details["queue"], details["item"], details["attempts"]) == ("pages", item, "1")
    assert details["requeue"] == f"orchestrator dlq requeue pages/{item} --reason REASON"
    assert details["discard"] == f"orchestrator dlq discard pages/{item} --reason REASON"
    # the last error line, on one line and cut as every event's text is
    assert details["error"].endswith("KeyError: 'url'") and "\n" not in details["error"]
    assert len(details["error"]) <= SUMMARY_LIMIT and len(event.summary) <= SUMMARY_LIMIT
    assert derive(before, after, seen()) == [event]  # the same decision, the same event
    assert derive(after, after, seen()) == []  # told once: the next tick says nothing
    jsonschema.validate(event.to_json(), event_json_schema())


def test_an_item_requeued_and_dead_again_is_a_new_event_and_a_discard_is_none() -> None:
    from orchestrator.state import queueops

    before, after = _queue_state(1, fail=1)
    [first] = derive(before, after, seen())
    book = after.queues["pages"]
    item_id = next(iter(book.dead))
    discarded = after.copy()
    queueops.discard(discarded.queues["pages"], book.item(item_id),  # type: ignore[arg-type]
                     NOW, "me", "obsolete")
    assert derive(after, discarded, seen()) == []
    _, again = _queue_state(1, fail=1, now=NOW + timedelta(hours=1))
    [second] = derive(after, again, seen())
    assert second.id != first.id and second.id.endswith(stamp(NOW + timedelta(hours=1)))


@pytest.mark.parametrize(("count", "events"), [(GROUP_ABOVE, GROUP_ABOVE), (500, 1)])
def test_many_items_dead_in_one_tick_are_one_event_for_their_queue(
        count: int, events: int) -> None:
    before, after = _queue_state(count, fail=count)
    told = derive(before, after, seen())
    assert len(told) == events and kinds(told) == ["queue_dead_letter"] * events
    if events > 1:
        return
    [event] = told
    dead = sorted(after.queues["pages"].dead)
    named = event.details["items"].split(",")
    assert event.details["count"] == "500" and len(named) == GROUP_NAMES
    assert set(named) <= set(dead)
    assert event.summary.startswith("queue pages: 500 items dead in one tick; ")
    # one command for the whole queue, not the first 5 of 500 keys
    assert event.details["requeue"] == "orchestrator dlq requeue --queue pages --reason REASON"
    assert event.details["discard"] == "orchestrator dlq discard --queue pages --reason REASON"
    assert f"`{event.details['requeue']}`" in event.summary
    assert f"`{event.details['discard']}`" in event.summary
    assert event.details["list"] == "orchestrator dlq list"
    assert title(event) == "500 queue items dead: nightly"
    assert event.run_id == RUN
    assert derive(before, after, seen()) == told  # a stable id for the group too
    assert derive(after, after, seen()) == []
    assert len(event.id) <= 200
    jsonschema.validate(event.to_json(), event_json_schema())


def test_a_channel_routes_queue_dead_letters_by_their_own_kind() -> None:
    before, after = _queue_state(2, fail=2)
    events = derive(before, after, seen())
    routes = Routes(hooks({"url_secret": "QUEUE_WEBHOOK", "events": ["queue_dead_letter"]},
                          {"url_secret": "RUNS_WEBHOOK", "events": ["dead_letter"]},
                          github_issues=True))
    assert [routes.channels(e) for e in events] == [["webhook:json:QUEUE_WEBHOOK"]] * 2
    assert title(events[0]) == "Queue item dead: nightly"
