"""The external clock's entries in hosted schedulers' syntax: each service's schedules,
read back by this project's cron parser, match the days and times of the entry's cron
(through a whole year); what a service cannot express is named, and only then."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest

from orchestrator.cadence import hosted
from orchestrator.cadence.machine import systemd_word
from orchestrator.cron import parse_cron

CRONS = ["0 7 * * *", "15 2 * * 1-5", "0 9 1 * 1-5", "*/20 8-17 * 1,3,12 mon-fri",
         "30 6 1,15 * *", "0 0 * * 0", "5 4 * * 7", "0 12 1-31 * 1", "0 3 */2 * *",
         "0 3 */2 * 1", "@hourly", "0 0 29 2 *"]
YEAR = [date(2028, 1, 1) + timedelta(days=n) for n in range(366)]


def _days_of(expr: str) -> set[date]:
    parsed = parse_cron(expr)
    return {d for d in YEAR if parsed.day_matches(d)}


def _times(expr: str) -> set[tuple[int, int]]:
    parsed = parse_cron(expr)
    return {(h, m) for h in parsed.hours for m in parsed.minutes}


def _from_eventbridge(expression: str) -> str:
    """EventBridge's six fields as five-field cron: ``?`` is ``*``, days of the week
    1 (Sunday) to 7 back to 0 to 6, the year (always ``*``) dropped."""
    minute, hour, day, month, week, year = re.fullmatch(r"cron\((.*)\)", expression)[1].split()
    assert year == "*"
    if week != "?":
        week = re.sub(r"\d+", lambda m: str(int(m[0]) - 1), week)
    return " ".join([minute, hour, day.replace("?", "*"), month, week.replace("?", "*")])


def _job_days(job: dict[str, list[int]]) -> set[date]:
    def every(values: list[int], value: int) -> bool:
        return values == [-1] or value in values

    return {d for d in YEAR if every(job["mdays"], d.day) and every(job["months"], d.month)
            and every(job["wdays"], d.isoweekday() % 7)}


@pytest.mark.parametrize("cron", CRONS)
def test_each_services_schedules_call_on_the_crons_days_and_times(cron: str) -> None:
    entry = hosted.cron_entry({"cron": cron, "timezone": "Europe/Paris", "schedules": ["s"],
                               "dst": {"gap": "shift", "fold": "first"}})
    _, wider = hosted.alternatives(parse_cron(cron))
    days, times = _days_of(cron), _times(cron)

    cloud = entry[hosted.CLOUD_SCHEDULER]
    assert cloud["timeZone"] == "Europe/Paris"
    assert (_days_of(cloud["schedule"]) >= days) and (
        wider or _days_of(cloud["schedule"]) == days)
    assert _times(cloud["schedule"]) == times

    bridge = [s["ScheduleExpression"] for s in entry[hosted.EVENTBRIDGE]]
    assert all(e.count("?") == 1 for e in bridge)  # one day field is always '?'
    bridged = set().union(*(_days_of(_from_eventbridge(e)) for e in bridge))
    assert bridged == days or (wider and bridged > days)
    assert all(_times(_from_eventbridge(e)) == times for e in bridge)

    jobs = [j["schedule"] for j in entry[hosted.CRON_JOB_ORG]]
    assert set().union(*(_job_days(j) for j in jobs)) == bridged
    for job in jobs:
        hours = range(24) if job["hours"] == [-1] else job["hours"]
        minutes = range(60) if job["minutes"] == [-1] else job["minutes"]
        assert {(h, m) for h in hours for m in minutes} == times
        assert job["expiresAt"] == 0 and job["timezone"] == "Europe/Paris"
    # a widened schedule says so, in every service
    said = [line for lines in entry["not_expressed"].values() for line in lines]
    assert (len(said) == 3) is wider, said


def test_both_day_fields_are_two_schedules_where_the_service_reads_them_otherwise() -> None:
    entry = hosted.cron_entry({"cron": "0 9 1 * 1-5", "timezone": "UTC", "schedules": ["s"]})
    assert [s["ScheduleExpression"] for s in entry[hosted.EVENTBRIDGE]] == [
        "cron(0 9 1 * ? *)", "cron(0 9 ? * 2-6 *)"]
    assert entry[hosted.CLOUD_SCHEDULER]["schedule"] == "0 9 1 * 1-5"
    assert [(j["schedule"]["mdays"], j["schedule"]["wdays"])
            for j in entry[hosted.CRON_JOB_ORG]] == [([1], [-1]), ([-1], [1, 2, 3, 4, 5])]


def _daylight_lines(cron: str) -> list[str]:
    around = [{"change": "2027-03-14T07:00:00Z"}, {"change": "2027-11-07T06:00:00Z"}]
    entry = hosted.cron_entry({"cron": cron, "timezone": "America/New_York",
                               "schedules": ["s"], "around_changes": around,
                               "dst": {"gap": "shift", "fold": "first"}})
    return [line for lines in entry["not_expressed"].values() for line in lines]


def test_daylight_saving_is_named_only_for_a_wall_time_in_a_skipped_or_repeated_hour() -> None:
    lines = _daylight_lines("30 2 * * *")  # 02:30 New York: skipped in March
    assert len(lines) == 3
    assert ("daylight saving in America/New_York: EventBridge skips a time the clock jumps "
            "over and calls once in a repeated hour, not dst gap shift, fold first") in lines[0]
    assert "Google Cloud Scheduler applies its own rule" in lines[1]
    assert _daylight_lines("30 1 * * *")  # 01:30: repeated in November
    assert _daylight_lines("0 7 * * *") == []  # 07:00 is neither


def test_life_span_exclusions_and_one_shots_are_expressed_where_they_can_be() -> None:
    entry = hosted.cron_entry({"cron": "0 7 * * *", "timezone": "Europe/Berlin",
                               "schedules": ["s"], "start_at": "2027-01-01T00:00:00Z",
                               "end_at": "2027-06-30T22:00:00Z",
                               "exclude": ["2027-12-24", "2027-12-25"]})
    [bridge] = entry[hosted.EVENTBRIDGE]
    assert (bridge["StartDate"], bridge["EndDate"]) == ("2027-01-01T00:00:00Z",
                                                       "2027-06-30T22:00:00Z")
    # cron-job.org's expiry is in the job's zone: midnight in Berlin, summer time
    assert entry[hosted.CRON_JOB_ORG][0]["schedule"]["expiresAt"] == 20270701000000
    gaps = entry["not_expressed"]
    assert [g.split(":")[0] for g in gaps[hosted.EVENTBRIDGE]] == ["exclude"]
    assert [g.split(" ")[0] for g in gaps[hosted.CRON_JOB_ORG]] == ["exclude:", "start_at"]
    assert [g.split(" ")[0] for g in gaps[hosted.CLOUD_SCHEDULER]] == [
        "exclude:", "start_at", "end_at"]
    assert "the 2 excluded date(s) too (first 2027-12-24)" in gaps[hosted.EVENTBRIDGE][0]

    once = hosted.once_entry({"at": "2027-02-01T10:30:00Z", "schedules": ["o"]})
    assert once[hosted.EVENTBRIDGE][0]["ScheduleExpression"] == "at(2027-02-01T10:30:00)"
    assert once[hosted.CLOUD_SCHEDULER]["schedule"] == "30 10 1 2 *"
    assert once[hosted.CRON_JOB_ORG][0]["schedule"]["expiresAt"] == 20270201103100
    assert list(once["not_expressed"]) == [hosted.CLOUD_SCHEDULER]


def test_runs_and_unit_words() -> None:
    assert hosted.runs((1, 2, 3, 5, 7, 8)) == "1-3,5,7-8"
    assert hosted.runs((0, 6), shift=1) == "1,7"
    assert hosted.runs(None) == "*"
    assert systemd_word("/srv/a b/%h") == '"/srv/a b/%%h"'
    assert systemd_word('say "hi"') == '"say \\"hi\\""'
    assert systemd_word("/srv/plain") == "/srv/plain"
