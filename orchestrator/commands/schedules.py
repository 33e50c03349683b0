"""``orchestrator schedules``: list, inspect and edit schedule files in the working tree.

Edits touch only ``schedules/<id>.json`` in the checkout; the user commits them and
opens a pull request, where ``validate`` previews the change. Writes are atomic and
stably formatted, so ``enable``/``disable`` change exactly one line.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from ..cadence.wake import settled_after
from ..config import edit
from ..config.fieldtypes import check_id
from ..config.files import (
    SCHEMA_FILE,
    SCHEMA_REF,
    describe_error,
    display_path,
    dumps,
    load_all,
    load_schedule,
    schema_text,
    write_schedule,
)
from ..config.models import CatchupPolicy, OverlapPolicy, Schedule, ScheduleSpec
from ..config.policies import Pause
from ..config.preview import Chain, slot_dict, upcoming
from ..config.triggers import for_spec
from ..cron import DstFold, DstGap, SlotInfo, dst_note
from ..errors import NotFound, OrchestratorError, ScheduleError, UserError
from ..state import model as state_model
from ..state.records import Cursor, Run
from ..support.times import iso, parse_now
from .context import Config, pass_config
from .resume import cursors, pause_text

# --------------------------------------------------------------------------- helpers


class InstantType(click.ParamType):
    """An ISO datetime with a UTC offset (``Z`` allowed), as an aware UTC datetime."""

    name = "ISO"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            return parse_now(str(value), param.opts[0] if param else "--from")
        except UserError as exc:  # a bad option value is a usage error (exit 2)
            self.fail(exc.message.split(": ", 1)[-1], param, ctx)


INSTANT = InstantType()


fmt_utc = iso
"""``2026-11-01T05:30:00Z``."""


def fmt_local(moment: datetime) -> str:
    """``Sun 2026-11-01 01:30 EDT`` (the zone abbreviation tells the two 01:30s apart)."""
    return moment.strftime("%a %Y-%m-%d %H:%M %Z")


def schedule_path(cfg: Config, schedule_id: str) -> Path:
    """``schedules/<id>.json``; the id check is also the guard against path traversal."""
    return cfg.schedules_dir / f"{check_id(schedule_id, 'schedule id')}.json"


def _existing(cfg: Config, schedule_id: str) -> Path:
    path = schedule_path(cfg, schedule_id)
    if not path.is_file():
        raise NotFound(f"no schedule {schedule_id!r} ({display_path(path, cfg.repo)} "
                       "does not exist)")
    return path


def _load(cfg: Config, schedule_id: str) -> Schedule:
    return load_schedule(_existing(cfg, schedule_id), cfg.repo)


def _now(start: datetime | None) -> datetime:
    return start or datetime.now(UTC)


def _from(cursor: Cursor | None, now: datetime, start: datetime | None) -> datetime:
    """Where the next runs of a schedule start: ``--from`` as given, else after what
    its cursor settled (the next tick fires nothing before that)."""
    return start if start is not None else settled_after(cursor, now)


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


from_option = click.option(
    "--from", "start", type=INSTANT, default=None, metavar="ISO",
    help="Compute from this instant (with offset, e.g. 2026-11-01T00:00:00Z) instead of now.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.group("schedules")
def command() -> None:
    """List, inspect and edit schedules/*.json in the working tree.

    Edits change files only: commit them and open a pull request.
    """


# --------------------------------------------------------------------------- reading


@command.command("list")
@json_option
@from_option
@pass_config
def list_(cfg: Config, as_json: bool, start: datetime | None) -> int:
    """Every schedule with its next run. Invalid files are reported on stderr."""
    now = _now(start)
    loaded = load_all(cfg.schedules_dir)
    for error in loaded.errors:
        click.echo(f"orchestrator: {error.message}", err=True)
    standing = cursors(cfg) if loaded.schedules else {}
    listed = [(schedule, _next_run(schedule, standing.get(schedule.id), now, start),
               _pause_of(standing.get(schedule.id))) for schedule in loaded.schedules]
    if as_json:
        _echo_json({"schedules": [_list_row(*entry) for entry in listed], "errors": [
            {"file": e.file, "field": e.field, "problem": e.problem} for e in loaded.errors]})
    elif not listed:
        click.echo(f"no schedules in {display_path(cfg.schedules_dir, cfg.repo)}/")
    else:
        width = max(len(s.id) for s in loaded.schedules)
        click.echo("\n".join(_list_line(*entry, width) for entry in listed))
    return 0


def _pause_of(cursor: Cursor | None) -> Pause | None:
    return cursor.paused if cursor is not None else None


def _next_run(schedule: Schedule, cursor: Cursor | None, now: datetime,
              start: datetime | None) -> list[SlotInfo]:
    """The schedule's next run, as ``list`` shows it."""
    if not schedule.spec.enabled:
        return []  # a disabled schedule never fires: a "next run" would be a promise it breaks
    return upcoming(schedule, _from(cursor, now, start), 1).slots


def _list_row(schedule: Schedule, nxt: list[SlotInfo], pause: Pause | None
              ) -> dict[str, Any]:
    spec = schedule.spec
    return {
        "id": schedule.id,
        "file": schedule.path,
        "enabled": spec.enabled,
        "when": for_spec(spec).describe(),
        "next": slot_dict(nxt[0]) if nxt else None,
        "tracks": [t.name for t in spec.tracks],
        "paused": pause.model_dump(mode="json") if pause is not None else None,
    }


def _list_line(schedule: Schedule, nxt: list[SlotInfo], pause: Pause | None,
               width: int) -> str:
    spec = schedule.spec
    state = ("paused  " if pause is not None else
             "enabled " if spec.enabled else "disabled")
    first = (fmt_local(nxt[0].local) if nxt else
             "no upcoming run" if spec.enabled else "none (disabled)")
    count = len(spec.tracks)
    return (f"{schedule.id:<{width}}  {state}  next {first:<26}  "
            f"{for_spec(spec).describe()} [{count} track{'s' if count != 1 else ''}]")


@command.command("show")
@click.argument("schedule_id", metavar="ID")
@click.option("-n", "n", type=click.IntRange(0, 1000), default=5, show_default=True,
              help="Upcoming runs to show.")
@json_option
@from_option
@pass_config
def show(cfg: Config, schedule_id: str, n: int, as_json: bool, start: datetime | None) -> int:
    """One schedule: its settings, in words, and its next runs."""
    schedule = _load(cfg, schedule_id)
    cursor = cursors(cfg).get(schedule.id)
    nxt = upcoming(schedule, _from(cursor, _now(start), start), n).slots
    pause = _pause_of(cursor)
    recent, chain = recent_runs(cfg, schedule.id), Chain.of(schedule, cfg.schedules_dir)
    if as_json:
        _echo_json({**_show_json(schedule, nxt, pause, recent), **chain.json})
        return 0
    click.echo("\n".join([*_settings_lines(schedule, pause), *chain.lines,
                          *_track_lines(schedule.spec), *_dated_lines(nxt, recent)]))
    return 0


def _show_json(schedule: Schedule, nxt: list[SlotInfo], pause: Pause | None,
               recent: list[Run]) -> dict[str, Any]:
    spec = schedule.spec
    return {
        "id": schedule.id,
        "file": schedule.path,
        "when": for_spec(spec).describe(),
        "spec": spec.model_dump(mode="json", by_alias=True),
        "next": [slot_dict(s) for s in nxt],
        "paused": pause.model_dump(mode="json") if pause else None,
        "recent_runs": [{"run_id": r.run_id, "origin": r.origin, "status": r.status.value,
                         "acts": r.acts()} for r in recent],
    }


def _settings_lines(schedule: Schedule, pause: Pause | None) -> list[str]:
    """What ``show`` says of the schedule's settings, in words."""
    spec = schedule.spec
    lines = [f"{schedule.id}  ({schedule.path})"]
    if spec.description:
        lines.append(f"  {spec.description}")
    lines.append(f"  when:      {for_spec(spec).describe()}"
                 + (f"   [{spec.cron}]" if spec.cron else ""))
    lines.append(f"  enabled:   {'yes' if spec.enabled else 'no (never fires)'}")
    if pause:
        lines.append(f"  PAUSED:    {pause_text(pause)}; fires nothing until "
                     f"`orchestrator schedules resume {schedule.id} --reason ...`")
    return [*lines, *policy_lines(spec),
            f"  overlap:   {spec.overlap.value};  catchup: {spec.catchup.value} "
            f"(window {spec.catchup_window_minutes} min);  deadline: "
            f"{spec.deadline_minutes:g} min",
            f"  dst:       gap {spec.dst.gap.value}, fold {spec.dst.fold.value};  "
            f"jitter: {spec.jitter_seconds} s;  max runs/day: "
            f"{spec.max_runs_per_day or 'no limit'};  workflow: {spec.workflow}"]


def _track_lines(spec: ScheduleSpec) -> list[str]:
    lines = [f"  tracks:    {len(spec.tracks)}"]
    for track in spec.tracks:
        work = track.run if track.run is not None else json.dumps(track.inputs)
        lines.append(f"    {track.name}: {work}  (timeout {track.timeout_minutes:g} min, "
                     f"{track.max_attempts} attempt{'s' if track.max_attempts != 1 else ''})")
    return lines


def _dated_lines(nxt: list[SlotInfo], recent: list[Run]) -> list[str]:
    """The schedule's next runs and its recent ones, each list labelled on its first."""
    lines = []
    for i, slot in enumerate(nxt):
        label = "next:" if i == 0 else ""
        lines.append(f"  {label:<11}{fmt_local(slot.local):<26}  {fmt_utc(slot.at)}")
    for i, run in enumerate(recent):
        label = "recent:" if i == 0 else ""
        acts = run.acts()
        lines.append(f"  {label:<11}{run.run_id}  {run.origin}  {run.status.value}"
                     + (f"  ({acts[0]})" if acts else ""))
    return lines


RECENT_RUNS = 10


def recent_runs(cfg: Config, schedule_id: str) -> list[Run]:
    """The schedule's newest runs on the state branch, cron, manual and backfilled alike
    (none when the branch cannot be read: ``show`` still describes the file)."""
    try:
        snap = cfg.store().read()
        state = state_model.load(snap.files)
    except OrchestratorError:
        return []
    runs = [r for r in state.runs.values() if r.schedule_id == schedule_id]
    return sorted(runs, key=lambda r: (r.created_at, r.run_id), reverse=True)[:RECENT_RUNS]


@command.command("next")
@click.argument("schedule_id", metavar="ID")
@click.option("-n", "n", type=click.IntRange(1, 10000), default=5, show_default=True,
              help="How many runs.")
@from_option
@json_option
@pass_config
def next_(cfg: Config, schedule_id: str, n: int, start: datetime | None, as_json: bool) -> int:
    """The next N runs, in UTC and in the schedule's time zone."""
    schedule = _load(cfg, schedule_id)
    found = upcoming(schedule, _now(start), n)
    nxt = found.slots
    if not schedule.spec.enabled:
        click.echo(f"orchestrator: note: {schedule.id} is disabled; these runs happen only "
                   "once it is enabled", err=True)
    if as_json:
        _echo_json([slot_dict(s) for s in nxt])
    else:
        if not nxt:
            click.echo("no upcoming run")
        for slot in nxt:
            note = dst_note(slot, schedule.spec.timezone)
            click.echo(f"{fmt_utc(slot.at)}  {fmt_local(slot.local)}"
                       + (f"  ({note})" if note else ""))
    if found.stopped and as_json:  # the JSON on stdout stays a plain list
        click.echo(f"orchestrator: note: {found.stopped}", err=True)
    elif found.stopped:
        click.echo(f"fewer runs than asked: {found.stopped}")
    return 0


# --------------------------------------------------------------------------- editing


@command.command("add")
@click.argument("schedule_id", metavar="ID")
@click.option("--cron", "cron_expr", metavar="EXPR", help="Five-field cron expression.")
@click.option("--at", "at", metavar="ISO",
              help="One-shot local date and time, e.g. 2026-12-24T18:00.")
@click.option("--every", type=click.Choice(edit.EVERY), help="A common interval.")
@click.option("--weekly", is_flag=True, help="Once a week, on --on-day at --time.")
@click.option("--on-day", "on_days", type=click.IntRange(0, 6), multiple=True,
              help="Day of week for --weekly, 0 = Sunday (repeatable).")
@click.option("--time", "time", metavar="HH:MM",
              help="Local time of day for --every day|weekday and --weekly.")
@click.option("--minute", type=click.IntRange(0, 59), default=None,
              help="Minute of the hour for --every hour (default 0).")
@click.option("--timezone", default="UTC", show_default=True, help="IANA time zone.")
@click.option("--track", "tracks", multiple=True, metavar="NAME=COMMAND",
              help="A track and its shell command (repeatable; at least one).")
@click.option("--description", default=None)
@click.option("--disabled", is_flag=True, help="Write it disabled.")
@click.option("--workflow", default=None, help="Track workflow file name (default track.yml).")
@click.option("--overlap", type=click.Choice([p.value for p in OverlapPolicy]))
@click.option("--catchup", type=click.Choice([p.value for p in CatchupPolicy]))
@click.option("--catchup-window-minutes", type=int)
@click.option("--deadline-minutes", type=float)
@click.option("--max-runs-per-day", type=int)
@click.option("--jitter-seconds", type=int)
@click.option("--dst-gap", type=click.Choice([p.value for p in DstGap]))
@click.option("--dst-fold", type=click.Choice([p.value for p in DstFold]))
@click.option("--timeout-minutes", type=float, help="Per track.")
@click.option("--max-attempts", type=int, help="Per track.")
@click.option("--retry-backoff-seconds", type=int, help="Per track.")
@click.option("--needs", "needs", multiple=True, metavar="TRACK=A,B",
              help="Tracks TRACK waits for (repeatable).")
@click.option("--input", "inputs", multiple=True, metavar="TRACK:KEY=VALUE",
              help="An input of TRACK for its CI workflow (repeatable).")
@click.option("--track-timeout", "track_timeouts", multiple=True, metavar="TRACK=MINUTES",
              help="TRACK's own timeout, over --timeout-minutes (repeatable).")
@pass_config
def add(cfg: Config, schedule_id: str, cron_expr: str | None, at: str | None,
        every: str | None, weekly: bool, on_days: tuple[int, ...], time: str | None,
        minute: int, timezone: str, tracks: tuple[str, ...], description: str | None,
        disabled: bool, workflow: str | None, overlap: str | None, catchup: str | None,
        catchup_window_minutes: int | None, deadline_minutes: float | None,
        max_runs_per_day: int | None, jitter_seconds: int | None, dst_gap: str | None,
        dst_fold: str | None, timeout_minutes: float | None, max_attempts: int | None,
        retry_backoff_seconds: int | None, needs: tuple[str, ...], inputs: tuple[str, ...],
        track_timeouts: tuple[str, ...]) -> int:
    """Write a new schedules/ID.json (validated before it is written). A flag that does
    not apply to the chosen form (--time with --every hour) is refused."""
    path = schedule_path(cfg, schedule_id)
    if path.exists():
        raise UserError(f"{display_path(path, cfg.repo)} already exists; edit it, or "
                        "remove it first")
    if sum([cron_expr is not None, at is not None, every is not None, weekly]) != 1:
        raise click.UsageError("give exactly one of --cron, --at, --every and --weekly")
    if not tracks:
        raise click.UsageError("give at least one --track NAME=COMMAND")
    per_track = {"timeout_minutes": timeout_minutes, "max_attempts": max_attempts,
                 "retry_backoff_seconds": retry_backoff_seconds}
    try:
        data: dict[str, Any] = {
            "$schema": SCHEMA_REF, **_given(description=description),
            **_when(cron_expr, at, every, weekly, time, minute, on_days),
            "timezone": timezone, "enabled": not disabled,
            "tracks": edit.tracks_field(tracks, per_track, needs, inputs, track_timeouts)}
    except edit.FlagError as exc:
        raise click.UsageError(str(exc)) from None
    data.update(_given(workflow=workflow, overlap=overlap, catchup=catchup,
                       catchup_window_minutes=catchup_window_minutes,
                       deadline_minutes=deadline_minutes, max_runs_per_day=max_runs_per_day,
                       jitter_seconds=jitter_seconds))
    if dst := _given(gap=dst_gap, fold=dst_fold):
        data["dst"] = dst
    spec = _write_new(cfg, path, data)
    click.echo(f"wrote {display_path(path, cfg.repo)}: {for_spec(spec).describe()}"
               + ("" if spec.enabled else " (disabled)"))
    click.echo("commit it and open a pull request; `orchestrator validate --preview 5` "
               "shows what will happen")
    return 0


def _given(**values: Any) -> dict[str, Any]:
    """The fields a flag set, in the order given: a flag left out keeps the default."""
    return {key: value for key, value in values.items() if value is not None}


def _when(cron_expr: str | None, at: str | None, every: str | None, weekly: bool,
          time: str | None, minute: int | None, on_days: tuple[int, ...]
          ) -> dict[str, Any]:
    """The ``at`` or ``cron`` field of a new schedule (:class:`edit.FlagError` when a
    flag does not apply to the form chosen)."""
    if at is not None or cron_expr is not None:
        edit.refuse_what_does_not_apply(every, weekly, time, minute, on_days)
    if at is not None:
        return {"at": at}
    return {"cron": cron_expr if cron_expr is not None else edit.build_cron(
        every, weekly, time, minute, on_days)}


def _write_new(cfg: Config, path: Path, data: dict[str, Any]) -> ScheduleSpec:
    """Write ``data`` to ``path`` once it validates, with the schema beside it."""
    text = dumps(data)
    try:
        spec = ScheduleSpec.model_validate_json(text)
    except ValidationError as exc:
        raise ScheduleError(display_path(path, cfg.repo),
                            *describe_error(exc.errors()[0])) from None
    write_schedule(path, text)
    schema = cfg.schedules_dir / SCHEMA_FILE
    if not schema.exists():
        write_schedule(schema, schema_text())
    return spec


def _toggle(cfg: Config, schedule_id: str, enabled: bool) -> int:
    schedule = _load(cfg, schedule_id)  # refuses to edit an invalid file
    path = _existing(cfg, schedule_id)
    verb = "enabled" if enabled else "disabled"
    if edit.set_enabled(path, enabled):
        click.echo(f"{verb} {schedule.path}; commit it and open a pull request")
    else:
        click.echo(f"{schedule.path} is already {verb}")
    return 0


@command.command("enable")
@click.argument("schedule_id", metavar="ID")
@pass_config
def enable(cfg: Config, schedule_id: str) -> int:
    """Set "enabled": true in schedules/ID.json."""
    return _toggle(cfg, schedule_id, True)


@command.command("disable")
@click.argument("schedule_id", metavar="ID")
@pass_config
def disable(cfg: Config, schedule_id: str) -> int:
    """Set "enabled": false in schedules/ID.json (it stops firing once merged)."""
    return _toggle(cfg, schedule_id, False)


@command.command("remove")
@click.argument("schedule_id", metavar="ID")
@pass_config
def remove(cfg: Config, schedule_id: str) -> int:
    """Delete schedules/ID.json (its state and past runs stay on the state branch)."""
    path = _existing(cfg, schedule_id)
    path.unlink()
    click.echo(f"removed {display_path(path, cfg.repo)}; commit it and open a pull request")
    return 0


def policy_lines(spec: ScheduleSpec) -> list[str]:
    """The opt-in policies a schedule sets, in words (none set: no line)."""
    words = []
    if spec.max_parallel is not None:
        words.append(f"at most {spec.max_parallel} track(s) of a run in flight")
    if spec.pause_after_failures is not None:
        words.append(f"pause after {spec.pause_after_failures} failed run(s) in a row")
    if spec.on_failure.value != "continue":
        words.append(f"on failure: {spec.on_failure.value}")
    if spec.runs_on or any(t.runs_on for t in spec.tracks):
        where = f"runs on {', then '.join(spec.runs_on)}; " if spec.runs_on else ""
        words.append(f"{where}a label is degraded after {spec.queue_timeout_minutes:g} "
                     f"min queued or a failed start, probed after "
                     f"{spec.runner_cooldown_minutes:g} min")
    lines = [f"  policies:  {'; '.join(words)}"] if words else []
    for track in spec.tracks:
        if track.compensate is not None:
            lines.append(f"    {track.name}: undone by {track.compensate.run}")
        if track.runs_on:
            lines.append(f"    {track.name}: runs on {', then '.join(track.runs_on)}")
    return lines


def _add_runs() -> None:
    # `schedules runs ID` and `schedules resume ID` read the state branch; their code
    # lives with `runs` and in `resume`.
    from .resume import schedule_pause, schedule_resume
    from .runs import schedule_runs

    command.add_command(schedule_runs)
    command.add_command(schedule_resume)
    command.add_command(schedule_pause)
    command.add_command(schedule_resume, "unpause")  # the same command: they cannot drift


_add_runs()
