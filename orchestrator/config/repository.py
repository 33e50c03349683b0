"""``orchestrator.json``: repository-wide settings, beside ``schedules/``.

Optional; a repository without it gets the defaults. It is validated as strictly
as a schedule (frozen models, unknown fields rejected, one line naming the field),
and has its own JSON Schema (``orchestrator schema --config``) for editors.

To add a setting: a field with a default and a ``description`` on
:class:`RepoConfig` (or a new section model beside :class:`Cadence`); the schema,
the error messages and every reader follow.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import OrchestratorError, UserError
from ..support import safejson
from ..support.text import error_location
from .channels import NotifySpec
from .fieldtypes import CronText, Frozen

CONFIG_FILE = "orchestrator.json"
MAX_BYTES = 64 * 1024

DAY_DIVISORS = (1, 2, 3, 4, 6, 8, 12, 24)


class Cadence(Frozen):
    """When ``tick.yml`` runs: derived from the schedules, a fixed cron, or called by an
    external clock at each slot."""

    mode: Literal["derived", "fixed", "external"] = Field(
        "derived",
        description="'derived': `orchestrator cron-sync` writes tick.yml's cron from the "
        "schedules (ticks shortly before each slot, plus a sparse safety tick); 'fixed': "
        "tick.yml runs on `fixed_cron` whatever the schedules say; 'external': a clock "
        "outside GitHub dispatches tick.yml at each slot (`orchestrator cron-sync "
        "--external` says when and how), and tick.yml keeps only the safety tick.",
    )
    lead_minutes: list[int] = Field(
        [15, 10, 5], min_length=1, max_length=6,
        description="Derived mode: a tick is scheduled this many minutes before each slot "
        "(several, because GitHub starts scheduled runs late and drops some: the first to "
        "arrive lingers until the slot). Rounded to GitHub-friendly minutes, at most 5 "
        "minutes earlier.",
    )
    safety_every_hours: int = Field(
        6,
        description="Derived and external modes: a tick at least every N hours (a "
        "divisor of 24), for retries, deadlines, runs whose fan-in job never came and "
        "an external clock's missed calls.",
    )
    linger_min_interval_hours: float = Field(
        12, ge=0, le=8784,
        description="Derived mode: a slot gets lead ticks and a tick that lingers until it "
        "when its schedule has no other slot in the N hours before it (daily, weekly: on "
        "time for about 13 runner-minutes a fire). A slot of a more frequent schedule gets "
        "one tick just after it and is fired by that tick, minutes late, for 1 runner-minute "
        "(lingering before every hourly slot would keep a runner busy all day). 0: every "
        "slot lingers.",
    )
    gather_minutes: int = Field(
        15, ge=5, le=60,
        description="Derived mode: a slot no tick lingers for gets a tick at most this many "
        "minutes after it, one tick serving the slots of several schedules in that span "
        "(never two of one schedule); 5: each slot its own tick.",
    )
    linger_schedules: dict[str, bool] = Field(
        default_factory=dict,
        description="Derived mode: per schedule id, true to linger before each of its "
        "slots, false never to, whatever its interval (overrides "
        "linger_min_interval_hours).",
    )
    clock_confirms: bool = Field(
        False,
        description="External mode: the clock is `orchestrator serve --clock-only`, which "
        "reads the state branch after each call and calls again until the slot is fired "
        "(a hosted scheduler cannot). tick.yml then keeps a weekly backstop tick instead "
        "of catch-up and safety ticks, and watchdog.yml checks weekly: the clock watches "
        "the ticks in between.",
    )
    cancel_idle_pending: bool = Field(
        True,
        description="A lingering tick on GitHub cancels, as it ends, the scheduled tick.yml "
        "run GitHub holds pending behind it when that run would find nothing to do before "
        "the next scheduled tick (it saves that run's billed minute); false: never cancel.",
    )
    reenable_workflows: bool = Field(
        False,
        description="On GitHub, a tick enables tick.yml or watchdog.yml again once GitHub "
        "has disabled it for 60 days without activity in a public repository. Off by "
        "default: the tick warns from 45 days instead, and an active workflow is never "
        "enabled (GitHub disabled a project for doing that to bypass the rule).",
    )
    max_lateness_minutes: float | None = Field(
        None, gt=0, le=7 * 24 * 60,
        description="The most lateness of GitHub's cron a schedule tolerates, unless it "
        "says its own max_lateness_minutes (the event cron_late). Unset: none.",
    )
    fixed_cron: list[CronText] = Field(
        ["7,22,37,52 * * * *"], min_length=1, max_length=20,
        description="Fixed mode: the cron lines (UTC) of tick.yml.",
    )

    @field_validator("lead_minutes")
    @classmethod
    def _leads(cls, value: list[int]) -> list[int]:
        if any(not 1 <= m <= 55 for m in value):
            raise ValueError("each lead is 1 to 55 minutes")
        if len(set(value)) != len(value):
            raise ValueError("leads must differ")
        return sorted(value, reverse=True)

    @model_validator(mode="after")
    def _confirms_only_externally(self) -> Cadence:
        if self.clock_confirms and self.mode != "external":
            raise ValueError("clock_confirms needs \"mode\": \"external\"")
        return self

    @field_validator("safety_every_hours")
    @classmethod
    def _divides_the_day(cls, value: int) -> int:
        if value not in DAY_DIVISORS:
            raise ValueError(f"must divide 24: one of {', '.join(map(str, DAY_DIVISORS))}")
        return value


class RepoConfig(Frozen):
    """The repository-wide settings file, ``orchestrator.json``."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", populate_by_name=True,
                              json_schema_extra={"additionalProperties": False})

    schema_ref: str | None = Field(
        None, alias="$schema", description="Path or URL of the JSON Schema, for editors.")
    cadence: Cadence = Field(default_factory=Cadence,
                             description="When tick.yml runs (see the docs: 'The cadence').")
    max_concurrent_tracks: int | None = Field(
        None, ge=1, le=100_000,
        description="At most this many tracks in flight (dispatched or running) across all "
        "runs of all schedules; the others wait, oldest run first. Unset: no cap.")
    max_dispatches_per_tick: int | None = Field(
        None, ge=1, le=100_000,
        description="At most this many tracks dispatched by one tick; the others wait for "
        "the next tick. Unset: no cap.")
    keep_finished_runs_days: int | None = Field(
        30, ge=1, le=36_500,
        description="Retention: the tick archives runs that finished more than N days ago "
        "(about once a day, after its own work), as `orchestrator compact --keep-days N` "
        "does: off the state branch, kept under the tag orchestrator-archive/<time>. Open "
        "runs and runs with a dead letter waiting are kept. null: keep every run (no "
        "automatic archiving).")
    notify: NotifySpec = Field(
        default_factory=NotifySpec,
        description="Where events worth a person's attention go: a GitHub issue per failing "
        "schedule, webhooks (docs/how-to/notifications.md).")


