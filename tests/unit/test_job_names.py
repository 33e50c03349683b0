"""Leg job names stay within GitHub's 100 characters and are matched by a hash of the
dispatch key; jobs named after the whole key (an older track.yml) still match."""

from __future__ import annotations

from orchestrator.executors.github.jobnames import (
    MAX_CHARS,
    as_listed,
    is_leg,
    job_name,
    key_hash,
    match,
)

LONG_ID = "s" * 64
LONG_TRACK = "t" * 64
WORST = f"{LONG_ID}--20261201T0700Z--{LONG_TRACK}--undo--999.9999"


def test_the_longest_key_gives_a_name_of_at_most_100_characters_ending_in_its_hash() -> None:
    assert len(WORST) > 150
    name = job_name(WORST)
    assert len(name) <= MAX_CHARS
    assert name.endswith(f" {key_hash(WORST)}") and name.startswith(LONG_TRACK)
    assert as_listed(name) == name  # GitHub lists it whole


def test_a_short_key_reads_as_its_track_and_attempt() -> None:
    key = "nightly--20261201T0700Z--ingest--2.1"
    assert job_name(key) == f"ingest--2.1 {key_hash(key)}"
    assert job_name(key) == job_name(key) != job_name("nightly--20261201T0700Z--ingest--2.2")


def test_jobs_match_by_hash_by_old_name_and_by_github_s_cut_of_an_old_name() -> None:
    new = "nightly--20261201T0700Z--build--1"
    old = "nightly--20261201T0700Z--test--1"
    long_old = f"{LONG_ID}--20261201T0700Z--{LONG_TRACK}--1"
    jobs = [{"id": 1, "name": job_name(new)}, {"id": 2, "name": old},
            {"id": 3, "name": as_listed(long_old)}, {"id": 4, "name": "fan-in"}]
    assert as_listed(long_old).endswith("...") and len(as_listed(long_old)) == 100
    found = match(jobs, [new, old, long_old, "nightly--20261201T0700Z--lost--1"])
    assert {k: j["id"] for k, j in found.items()} == {new: 1, old: 2, long_old: 3}


def test_a_cut_name_two_wanted_keys_share_matches_neither() -> None:
    first = f"{LONG_ID}--20261201T0700Z--{LONG_TRACK}--1"
    second = f"{LONG_ID}--20261201T0700Z--{LONG_TRACK}--2"
    assert as_listed(first) == as_listed(second)
    assert match([{"id": 1, "name": as_listed(first)}], [first, second]) == {}


def test_the_newest_job_of_a_name_wins_and_fan_in_is_no_leg() -> None:
    key = "nightly--20261201T0700Z--build--1"
    found = match([{"id": 9, "name": job_name(key)}, {"id": 3, "name": job_name(key)}], [key])
    assert found[key]["id"] == 9
    assert is_leg(job_name(key)) and is_leg(key) and not is_leg("fan-in")
