"""Runs with plausible histories for the brief's tests and benchmark.

Every object is a real model built through the state machine (``move_track`` and
``move_run``), so the histories are ones the planner could have written.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from builders import schedule_spec

from orchestrator.brief import BriefContext
from orchestrator.config.models import ScheduleSpec, TrackSpec
from orchestrator.state.machine import move_run, move_track
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import DeadLetter, Run, Track

SLOT = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
"""02:00 in New York, a Tuesday."""
RUN_ID = "nightly-refresh--20261201T0700Z"
XSS = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "{{ 7*7 }}"]
"""The payloads every text field of a brief must show as text."""


def at(minutes: float) -> datetime:
    return SLOT + timedelta(minutes=minutes)


def schedule(tracks: list[TrackSpec]) -> ScheduleSpec:
    return schedule_spec("0 2 * * 1-5", "America/New_York", tracks=tracks, deadline_minutes=50,
                         description="Nightly warehouse refresh and report publishing")


def _track(spec: TrackSpec, run_id: str = RUN_ID) -> Track:
    return Track(run_id=run_id, name=spec.name, spec=spec, max_attempts=spec.max_attempts)


def _attempt(track: Track, dispatched: float, started: float | None, end_phase: TrackPhase,
             ended: float | None, reason: str = "", **changes: Any) -> Track:
    url = f"https://github.com/acme/warehouse/actions/runs/{7_000_000 + int(dispatched * 60)}"
    track = move_track(track, TrackPhase.DISPATCHED, at(dispatched), "mark",
                       dispatched_at=at(dispatched), dispatch_key=track.key, executor="github",
                       handle={"run_id": 7_000_000 + int(dispatched * 60)}, url=url)
    if started is not None:
        track = move_track(track, TrackPhase.RUNNING, at(started), "job started",
                           started_at=at(started))
    if ended is not None:
        track = move_track(track, end_phase, at(ended), reason, finished_at=at(ended),
                           **changes)
    return track


def _retry(track: Track, when: float, backoff_minutes: float) -> Track:
    return move_track(track, TrackPhase.PENDING, at(when), "retry", attempt=track.attempt + 1,
                      not_before=at(when + backoff_minutes), dispatched_at=None,
                      started_at=None, finished_at=None, handle=None)


def four_track_run(*, summaries: dict[str, str] | None = None,
                   errors: list[str] | None = None) -> BriefContext:
    """2 complete, 1 failed after a retry, 1 tapped out; rendered as the run consolidates.

    ``summaries`` (by track) and ``errors`` (added to every error log and reason)
    replace or extend the texts, for the escaping tests.
    """
    summaries = summaries or {}
    extra = errors or []
    specs = [
        TrackSpec(name="ingest", run="make ingest"),
        TrackSpec(name="transform", run="make transform"),
        TrackSpec(name="publish", run="make publish", max_attempts=2,
                  retry_backoff_seconds=60),
        TrackSpec(name="backfill-2019", run="make backfill YEAR=2019", timeout_minutes=30),
    ]
    ingest = _attempt(_track(specs[0]), 4.5, 5.2, TrackPhase.COMPLETE, 12.8, "job succeeded",
                      result={"summary": summaries.get(
                          "ingest", "Loaded 1,284,112 rows from 14 sources.")})
    transform = _attempt(_track(specs[1]), 4.5, 5.0, TrackPhase.COMPLETE, 21.7, "job succeeded",
                         result={"summary": summaries.get(
                             "transform", "Rebuilt 37 tables; 2 schema migrations applied.")})
    publish_errors = [
        "attempt 1: upload to s3://reports/2026-12-01/ failed: 503 Slow Down",
        "attempt 2: upload to s3://reports/2026-12-01/ failed: 503 Slow Down "
        "(gave up after 5 retries)",
        *extra,
    ]
    publish = _attempt(_track(specs[2]), 4.5, 5.3, TrackPhase.FAILED, 9.0, "job failed",
                       error_log=publish_errors[:1])
    publish = _retry(publish, 10.0, 1.0)
    publish = _attempt(publish, 11.1, 11.7, TrackPhase.FAILED, 16.9, "job failed",
                       error_log=publish_errors[:2] + extra,
                       result={"summary": summaries.get(
                           "publish", "Rendered 12 reports; upload failed twice.")})
    backfill = _attempt(_track(specs[3]), 4.5, 6.0, TrackPhase.TAPPED_OUT, 36.2,
                        "timeout_minutes=30 exceeded",
                        error_log=["tapped out: still running after timeout_minutes=30",
                                   *extra],
                        result={"summary": summaries.get(
                            "backfill-2019", "Backfilled 7 of 12 months before the timeout.")})
    tracks = [ingest, transform, publish, backfill]

    run = Run(run_id=RUN_ID, schedule_id="nightly-refresh", slot=SLOT, fire_at=SLOT,
              created_at=at(4.4), deadline=at(4.4 + 50), tracks=[t.name for t in tracks],
              description="Nightly warehouse refresh and report publishing",
              cron="0 2 * * 1-5", timezone="America/New_York")
    run = move_run(run, RunStatus.RUNNING, at(4.5), "dispatched 4 tracks")
    run = move_run(run, RunStatus.CONSOLIDATING, at(40), "all tracks terminal")
    run = move_run(run, RunStatus.FAILED, at(40), "2 tracks did not complete",
                   finished_at=at(40))

    letters = [
        DeadLetter(key=f"{RUN_ID}--publish", run_id=RUN_ID, track="publish",
                   reason=" ".join(["failed after 2 of 2 attempts", *extra]),
                   parked_at=at(16.9), attempts=2, payload=specs[2],
                   error_log=publish.error_log, state_history=publish.state_history),
        DeadLetter(key=f"{RUN_ID}--backfill-2019", run_id=RUN_ID, track="backfill-2019",
                   reason="tapped out: ran longer than timeout_minutes=30",
                   parked_at=at(36.2), attempts=1, payload=specs[3],
                   error_log=backfill.error_log, state_history=backfill.state_history),
    ]
    polls: list[dict[str, Any]] = []
    observed = {t.name: "dispatched" for t in tracks}
    for minute, changes in [
        (4.5, {"ingest": "running", "transform": "running", "publish": "running",
               "backfill-2019": "running"}),
        (10.0, {"ingest": "running", "publish": "pending"}),
        (15.0, {"ingest": "complete", "publish": "running"}),
        (20.0, {"publish": "failed"}),
        (25.0, {"transform": "complete"}),
        (30.0, {}), (35.0, {}),
        (40.0, {"backfill-2019": "tapped_out"}),
    ]:
        observed.update(changes)
        notes = [f"{k} -> {v}" for k, v in changes.items()] or ["no change"]
        polls.append({"at": f"{at(minute):%Y-%m-%dT%H:%M:%SZ}", "tick": f"{at(minute):%H%M}",
                      "observed": dict(observed), "notes": notes + extra})
    return BriefContext(run=run, tracks=tracks, dead_letters=letters, polls=polls,
                        generated_at=at(40), last_tick=at(35), schedule=schedule(specs))


def many_track_run(n: int, *, summary_chars: int = 120, errors_per_track: int = 1,
                   error_chars: int = 0, polls: int = 24) -> BriefContext:
    """``n`` tracks: most complete, every 10th failed after retries, every 25th tapped out.

    ``error_chars`` pads each error message (a stack trace, say) to that length."""
    run_id = f"fanout--{SLOT:%Y%m%dT%H%MZ}"
    tracks: list[Track] = []
    letters: list[DeadLetter] = []
    for i in range(n):
        spec = TrackSpec(name=f"shard-{i:03d}", run=f"make shard N={i}", max_attempts=2)
        track = _track(spec, run_id)
        start = 1 + (i % 16) * 0.2
        summary = (f"shard {i}: " + "processed 1,024 objects; " * summary_chars)[:summary_chars]
        errs = [f"shard {i} error {k}: connection reset by peer".ljust(error_chars, ".")
                for k in range(errors_per_track)]
        if i % 10 == 9:
            track = _attempt(track, start, start + 0.3, TrackPhase.FAILED, start + 5, "job failed",
                             error_log=errs[:1])
            track = _retry(track, start + 6, 1)
            track = _attempt(track, start + 7.5, start + 8, TrackPhase.FAILED, start + 12,
                             "job failed", error_log=errs, result={"summary": summary})
            letters.append(DeadLetter(key=f"{run_id}--{spec.name}", run_id=run_id,
                                      track=spec.name, reason="failed after 2 attempts",
                                      parked_at=at(start + 12), attempts=2, payload=spec,
                                      error_log=errs))
        elif i % 25 == 24:
            track = _attempt(track, start, start + 0.5, TrackPhase.TAPPED_OUT, 30, "deadline",
                             error_log=errs, result={"summary": summary})
        else:
            track = _attempt(track, start, start + 0.4, TrackPhase.COMPLETE, start + 3 + (i % 7),
                             "job succeeded", result={"summary": summary})
        tracks.append(track)
    run = Run(run_id=run_id, schedule_id="fanout", slot=SLOT, fire_at=SLOT,
              created_at=at(0.9), deadline=at(30), tracks=[t.name for t in tracks],
              description=f"{n}-way fan-out", cron="0 * * * *", timezone="UTC")
    run = move_run(run, RunStatus.RUNNING, at(1), "dispatched")
    run = move_run(run, RunStatus.CONSOLIDATING, at(31), "all tracks terminal")
    run = move_run(run, RunStatus.FAILED, at(31), "some tracks did not complete",
                   finished_at=at(31))
    poll_lines = [{"at": f"{at(1 + k):%Y-%m-%dT%H:%M:%SZ}", "tick": k,
                   "observed": {t.name: "running" for t in tracks},
                   "notes": [f"observed {n} tracks"]} for k in range(polls)]
    return BriefContext(run=run, tracks=tracks, dead_letters=letters, polls=poll_lines,
                        generated_at=at(31), last_tick=at(30))


MD_INJECTION = ["[click](javascript:alert(1))", "![x](https://evil.invalid/x.png)",
                "a | b | c", "<https://evil.invalid>", "**bold** `code` $x$"]


def payload_run() -> BriefContext:
    payloads = XSS + MD_INJECTION
    return four_track_run(summaries={"ingest": "\n".join(payloads), "publish": XSS[0],
                                     "transform": XSS[1], "backfill-2019": XSS[2]},
                          errors=payloads)
