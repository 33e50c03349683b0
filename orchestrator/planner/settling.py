"""The settling loop: the passes that may enable each other, run to a fixed point.

- A pass is a function of the :class:`~.context.Context` that returns whether it
  changed anything. A round where every pass says ``False`` is a fixed point: the loop
  stops there.
- A pass only moves records forward (a track to a terminal phase, a claim dropped, a
  render asked for), never undoes another's change: that is why the loop ends.
- :data:`PASSES` run in a fixed order, each enabling the next: a worker settled lets its
  drain finish, a finished drain lets its dependants be skipped, a skip lets its run fan in.
- In that order one round does everything and a second finds nothing. Any other order
  reaches the same decision, sometimes in more rounds (a test runs every permutation).
- The chain has four links and no pass enables an earlier one, so any order settles in
  at most four rounds plus a quiet one. :data:`ROUNDS` leaves room for a fifth pass.
- A loop still changing things after :data:`ROUNDS` rounds is a bug: it raises
  :class:`Unsettled`, never stops silently with a half-settled decision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import drain, graph
from .context import Context
from .fan_in import fan_in

Pass = Callable[[Context], bool]
"""One settling pass: changes the context, and says whether it changed anything."""

PASSES: tuple[Pass, ...] = (drain.settle_workers, drain.finish_drains, graph.settle, fan_in)
"""Workers that ended are settled, drains whose workers all settled finish, tracks whose
needs did not complete are skipped, runs whose tracks are all terminal fan in."""

ROUNDS = 8
"""Rounds before the loop gives up: the four passes need at most five in any order, and
a pass that never settles is found after a few more, not hidden."""


class Unsettled(RuntimeError):
    """The settling passes still changed something after the last round allowed (a bug:
    some pass reports a change every time, or two passes undo each other)."""


def settle(ctx: Context, passes: Sequence[Pass] = PASSES, rounds: int = ROUNDS) -> int:
    """Run ``passes`` in order, round after round, until a round changes nothing; return
    how many rounds that took (the quiet one included)."""
    changed: list[Pass] = []
    for done in range(1, rounds + 1):
        changed = [step for step in passes if step(ctx)]
        if not changed:
            return done
    names = ", ".join(step.__name__ for step in changed)
    raise Unsettled(f"the planner did not settle in {rounds} rounds; "
                    f"still changing in the last: {names}")