def defaults() -> RepoConfig:
    """The settings of a repository without ``orchestrator.json``.

    Built without validation (defaults are not validated either way), so a tick in
    such a repository never builds the validators of the whole settings tree. The
    fields whose default is a builtin factory (``dict``, ``list``) are given: pydantic
    would read that factory's signature from its text, compiling the tokenizer's
    patterns (about 14 M instructions) on every tick.
    """
    return RepoConfig.model_construct(
        cadence=Cadence.model_construct(linger_schedules={}),
        notify=NotifySpec.model_construct(webhooks=[]))


def read_config_bytes(root: Path) -> bytes:
    """The bytes of ``orchestrator.json`` at ``root``, read as hostile input: a regular
    file of at most :data:`MAX_BYTES` (a FIFO, a device or a symlink out of the
    repository is refused, not waited on). :class:`FileNotFoundError` when there is
    none, :class:`UserError` naming the file otherwise."""
    try:
        return safejson.read_file(root / CONFIG_FILE, max_bytes=MAX_BYTES, root=root)
    except safejson.UnsafeJSON as exc:
        raise UserError(f"{CONFIG_FILE}: {exc}") from None


def load_repo_config(root: Path) -> RepoConfig:
    """The settings of the repository at ``root``; defaults when it has no file.

    Raises :class:`UserError` naming the file and field of the first problem."""
    try:
        raw = read_config_bytes(root)
    except FileNotFoundError:
        return defaults()
    return parse_repo_config(raw)


