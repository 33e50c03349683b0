"""Builders for the objects most tests start from: schedule files, specs, tracks, and
the records of a run on the state branch.

Plain functions rather than fixtures, so module-level helpers, ``partial`` defaults and
``parametrize`` lists can use them in every tier. A spec is built from the JSON a
schedule file would hold (``model_validate_json``), so tests see what a tick reads.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from orchestrator.config.models import Schedule, ScheduleSpec, TrackSpec
from orchestrator.state import codec, layout
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Run, Track

CRON = "0 7 * * *"
"""07:00 every day: the default timing of a built schedule."""
RUN_ID = "nightly--20261201T0700Z"

TrackLike = str | Mapping[str, Any] | TrackSpec


def track_specs(tracks: int | Sequence[TrackLike] = ("a",), run: str = "true",
                **extra: Any) -> list[dict[str, Any]]:
    """Track entries of a schedule file: ``n`` tracks ``t0..``, or names each running
    ``run`` (with ``extra`` fields), or ready-made entries kept as they are."""
    names: Sequence[TrackLike] = [f"t{i}" for i in range(tracks)] if isinstance(
        tracks, int) else tracks
    out: list[dict[str, Any]] = []
    for item in names:
        if isinstance(item, str):
            out.append({"name": item, "run": run, **extra})
        elif isinstance(item, TrackSpec):
            out.append(item.model_dump(mode="json"))
        else:
            out.append(dict(item))
    return out


def spec_data(cron: str | None = CRON, timezone: str | None = None, *,
              tracks: int | Sequence[TrackLike] = ("a",), run: str = "true",
              **fields: Any) -> dict[str, Any]:
    """The JSON of a schedule file. ``cron=None`` (or an ``at`` field) leaves cron out;
    ``timezone=None`` leaves the default (UTC)."""
    data: dict[str, Any] = {}
    if cron is not None and "at" not in fields:
        data["cron"] = cron
    if timezone is not None:
        data["timezone"] = timezone
    data["tracks"] = track_specs(tracks, run)
    data.update(fields)
    return data


def schedule_spec(cron: str | None = CRON, timezone: str | None = None, *,
                  tracks: int | Sequence[TrackLike] = ("a",), run: str = "true",
                  **fields: Any) -> ScheduleSpec:
    """A validated spec, read from :func:`spec_data` as a schedule file is read."""
    data = spec_data(cron, timezone, tracks=tracks, run=run, **fields)
    return ScheduleSpec.model_validate_json(json.dumps(data))


def schedule(sid: str = "nightly", **spec: Any) -> Schedule:
    """A loaded schedule ``sid`` whose spec is :func:`schedule_spec` of ``spec``."""
    return Schedule(id=sid, spec=schedule_spec(**spec))


def schedule_factory(default_id: str = "nightly", **defaults: Any) -> Callable[..., Schedule]:
    """:func:`schedule` with other defaults, for a test module whose schedules share them."""
    def make(sid: str = default_id, **spec: Any) -> Schedule:
        return schedule(sid, **{**defaults, **spec})
    return make


def track(name: str = "a", phase: TrackPhase = TrackPhase.PENDING, *, run_id: str = RUN_ID,
          run: str = "true", **fields: Any) -> Track:
    """A track record of ``run_id`` whose spec runs ``run``; ``fields`` set the rest."""
    return Track(run_id=run_id, name=name, phase=phase, spec=TrackSpec(name=name, run=run),
                 **fields)


def run_files(run_id: str = RUN_ID, status: RunStatus = RunStatus.RUNNING,
              finished: datetime | None = None, *, tracks: Sequence[str] = ("a",),
              phase: TrackPhase | None = None, also: Iterable[str] = ()) -> dict[str, bytes]:
    """The records of run ``run_id`` on the state branch, by path: its ``run.json`` (slot,
    fire time and creation at the slot its id names, deadline four hours later) in
    ``status``, finished at ``finished``, and a record of each of ``tracks`` running
    ``true`` in ``phase`` (default: ``complete`` once the run finished, else ``running``).
    ``also`` adds files of the run beside them: ``"brief"`` (its HTML brief), ``"polls"``
    (its poll log), ``"undo"`` (a compensation record of each track)."""
    schedule_id, _, stamp = run_id.partition("--")
    slot = datetime.strptime(stamp, "%Y%m%dT%H%MZ").replace(tzinfo=UTC)
    run = Run(run_id=run_id, schedule_id=schedule_id, slot=slot, fire_at=slot,
              created_at=slot, deadline=slot + timedelta(hours=4), status=status,
              tracks=list(tracks), finished_at=finished)
    if phase is None:
        phase = TrackPhase.RUNNING if finished is None else TrackPhase.COMPLETE
    files = {layout.run_path(run_id): codec.to_json(run)}
    for name in tracks:
        files[layout.track_path(run_id, name)] = codec.to_json(
            Track(run_id=run_id, name=name, phase=phase, spec=TrackSpec(name=name, run="true")))
    extra = set(also)
    unknown = extra - {"brief", "polls", "undo"}
    assert not unknown, f"run_files cannot add {sorted(unknown)}"
    if "brief" in extra:
        files[layout.brief_path(run_id)] = b"<html>\n"
    if "polls" in extra:
        files[layout.polls_path(run_id)] = b"{}\n"
    if "undo" in extra:
        files.update({f"{layout.run_dir(run_id)}/undo/{name}.json": b"{}\n" for name in tracks})
    return files


BENCH = Path(__file__).resolve().parent.parent / "bench"


def bench_module(name: str) -> ModuleType:
    """``bench/<name>.py`` as a module (its functions are what some tests check: the
    cost model's bounds, the figures ``estimate`` must equal). Loaded once."""
    key = f"bench_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # dataclasses look their module up while defined
    spec.loader.exec_module(module)
    return module
