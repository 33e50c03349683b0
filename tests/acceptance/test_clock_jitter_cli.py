"""``serve --executor github --clock-only`` and a jittered schedule, in real time: the
clock dispatches tick.yml within 5 s of the run's ``fire_at`` (its slot plus the
run's jitter), not at its next wake-up a minute later.

The schedule is built from the clock at the test's start, in UTC, so it runs on any
date and at any time of day (midnight and daylight saving included)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.planner.fire import jitter
from orchestrator.state.layout import run_id_for
from orchestrator.support.times import iso
from tests.acceptance.cliuser import User, reaped, terminate, wait
from tests.fakes.github import FakeGitHub

JITTER_SECONDS = 300
LEAD = (timedelta(seconds=12), timedelta(seconds=24))
"""How far ahead of the test's start ``fire_at`` falls: time for ``serve`` to start on
a loaded machine, and a short wait."""
BOUND = timedelta(seconds=5)
"""The acceptance bound of the dispatch's lag behind ``fire_at``."""
GUARD = timedelta(seconds=90)
"""Longer than ``--interval``'s 60 s: without the fix, the next wake-up comes within it."""


def jittered_slot(start: datetime) -> tuple[str, datetime, datetime]:
    """A schedule id, its slot (the minute of ``start``, so the slot has passed when
    ``serve`` starts) and the run's ``fire_at`` within :data:`LEAD` of ``start``. The
    jitter is a hash of the run id: the id is searched, not the clock."""
    slot = start.replace(second=0, microsecond=0)
    for n in range(2000):
        sid = f"jittered-{n}"
        fire_at = slot + jitter(run_id_for(sid, slot), JITTER_SECONDS)
        if start + LEAD[0] <= fire_at <= start + LEAD[1]:
            return sid, slot, fire_at
    raise AssertionError(f"no schedule id puts fire_at within {LEAD} of {start}")


@pytest.mark.slow
def test_serve_clock_only_dispatches_a_jittered_run_at_its_fire_at(
        scaffolded: tuple[User, Path], fake_github: FakeGitHub,
        monkeypatch: pytest.MonkeyPatch) -> None:
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    (user.cwd / "orchestrator.json").write_text(json.dumps({"cadence": {"mode": "external"}}))
    for name, value in fake_github.env().items():
        if name != "GITHUB_TOKEN":  # the clock has a token of its own
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("ORCHESTRATOR_CLOCK_TOKEN", fake_github.token)
    sid, slot, fire_at = jittered_slot(datetime.now(UTC))
    # A daily cron at the slot's minute in UTC: its one slot near now is the one chosen.
    user.run("schedules", "add", sid, "--cron", f"{slot.minute} {slot.hour} * * *",
             "--jitter-seconds", str(JITTER_SECONDS), "--track", "t=true")

    # The default --interval (60 s): the loop wakes at second 0 of each minute, and at
    # the moments the clock asks for.
    with reaped(user.start("serve", "--executor", "github", "--clock-only")) as proc:
        called = dispatched(fake_github, until=fire_at + GUARD)
        err = terminate(proc)
    first = next(line for line in err.splitlines() if " wake-up 1:" in line)
    # serve must look before fire_at to see it ahead: a start slower than LEAD fails here
    assert first.split()[0] <= iso(fire_at), f"serve started after {iso(fire_at)}: {err}"
    assert called, f"no dispatch by {GUARD} after fire_at {iso(fire_at)}: {err}"
    assert proc.returncode == 0, err
    # The slot passed before serve started, so its one call is the jitter's end.
    [run] = fake_github.runs_of("tick.yml")
    lag = run.created_at - fire_at
    assert timedelta(0) <= lag <= BOUND, (iso(slot), iso(fire_at), run.created_at)
    assert (f"clock: dispatched tick.yml (workflow_dispatch) for {sid}: its run's jitter "
            f"ends {iso(fire_at)}") in err, err


def dispatched(fake: FakeGitHub, until: datetime) -> bool:
    """Whether tick.yml was dispatched before ``until``; a guard against a hang only, the
    lag is read from the fake's record of the run."""
    try:
        wait(lambda: bool(fake.runs_of("tick.yml")), "no dispatch",
             timeout=(until - datetime.now(UTC)).total_seconds())
    except AssertionError:
        return False
    return True
