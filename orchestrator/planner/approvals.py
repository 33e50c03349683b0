"""Approval gates (a track's ``approval``): a track held before dispatch until a person
decides.

- A gated track is held while its gate is not approved for its current attempt. With
  ``environment``, on an executor that has environments, GitHub's reviewers hold the
  leg instead and nothing is held here.
- Its wait starts when it would otherwise be dispatched (needs ended, past
  ``not_before``): that tick sets the gate's ``since``, once; ``approval_waiting`` is
  told from it.
- Past ``timeout_minutes`` after ``since`` it is tapped out. The run's deadline spares
  a track while it waits, and gives back the time it had left once it is approved.
- ``approve`` and ``reject`` are requests honoured in the tick's compare-and-swap, so
  two racing approvals start the track once: the second finds it approved.
- ``reject`` ends it ``rejected``: terminal, never retried nor parked. Its ``needs``
  dependants are skipped by the settling loop.
- Who decides is checked against the ``by`` of the spec the track fired with.
- On GitHub, a leg in its environment waits from the tick that first sees its job
  ``waiting``. A start is its reviewers' approval; a failure before any start, their
  rejection. GitHub's jobs do not tell a rejected job from an approved one that no
  runner took, so the latter is taken for a rejection too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from .. import executors
from ..config.approval import Approval
from ..executors.base import Observation
from ..state import machine
from ..state.phases import RunStatus, TrackPhase
from ..state.records import Act, Gate, Run, Track
from .context import Context

Verdict = Literal["approve", "reject"]

DONE: dict[str, str] = {"approve": "approved", "reject": "rejected"}
"""A verdict in its answers: "approved", "not rejected: ..."."""


@dataclass(frozen=True)
class ApprovalRequest:
    """Approve or reject the gate of ``track`` of ``run_id`` (``orchestrator approve``,
    ``orchestrator reject``)."""

    run_id: str
    track: str
    verdict: Verdict
    act: Act

    @property
    def key(self) -> str:
        return f"{self.verdict} {self.run_id}/{self.track}"


def held_here(ctx: Context, approval: Approval) -> bool:
    """Whether the tick holds the gate: always with ``by``; with ``environment`` only
    where the executor runs no leg in an environment."""
    return approval.environment is None or not executors.declared(ctx.executor).environments


def held(ctx: Context, track: Track) -> bool:
    """Whether ``track`` may not be dispatched yet: its gate, held here, is not approved."""
    approval = track.spec.approval
    if approval is None or not held_here(ctx, approval):
        return False
    gate = track.current_gate
    return gate is None or gate.approved is None


def let_through(ctx: Context, tracks: Mapping[str, Track], due: Iterable[str]) -> list[str]:
    """The tracks of ``due`` that may go; each held one starts its wait, if it has not."""
    going = []
    for name in due:
        track, gate = tracks[name], tracks[name].current_gate
        if not held(ctx, track):
            going.append(name)
        elif gate is None or gate.since is None:
            start_wait(ctx, track)
    return going


def start_wait(ctx: Context, track: Track) -> None:
    """Record that ``track`` waits for a person from now on."""
    approval = track.spec.approval
    assert approval is not None
    gate = track.current_gate or Gate(attempt=track.attempt)
    ctx.set_track(machine.revise(track, gate=machine.revise(gate, since=ctx.now)))
    ctx.decision.note(track.run_id, f"{track.name}: waiting for approval by "
                      f"{approval.describe()}")


def waited_out(ctx: Context, track: Track) -> str | None:
    """Why a waiting ``track`` is tapped out (no decision in time), or ``None``."""
    gate, approval = track.current_gate, track.spec.approval
    if gate is None or gate.since is None or approval is None:
        return None
    if ctx.now < gate.since + timedelta(minutes=approval.timeout_minutes):
        return None
    return (f"no approval by {approval.describe()} within "
            f"{approval.timeout_minutes:g} minutes")


def observed(ctx: Context, track: Track, seen: Observation) -> Track:
    """``track`` after what ``seen`` says of a leg its environment's reviewers hold: its
    wait begins when it is first seen held; a start means they approved it, and a
    failure without one that they rejected it ("If a job is rejected, the workflow
    will fail": docs, "Reviewing deployments")."""
    approval = track.spec.approval
    if approval is None or held_here(ctx, approval):
        return track
    gate = track.current_gate
    if seen.held:
        if gate is None or gate.since is None:
            start_wait(ctx, track)
        return ctx.state.tracks[track.run_id][track.name]
    if gate is None or not track.awaits_approval or seen.phase not in _DECIDED:
        return track  # a cancel of its run is a cancel: the hygiene follows it
    reviewers = Act(by=approval.describe(), at=ctx.now, reason="on GitHub")
    if seen.phase is TrackPhase.FAILED:
        return ctx.move(track, TrackPhase.REJECTED, f"rejected by {approval.describe()} "
                        "on GitHub", finished_at=seen.finished_at or ctx.now,
                        gate=machine.revise(gate, rejected=reviewers))
    _approve(ctx, track, gate, reviewers)
    return ctx.state.tracks[track.run_id][track.name]


_DECIDED = frozenset({TrackPhase.RUNNING, TrackPhase.COMPLETE, TrackPhase.WAITING,
                      TrackPhase.FAILED})
"""What a held leg's news says of its reviewers: it ran (approved), or failed unstarted
(rejected)."""


def clock_start(track: Track) -> datetime | None:
    """When ``track``'s own timeout began: its start, or its approval if that came later
    (GitHub may date a held job's start before its reviewers let it go)."""
    gate = track.current_gate
    if track.started_at is None or gate is None or gate.approved is None:
        return track.started_at
    return max(track.started_at, gate.approved.at)


def runner_wait_began(track: Track) -> datetime | None:
    """When ``track``'s leg began to wait for a runner: its dispatch, or its approval if
    later; ``None`` while a person holds it."""
    gate = track.current_gate
    if track.awaits_approval or track.dispatched_at is None:
        return None
    if gate is None or gate.approved is None:
        return track.dispatched_at
    return max(track.dispatched_at, gate.approved.at)


def expire(ctx: Context, track: Track) -> None:
    """Tap ``track`` out once it waited past its ``timeout_minutes``; its run gets back
    the time it had left when the wait began."""
    why, gate = waited_out(ctx, track), track.current_gate
    if why is not None and gate is not None and gate.since is not None:
        ctx.tap_out(track, why)
        _give_back(ctx, track.run_id, gate.since)


def run_waits(ctx: Context, run: Run) -> bool:
    """Whether a track of ``run`` waits for a person: its deadline stands still."""
    return any(t.awaits_approval for t in ctx.state.tracks.get(run.run_id, {}).values())


def decide(ctx: Context, requests: Iterable[object]) -> None:
    """Before the settling: a rejected track's dependants are skipped in this tick, and
    an approved one is dispatched by it."""
    for request in requests:
        if isinstance(request, ApprovalRequest):
            line = _decide(ctx, request)
            ctx.decision.answers[request.key] = line
            ctx.decision.log.append(line)


def _decide(ctx: Context, request: ApprovalRequest) -> str:
    where = f"{request.run_id}/{request.track}"
    track = ctx.state.tracks.get(request.run_id, {}).get(request.track)
    gate = track.current_gate if track is not None else None
    if gate is not None and gate.decided is not None:
        return _decided_already(where, request, gate)
    why_not = _refusal(ctx, request, track)
    if why_not is not None or track is None:
        return f"{where}: not {DONE[request.verdict]}: {why_not}"
    gate = gate or Gate(attempt=track.attempt)
    if request.verdict == "reject":
        ctx.move(track, TrackPhase.REJECTED, f"rejected {request.act.describe()}",
                 finished_at=ctx.now, not_before=None,
                 gate=machine.revise(gate, rejected=request.act))
    else:
        _approve(ctx, track, gate, request.act)
    return f"{where}: {DONE[request.verdict]} {request.act.describe()}"


def _decided_already(where: str, request: ApprovalRequest, gate: Gate) -> str:
    """The answer to a decision on a gate decided already: the same verdict is the
    same request again (a racing or repeated call); the other is refused."""
    act = gate.approved or gate.rejected
    assert act is not None
    done = "approved" if gate.approved is not None else "rejected"
    if done == DONE[request.verdict]:
        return f"{where}: already {done} {act.describe()}"
    return f"{where}: not {DONE[request.verdict]}: already {done} {act.describe()}"


def _refusal(ctx: Context, request: ApprovalRequest, track: Track | None) -> str | None:
    """Why ``request`` cannot be carried out, or ``None``."""
    run = ctx.state.runs.get(request.run_id)
    if run is None or run.status not in (RunStatus.SCHEDULED, RunStatus.RUNNING):
        return "no open run" if run is None else f"the run is {run.status.value}"
    approval = track.spec.approval if track is not None else None
    if track is None or approval is None:
        return "no such track" if track is None else "the track has no approval gate"
    if not held_here(ctx, approval):
        return f"{approval.environment}'s reviewers decide on GitHub"
    if track.phase is not TrackPhase.PENDING:
        return f"the track is {track.phase.value}"
    if not approval.allows(request.act.by):
        return f"{request.act.by} is not in its approval.by ({approval.describe()})"
    return None


def _approve(ctx: Context, track: Track, gate: Gate, act: Act) -> None:
    """Approve ``track``; its run gets back the time it had left when the wait began."""
    ctx.set_track(machine.revise(track, gate=machine.revise(gate, approved=act)))
    ctx.decision.note(track.run_id, f"{track.name}: approved {act.describe()}")
    if gate.since is not None:
        _give_back(ctx, track.run_id, gate.since)


def _give_back(ctx: Context, run_id: str, since: datetime) -> None:
    """A running run's deadline moved on by a wait that began at ``since`` (a scheduled
    run's deadline counts from its first dispatch anyway)."""
    run = ctx.state.runs[run_id]
    if run.status is not RunStatus.RUNNING:
        return
    left = max(run.deadline - since, timedelta(0))
    if ctx.now + left > run.deadline:
        ctx.state.runs[run_id] = machine.revise(run, deadline=ctx.now + left)
