"""``tick --linger`` and ``serve`` on the real clock: a slot fires at its time, not at
the next cron tick (or the next whole interval).

Each test uses a schedule due every minute, so the next slot is less than a minute
away whenever the test starts; the run's ``created_at`` is the instant the tick
that fired it decided, so ``created_at - slot`` is how late the slot fired.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.acceptance.cliuser import User, git, new_repository, reaped, terminate, wait


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


def waited_for(line: str) -> datetime:
    """The moment a ``linger: waiting for MOMENT (in N s): ...`` line names."""
    return datetime.fromisoformat(line.removeprefix("linger: waiting for ").split(" ")[0]
                                  .replace("Z", "+00:00"))


class Lines:
    """The stderr of a started command, read line by line as it comes (in a thread),
    so a test can act on what the command said."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        self.lines: list[str] = []
        self._stream = proc.stderr
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._stream:
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        """Everything said, once the command has ended (the stream is closed then)."""
        self._thread.join(60)
        self._stream.close()
        return "\n".join(self.lines)


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
    clear_of_a_boundary()  # the first tick ends before the next slot: it waits for it
    # The window would allow every minute; --max-linger (1 minute) allows the next
    # slot only: the one after it is more than a minute after the first tick.
    proc = user.run("tick", "--linger", "5", "--max-linger", "1", timeout=240)
    # One wait, for the slot after the first tick's (the command says which: a slow
    # start may have put the first tick in a later minute than the test's clock did).
    [wait_line] = [line for line in proc.stderr.splitlines()
                   if line.startswith("linger: waiting for")]
    next_slot = waited_for(wait_line)
    assert "past --max-linger" in proc.stderr, proc.stderr
    late = lateness(user)
    assert next_slot in late, (sorted(late), proc.stderr)
    assert 0 <= late[next_slot] < 5, late  # the tick came when the wait ended
    assert next_slot + timedelta(minutes=1) not in late  # nor waited for a slot past it
    assert "next due" in proc.stdout  # the summary says when it would wake next, and why


def test_by_default_a_tick_does_not_wait_for_a_frequent_schedule_s_slot(
        tmp_path: Path) -> None:
    user = minutely(tmp_path, wait_for_it=False)
    proc = user.run("tick", "--linger", "5", "--max-linger", "5", timeout=120)
    assert "not worth a waiting runner" in proc.stderr, proc.stderr
    assert "linger: waiting for" not in proc.stderr
    # one tick, one slot: it did not stay for the next minute's
    assert len(lateness(user)) == 1, proc.stderr


@pytest.mark.slow
def test_sigterm_ends_a_lingering_tick_with_exit_0(tmp_path: Path) -> None:
    user = minutely(tmp_path)
    proc = user.start("tick", "--linger", "5", "--max-linger", "30")
    said = Lines(proc)
    try:
        # The signal comes while the command waits for a slot at least 10 s away (the
        # next minute's, if this one's is closer): between ticks, never in one.
        def waiting() -> datetime | None:
            moments = [waited_for(line) for line in said.lines
                       if line.startswith("linger: waiting for")]
            left = moments[-1] - datetime.now(UTC) if moments else None
            return moments[-1] if left is not None and left.total_seconds() >= 10 else None

        wait(lambda: waiting() is not None, "no wait for a slot 10 s away", timeout=180)
        moment = waiting()
        assert moment is not None
        ticks = sum(line.startswith("linger: waiting for") for line in said.lines)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        ended = datetime.now(UTC)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err = said.text()
        assert proc.stdout is not None
        proc.stdout.close()
    assert proc.returncode == 0, err
    assert f"linger: SIGTERM: stopping after {ticks} tick(s)" in err, err
    assert ended < moment, "SIGTERM did not end the wait: it lasted to the slot"


@pytest.mark.slow
def test_serve_wakes_for_a_slot_between_its_intervals(tmp_path: Path) -> None:
    """--interval 600 would wake at whole ten minutes; the slot fires within a second."""
    user = minutely(tmp_path)
    clear_of_a_boundary()  # the first tick ends before the next slot: serve sleeps to it
    log = user.cwd / ".orchestrator" / "work" / "launches.log"

    def slots() -> list[datetime]:
        """The slots whose track serve launched, in order (a last line still being
        written waits for the next look)."""
        found: set[datetime] = set()
        for line in log.read_text().splitlines() if log.exists() else []:
            with contextlib.suppress(ValueError):
                slot = json.loads(line)["key"].split("--")[1]
                found.add(datetime.strptime(slot, "%Y%m%dT%H%MZ").replace(tzinfo=UTC))
        return sorted(found)

    with reaped(user.start("serve", "--interval", "600")) as proc:
        # The first wake-up fires its minute's slot (whenever a slow start put it), the
        # next slot is the one served between intervals. Its run is committed before its
        # track launches, so once the launch is logged the run is on the origin.
        wait(lambda: len(slots()) >= 2, "no second slot launched", timeout=150)
        next_slot = slots()[1]
        err = terminate(proc, timeout=120)
    assert proc.returncode == 0, err
    late = lateness(user)
    assert next_slot in late, (sorted(late), err)
    assert 0 <= late[next_slot] < 1, late
