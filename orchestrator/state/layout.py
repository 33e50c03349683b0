"""Where every record of the state branch lives: the one place that builds its paths.

- Every id in a path is validated first (:func:`~orchestrator.spec.fields.check_id`),
  so no path built here can leave ``state/``.
"""

from __future__ import annotations

from ..spec.fields import check_id, check_run_id

ROOT = "state"
TICKS = f"{ROOT}/ticks.jsonl"
HEALTH = f"{ROOT}/health.json"
INDEX = f"{ROOT}/index.html"


def cursor_path(schedule_id: str) -> str:
    return f"{ROOT}/schedules/{check_id(schedule_id, 'schedule id')}.json"


def run_dir(run_id: str) -> str:
    return f"{ROOT}/runs/{check_run_id(run_id)}"


def run_path(run_id: str) -> str:
    return f"{run_dir(run_id)}/run.json"


def track_path(run_id: str, track: str) -> str:
    return f"{run_dir(run_id)}/tracks/{check_id(track, 'track name')}.json"


def specs_path(run_id: str) -> str:
    return f"{run_dir(run_id)}/specs.json"


def undo_path(run_id: str, track: str) -> str:
    """The compensation record of ``track`` (a :class:`Track` with ``compensating``)."""
    return f"{run_dir(run_id)}/undo/{check_id(track, 'track name')}.json"


def polls_path(run_id: str) -> str:
    return f"{run_dir(run_id)}/polls.jsonl"


def brief_path(run_id: str) -> str:
    return f"{run_dir(run_id)}/brief.html"


def dlq_key(run_id: str, track: str) -> str:
    return f"{check_run_id(run_id)}--{check_id(track, 'track name')}"


def dlq_path(key: str) -> str:
    run_id, sep, track = key.rpartition("--")
    if not sep:
        check_run_id(key)  # raises with a clear message
    return f"{ROOT}/dlq/{dlq_key(run_id, track)}.json"
