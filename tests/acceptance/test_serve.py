"""``orchestrator serve --interval 1`` on the real clock, up to the second slot it fires.

The origin gets a pre-receive hook that takes two seconds per push and logs when each
push starts and ends: it makes every firing tick slow enough that later wake-ups
find it still running (they must skip it, not overlap it), and it shows the test
when a push is in flight, so SIGTERM can be sent in the middle of a tick.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.acceptance.cliuser import User, git, reaped, terminate, wait

HOOK = """#!/bin/sh
cat > /dev/null
printf 'start\\n' >> "{log}"
sleep 2
printf 'end\\n' >> "{log}"
"""


def minute(moment: datetime) -> str:
    return f"minutely--{moment:%Y%m%dT%H%MZ}"


def launched(work: Path) -> list[str]:
    """The attempts the local executor launched in ``work``, in launch order."""
    log = work / "launches.log"
    if not log.exists():
        return []
    return [json.loads(line)["key"] for line in log.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_serve_fires_each_minute_once_and_sigterm_mid_tick_exits_0(tmp_path: Path,
        scaffolded: tuple[User, Path]) -> None:
    user, origin = scaffolded
    user.run("schedules", "remove", "nightly")
    # overlap=allow: on a loaded machine the previous minute's run may still be open at
    # the next slot, and this test is about wake-ups and exactly-once, not overlap
    user.run("schedules", "add", "minutely", "--every", "minute", "--track", "t=true",
             "--overlap", "allow")
    pushes = tmp_path / "pushes.log"
    hook = origin / "hooks" / "pre-receive"
    hook.write_text(HOOK.format(log=pushes))
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)

    work = user.cwd / ".orchestrator" / "work"
    started = datetime.now(UTC)
    with reaped(user.start("serve", "--interval", "1")) as proc:
        # A new schedule's first tick fires the slot of its minute; the next slot comes
        # at the next minute boundary, in the same serve. Wait for that second firing
        # (its launch is logged once its run is committed), then for a push to be in
        # flight: a tick is between its start and its end.
        fired = work / "launches.log"  # one line a launch, the last maybe half written
        wait(lambda: fired.exists() and fired.read_text().count("\n") >= 2,
             "serve did not fire two slots", timeout=200)
        wait(lambda: pushes.exists() and (pushes.read_text().splitlines() or [""])[-1]
             == "start", "no push after the second slot fired", timeout=50)
        err = terminate(proc, timeout=120)
    assert proc.returncode == 0, err
    assert "SIGTERM: stopping; waiting for tick to finish" in err, err
    # The push in flight at the signal completed: every push that started, ended.
    log = pushes.read_text().splitlines()
    assert log.count("start") == log.count("end") and log[-1] == "end"

    # One line per wake-up, numbered without gaps; a busy tick was skipped, not doubled
    # (a firing tick takes two pushes of two seconds: wake-ups come while it runs).
    numbers = [int(line.split(" wake-up ")[1].split(":")[0]) for line in err.splitlines()
               if " wake-up " in line]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 5
    assert "skipped tick (still running)" in err

    # Catch up on what the interrupted serve left (a record commit, a consolidation).
    finished = datetime.now(UTC)
    user.run("tick")
    runs = {r["run_id"] for r in user.json("runs", "list", "--json")}
    # Two slots of one schedule, a minute apart, fired by the one serve (the first two
    # launches); the last tick may have fired one more minute.
    [first, second, *_] = launched(work)
    assert first.endswith("--t--1") and second.endswith("--t--1")
    slots = sorted(datetime.strptime(k.split("--")[1], "%Y%m%dT%H%MZ").replace(tzinfo=UTC)
                   for k in (first, second))
    assert slots[1] - slots[0] == timedelta(minutes=1), (first, second)
    allowed = {minute(started + timedelta(minutes=m)) for m in range(
        int((finished - started).total_seconds() // 60) + 2)}
    assert {minute(s) for s in slots} <= runs <= allowed, (sorted(runs), err)
    # Exactly once: one launch per run, never two.
    assert sorted(launched(work)) == sorted(f"{run}--t--1" for run in runs)


@pytest.mark.slow
def test_serve_survives_a_restart_without_firing_again(scaffolded: tuple[User, Path]) -> None:
    """State is in git: a second serve right after the first fires nothing twice, and
    serving leaves the checkout clean."""
    user, _ = scaffolded
    user.run("schedules", "remove", "nightly")
    user.run("schedules", "add", "minutely", "--every", "minute", "--track", "t=true")
    git("add", "-A", "schedules", cwd=user.cwd)
    git("commit", "--quiet", "-m", "Every minute", cwd=user.cwd)
    work = user.cwd / ".orchestrator" / "work"
    started = datetime.now(UTC)
    for _ in range(2):
        with reaped(user.start("serve", "--interval", "1")) as proc:
            # "serving ..." comes once the signal handlers are in place: a SIGINT
            # before that (a slow start on a loaded machine) would end it with 130.
            assert proc.stderr is not None and "serving" in proc.stderr.readline()
            wait(lambda: (work / "launches.log").exists(), "nothing fired", timeout=60)
            time.sleep(2)
            os.kill(proc.pid, signal.SIGINT)
            proc.communicate(timeout=60)
        assert proc.returncode == 0
    finished = datetime.now(UTC)
    runs = {r["run_id"] for r in user.json("runs", "list", "--json")}
    launches = [json.loads(line)["key"] for line in
                (work / "launches.log").read_text().splitlines()]
    assert sorted(launches) == sorted(f"{run}--t--1" for run in runs)
    # no more than one run a minute the two serves lasted (a loaded machine makes them
    # last longer, and cross more minutes: not a count fixed in advance)
    allowed = {minute(started + timedelta(minutes=m)) for m in range(
        int((finished - started).total_seconds() // 60) + 2)}
    assert runs and runs <= allowed, (sorted(runs), started, finished)
    assert git("status", "--porcelain", cwd=user.cwd) == ""
