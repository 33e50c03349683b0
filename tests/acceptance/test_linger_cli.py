"""``tick --linger`` and ``serve`` on the real clock: a slot fires at its time, not at
the next cron tick (or the next whole interval).

Each test uses a schedule due every minute, so the next slot is less than a minute
away whenever the test starts; the run's ``created_at`` is the instant the tick
that fired it decided, so ``created_at - slot`` is how late the slot fired.
"""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.acceptance.cliuser import User, git, new_repository, wait


def minutely(tmp_path: Path, *, wait_for_it: bool = True) -> User:
    user, _ = new_repository(tmp_path)
    user.run("schedules", "remove", "nightly")
    # overlap "allow": the previous minute's run is still open (its fan-in is the next
    # tick's) when the next slot comes, and this is about when slots fire
    user.run("schedules", "add", "minutely", "--every", "minute", "--track", "t=true",
             "--overlap", "allow")
    if wait_for_it:
        # a minutely slot is not worth a waiting runner by default: say it is
        (user.cwd / "orchestrator.json").write_text(
            '{"cadence": {"linger_schedules": {"minutely": true}}}\n')
    git("add", "-A", "schedules", "orchestrator.json" if wait_for_it else "schedules",
        cwd=user.cwd)
    git("commit", "--quiet", "-m", "Every minute", cwd=user.cwd)
    return user


def lateness(user: User) -> dict[datetime, float]:
    """Slot -> seconds from the slot to the tick that fired it, for every run."""
    found: dict[datetime, float] = {}
    for row in user.json("runs", "list", "--json"):
        run = user.json("runs", "show", row["run_id"], "--json")["run"]
        slot = datetime.fromisoformat(run["slot"].replace("Z", "+00:00"))
        created = datetime.fromisoformat(run["created_at"].replace("Z", "+00:00"))
        found[slot] = (created - slot).total_seconds()
    return found


def boundary_after(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0) + timedelta(minutes=1)


def clear_of_a_boundary(margin: float = 20.0) -> datetime:
    """Now, or just after the next minute boundary when that is under ``margin``
    seconds away: the tick must start in the minute the test thinks it does, or the
    slot it fires first is not the one the test expects (a slow process start can
    cross the boundary)."""
    now = datetime.now(UTC)
    left = (boundary_after(now) - now).total_seconds()
    if left < margin:
        time.sleep(left + 0.5)
        now = datetime.now(UTC)
    return now


@pytest.mark.slow
def test_linger_fires_the_next_slot_within_seconds_and_stops_at_max_linger(
        tmp_path: Path) -> None:
    user = minutely(tmp_path)
    started = clear_of_a_boundary()
    next_slot = boundary_after(started)
    # The window would allow every minute; --max-linger (1 minute) allows the next
    # slot only: the one after it is more than a minute after the first tick.
    proc = user.run("tick", "--linger", "5", "--max-linger", "1", timeout=240)
    ended = datetime.now(UTC)
    assert "linger: waiting for" in proc.stderr, proc.stderr
    assert "past --max-linger" in proc.stderr, proc.stderr
    late = lateness(user)
    assert next_slot in late, (sorted(late), proc.stderr)
    assert 0 <= late[next_slot] < 5, late
    assert next_slot + timedelta(minutes=1) not in late
    assert ended < next_slot + timedelta(minutes=1), "it waited for a slot past --max-linger"
    assert "next due" in proc.stdout  # the summary says when it would wake next, and why


def test_by_default_a_tick_does_not_wait_for_a_frequent_schedule_s_slot(
        tmp_path: Path) -> None:
    user = minutely(tmp_path, wait_for_it=False)
    started = time.monotonic()
    proc = user.run("tick", "--linger", "5", "--max-linger", "5", timeout=120)
    assert "not worth a waiting runner" in proc.stderr, proc.stderr
    assert "linger: waiting for" not in proc.stderr
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_sigterm_ends_a_lingering_tick_with_exit_0(tmp_path: Path) -> None:
    user = minutely(tmp_path)
    proc = user.start("tick", "--linger", "5", "--max-linger", "30")
    try:
        # The first tick has committed once the state branch exists on the origin.
        wait(lambda: git("ls-remote", "origin", "orchestrator-state", cwd=user.cwd) != "",
             "the first tick did not commit", timeout=120)
        time.sleep(1)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "linger: SIGTERM: stopping" in err, err
    assert took < 30, f"SIGTERM took {took:.1f} s to end the wait"


@pytest.mark.slow
def test_serve_wakes_for_a_slot_between_its_intervals(tmp_path: Path) -> None:
    """--interval 600 would wake at whole ten minutes; the slot fires within a second."""
    user = minutely(tmp_path)
    started = clear_of_a_boundary()
    next_slot = boundary_after(started)
    launched = f"minutely--{next_slot:%Y%m%dT%H%MZ}--t--1"
    log = user.cwd / ".orchestrator" / "work" / "launches.log"
    proc = user.start("serve", "--interval", "600")
    try:
        # The slot's run is committed before its track launches, so once the launch is
        # logged the run is on the origin: no need to sit out a fixed margin after it.
        wait(lambda: log.exists() and launched in log.read_text(),
             f"{launched} not launched", timeout=150)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    late = lateness(user)
    assert next_slot in late, (sorted(late), err)
    assert 0 <= late[next_slot] < 1, late
