"""The CLI process's own settings, which the tracks it starts do not inherit.

pydantic looks for plugins the first time a model validates: it imports
:mod:`importlib.metadata` (with :mod:`email` and more) and reads the entry points of
every installed distribution, then imports each plugin it finds. The orchestrator's
models are its own records, and no plugin is wanted on them: a plugin installed beside
it would observe every record a tick reads, and slow every command (the import and the
scan cost a no-op tick about 15 ms of its 200; a plugin like logfire's costs over 100).
So the CLI turns them off as pydantic documents, ``PYDANTIC_DISABLE_PLUGINS=__all__``,
unless the environment already says something, and defers pydantic's plugin loader
until a plugin may be wanted (:class:`_DeferredLoader`).

A track is the user's code: its environment is the one the orchestrator was given,
without what :func:`settle` added (:func:`given`).
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Iterable, Mapping
from typing import Any

OWN = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}
"""Set for the CLI's process when its environment does not set them."""

_added: dict[str, str] = {}

_LOADER = "pydantic.plugin._loader"
_OFF = ("__all__", "1", "true")
"""The values of ``PYDANTIC_DISABLE_PLUGINS`` with which pydantic loads no plugin."""


def settle() -> None:
    """Apply :data:`OWN` where the environment is silent (the CLI's first step)."""
    for name, value in OWN.items():
        if name not in os.environ:
            os.environ[name] = _added[name] = value
    _defer_plugin_loader()


def given(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without what :func:`settle` added to this process's environment."""
    return {k: v for k, v in env.items() if k not in _added or _added[k] != v}


class _DeferredLoader(types.ModuleType):
    """pydantic's plugin loader, imported when a plugin may be wanted.

    pydantic imports its loader (and with it :mod:`importlib.metadata`) to ask
    ``get_plugins()``, whose answer is no plugin at all while ``PYDANTIC_DISABLE_PLUGINS``
    has one of :data:`_OFF`. This module gives that answer without the import, and
    hands every other question, and ``get_plugins()`` when plugins are on, to the real
    loader, which it then puts in its place.
    """

    def get_plugins(self, *args: Any, **kwargs: Any) -> Iterable[Any]:
        import pydantic  # imported by now: it is asking

        if (not args and not kwargs and pydantic.VERSION.split(".")[0] == "2"
                and os.environ.get("PYDANTIC_DISABLE_PLUGINS") in _OFF):
            return ()  # what pydantic 2's loader answers then
        return self._real().get_plugins(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system asks (is it a package?)
            raise AttributeError(name)
        return getattr(self._real(), name)

    def _real(self) -> types.ModuleType:
        if sys.modules.get(_LOADER) is self:
            del sys.modules[_LOADER]
        return importlib.import_module(_LOADER)


def _defer_plugin_loader() -> None:
    if _LOADER not in sys.modules:
        sys.modules[_LOADER] = _DeferredLoader(_LOADER)