class ConfigError(UserError):
    """A problem of ``orchestrator.json``; ``section`` is the top-level setting it lies
    in, when it lies inside one (a bad webhook name is in ``notify``)."""

    def __init__(self, message: str, section: str | None = None) -> None:
        super().__init__(message)
        self.section = section


def parse_repo_config(raw: bytes) -> RepoConfig:
    """The settings in the bytes ``raw`` of ``orchestrator.json``, or :class:`UserError`
    naming the file and the field of the first problem."""
    try:
        text = raw.decode("utf-8-sig")
        json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{CONFIG_FILE}: not a JSON file: {exc}") from None
    try:
        return RepoConfig.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err.get("loc", ()))
        where = error_location(loc) if loc else "(top level)"
        problem = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            problem = "unknown field"
        raise ConfigError(f"{CONFIG_FILE}: {where}: {problem}",
                          str(loc[0]) if len(loc) > 1 else None) from None


def _without_section(raw: bytes, section: str | None) -> RepoConfig | None:
    """The settings of ``raw`` with ``section`` left at its default: one bad channel
    must not drop the caps, the retention and every other channel with it."""
    try:
        data = json.loads(raw.decode("utf-8-sig"))
        if section is None or not isinstance(data, dict) or section not in data:
            return None
        del data[section]
        return RepoConfig.model_validate(data)
    except (ValueError, ValidationError):
        return None


@dataclass(frozen=True)
class RepoSettings:
    """``orchestrator.json`` read once, for commands that must go on when it is invalid
    (the tick, ``status``, ``serve``). Each setting's fallback for an invalid file is
    written beside it; ``validate`` is the command that fails on the file."""

    config: RepoConfig | None
    """The settings; ``None`` when the file is invalid (then :attr:`problem` says why)."""
    problem: str | None
    """One line naming the file and the field at fault, or ``None``."""
    key: bytes
    """What the memo of quiet schedules is keyed by: the file's bytes, or a marker."""
    dropped: str | None = None
    """The one top-level setting left at its default because :attr:`problem` lies in
    it; the others apply (``None`` with a problem: none applies)."""

    @classmethod
    def read(cls, root: Path) -> RepoSettings:
        try:
            raw = read_config_bytes(root)
        except FileNotFoundError:
            return cls(defaults(), None, b"(none)")
        except OrchestratorError as exc:
            return cls(None, exc.message, b"(unreadable)")
        try:
            return cls(parse_repo_config(raw), None, raw)
        except ConfigError as exc:
            rest = _without_section(raw, exc.section)
            return cls(rest, exc.message, raw, exc.section if rest is not None else None)

    @property
    def cadence(self) -> Cadence:
        """Invalid file: the default cadence (the tick must not stop over it)."""
        return self.config.cadence if self.config else Cadence()

    @property
    def max_concurrent_tracks(self) -> int | None:
        """Invalid file: no cap (one bad file must not stop every schedule)."""
        return self.config.max_concurrent_tracks if self.config else None

    @property
    def max_dispatches_per_tick(self) -> int | None:
        """Invalid file: no cap, as for :attr:`max_concurrent_tracks`."""
        return self.config.max_dispatches_per_tick if self.config else None

    @property
    def keep_finished_runs_days(self) -> int | None:
        """Invalid file: ``None``, keep every run. Archiving on defaults the user may have
        meant to change would lose nothing, but surprise them."""
        return self.config.keep_finished_runs_days if self.config else None

    @property
    def notify(self) -> NotifySpec:
        """Invalid file: no channel. Its problem is reported by every tick instead."""
        return self.config.notify if self.config else NotifySpec()

    @property
    def caps_problem(self) -> str | None:
        """The line the tick reports for an invalid file, beside invalid schedules."""
        if not self.problem:
            return None
        if self.dropped:
            return f"{self.problem}; '{self.dropped}' is not applied, the other settings are"
        return f"{self.problem}; none of its settings is applied (its caps neither)"


def repo_config_json_schema() -> dict[str, Any]:
    schema = RepoConfig.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://orchestrator.invalid/orchestrator.schema.json",
        "title": "Orchestrator repository settings",
        **{k: v for k, v in schema.items() if k != "title"},
    }
