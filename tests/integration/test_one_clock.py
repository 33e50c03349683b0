"""One clock per run: a tick at a given ``now`` runs its local tracks on that clock.

A simulated tick years away from the machine's clock must behave as a real tick would:
its track starts at the tick's ``now`` (plus the real seconds since the tick began), and
the next simulated tick measures the track's timeout on that same clock.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.executors import _attempt_folder as supervisor
from orchestrator.state.phases import TrackPhase
from tests.builders import spec_data
from tests.drive import finished, state_of, tick, wait_until
from tests.gitrepo import clone, make_origin

# Far from any real clock this suite runs on, in both directions.
CLOCKS = [datetime(2001, 3, 4, 7, 0, tzinfo=UTC), datetime(2091, 3, 4, 7, 0, tzinfo=UTC)]
RUN = "nightly--{:%Y%m%dT%H%MZ}"


def status(work: Path, key: str) -> dict[str, str]:
    return json.loads((work / key / "status.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("t0", CLOCKS, ids=["past", "future"])
def test_a_simulated_tick_records_its_tracks_times_on_its_own_clock(
        tmp_path: Path, t0: datetime) -> None:
    origin = make_origin(tmp_path, {"nightly": spec_data(cron="0 7 * * *")})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    fired = tick(repo, t0 + timedelta(minutes=1), work)
    (key,) = fired.dispatched
    wait_until(lambda: finished(work, key))
    record = status(work, key)
    launch = json.loads((work / key / "launch.json").read_text())
    for field in ("queued_at", "started_at", "finished_at"):
        at = datetime.fromisoformat(record[field])
        # the tick's now plus the seconds the tick and the track really took
        assert t0 + timedelta(minutes=1) <= at < t0 + timedelta(minutes=2), (field, at)
    assert datetime.fromisoformat(launch["dispatched_at"]) < t0 + timedelta(minutes=2)


@pytest.mark.parametrize("t0", CLOCKS, ids=["past", "future"])
def test_the_next_simulated_tick_times_a_track_out_on_the_clock_it_started_on(
        tmp_path: Path, t0: datetime) -> None:
    origin = make_origin(tmp_path, {"nightly": spec_data(
        cron="0 7 * * *", tracks=[{"name": "a", "run": "sleep 60", "timeout_minutes": 30}])})
    repo = clone(origin, tmp_path / "repo")
    work = tmp_path / "work"
    tick(repo, t0 + timedelta(minutes=1), work)
    run = RUN.format(t0)
    # 20 minutes on the track's clock: running, not timed out
    tick(repo, t0 + timedelta(minutes=21), work)
    state, _ = state_of(repo)
    assert state.tracks[run]["a"].phase is TrackPhase.RUNNING
    # 32 minutes: past its 30, tapped out by the tick (its supervisor would wait 30
    # real minutes)
    tick(repo, t0 + timedelta(minutes=33), work)
    state, _ = state_of(repo)
    assert state.tracks[run]["a"].phase is TrackPhase.TAPPED_OUT


@pytest.mark.parametrize("offset", ["nan", '"soon"', "true", "1e300"])
def test_a_hand_edited_clock_offset_leaves_the_machines_clock(offset: str) -> None:
    # launch.json is the work folder's, and a person may edit it: a value that is no
    # finite offset is ignored, never a supervisor that cannot record a time
    before = supervisor.utc_now()
    supervisor.set_clock_offset(json.loads(offset) if offset != "nan" else float("nan"))
    try:
        now = datetime.fromisoformat(supervisor.utc_now())
        assert abs(now - datetime.fromisoformat(before)) < timedelta(minutes=5)
    finally:
        supervisor.set_clock_offset(0)
