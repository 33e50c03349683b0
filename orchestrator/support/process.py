"""The CLI process's own settings, which the tracks it starts do not inherit.

pydantic looks for plugins the first time a model validates: it reads the entry points
of every installed distribution and imports each plugin it finds. The orchestrator's
models are its own records, and no plugin is wanted on them: a plugin installed beside
it would observe every record a tick reads, and slow every command (a plugin like
logfire's costs over 100 ms). So the CLI turns them off as pydantic documents,
``PYDANTIC_DISABLE_PLUGINS=__all__``, unless the environment already says something.

That setting is all the CLI does about plugins. pydantic's loader still imports
:mod:`importlib.metadata` when it is first asked (about 12 ms of a no-op tick); that
import could be skipped only by putting a stand-in for the private module
``pydantic.plugin._loader`` into ``sys.modules``, which ties the CLI to the name, the
signature and the answers of a module pydantic may change in any release without
notice, and a change would fail silently (plugins loaded against the user's setting,
or not loaded when asked for). The documented variable is kept instead of the import
time.

A track is the user's code: its environment is the one the orchestrator was given,
without what :func:`settle` added (:func:`given`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

OWN = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}
"""Set for the CLI's process when its environment does not set them."""

_added: dict[str, str] = {}


def settle() -> None:
    """Apply :data:`OWN` where the environment is silent (the CLI's first step)."""
    for name, value in OWN.items():
        if name not in os.environ:
            os.environ[name] = _added[name] = value


def given(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without what :func:`settle` added to this process's environment."""
    return {k: v for k, v in env.items() if k not in _added or _added[k] != v}
