"""What one tick reads before it decides, read once: :class:`TickInputs`.

- The state branch is read once (one snapshot); the schedules, ``orchestrator.json``
  and the shared calendars once each, with the fallbacks of an invalid
  ``orchestrator.json`` side by side in :class:`~orchestrator.config.repository.RepoSettings`.
- The calendars reach the planner inside the schedules that name them; their bytes
  are part of the memo's key, so an edited calendar is planned at once.
- A schedule whose cursor is quarantined is held (never planned): firing it would
  overwrite a record a person has to look at.
- After a lost compare-and-swap, :meth:`TickInputs.on` gives the inputs for the new
  tip; the schedules are parsed again only when the memo vouched for some of them on
  the tip it lost to.
- :meth:`TickInputs.load` reads the checkout (the schedule files, ``orchestrator.json``,
  git's listing for the memo); :meth:`TickInputs.of` takes them as given, for a tick
  whose schedules and settings are already in memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.calendars import Calendars
from ..config.repository import RepoSettings, defaults
from ..state import index as state_index
from . import memo as quiet

if TYPE_CHECKING:
    from ..config.models import Schedule
    from ..planner import Caps
    from ..state.breaker import Breaker
    from ..state.model import State
    from ..store import Snapshot


@dataclass(frozen=True)
class TickInputs:
    """Everything a tick plans on, for one tip of the state branch."""

    snapshot: Snapshot
    loaded: state_index.Loaded
    """The state of :attr:`snapshot`, through the index of open runs."""
    schedules: tuple[Schedule, ...]
    """The schedules to plan: parsed, valid, not held, not vouched for by the memo."""
    invalid: tuple[str, ...]
    """One line per invalid schedule file, and one for an invalid ``orchestrator.json``."""
    held: frozenset[str]
    settings: RepoSettings
    memo: quiet.Memo | None
    """The memo of quiet schedules (``None`` for a tick scoped to one run)."""
    calendars: Calendars | None = None
    """The calendar folder as this tick read it (``None``: no checkout was read)."""

    @classmethod
    def load(cls, snapshot: Snapshot, repo: Path, now: datetime,
             scoped: bool = False) -> TickInputs:
        settings = RepoSettings.read(repo)
        calendars = Calendars(repo)
        memo = None if scoped else quiet.Memo.read(snapshot.files, repo, now, settings.key,
                                                   calendars)
        parsed, loaded = quiet.select(memo, repo / "schedules", snapshot.files,
                                      calendars=calendars)
        held = frozenset(loaded.state.held_schedules())
        invalid = [e.message for e in parsed.errors]
        if settings.caps_problem:  # reported like an invalid schedule; the rest is served
            invalid.append(settings.caps_problem)
        return cls(snapshot, loaded, _planned(parsed.schedules, held), tuple(invalid), held,
                   settings, memo, calendars)

    @classmethod
    def of(cls, snapshot: Snapshot, schedules: Iterable[Schedule],
           settings: RepoSettings | None = None, *,
           invalid: Iterable[str] = ()) -> TickInputs:
        """The inputs for ``snapshot`` with ``schedules`` already parsed, without reading
        a checkout: no schedule file, no ``orchestrator.json`` (``settings``, default:
        the defaults of an absent file), no memo of quiet schedules. ``invalid`` are
        the lines of schedule files that did not parse. Held schedules are left out,
        as :meth:`load` leaves them out."""
        if settings is None:
            settings = RepoSettings(defaults(), None, b"(none)")
        loaded = state_index.load(snapshot.files)
        held = frozenset(loaded.state.held_schedules())
        lines = list(invalid)
        if settings.caps_problem:
            lines.append(settings.caps_problem)
        return cls(snapshot, loaded, _planned(list(schedules), held), tuple(lines), held,
                   settings, None)

    def on(self, snapshot: Snapshot, repo: Path) -> TickInputs:
        """The inputs for ``snapshot``, the tip a lost compare-and-swap ended on."""
        if snapshot.tip == self.snapshot.tip:
            return self
        schedules = self.schedules
        if self.memo is not None and self.memo.left_out:
            # the memo was checked against the tip it lost to: plan everything
            parsed, _ = quiet.select(self.memo, repo / "schedules", snapshot.files,
                                     everything=True, calendars=self.calendars)
            schedules = _planned(parsed.schedules, self.held)
        return replace(self, snapshot=snapshot, loaded=state_index.load(snapshot.files),
                       schedules=schedules)

    @property
    def state(self) -> State:
        return self.loaded.state

    @property
    def caps(self) -> Caps:
        from ..planner import Caps

        return Caps(self.settings.max_concurrent_tracks,
                    self.settings.max_dispatches_per_tick)

    def breaker(self, executor: str) -> Breaker | None:
        """The executor's circuit breaker as the branch holds it."""
        return self.state.health.get(executor)


def _planned(schedules: list[Schedule], held: frozenset[str]) -> tuple[Schedule, ...]:
    return tuple(s for s in schedules if s.id not in held)
