"""The files of the tick's mark commit, assembled from parts: :data:`CONTRIBUTORS`.

- A contributor is a plain function of the :class:`Draft` (the inputs of one tip,
  the decision on it, the tick's settings) and the files built so far; it returns
  the files with its part added (:class:`Part`), and may say what it did.
- They run in the order of :data:`CONTRIBUTORS`, each on what the ones before it
  wrote; the tuple says why each comes where it does.
- The compare-and-swap retry decides again on the new tip and assembles again
  (:meth:`.shell.Tick.mark`): a contributor keeps nothing between calls.
- A new part of the commit is one function here and one entry in the tuple.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from .. import store
from ..state import index as state_index
from ..state import layout
from . import memowrite, notifying, polllogs
from .consolidate import Consolidated, board_state, finish_runs, paused_schedules
from .deciding import split

if TYPE_CHECKING:
    from ..brief.context import BriefContext
    from ..brief.dashboard import Dashboard
    from ..config.models import Schedule
    from ..planner import Decision
    from ..state.model import State
    from ..state.records import Run
    from .inputs import TickInputs
    from .settings import TickSettings

Files = dict[str, "bytes | None"]
"""Path -> the bytes the commit writes there (``None``: the file goes)."""

Tails = Callable[["BriefContext"], "BriefContext"]
"""Adds the tracks' stdout tails to a brief's context (:mod:`orchestrator.brief.tails`)."""


@dataclass(frozen=True)
class Draft:
    """What every contributor reads: one decision on one tip, and how the tick is set."""

    inputs: TickInputs
    decision: Decision
    settings: TickSettings
    now: datetime
    repo: Path
    """The checkout (its ``schedules/`` for the dashboard)."""
    notifications: notifying.Notifications
    tails: Tails | None = None

    @property
    def base(self) -> Mapping[str, bytes]:
        """The files of the tip decided on."""
        return self.inputs.snapshot.files

    @cached_property
    def before(self) -> State:
        """The state decided on (a scoped tick's: its run only)."""
        return split(self.inputs, self.settings.scope)[0]

    @cached_property
    def others(self) -> Mapping[str, Run]:
        """The open runs a scoped tick left out of its state."""
        return split(self.inputs, self.settings.scope)[1]

    @cached_property
    def stale_after(self) -> timedelta:
        """How old a last tick may be before it is stale: what ``status`` and the
        watchdog judge this repository by (its tick.yml's cadence), so a brief and the
        dashboard say the same. Read only when one is rendered."""
        from ..runs.status import staleness_for

        return staleness_for(self.repo, self.now)

    def brief_context(self, ctx: BriefContext) -> BriefContext:
        """A brief's context judged by :attr:`stale_after`, with the tracks' tails."""
        ctx = replace(ctx, stale_after=self.stale_after)
        return self.tails(ctx) if self.tails is not None else ctx


@dataclass(frozen=True)
class Part:
    """The files after one contributor, and what it has to report, if anything."""

    files: Files
    consolidated: Consolidated | None = None
    notify: notifying.Planned | None = None


@dataclass(frozen=True)
class Planned:
    """One planning pass over one tip: the decision and the files it changes."""

    decision: Decision
    changes: dict[str, bytes | None]
    consolidated: Consolidated
    parked: dict[str, str]
    """Dead letter key -> reason, for each track this change parks."""
    notify: notifying.Planned = notifying.OFF


Contributor = Callable[[Draft, Files], Part]


def records(draft: Draft, files: Files) -> Part:
    """The decision's records: runs, tracks, cursors, dead letters, queues."""
    return Part({**files, **draft.decision.state.dump(base=draft.before)})


def briefs(draft: Draft, files: Files) -> Part:
    """Each consolidated run's brief, and the index with its dashboard when anything
    it lists moved (:mod:`.consolidate`); a run is finished in the decision here."""
    decision, before, files = draft.decision, draft.before, dict(files)
    inputs = draft.inputs
    done = finish_runs(
        decision, files, draft.base, {s.id: s.spec for s in inputs.schedules},
        draft.others,
        redraw_index=paused_schedules(decision.state) != paused_schedules(before),
        now=draft.now, executor=draft.settings.executor_name,
        templates=draft.settings.templates, tails=draft.brief_context,
        board=lambda after, rest: board(draft, after, rest))
    return Part(files, consolidated=done)


def board(draft: Draft, after: State, others: Mapping[str, Run]) -> Dashboard:
    """The index's dashboard on the state this tick commits. Every schedule is on
    it, so the files the memo vouched for are parsed here: only when the index is
    rendered (a run started or ended, a pause moved), never on a quiet tick."""
    from ..brief.dashboard import from_files
    from ..cadence.pending import tick_crons

    inputs = draft.inputs
    schedules, invalid = _every_schedule(draft)
    state = board_state(inputs.state, after, others, inputs.snapshot.files,
                        [s.id for s in schedules])
    return from_files(inputs.snapshot.files, schedules, invalid, draft.now, state=state,
                      last_tick=draft.now, max_staleness=draft.stale_after,
                      tick_lines=tick_crons(draft.repo),
                      max_lateness_minutes=inputs.settings.cadence.max_lateness_minutes)


def _every_schedule(draft: Draft) -> tuple[list[Schedule], list[str]]:
    """The schedules the dashboard shows and the lines of those invalid: the tick's
    own, or the whole folder parsed again when the memo left some out."""
    from ..config.files import load_all

    inputs = draft.inputs
    folder = draft.repo / "schedules"
    if not _left_out(inputs, folder):
        return list(inputs.schedules), list(inputs.invalid)
    parsed = load_all(folder, calendars=inputs.calendars)
    schedules = [s for s in parsed.schedules if s.id not in inputs.held]
    invalid = [e.message for e in parsed.errors] + [
        line for line in inputs.invalid if line == inputs.settings.caps_problem]
    return schedules, invalid


def _left_out(inputs: TickInputs, folder: Path) -> bool:
    """Whether the memo left schedules of ``folder`` unparsed this tick."""
    return inputs.memo is not None and bool(inputs.memo.left_out) and folder.is_dir()


def outbox(draft: Draft, files: Files) -> Part:
    """The events of the decision, claimed in ``state/notify.json`` (:mod:`.notifying`)."""
    files = dict(files)
    notes = draft.notifications.plan(draft.inputs, draft.before, draft.decision.state,
                                     files, draft.base, draft.settings.scope)
    return Part(files, notify=notes)


def index(draft: Draft, files: Files) -> Part:
    """The index of open runs, refreshed from every record written before it."""
    return Part(state_index.refresh(draft.base, files, draft.inputs.loaded.index))


def poll_logs(draft: Draft, files: Files) -> Part:
    """The touched runs' poll lines and the heartbeat line (:mod:`.polllogs`)."""
    files, clock = dict(files), draft.settings.clock
    polllogs.append_logs(files, store.changes(draft.base, files), draft.base, draft.decision,
                     draft.now, draft.settings.executor_name, draft.settings.heartbeat_every,
                     clock.kind if clock else None, clock.machine if clock else None)
    return Part(files)


def ledger(draft: Draft, files: Files) -> Part:
    """This scheduled tick's lateness sample (:mod:`~orchestrator.cadence.lateness`),
    only beside other changes: it never makes a commit of its own."""
    sample = draft.settings.lateness
    if sample is None or not store.changes(draft.base, files):
        return Part(files)
    from ..cadence import lateness

    path = layout.LATENESS
    data = lateness.append(files.get(path) or draft.base.get(path), sample)
    return Part(files if data is None else {**files, path: data})


def memo(draft: Draft, files: Files) -> Part:
    """The memo of quiet schedules (:mod:`.memo`), only beside other changes: it never
    makes a commit of its own."""
    inputs = draft.inputs
    if inputs.memo is None:
        return Part(files)
    entries = memowrite.changes(inputs.memo, inputs.schedules, draft.decision.state,
                                draft.base, store.changes(draft.base, files),
                                lambda: inputs.settings.cadence)
    return Part({**files, **entries})


CONTRIBUTORS: tuple[Contributor, ...] = (
    records,
    # Finishing a run changes its record and the decision's state: every part after
    # this one reads the finished run.
    briefs,
    # The events are derived from the state the briefs finished (a run_failed needs
    # the finished run).
    outbox,
    # The index lists the open runs of every record written above.
    index,
    # The heartbeat says whether the commit changes anything: it comes after every
    # file but the memo, and the poll lines carry the briefs' notes.
    poll_logs,
    # The lateness sample rides a commit made anyway: after the heartbeat, which makes
    # one of an idle tick's when due.
    ledger,
    # Last: the memo is written only beside other changes, never alone.
    memo,
)
"""The parts of the mark commit, in the order they are built."""


def assemble(draft: Draft, contributors: tuple[Contributor, ...] = CONTRIBUTORS
             ) -> Planned:
    """Run ``contributors`` in order on ``draft``: the files of the mark commit, and
    what the briefs and the outbox reported."""
    files: Files = {}
    consolidated, notes = Consolidated(), notifying.OFF
    for contribute in contributors:
        part = contribute(draft, files)
        files = part.files
        if part.consolidated is not None:
            consolidated = part.consolidated
        if part.notify is not None:
            notes = part.notify
    decision, before = draft.decision, draft.before
    parked = {key: d.reason for key, d in sorted(decision.state.dlq.items())
              if not d.discarded and before.dlq.get(key) is not d}
    parked.update(sorted(decision.dead_items.items()))  # items: the same alert
    return Planned(decision, store.changes(draft.base, files), consolidated, parked, notes)
