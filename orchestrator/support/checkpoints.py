"""Named points of no return, where a crash test may stop the process.

The tick and the store call :func:`reached` at each point a crash would leave work
half done: a tick's ``before-mark``, ``mark-planned``, ``after-mark``,
``after-dispatch``, ``after-notify`` and ``after-record``, and the store's ``fetch`` and
``push`` (just before the git process starts). The product installs no hook, so
:func:`reached` does nothing; the crash tests install one (``tests/crashpoint.py``)
that kills the process there, or while the git process runs, to prove that a later
tick repairs the damage.
"""

from __future__ import annotations

from collections.abc import Callable

Hook = Callable[[str], None]
"""Called with the name of each point reached."""

POINTS = ("before-mark", "mark-planned", "after-mark", "after-dispatch", "after-notify",
          "after-record", "fetch", "push")
"""Every point, in the order a tick that fetches and pushes reaches them."""

HOOKS: list[Hook] = []
"""Installed hooks; empty in the product."""


def reached(point: str) -> None:
    """Tell every hook that ``point`` is reached."""
    for hook in HOOKS:
        hook(point)
